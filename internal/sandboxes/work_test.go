package sandboxes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
)

// TestDeliveryIsIdempotent: an assignment is offered again until the agent lists it as done,
// and a start carried out twice starts the sandbox once; events are taken in once per (sandbox,
// state), and an event about a sandbox the node does not run is NOT_FOUND.
func TestDeliveryIsIdempotent(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 4)
		b := e.NewAgent("127.0.0.3", 4)
		a.Behave = func(nodeapi.SandboxSpec) sandboxtest.Run { return sandboxtest.Run{} } // runs until stopped
		s := e.Create("root", "sleep", "60")
		on := map[string]*sandboxtest.Agent{"127.0.0.2": a, "127.0.0.3": b}[s.NodeID]
		if on != a {
			a, b = b, a
			a.Behave = func(nodeapi.SandboxSpec) sandboxtest.Run { return sandboxtest.Run{} }
		}
		first, err := a.Poll(ctx, 0)
		if err != nil || len(first) != 1 || first[0].Kind != nodeapi.KindStart || first[0].Sandbox.ID != s.ID {
			t.Fatalf("first poll: %+v %v", first, err)
		}
		again, err := a.Poll(ctx, 0) // not done yet: offered again
		if err != nil || len(again) != 1 || again[0].ID != first[0].ID {
			t.Fatalf("second poll: %+v %v", again, err)
		}
		a.Handle(ctx, first)
		a.Handle(ctx, again)
		if n := a.Starts(s.ID); n != 2 || len(a.Running()) != 1 {
			t.Fatalf("handled twice: %d starts asked, running %v", n, a.Running())
		}
		if got, err := a.Poll(ctx, 0); err != nil || len(got) != 0 {
			t.Fatalf("after done: %+v %v", got, err)
		}
		if got := e.Get("root", s.ID); got.State != sandboxes.StateRunning {
			t.Fatalf("after the running event: %+v", got)
		}
		// The same final event twice, then another: the first stands.
		zero, one := 0, 1
		for _, ev := range []nodeapi.SandboxEvent{
			{State: nodeapi.StateExited, ExitCode: &zero, Stdout: []byte("first")},
			{State: nodeapi.StateExited, ExitCode: &zero, Stdout: []byte("first")},
			{State: nodeapi.StateKilled, ExitCode: &one, Stdout: []byte("second")},
			{State: nodeapi.StateRunning},
		} {
			if code, err := a.Event(ctx, s.ID, ev); code != 200 || err != nil {
				t.Fatalf("event %s: %d %v", ev.State, code, err)
			}
		}
		got := e.Get("root", s.ID)
		_, out, _ := e.Svc.Logs(ctx, "root", s.ID)
		if got.State != sandboxes.StateExited || *got.Result.ExitCode != 0 || string(out.Stdout) != "first" || len(got.States) != 4 {
			t.Fatalf("after repeated events: %+v %q", got, out.Stdout)
		}
		// Another node's event about it, and an event about a sandbox nobody runs.
		if code, err := b.Event(ctx, s.ID, nodeapi.SandboxEvent{State: nodeapi.StateRunning}); code != 404 || err != nil {
			t.Errorf("another node's event: %d %v", code, err)
		}
		if code, err := a.Event(ctx, "sbx_01JV3K8Q6W4Z0M5N7P9R2T4V6X", nodeapi.SandboxEvent{State: nodeapi.StateRunning}); code != 404 || err != nil {
			t.Errorf("an unknown sandbox's event: %d %v", code, err)
		}
	})
}

// TestLongPollAnswersAtOnce: a work request held open is answered as soon as work arrives for
// its node, not when its wait ends.
func TestLongPollAnswersAtOnce(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 4)
		type answer struct {
			asgs []nodeapi.Assignment
			err  error
			at   time.Time
		}
		got := make(chan answer, 1)
		go func() {
			asgs, err := a.Poll(ctx, 20*time.Second)
			got <- answer{asgs, err, time.Now()}
		}()
		time.Sleep(200 * time.Millisecond)
		created := time.Now()
		s := e.Create("root", "true")
		ans := <-got
		if ans.err != nil || len(ans.asgs) != 1 || ans.asgs[0].Sandbox.ID != s.ID {
			t.Fatalf("poll: %+v %v", ans.asgs, ans.err)
		}
		if d := ans.at.Sub(created); d > 2*time.Second {
			t.Errorf("the held poll answered %s after the create", d)
		}
	})
}

