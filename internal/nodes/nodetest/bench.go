package nodetest

import (
	"bytes"
	"context"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/nodes/nodesim"
	"github.com/cubefleet/cubefleet/internal/nodes/nodestore"
	"github.com/cubefleet/cubefleet/internal/store"
)

// BenchNodes is how many nodes Bench registers.
const BenchNodes = 10000

// StatusTemplate is the golden status body with its times as nodesim's placeholder.
func StatusTemplate() []byte {
	b := Status()
	b = bytes.ReplaceAll(b, []byte("2026-05-04T10:00:00Z"), []byte("2006-01-02T15:04:05Z"))
	return bytes.ReplaceAll(b, []byte("2026-05-04T09:59:59Z"), []byte("2006-01-02T15:04:05Z"))
}

// BenchEnv is a running registry with BenchNodes nodes, on the real clock, served over HTTP
// on 127.0.0.1.
type BenchEnv struct {
	Reg   *nodes.Registry
	Store *nodestore.Store
	Addr  string         // the server's host:port
	Nodes []nodesim.Node // the registered nodes (stock Cubelets: no credentials)
	stop  func()
}

// Stop stops the registry's loops (so a benchmark can call Flush alone); the server stays.
func (e *BenchEnv) Stop() { e.stop() }

// Bench starts a registry on db with BenchNodes stock nodes (registered over HTTP with the
// golden register body, each of which reported once) and checks their health once.
func Bench(b *testing.B, db *store.DB) *BenchEnv {
	b.Helper()
	st, err := nodestore.New(nodestore.Config{DB: db})
	if err != nil {
		b.Fatal(err)
	}
	reg, err := nodes.New(context.Background(), nodes.Config{Store: st, JoinTokens: st})
	if err != nil {
		b.Fatal(err)
	}
	h, err := nodehttp.New(nodehttp.Config{Registry: reg, Audit: st, DB: db, AllowUnauthenticated: []netip.Prefix{Loopback}})
	if err != nil {
		b.Fatal(err)
	}
	srv, stop := serve(b, reg, h)
	addr := strings.TrimPrefix(srv.URL, "http://")
	reg1 := Register()
	ns, err := nodesim.RegisterAll(context.Background(), addr, nodesim.IDs(BenchNodes), "", 64, func(id string) []byte {
		return bytes.ReplaceAll(reg1, []byte("10.0.0.7"), []byte(id))
	})
	if err != nil {
		b.Fatal(err)
	}
	body := nodesim.StatusBody(StatusTemplate())
	c, err := nodesim.Dial(addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var buf []byte
	for i, n := range ns {
		buf = body(i, 0, buf)
		if status, out, err := c.Do(http.MethodPost, nodeapi.StatusPath(n.ID), "", buf); err != nil || status != 200 {
			b.Fatalf("status %s: %d %v %s", n.ID, status, err, out)
		}
	}
	reg.CheckHealth(context.Background())
	return &BenchEnv{Reg: reg, Store: st, Addr: addr, Nodes: ns, stop: stop}
}
