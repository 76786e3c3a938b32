package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/cubefleet/cubefleet"
)

// reconnectFor bounds how long the long polls of `sandboxes wait` and `create --wait` keep
// calling again while the control plane cannot be reached (1 minute without an answer).
const reconnectFor = time.Minute

// reconnecting runs call, a long poll that may outlive the replica serving it: when the
// connection is lost or refused (that replica died or restarts) or the answer is UNAVAILABLE
// (its database is down), it calls again at the same URL, where a load balancer, or the
// replica restarted, answers; pauses grow from 250 ms to 2 s, for at most reconnectFor without
// an answer or until ctx ends. Any other error is returned at once.
func reconnecting[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	wait := 250 * time.Millisecond
	var since time.Time
	for {
		out, err := call(ctx)
		if err == nil || !connectionLost(err) || ctx.Err() != nil {
			return out, err
		}
		if since.IsZero() {
			since = time.Now()
		} else if time.Since(since) > reconnectFor {
			return out, err
		}
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
