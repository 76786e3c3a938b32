package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/client"
)

// recorder is a loopback server that records the methods called and answers each with answer.
type recorder struct {
	mu      sync.Mutex
	methods []string
	auth    []string
	bodies  []string
}

func (r *recorder) start(t *testing.T, answer func(w http.ResponseWriter, method string, body []byte)) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		method := strings.TrimPrefix(req.URL.Path, "/api/v1/")
		r.mu.Lock()
		r.methods = append(r.methods, method)
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		r.bodies = append(r.bodies, string(body))
		r.mu.Unlock()
		answer(w, method, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestEveryMethodHasAClientMethod calls every exported method of every service of a Client
// (zero inputs) against a recording server and checks that together they call every method of
// the contract, each with the bearer key: a contract method the client cannot call fails here.
func TestEveryMethodHasAClientMethod(t *testing.T) {
	var rec recorder
	url := rec.start(t, func(w http.ResponseWriter, _ string, _ []byte) { io.WriteString(w, `{"done":true}`) })
	c := client.New(url, "cfk_test")
	ctx := context.Background()
	var call func(v reflect.Value)
	call = func(v reflect.Value) {
		for i := range v.NumMethod() {
			m := v.Method(i)
			args := []reflect.Value{reflect.ValueOf(ctx)}
			for j := 1; j < m.Type().NumIn(); j++ {
				args = append(args, reflect.Zero(m.Type().In(j)))
			}
			for _, out := range m.Call(args) {
				if out.Kind() == reflect.Func { // an iterator: take its first item
					yield := reflect.MakeFunc(out.Type().In(0), func([]reflect.Value) []reflect.Value { return []reflect.Value{reflect.ValueOf(false)} })
					out.Call([]reflect.Value{yield})
				}
			}
		}
		e := v.Elem()
		for i := range e.NumField() {
			if f := e.Field(i); e.Type().Field(i).IsExported() && f.Kind() == reflect.Pointer {
				call(f)
			}
		}
	}
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); v.Type().Field(i).IsExported() && f.Kind() == reflect.Pointer {
			call(f)
		}
	}
	for _, m := range api.Methods() {
		if !slices.Contains(rec.methods, m.Name) {
			t.Errorf("the client has no method that calls %s: add one to its service (docs/go-client.md lists them)", m.Name)
		}
	}
	for _, m := range rec.methods {
		if _, ok := api.Lookup(m); !ok {
			t.Errorf("the client calls %s, which the contract does not have", m)
		}
	}
	for i, a := range rec.auth {
		if a != "Bearer cfk_test" {
			t.Fatalf("call %d (%s) sent Authorization %q", i, rec.methods[i], a)
		}
	}
}

