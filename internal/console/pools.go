package console

import (
	"context"
	"fmt"
	"net/http"

	"github.com/cubefleet/cubefleet/internal/iam"
)

// Pool is one pool on the Pools page: its nodes' room, each offer's quota use, its warm pools'
// fill and the creates waiting for room.
type Pool struct {
	ID, Name string
	Nodes    []PoolNode
	Offers   []OfferUse
	Warm     []WarmFill
	Waiting  int
}

// PoolNode is one node of a pool with a bar per resource (CPU, memory, microVM slots).
type PoolNode struct {
	ID, State string
	Bars      []Bar
}

// Bar is one resource of a node as the scheduler holds it: Reported use (the node's last
// report), Reserved for sandboxes placed and not yet reported, Free room left, and Kept (what
// the node keeps from sandboxes: the mem filter's host reserve), in Unit ("cores", "GiB",
// "slots").
type Bar struct {
	Resource, Unit                 string
	Reported, Reserved, Free, Kept float64
}

// Total is everything the bar stands for.
func (b Bar) Total() float64 { return b.Reported + b.Reserved + b.Free + b.Kept }

// Label says the bar in words, for screen readers and without the picture: "CPU: 1.5 of 4
// cores reported, 0.5 reserved, 2 free".
func (b Bar) Label() string {
	s := fmt.Sprintf("%s: %s of %s %s reported, %s reserved, %s free", b.Resource, num(b.Reported), num(b.Total()), b.Unit, num(b.Reserved), num(b.Free))
	if b.Kept > 0 {
		s += ", " + num(b.Kept) + " kept for the host"
	}
	return s
}

// Segments are the bar's stacked parts as x offsets and widths in a 0-100 wide picture.
func (b Bar) Segments() []Segment {
	total := b.Total()
	if total <= 0 {
		return nil
	}
	var out []Segment
	x := 0.0
	for _, p := range []struct {
		class string
		v     float64
	}{{"reported", b.Reported}, {"reserved", b.Reserved}, {"free", b.Free}, {"kept", b.Kept}} {
		w := p.v / total * 100
		if w > 0 {
			out = append(out, Segment{Class: p.class, X: x, W: w})
		}
		x += w
	}
	return out
}

// Full reports whether the bar has no room left: the node is full for this resource.
func (b Bar) Full() bool { return b.Total() > 0 && b.Free <= 0 }

// Segment is one stacked part of a bar.
type Segment struct {
	Class string
	X, W  float64
}

// OfferUse is an offer of the pool: its tenant and, per resource its quota names, the use.
type OfferUse struct {
	Tenant string
	Uses   []QuotaUse
}

// QuotaUse is what a tenant uses of one quota resource of an offer.
type QuotaUse struct {
	Resource    string
	Used, Limit int64
}

// WarmFill is a template's warm pool: ready and starting idle warm sandboxes, and its min and
// max.
type WarmFill struct {
	Template        string
	Ready, Starting int
	Min, Max        int
}

// PoolSource reads the pools for the Pools page.
type PoolSource interface {
	ConsolePools(ctx context.Context) ([]Pool, error)
}

// num writes a figure without trailing zeros: "1.5", "4".
func num(v float64) string { return fmt.Sprintf("%.4g", v) }

func (c *Console) poolsData(r *http.Request, _ *iam.Principal) (any, error) {
	if c.cfg.Pools == nil {
		return []Pool{}, nil
	}
	return c.cfg.Pools.ConsolePools(r.Context())
}
