package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/api"
)

// rawRequest opens a connection to e and sends the head of a POST to method announcing a body
// of length bytes, with token ("" sends none), then the first sent bytes of the body.
func rawRequest(t *testing.T, e *testEnv, method, token string, length int, sent string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", e.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := fmt.Sprintf("POST /api/v1/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", method, length)
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := io.WriteString(c, head+"\r\n"+sent); err != nil {
		t.Fatal(err)
	}
	return c
}

// readResponse reads one response from c within d.
func readResponse(t *testing.T, c net.Conn, d time.Duration) (*http.Response, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer within %s: %v", d, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestNoKeyIsAnsweredBeforeTheBody: a request without a key, or with one that is not valid, is
// answered 401 as soon as its head arrives, without waiting for (or buffering) its body, and
// the connection is closed.
func TestNoKeyIsAnsweredBeforeTheBody(t *testing.T) {
	e := mustStart(t, nil, nil)
	for _, token := range []string{"", "cfk_not-a-key"} {
		c := rawRequest(t, e, "fleet.apply", token, 8<<20, `{"tenantId":"root","config":`)
		resp, _ := readResponse(t, c, 5*time.Second)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("token %q: status %d, want 401", token, resp.StatusCode)
		}
		if !resp.Close {
			t.Errorf("token %q: the connection stays open for the rest of an 8 MiB body", token)
		}
	}
}

// TestMethodBodyCap: each method takes a body up to its own cap: a list call is refused at
// 100 KiB (413 from its Content-Length, before any byte of it is read); a fleet document may be
// larger.
func TestMethodBodyCap(t *testing.T) {
	e := mustStart(t, nil, nil)
	pad := strings.Repeat("a", 100<<10)
	status, body := e.post(e.admin, "iam.tenants.list", `{"pad":"`+pad+`"}`)
	if status != http.StatusRequestEntityTooLarge || errCode(t, body) != cubefleet.CodePayloadTooLarge {
		t.Errorf("100 KiB to iam.tenants.list: %d %s, want 413", status, body)
	}
	c := rawRequest(t, e, "iam.tenants.list", e.admin, 1<<20, "")
	if resp, _ := readResponse(t, c, 5*time.Second); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 1 MiB Content-Length to iam.tenants.list: %d, want 413 at once", resp.StatusCode)
	}
	// The same pad inside a fleet document is read (and refused for what it says).
	status, body = e.post(e.admin, "fleet.plan", `{"tenantId":"root","config":{"version":1,"pad":"`+pad+`"}}`)
	if status != http.StatusBadRequest {
		t.Errorf("100 KiB to fleet.plan: %d %s, want 400 for the unknown field", status, body)
	}
	if m, _ := e.srv.api.Lookup("fleet.apply"); m.MaxBody != api.MaxDocumentBody {
		t.Errorf("fleet.apply takes %d bytes, want %d", m.MaxBody, api.MaxDocumentBody)
	}
}

// TestBodyBudget: the bytes the server buffers for request bodies are bounded: while one
// request holds most of the budget, another that does not fit is RESOURCE_EXHAUSTED (429 with
// Retry-After) at once; when the first is done, the budget is free again.
func TestBodyBudget(t *testing.T) {
	e := mustStart(t, nil, func(c *Config) { c.BodyBudget = 1 << 20 })
	held := rawRequest(t, e, "fleet.plan", e.admin, 900<<10, `{"tenantId":"root","config":{"version":1},"pad":"`)
	time.Sleep(100 * time.Millisecond) // the first request has its share
	c := rawRequest(t, e, "fleet.plan", e.admin, 200<<10, "")
	resp, body := readResponse(t, c, 5*time.Second)
	if resp.StatusCode != http.StatusTooManyRequests || errCode(t, []byte(body)) != cubefleet.CodeResourceExhausted || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a body over the budget: %d %s (Retry-After %q), want 429 with Retry-After", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	held.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, body := e.post(e.admin, "fleet.plan", map[string]any{"tenantId": "root", "config": map[string]any{"version": 1}, "x": strings.Repeat("a", 600<<10)})
		if status == http.StatusBadRequest { // read, and refused for its unknown field
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the budget is not freed: %d %s", status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBodyMinimumRate: a body that arrives slower than the minimum rate (after the grace) is
// refused and its connection closed; one that keeps the rate is read.
func TestBodyMinimumRate(t *testing.T) {
	e := mustStart(t, nil, func(c *Config) { c.BodyMinRate = 1000; c.BodyRateGrace = 500 * time.Millisecond })
	c := rawRequest(t, e, "fleet.plan", e.admin, 4000, `{"tenantId":"root",`)
	start := time.Now()
	go func() { // a byte a second, far below 1000 bytes a second
		for range 10 {
			time.Sleep(time.Second)
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("the slow connection is still open after %s: %v", time.Since(start), err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the slow connection was closed after %s, want about the grace (0.5 s)", d)
	}
	// 2,000 bytes in 4 writes a quarter of a second apart keep the rate.
	ok := rawRequest(t, e, "fleet.plan", e.admin, 2000, "")
	doc := `{"tenantId":"root","config":{"version":1}` + strings.Repeat(" ", 2000-len(`{"tenantId":"root","config":{"version":1}}`)) + "}"
	for i := range 4 {
		time.Sleep(250 * time.Millisecond)
		ok.Write([]byte(doc[i*500 : (i+1)*500]))
	}
	if resp, body := readResponse(t, ok, 5*time.Second); resp.StatusCode != http.StatusOK {
		t.Fatalf("a body at the rate: %d %s", resp.StatusCode, body)
	}
}