// TestErrors: an error body is a *client.Error that unwraps to the server's *cubefleet.Error
// (errors.As, errors.Is on its code, field errors typed) with the Retry-After; a body that is
// not the API's is a plain error naming the URL; an unreachable server names it too.
func TestErrors(t *testing.T) {
	var rec recorder
	url := rec.start(t, func(w http.ResponseWriter, method string, _ []byte) {
		switch method {
		case "sandboxes.create":
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"code":"RESOURCE_EXHAUSTED","message":"tenant acme has 1 of 1 sandboxes"}}`)
		case "compute.pools.create":
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"code":"INVALID_INPUT","message":"siteId: required","details":{"path":"siteId","errors":[{"path":"siteId","message":"required"}]}}}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `<html>not here</html>`)
		}
	})
	c := client.New(url, "cfk_test")
	ctx := context.Background()

	_, err := c.Sandboxes.Create(ctx, api.SandboxCreateInput{TenantID: "acme", Template: "sh"})
	var e *cubefleet.Error
	if !errors.As(err, &e) || e.Code != cubefleet.CodeResourceExhausted || e.Message != "tenant acme has 1 of 1 sandboxes" {
		t.Errorf("a 429: %v, want *cubefleet.Error RESOURCE_EXHAUSTED", err)
	}
	if !errors.Is(err, cubefleet.CodeResourceExhausted) || errors.Is(err, cubefleet.CodeNotFound) {
		t.Errorf("errors.Is on codes of %v", err)
	}
	if wait, ok := client.RetryAfter(err); !ok || wait != 5*time.Second {
		t.Errorf("RetryAfter = %s, %v; want 5s", wait, ok)
	}
	if err.Error() != "RESOURCE_EXHAUSTED: tenant acme has 1 of 1 sandboxes" || strings.Contains(err.Error(), "cfk_test") {
		t.Errorf("message %q", err)
	}

	_, err = c.Compute.Pools.Create(ctx, api.PoolCreate{})
	if !errors.As(err, &e) || e.Code != cubefleet.CodeInvalidInput || e.Details["path"] != "siteId" {
		t.Errorf("a 400: %v", err)
	} else if fes, ok := e.Details["errors"].([]cubefleet.FieldError); !ok || len(fes) != 1 || fes[0].Path != "siteId" {
		t.Errorf("details.errors = %#v, want []cubefleet.FieldError", e.Details["errors"])
	}
	if _, ok := client.RetryAfter(err); ok {
		t.Error("a 400 without Retry-After has a RetryAfter")
	}

	_, err = c.Nodes.List(ctx, api.NodeListInput{})
	if errors.As(err, &e) || err == nil || !strings.Contains(err.Error(), "HTTP 404 from "+url) {
		t.Errorf("a body that is not the API's: %v", err)
	}

	dead := client.New("http://127.0.0.1:1", "cfk_test")
	if _, err := dead.Scheduler.Status(ctx); err == nil || !strings.Contains(err.Error(), "cannot reach the control plane at http://127.0.0.1:1") {
		t.Errorf("an unreachable server: %v", err)
	}
}

// TestLongPollHonoursTheContext: a sandboxes.wait the server holds ends when its context ends,
// with the context's error, long before the server would answer.
func TestLongPollHonoursTheContext(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var rec recorder
	url := rec.start(t, func(w http.ResponseWriter, _ string, _ []byte) { <-release })
	c := client.New(url, "cfk_test")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Sandboxes.Wait(ctx, api.SandboxWaitInput{TenantID: "acme", ID: "sbx_1", TimeoutSeconds: 300})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait = %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Wait returned after %s", d)
	}
}

// TestAllPages: All follows nextCursor page by page, passing each as cursor, until a page has
// none; breaking out of the loop stops the paging.
func TestAllPages(t *testing.T) {
	pages := map[string]string{
		"":      `{"items":[{"id":"sbx_a"},{"id":"sbx_b"}],"nextCursor":"sbx_b"}`,
		"sbx_b": `{"items":[{"id":"sbx_c"}],"nextCursor":"sbx_c"}`,
		"sbx_c": `{"items":[]}`,
	}
	var rec recorder
	url := rec.start(t, func(w http.ResponseWriter, _ string, body []byte) {
		var in api.SandboxListInput
		json.Unmarshal(body, &in)
		io.WriteString(w, pages[in.Cursor])
	})
	c := client.New(url, "cfk_test")
	var ids []string
	for s, err := range c.Sandboxes.All(context.Background(), api.SandboxListInput{TenantID: "acme", Cursor: "ignored"}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	if strings.Join(ids, ",") != "sbx_a,sbx_b,sbx_c" || len(rec.methods) != 3 {
		t.Errorf("All gave %v in %d calls, want sbx_a,sbx_b,sbx_c in 3", ids, len(rec.methods))
	}
	for range c.Sandboxes.All(context.Background(), api.SandboxListInput{TenantID: "acme"}) {
		break
	}
	if len(rec.methods) != 4 {
		t.Errorf("a loop that broke at its first item made %d calls, want 1", len(rec.methods)-3)
	}
}
