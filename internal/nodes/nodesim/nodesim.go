// Package nodesim simulates compute nodes for load tests and benchmarks of the node registry:
// each node is a goroutine with its own HTTP/1.1 keep-alive connection to the control plane on
// 127.0.0.1, reporting a Cubelet-shaped status every period. The client is deliberately
// minimal (one request at a time per connection, Content-Length bodies only) so that on a small
// machine the load generator leaves the CPU to the server it measures.
package nodesim

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// Conn is one keep-alive HTTP/1.1 connection. It is not safe for concurrent use.
type Conn struct {
	addr string
	conn net.Conn
	br   *bufio.Reader
	req  []byte
	body []byte
}

// Dial opens a connection to addr (host:port).
func Dial(addr string) (*Conn, error) {
	c := &Conn{addr: addr}
	return c, c.dial()
}

func (c *Conn) dial() error {
	conn, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
	if err != nil {
		return fmt.Errorf("dial %s: %w", c.addr, err)
	}
	c.conn, c.br = conn, bufio.NewReaderSize(conn, 8192)
	return nil
}

// Close closes the connection.
func (c *Conn) Close() error {
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}

// Do sends one request (token "" sends no Authorization header) and returns the status and
// the body, which is valid until the next call. A broken connection is redialed once.
func (c *Conn) Do(method, path, token string, body []byte) (int, []byte, error) {
	status, out, err := c.do(method, path, token, body)
	if err != nil && c.redial() == nil {
		status, out, err = c.do(method, path, token, body)
	}
	return status, out, err
}

func (c *Conn) redial() error {
	c.Close()
	return c.dial()
}

