package nodes_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// joinAgent joins node 127.0.0.1 as cubefleet agent through e's HTTP edge and returns its node
// credential.
func joinAgent(t *testing.T, e *nodetest.Env) string {
	t.Helper()
	join := e.JoinToken(nodes.JoinTokenInput{IP: "127.0.0.1"})
	code, body := e.Call(nodetest.From("127.0.0.1"), "POST", nodeapi.PathRegister, join, nodetest.WithNode("127.0.0.1"))
	if code != 200 {
		t.Fatalf("join: %d %s", code, body)
	}
	var joined nodeapi.RegisterResponse
	if err := json.Unmarshal(body, &joined); err != nil {
		t.Fatal(err)
	}
	return joined.NodeCredential
}

// reportSandboxes sends a status report of node 127.0.0.1 listing ids as the sandboxes it runs.
func reportSandboxes(t *testing.T, e *nodetest.Env, cred string, ids ...string) {
	t.Helper()
	body := nodetest.Patch(t, nodetest.Status(), "sandboxes", append([]string{}, ids...))
	if code, out := e.Call(nodetest.From("127.0.0.1"), "POST", nodeapi.StatusPath("127.0.0.1"), cred, body); code != 200 {
		t.Fatalf("status: %d %s", code, out)
	}
}

// TestSandboxesListed: the sandboxes cubefleet agent lists are what a drain counts (not
// allocated.mvm_num), what WorkNodes shows, and reach another replica through the store.
func TestSandboxesListed(t *testing.T) {
	storetest.Each(t, nodetest.Modules, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a := nodetest.MustEnv(t, db, func(c *nodetest.Config) { c.Store.Holder = "replica-a" })
		b := nodetest.Start(t, db, a.Clock, func() nodetest.Config { c := a.Cfg; c.Store.Holder = "replica-b"; return c }())
		a.Store.Announce(ctx)
		cred := joinAgent(t, a)
		reportSandboxes(t, a, cred, "sbx_a", "sbx_b") // allocated.mvm_num says 4
		v, err := a.Reg.Drain(ctx, "127.0.0.1", "retire", "ops")
		if err != nil {
			t.Fatal(err)
		}
		if v.Drain == nil || v.Drain.State != nodes.DrainDraining || v.Drain.SandboxesLeft != 2 {
			t.Fatalf("drain: %+v", v.Drain)
		}
		w, ok, err := a.Reg.WorkNode(ctx, "127.0.0.1")
		if err != nil || !ok || !w.Cubefleet || !w.Draining || !w.SandboxesReported || !slices.Equal(w.Sandboxes, []string{"sbx_a", "sbx_b"}) ||
			w.PoolID != nodetest.Pool.ID || w.State != nodes.StateReady {
			t.Fatalf("WorkNode = %+v, %v, %v", w, ok, err)
		}
		a.Flush()
		if err := b.Store.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := b.Reg.WorkNodes(); len(got) != 1 || !slices.Equal(got[0].Sandboxes, []string{"sbx_a", "sbx_b"}) {
			t.Fatalf("replica b: %+v", got)
		}
		a.Clock.Add(time.Second)
		reportSandboxes(t, a, cred)
		if v, _ := a.Reg.Get(ctx, "127.0.0.1"); v.Drain == nil || v.Drain.State != nodes.DrainDrained {
			t.Fatalf("after a report of none: %+v", v.Drain)
		}
		a.Flush()
		if err := b.Store.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := b.Reg.WorkNodes(); len(got) != 1 || got[0].Sandboxes == nil || len(got[0].Sandboxes) != 0 || !got[0].SandboxesReported {
			t.Fatalf("replica b after a report of none: %+v", got)
		}
	})
}

// TestAuthenticateWork: only the node's own credential may call its work API; a stock
// Cubelet's node is refused (registry-only).
func TestAuthenticateWork(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		cred := joinAgent(t, e)
		if err := nodetest.NewCubelet(e.URL).Register(nodetest.WithNode("10.0.0.9")); err != nil {
			t.Fatal(err)
		}
		hash, err := e.Reg.AuthenticateWork(ctx, "127.0.0.1", nodes.Credential{Kind: nodes.CredentialNode, Hash: nodes.HashToken(cred)})
		if err != nil || hash != nodes.HashToken(cred) {
			t.Fatalf("own credential: %q, %v", hash, err)
		}
		for _, c := range []struct {
			name string
			id   string
			cred nodes.Credential
			code cubefleet.Code
		}{
			{"another credential", "127.0.0.1", nodes.Credential{Kind: nodes.CredentialNode, Hash: nodes.HashToken("cfn_other")}, cubefleet.CodeUnauthenticated},
			{"no credential", "127.0.0.1", nodes.Credential{}, cubefleet.CodeUnauthenticated},
			{"stock Cubelet", "10.0.0.9", nodes.Credential{}, cubefleet.CodeForbidden},
			{"the credential for a stock Cubelet", "10.0.0.9", nodes.Credential{Kind: nodes.CredentialNode, Hash: nodes.HashToken(cred)}, cubefleet.CodeUnauthenticated},
			{"unknown node", "10.0.0.99", nodes.Credential{}, cubefleet.CodeNotFound},
		} {
			_, err := e.Reg.AuthenticateWork(ctx, c.id, c.cred)
			var f *nodes.Refusal
			got := cubefleet.ErrorCode(err)
			if errors.As(err, &f) {
				got = f.Code
			}
			if got != c.code {
				t.Errorf("%s: %v, want %s", c.name, err, c.code)
			}
		}
	})
}