// TestLongPollHoldsInProgress: the assignments a work request lists as in progress are left
// out of its answer, and the request is held until other work arrives (then only that is
// answered), as if they were not queued; they stay queued until the agent lists them as done.
func TestLongPollHoldsInProgress(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 4)
		first := e.Create("root", "sleep", "60")
		offered, err := a.Poll(ctx, 0)
		if err != nil || len(offered) != 1 || offered[0].Sandbox.ID != first.ID {
			t.Fatalf("first poll: %+v %v", offered, err)
		}
		a.InProgress = []string{offered[0].ID}
		if got, err := a.Poll(ctx, 0); err != nil || len(got) != 0 {
			t.Fatalf("with the start in progress: %+v %v, want nothing", got, err)
		}
		got := make(chan []nodeapi.Assignment, 1)
		go func() {
			asgs, err := a.Poll(ctx, 20*time.Second)
			if err != nil {
				t.Error(err)
			}
			got <- asgs
		}()
		select {
		case asgs := <-got:
			t.Fatalf("a request with only work in progress was answered at once: %+v", asgs)
		case <-time.After(300 * time.Millisecond):
		}
		second := e.Create("root", "sleep", "60")
		if asgs := <-got; len(asgs) != 1 || asgs[0].Sandbox.ID != second.ID {
			t.Fatalf("held poll: %+v, want the second sandbox's start only", asgs)
		}
		a.InProgress = nil
		if again, err := a.Poll(ctx, 0); err != nil || len(again) != 2 {
			t.Fatalf("without in progress: %+v %v, want both starts again", again, err)
		}
	})
}

// TestWorkAuth: only the node's own credential may call its work API, with a nonce; a stock
// Cubelet's node is refused (403); every answer once the node is known is proven.
func TestWorkAuth(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		a := e.NewAgent("127.0.0.2", 4)
		b := e.NewAgent("127.0.0.3", 4)
		if err := nodetest.NewCubelet(e.URL).Register(nodetest.WithNode("10.0.0.9")); err != nil {
			t.Fatal(err)
		}
		post := func(path, token, nonce string) (int, http.Header, []byte) {
			req, _ := http.NewRequest(http.MethodPost, e.URL+path, strings.NewReader(`{"running":[],"wait_ms":0}`))
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			if nonce != "" {
				req.Header.Set(nodeapi.NonceHeader, nonce)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var buf bytes.Buffer
			buf.ReadFrom(resp.Body)
			return resp.StatusCode, resp.Header, buf.Bytes()
		}
		const n = "0123456789abcdefABCDEF"
		for _, c := range []struct {
			name, path, token, nonce string
			code                     int
		}{
			{"no credential", nodeapi.WorkPath("127.0.0.2"), "", n, 401},
			{"another node's credential", nodeapi.WorkPath("127.0.0.2"), b.Credential(), n, 401},
			{"a join token", nodeapi.WorkPath("127.0.0.2"), "cfj_whatever", n, 401},
			{"a stock Cubelet", nodeapi.WorkPath("10.0.0.9"), "", n, 403},
			{"no nonce", nodeapi.WorkPath("127.0.0.2"), a.Credential(), "", 400},
			{"a short nonce", nodeapi.WorkPath("127.0.0.2"), a.Credential(), "short", 400},
			{"an unknown node", nodeapi.WorkPath("10.0.0.99"), "", n, 404},
		} {
			if code, _, body := post(c.path, c.token, c.nonce); code != c.code {
				t.Errorf("%s: %d %s, want %d", c.name, code, body, c.code)
			}
		}
		code, hd, body := post(nodeapi.WorkPath("127.0.0.2"), a.Credential(), n)
		if code != 200 {
			t.Fatalf("own credential: %d %s", code, body)
		}
		if err := nodeapi.VerifyProof(nodeapi.CredentialKey(a.Credential()), n, "127.0.0.2", body, hd.Get(nodeapi.ProofHeader)); err != nil {
			t.Errorf("the answer is not proven: %v", err)
		}
		if err := nodeapi.VerifyProof(nodeapi.CredentialKey(b.Credential()), n, "127.0.0.2", body, hd.Get(nodeapi.ProofHeader)); err == nil {
			t.Errorf("the proof verifies under another node's key")
		}
		var resp nodeapi.WorkResponse
		if err := json.Unmarshal(body, &resp); err != nil || resp.Assignments == nil {
			t.Errorf("answer %s: %v", body, err)
		}
	})
}

// TestOrphansAreStopped: a node that runs a sandbox the control plane does not run there (it
// was lost meanwhile, or is unknown) is told to stop it.
func TestOrphansAreStopped(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 4)
		a.Behave = func(nodeapi.SandboxSpec) sandboxtest.Run { return sandboxtest.Run{} } // runs until stopped
		a.Handle(ctx, []nodeapi.Assignment{{ID: "asg_local", Kind: nodeapi.KindStart, Sandbox: &nodeapi.SandboxSpec{ID: "sbx_01JV3K8Q6W4Z0M5N7P9R2T4V6X"}}})
		asgs, err := a.Poll(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(asgs) != 1 || asgs[0].Kind != nodeapi.KindStop || asgs[0].SandboxID != "sbx_01JV3K8Q6W4Z0M5N7P9R2T4V6X" {
			t.Fatalf("assignments: %+v", asgs)
		}
	})
}