func (c *Conn) do(method, path, token string, body []byte) (int, []byte, error) {
	if c.conn == nil {
		if err := c.dial(); err != nil {
			return 0, nil, err
		}
	}
	r := c.req[:0]
	r = append(r, method...)
	r = append(r, ' ')
	r = append(r, path...)
	r = append(r, " HTTP/1.1\r\nHost: "...)
	r = append(r, c.addr...)
	r = append(r, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	r = strconv.AppendInt(r, int64(len(body)), 10)
	if token != "" {
		r = append(r, "\r\nAuthorization: Bearer "...)
		r = append(r, token...)
	}
	r = append(r, "\r\n\r\n"...)
	r = append(r, body...)
	c.req = r
	c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.conn.Write(r); err != nil {
		return 0, nil, err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, nil, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, nil, fmt.Errorf("bad status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, fmt.Errorf("bad status line %q", line)
	}
	length := -1
	closing := false
	for {
		h, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, nil, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, _ := bytes.Cut(h, []byte(":"))
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return 0, nil, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(value, []byte("close")):
			closing = true
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, nil, errors.New("nodesim: chunked answers are not supported")
		}
	}
	if length < 0 {
		return 0, nil, errors.New("nodesim: answer without Content-Length")
	}
	if cap(c.body) < length {
		c.body = make([]byte, length)
	}
	c.body = c.body[:length]
	if _, err := io.ReadFull(c.br, c.body); err != nil {
		return 0, nil, err
	}
	if closing {
		c.Close()
		c.conn = nil
	}
	return status, c.body, nil
}

// Node is one simulated node: its id and the credential it reports with ("" for a stock
// Cubelet).
type Node struct {
	ID         string
	Credential string
}

// Config is a load run: Nodes report to Addr every Period for Duration, each starting at a
// random offset within the first period (as real nodes do); Body returns node i's status body
// for report n (it may reuse a buffer per node). Conns caps the connections opened at once
// while starting (0: 256).
type Config struct {
	Addr     string
	Nodes    []Node
	Period   time.Duration
	Duration time.Duration
	Body     func(node, n int, buf []byte) []byte
	Conns    int
}

// Result is what a load run measured. Latencies are per report, from write to the last byte
// of the answer. Lost counts reports that did not get a 200 (errors, other statuses) plus
// ticks a node missed because its previous report had not answered yet.
type Result struct {
	Sent, OK, Lost, Missed int64
	P50, P99, P999, Max    time.Duration
	Elapsed                time.Duration
	Errors                 []string // the first few distinct failures
}

// Run runs a load and returns what it measured. It returns early when ctx ends.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Conns <= 0 {
		cfg.Conns = 256
	}
	conns := make([]*Conn, len(cfg.Nodes))
	sem := make(chan struct{}, cfg.Conns)
	var dialErr atomic.Value
	var wg sync.WaitGroup
	for i := range cfg.Nodes {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := Dial(cfg.Addr)
			if err != nil {
				dialErr.Store(err)
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	if err, _ := dialErr.Load().(error); err != nil {
		return Result{}, err
	}
	var res Result
	var mu sync.Mutex
	lat := make([][]time.Duration, len(cfg.Nodes))
	errs := map[string]bool{}
	start := time.Now()
	end := start.Add(cfg.Duration)
	for i := range cfg.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node, c := cfg.Nodes[i], conns[i]
			path := nodeapi.StatusPath(node.ID)
			var buf []byte
			mine := make([]time.Duration, 0, int(cfg.Duration/cfg.Period)+2)
			var sent, ok, lost, missed int64
			next := start.Add(time.Duration(rand.Int64N(int64(cfg.Period))))
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for n := 0; ; n++ {
				if wait := time.Until(next); wait > 0 {
					timer.Reset(wait)
					select {
					case <-ctx.Done():
						n = -1
					case <-timer.C:
					}
				}
				if n < 0 || !next.Before(end) {
					break
				}
				buf = cfg.Body(i, n, buf)
				t0 := time.Now()
				status, out, err := c.Do(http.MethodPost, path, node.Credential, buf)
				d := time.Since(t0)
				sent++
				if err == nil && status == http.StatusOK {
					ok++
					mine = append(mine, d)
				} else {
					lost++
					msg := fmt.Sprintf("report %d of %s: %d %v %.200s", n, node.ID, status, err, out)
					mu.Lock()
					if len(errs) < 10 {
						errs[msg] = true
					}
					mu.Unlock()
				}
				next = next.Add(cfg.Period)
				for time.Now().After(next.Add(cfg.Period)) && next.Before(end) { // fell a whole period behind
					missed++
					next = next.Add(cfg.Period)
				}
			}
			lat[i] = mine
			mu.Lock()
			res.Sent += sent
			res.OK += ok
			res.Lost += lost + missed
			res.Missed += missed
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	if len(all) > 0 {
		at := func(q float64) time.Duration { return all[min(len(all)-1, int(q*float64(len(all))))] }
		res.P50, res.P99, res.P999, res.Max = at(0.50), at(0.99), at(0.999), all[len(all)-1]
	}
	for e := range errs {
		res.Errors = append(res.Errors, e)
	}
	return res, nil
}

// Flood sends reports as fast as conns connections can (one in flight each) for d and returns
// how many got a 200 and how many did not: the ingestion ceiling.
func Flood(ctx context.Context, addr string, nodes []Node, conns int, d time.Duration, body func(node, n int, buf []byte) []byte) (ok, failed int64, err error) {
	cs := make([]*Conn, conns)
	for i := range cs {
		if cs[i], err = Dial(addr); err != nil {
			return 0, 0, err
		}
		defer cs[i].Close()
	}
	var okN, failN atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for n := 0; time.Now().Before(stop) && ctx.Err() == nil; n++ {
				i := (w + n*conns) % len(nodes)
				buf = body(i, n, buf)
				status, _, err := cs[w].Do(http.MethodPost, nodeapi.StatusPath(nodes[i].ID), nodes[i].Credential, buf)
				if err == nil && status == http.StatusOK {
					okN.Add(1)
				} else {
					failN.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return okN.Load(), failN.Load(), nil
}

// StatusBody returns a function building Cubelet-shaped status bodies from template: every
// occurrence of the placeholder 2006-01-02T15:04:05Z (same length as any UTC second) becomes
// the time of the report, as a Cubelet's heartbeat_time and lastHeartbeatTime do.
func StatusBody(template []byte) func(node, n int, buf []byte) []byte {
	placeholder := []byte("2006-01-02T15:04:05Z")
	var at []int
	for i := 0; ; {
		j := bytes.Index(template[i:], placeholder)
		if j < 0 {
			break
		}
		at = append(at, i+j)
		i += j + len(placeholder)
	}
	return func(node, n int, buf []byte) []byte {
		buf = append(buf[:0], template...)
		var now [len("2006-01-02T15:04:05Z")]byte
		time.Now().UTC().AppendFormat(now[:0], time.RFC3339)
		for _, i := range at {
			copy(buf[i:], now[:])
		}
		return buf
	}
}

// RegisterAll registers a node for every id over conns connections at once, with token (a join
// token allowing len(ids) uses, or "" for stock Cubelets), body(id) being each register body. It
// returns the nodes with the credentials they were given.
func RegisterAll(ctx context.Context, addr string, ids []string, token string, conns int, body func(id string) []byte) ([]Node, error) {
	out := make([]Node, len(ids))
	next := atomic.Int64{}
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range min(conns, len(ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := Dial(addr)
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
				return
			}
			defer c.Close()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(ids) {
					return
				}
				status, ans, err := c.Do(http.MethodPost, nodeapi.PathRegister, token, body(ids[i]))
				if err != nil || status != http.StatusOK {
					firstErr.CompareAndSwap(nil, fmt.Errorf("register %s: %d %v %.300s", ids[i], status, err, ans))
					return
				}
				out[i] = Node{ID: ids[i], Credential: credentialOf(ans)}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, err
	}
	return out, ctx.Err()
}

// credentialOf finds "node_credential":"..." in a register answer (nodeapi.RegisterResponse;
// "" when absent).
func credentialOf(ans []byte) string {
	key := []byte(`"node_credential":"`)
	i := bytes.Index(ans, key)
	if i < 0 {
		return ""
	}
	rest := ans[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// IDs returns n node ids, IPv4 addresses in 10.0.0.0/8 from 10.0.1.1 on.
func IDs(n int) []string {
	out := make([]string, n)
	for i := range n {
		v := 256 + 1 + i + i/254*2 // skip .0 and .255
		out[i] = fmt.Sprintf("10.%d.%d.%d", v>>16&255, v>>8&255, v&255)
	}
	return out
}
