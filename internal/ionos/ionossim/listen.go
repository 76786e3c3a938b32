package ionossim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Listener is a Sim listening on a loopback address.
type Listener struct {
	// URL is the base to give the SDK and our client, "http://127.0.0.1:PORT" (no trailing
	// slash, no /cloudapi/v6: the SDK appends it).
	URL string
	Sim *Sim

	srv  *http.Server
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// ErrNotLoopback is returned by Listen for an address outside 127.0.0.0/8 and ::1: the
// simulator checks no real credential and must never be reachable from another host.
var ErrNotLoopback = errors.New("the simulator listens only on a loopback address (127.0.0.0/8 or ::1)")

// Listen serves sim on addr ("127.0.0.1:0" picks a free port) until Close, and advances its
// asynchronous requests every 10 ms. ctx bounds only the opening of the listener. It returns
// ErrNotLoopback for a non-loopback address and the listener's error when the port is taken.
func Listen(ctx context.Context, addr string, sim *Sim) (*Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("listen address %q: %w", addr, ErrNotLoopback)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	tick, stop := context.WithCancel(context.Background())
	s := &Listener{
		URL: "http://" + ln.Addr().String(), Sim: sim, stop: stop,
		srv: &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second},
	}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-tick.Done():
				return
			case <-t.C:
				sim.Advance()
			}
		}
	}()
	return s, nil
}

// Close stops the listener and the ticker, waiting up to 5 s for calls in flight.
func (s *Listener) Close() error {
	s.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	s.wg.Wait()
	if err != nil {
		return fmt.Errorf("close simulator: %w", err)
	}
	return nil
}
