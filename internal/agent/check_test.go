package agent

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/server"
)

func names(results []CheckResult) []string {
	var out []string
	for _, r := range results {
		out = append(out, r.Name)
	}
	return out
}

func TestCheck(t *testing.T) {
	cp := newFakeCP(t, "cfj_join1")
	cfg := testConfig(t.TempDir(), "cfj_join1", "http://"+closedAddr(t), cp.srv.URL)
	cfg.Listen = closedAddr(t)
	cfg.S3.Endpoint = "http://" + listen(t)
	startAgent(t, cfg)
	results, ok := Check(context.Background(), cfg, CheckOptions{Timeout: 10 * time.Second, Interval: 20 * time.Millisecond})
	if !ok {
		t.Fatalf("Check failed: %v", results)
	}
	if want := []string{CheckLocalAgent, CheckControlPlane, CheckNodeListed, CheckS3}; !reflect.DeepEqual(names(results), want) {
		t.Errorf("checks %v, want %v", names(results), want)
	}
	for _, r := range results {
		if r.Status != CheckOK {
			t.Errorf("%s", r)
		}
	}
	// The first endpoint refuses connections; the check names the one that answered.
	if !strings.Contains(results[1].Detail, cp.srv.URL+nodeapi.PathReadyz+": ready") {
		t.Errorf("control plane: %s", results[1])
	}
}

func TestCheckFails(t *testing.T) {
	cp := newFakeCP(t) // the node never registers
	cfg := testConfig(t.TempDir(), "", cp.srv.URL)
	cfg.Listen = closedAddr(t)
	cfg.S3.Endpoint = "http://" + closedAddr(t)
	start := time.Now()
	results, ok := Check(context.Background(), cfg, CheckOptions{})
	if ok || time.Since(start) > 5*time.Second {
		t.Fatalf("Check = %v after %s, want a single failed round", ok, time.Since(start))
	}
	want := []struct{ status, detail string }{
		{CheckFail, "connect: connection refused (is the agent running? systemctl status cubefleet-agent.service)"},
		{CheckOK, "readyz: ready"},
		{CheckFail, nodeapi.NodePath("127.0.0.1") + ": HTTP 404: this node is not registered; see the agent's log (journalctl -u cubefleet-agent.service); a node joins with a join token: cubefleet nodes join-token create --pool <pool> --ip 127.0.0.1"},
		{CheckFail, "connection refused (allow TCP"},
	}
	for i, w := range want {
		if results[i].Status != w.status || !strings.Contains(results[i].Detail, w.detail) {
			t.Errorf("%s\nwant %s containing %q", results[i], w.status, w.detail)
		}
	}
	if s := results[0].String(); !strings.HasPrefix(s, "FAIL  local agent: http://") {
		t.Errorf("line %q", s)
	}
	// No control plane at all; no S3 configured.
	cfg.ControlPlane = []string{"http://" + closedAddr(t)}
	cfg.S3.Endpoint = ""
	results, _ = Check(context.Background(), cfg, CheckOptions{})
	if results[1].Status != CheckFail || !strings.Contains(results[1].Detail, "(check the firewall: TCP ") || results[3].Status != CheckSkip {
		t.Errorf("results %v", results)
	}
}

// TestCheckWaits starts the check before the agent: it polls until the agent has registered.
func TestCheckWaits(t *testing.T) {
	cp := newFakeCP(t, "cfj_join1")
	cfg := testConfig(t.TempDir(), "cfj_join1", cp.srv.URL)
	cfg.Listen = closedAddr(t)
	cfg.S3.Endpoint = ""
	done := make(chan struct{})
	var results []CheckResult
	var ok bool
	go func() {
		results, ok = Check(context.Background(), cfg, CheckOptions{Timeout: 20 * time.Second, Interval: 50 * time.Millisecond})
		close(done)
	}()
	time.Sleep(300 * time.Millisecond)
	if len(cp.callsTo("/readyz")) == 0 {
		t.Error("the check has not probed the control plane yet")
	}
	r := startAgent(t, cfg)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Check did not return")
	}
	if !ok {
		t.Errorf("Check: %v", results)
	}
	if n := len(cp.callsTo(nodeapi.NodePath("127.0.0.1"))); n < 2 {
		t.Errorf("%d probes of the node listing, want it to have polled", n)
	}
	// A revoked agent fails the local check with its reason.
	cp.deleteNode("127.0.0.1")
	waitFor(t, "the revocation", func() bool { return r.a.Health().State == StateRevoked })
	results, ok = Check(context.Background(), cfg, CheckOptions{Timeout: 5 * time.Second, Interval: 50 * time.Millisecond})
	if ok || !strings.Contains(results[0].Detail, "revoked: the control plane revoked this node's credential") {
		t.Errorf("Check after the deletion: %v", results)
	}
}

