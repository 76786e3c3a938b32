package nodesim

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestIDs(t *testing.T) {
	ids := IDs(10000)
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] || strings.HasSuffix(id, ".0") || strings.HasSuffix(id, ".255") {
			t.Fatalf("id %s repeated or not a host address", id)
		}
		seen[id] = true
	}
	if ids[0] != "10.0.1.1" {
		t.Errorf("first id %s", ids[0])
	}
}

func TestStatusBody(t *testing.T) {
	template := []byte(`{"a":"2006-01-02T15:04:05Z","b":"2006-01-02T15:04:05Z"}`)
	body := StatusBody(template)(0, 0, nil)
	if strings.Contains(string(body), "2006-") || len(body) != len(template) || !strings.HasPrefix(string(body), `{"a":"20`) {
		t.Errorf("body %s", body)
	}
}

// TestRunAndFlood runs a small load against a loopback server that answers 200 with a
// Content-Length body (and 500 for one node) and checks the accounting.
func TestRunAndFlood(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		calls.Add(1)
		if strings.Contains(r.URL.Path, "/10.0.1.3/") {
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Length", "2")
		w.Write([]byte("{}"))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	nodes, err := RegisterAll(context.Background(), addr, IDs(3), "", 2, func(id string) []byte { return []byte(`{"node_id":"` + id + `"}`) })
	if err != nil || len(nodes) != 3 {
		t.Fatalf("RegisterAll: %v %v", nodes, err)
	}
	body := StatusBody([]byte(`{}`))
	res, err := Run(context.Background(), Config{Addr: addr, Nodes: nodes, Period: 100 * time.Millisecond, Duration: 500 * time.Millisecond, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent < 12 || res.OK+res.Lost-res.Missed != res.Sent || res.Lost < 4 || len(res.Errors) == 0 {
		t.Errorf("Run: %+v", res)
	}
	ok, failed, err := Flood(context.Background(), addr, nodes[:2], 2, 200*time.Millisecond, body)
	if err != nil || ok == 0 || failed != 0 {
		t.Errorf("Flood: %d ok, %d failed, %v", ok, failed, err)
	}
}
