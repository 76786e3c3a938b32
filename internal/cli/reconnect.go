package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet"
	pubclient "github.com/cubefleet/cubefleet/client"
)

// reconnectFor bounds how long the long polls of `sandboxes wait` and `create --wait` keep
// calling again while the control plane cannot be reached (1 minute without an answer).
const reconnectFor = time.Minute

// replicas are the typed clients of the control plane's configured URLs (--url or
// CUBEFLEET_URL, comma-separated), the one in use first; a long poll that loses it moves on.
type replicas struct {
	all []*pubclient.Client
	i   int // the one in use
}

// typedReplicas connects (see connect) and returns the typed clients of every configured URL.
func typedReplicas(cmd *cobra.Command) (*replicas, error) {
	c, err := connect(cmd)
	if err != nil {
		return nil, err
	}
	r := &replicas{}
	for _, rc := range c.Replicas() {
		r.all = append(r.all, rc.API())
	}
	return r, nil
}

// current is the client in use.
func (r *replicas) current() *pubclient.Client { return r.all[r.i] }

// reconnecting runs call, a long poll that may outlive the replica serving it: when the
// connection is lost or refused (that replica died or restarts) or the answer is UNAVAILABLE
// (its database is down), it calls again, at the next configured URL when several are (and
// keeps to that one), else at the same URL, where a load balancer, or the replica restarted,
// answers; pauses grow from 250 ms to 2 s, for at most reconnectFor without an answer or until
// ctx ends. Any other error is returned at once.
func reconnecting[T any](ctx context.Context, r *replicas, call func(context.Context, *pubclient.Client) (T, error)) (T, error) {
	wait := 250 * time.Millisecond
	var since time.Time
	tried := 0
	for {
		out, err := call(ctx, r.current())
		if err == nil || !connectionLost(err) || ctx.Err() != nil {
			return out, err
		}
		if since.IsZero() {
			since = time.Now()
		} else if time.Since(since) > reconnectFor {
			return out, err
		}
		r.i = (r.i + 1) % len(r.all)
		if tried++; tried < len(r.all) {
			continue // the next replica at once; a round of them all pauses
		}
		tried = 0
		select {
		case <-ctx.Done():
			return out, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// connectionLost reports whether err says the control plane could not be reached or the
// connection to it broke (not an answer), or that it answered UNAVAILABLE.
func connectionLost(err error) bool {
	var ce *cubefleet.Error
	if errors.As(err, &ce) {
		return ce.Code == cubefleet.CodeUnavailable
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}
