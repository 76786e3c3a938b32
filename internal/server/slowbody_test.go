package server

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowBodyRun is what one run of slow-body connections against a server process saw.
type slowBodyRun struct {
	conns           int
	closed          int64           // connections the server closed before the client was done
	refused429      int64           // answered RESOURCE_EXHAUSTED
	peakRSS, endRSS float64         // MB
	readyz          []time.Duration // /readyz latencies while the connections were open
	readyzFailed    int
}

// slowBodies opens n connections to p, each announcing an 8 MiB body to fleet.apply with token
// ("" sends none), sending all of it but its last byte as fast as the server takes it and then
// one byte every 5 s, the way a client without a key exhausted the server's memory before the
// body limits existed.
// It holds them for hold, timing GET /readyz every 100 ms, then reads the server's peak RSS.
func slowBodies(t *testing.T, p *serverProc, n int, token string, hold time.Duration) slowBodyRun {
	t.Helper()
	const size = 8 << 20
	chunk := bytes.Repeat([]byte("a"), 64<<10)
	head := fmt.Sprintf("POST /api/v1/fleet.apply HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", size)
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	const prefix = `{"tenantId":"root","config":"`
	head += "\r\n" + prefix
	run := slowBodyRun{conns: n}
	stop := make(chan struct{})
	var wg, sent sync.WaitGroup
	sent.Add(n)
	for range n {
		wg.Go(func() {
			c, err := net.Dial("tcp", p.addr)
			if err != nil {
				sent.Done()
				t.Errorf("dial: %v", err)
				return
			}
			defer c.Close()
			go func() { // the server's answer, if any
				b := make([]byte, 512)
				if k, _ := io.ReadAtLeast(c, b, 12); k >= 12 && bytes.HasPrefix(b[9:], []byte("429")) {
					atomic.AddInt64(&run.refused429, 1)
				}
			}()
			left := size - len(prefix) - 1 // the rest of the body but its last byte
			_, err = io.WriteString(c, head)
			for err == nil && left > 0 {
				k := min(left, len(chunk))
				_, err = c.Write(chunk[:k])
				left -= k
			}
			sent.Done()
			for err == nil {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Second):
					_, err = c.Write([]byte("a"))
				}
			}
			atomic.AddInt64(&run.closed, 1)
		})
	}
	sent.Wait()
	client := &http.Client{Timeout: 5 * time.Second}
	for end := time.Now().Add(hold); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		start := time.Now()
		resp, err := client.Get(p.url + "/readyz")
		if err != nil {
			run.readyzFailed++
			continue
		}
		resp.Body.Close()
		run.readyz = append(run.readyz, time.Since(start))
	}
	run.endRSS, run.peakRSS = rss(p.pid)
	close(stop)
	wg.Wait()
	return run
}

func (r slowBodyRun) report(t *testing.T, what string) {
	slices.Sort(r.readyz)
	q := func(f float64) time.Duration {
		if len(r.readyz) == 0 {
			return 0
		}
		return r.readyz[min(len(r.readyz)-1, int(f*float64(len(r.readyz))))]
	}
	t.Logf("%s: %d connections: %d closed by the server, %d answered 429; RSS %.0f MB (peak %.0f MB); /readyz p50 %s p99 %s max %s (%d timed, %d failed)",
		what, r.conns, r.closed, r.refused429, r.endRSS, r.peakRSS, q(0.5), q(0.99), q(1), len(r.readyz), r.readyzFailed)
}

// TestSlowBodies runs a real `cubefleet server` process and opens 200 slow-body connections
// against it, first without a key, then with the administrator's: without a key they are
// answered 401 and closed without their bodies being buffered; with one, at most the body
// budget (64 MiB) is held and the rest are RESOURCE_EXHAUSTED, and the slow bodies are cut off
// by the minimum rate. The server's peak resident set stays under 150 MB throughout (before
// the fix, 200 such connections held 1.7 GB). The opt-in CUBEFLEET_SLOWBODY_LOAD=1 runs 1,000
// connections of each kind and reports the figures.
func TestSlowBodies(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a server process")
	}
	n, limit := 200, 150.0
	if os.Getenv("CUBEFLEET_SLOWBODY_LOAD") != "" {
		n, limit = envInt(t, "CUBEFLEET_SLOWBODY_LOAD_CONNS", 1000), 200
	}
	p := startServerProc(t, buildCubefleet(t), "")
	noKey := slowBodies(t, p, n, "", 3*time.Second)
	noKey.report(t, "without a key")
	if noKey.peakRSS > limit {
		t.Errorf("without a key: peak RSS %.0f MB with %d slow bodies, want under %.0f MB", noKey.peakRSS, n, limit)
	}
	if noKey.closed != int64(n) {
		t.Errorf("without a key: the server closed %d of %d connections", noKey.closed, n)
	}
	withKey := slowBodies(t, p, n, p.admin, 8*time.Second)
	withKey.report(t, "with a key")
	if withKey.peakRSS > limit {
		t.Errorf("with a key: peak RSS %.0f MB with %d slow bodies, want under %.0f MB", withKey.peakRSS, n, limit)
	}
	if withKey.closed != int64(n) {
		t.Errorf("with a key: the server closed %d of %d connections (budget or minimum rate)", withKey.closed, n)
	}
}