// TestCheckLocalState: only a reporting agent passes the local check; a registering or failing
// one fails it with its state and its last error.
func TestCheckLocalState(t *testing.T) {
	cp := newFakeCP(t, "cfj_join1")
	failing := false
	cp.setHook(func(r *http.Request) (int, string) {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		if failing && strings.HasSuffix(r.URL.Path, "/status") {
			return http.StatusInternalServerError, `{"error":"store down"}`
		}
		return 0, ""
	})
	// Registering: its only endpoint refuses connections.
	cfg := testConfig(t.TempDir(), "cfj_join1", "http://"+closedAddr(t))
	cfg.S3.Endpoint = ""
	r := startAgent(t, cfg)
	cfg.Listen = strings.TrimSuffix(strings.TrimPrefix(r.url, "http://"), "/healthz")
	waitFor(t, "a failed registration", func() bool { return len(r.sleeps()) > 0 })
	results, ok := Check(context.Background(), cfg, CheckOptions{})
	if ok || results[0].Status != CheckFail || !strings.Contains(results[0].Detail, "/healthz: registering: http://") ||
		!strings.Contains(results[0].Detail, "connection refused") {
		t.Errorf("a registering agent: %s", results[0])
	}
	r.stop()

	// Failing: registered, then its status reports fail.
	cfg = testConfig(t.TempDir(), "cfj_join1", cp.srv.URL)
	cfg.S3.Endpoint = ""
	r = startAgent(t, cfg)
	cfg.Listen = strings.TrimSuffix(strings.TrimPrefix(r.url, "http://"), "/healthz")
	waitFor(t, "reporting", func() bool { return r.a.Health().LastReportAt != "" })
	if results, ok := Check(context.Background(), cfg, CheckOptions{}); !ok || results[0].Detail != r.url+": reporting" {
		t.Errorf("a reporting agent: %v", results)
	}
	cp.mu.Lock()
	failing = true
	cp.mu.Unlock()
	waitFor(t, "failing", func() bool { return r.a.Health().State == StateFailing })
	results, ok = Check(context.Background(), cfg, CheckOptions{})
	if want := r.url + ": failing: " + cp.srv.URL + ": HTTP 500: store down"; ok || results[0].Status != CheckFail || results[0].Detail != want {
		t.Errorf("a failing agent: %s\nwant FAIL %s", results[0], want)
	}
}

// TestCheckNodeNotRegistered runs the check against a real control plane that does not know
// the node: without a credential the control plane answers 401 (it lists a node only to its
// own credential or an API key), which the check explains as "no credential yet" with what to
// do, instead of relaying the API-key advice meant for people.
func TestCheckNodeNotRegistered(t *testing.T) {
	cp := startRealCP(t, server.Config{}, "")
	dir := t.TempDir()
	cfg := testConfig(dir, "", cp.srv.InternalURL())
	for _, tc := range []struct {
		name  string
		state *State
		want  string
	}{
		{"no state file", nil, "HTTP 401: this node has no node credential in " + filepath.Join(dir, StateFile) + " (the agent has not registered with a join token yet), so the control plane does not show it to this check; see the agent's log (journalctl -u cubefleet-agent.service); a node joins with a join token: cubefleet nodes join-token create --pool <pool> --ip 127.0.0.1"},
		{"revoked", &State{NodeID: "127.0.0.1", Revoked: true, RevokedAt: "2026-05-04T03:02:01Z"}, "(its credential was revoked (the node was deleted at 2026-05-04T03:02:01Z))"},
		{"a credential the control plane does not know", &State{NodeID: "127.0.0.1", NodeCredential: "cfn_unknown"},
			"HTTP 401: the control plane does not accept this node's credential (unknown or revoked node credential (a deleted node needs a new join token)): the node is not registered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(filepath.Join(dir, StateFile))
			if tc.state != nil {
				if err := WriteState(dir, *tc.state); err != nil {
					t.Fatal(err)
				}
			}
			results, ok := Check(context.Background(), cfg, CheckOptions{})
			if r := results[2]; ok || r.Status != CheckFail || !strings.Contains(r.Detail, tc.want) || strings.Contains(r.Detail, "API key") {
				t.Errorf("%s\nwant FAIL containing %q", r, tc.want)
			}
		})
	}
}
