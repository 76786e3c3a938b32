package server

import (
	"encoding/json"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// dbProxy is a TCP proxy on 127.0.0.1 in front of PostgreSQL that a test cuts (every
// connection closed, new ones refused: the database is down) and restores.
type dbProxy struct {
	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

func newDBProxy(t *testing.T, target string) *dbProxy {
	p := &dbProxy{t: t, target: target, conns: map[net.Conn]bool{}}
	p.listen("127.0.0.1:0")
	t.Cleanup(p.cut)
	return p
}

func (p *dbProxy) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

// cut closes the listener and every connection through it.
func (p *dbProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// restore listens again on the same address.
func (p *dbProxy) restore() { p.listen(p.addr) }

// TestDatabaseUnreachableIsUnavailable: while the control plane's PostgreSQL cannot be reached
// (a proxy in front of it cut, then restored) under a stream of writes and reads, every call is
// answered 200 or 503 UNAVAILABLE with Retry-After, never 500 INTERNAL; /readyz says 503; once
// the database is back, calls succeed again and every write answered 200 is there.
func TestDatabaseUnreachableIsUnavailable(t *testing.T) {
	u, err := url.Parse(storetest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := newDBProxy(t, u.Host)
	u.Host = proxy.addr
	e, _ := replica(t, u.String(), "")

	var (
		mu          sync.Mutex
		created     []string
		unavailable int
		stop        = make(chan struct{})
		wg          sync.WaitGroup
	)
	call := func(method string, in map[string]any) (string, bool) {
		body, _ := json.Marshal(in)
		code, header, out := nodeCall(t, "POST", e.url+"/api/v1/"+method, e.admin, body)
		switch code {
		case 200:
			var o obj
			json.Unmarshal(out, &o)
			return o.id(), true
		case 503:
			var eb contract.ErrorBody
			json.Unmarshal(out, &eb)
			if eb.Error.Code != cubefleet.CodeUnavailable || header.Get("Retry-After") == "" || eb.Error.Message != "the control plane's database is unreachable; retry shortly" {
				t.Errorf("%s: 503 %s (Retry-After %q)", method, out, header.Get("Retry-After"))
			}
			mu.Lock()
			unavailable++
			mu.Unlock()
		default:
			t.Errorf("%s while the database is cut or back: %d %s\nserver log:\n%s", method, code, out, e.log.String())
		}
		return "", false
	}
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if id, ok := call("compute.sites.create", map[string]any{"tenantId": "root", "kind": "shared", "region": "eu-central"}); ok {
					mu.Lock()
					created = append(created, id)
					mu.Unlock()
				}
				call("compute.sites.list", map[string]any{"tenantId": "root"})
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	proxy.cut()
	testkit.WaitFor(t, 10*time.Second, "calls answered UNAVAILABLE", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return unavailable >= 4
	})
	if code, _, out := nodeCall(t, "GET", e.url+"/readyz", "", nil); code != 503 {
		t.Errorf("/readyz with the database cut: %d %s", code, out)
	}
	proxy.restore()
	mu.Lock()
	before := len(created)
	mu.Unlock()
	testkit.WaitFor(t, 20*time.Second, "writes succeeding again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(created) > before+2
	})
	close(stop)
	wg.Wait()
	var list struct {
		Items []obj `json:"items"`
	}
	e.must(e.admin, "compute.sites.list", map[string]any{"tenantId": "root", "limit": 1000}, &list)
	have := map[string]bool{}
	for _, o := range list.Items {
		have[o.id()] = true
	}
	for _, id := range created {
		if !have[id] {
			t.Errorf("site %s was created (200) but is not listed", id)
		}
	}
	t.Logf("%d sites created, %d calls answered UNAVAILABLE", len(created), unavailable)
}
