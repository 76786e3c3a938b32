package sandboxes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
)

// TestListOrder: list shows the newest first by the creation time it shows: a claimed warm
// sandbox keeps its older id but is as new as its claim; pages follow that order. A list by a
// template the tenant does not have is refused like a create.
func TestListOrder(t *testing.T) {
	o := sandboxtest.Options{Offer: map[string]int64{"sandboxes": 10}, Warm: &compute.Warm{Min: 1, Max: 1}}
	sandboxtest.Each(t, o, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 4)
		a.Behave = forever
		if err := e.Svc.KeepWarm(ctx); err != nil { // the warm sandbox: the oldest id
			t.Fatal(err)
		}
		e.Clock.Add(time.Second)
		cold := e.Create("acme", "sleep") // the warm one is not ready yet
		if cold.Warm {
			t.Fatalf("claimed a warm sandbox that is not ready: %+v", cold)
		}
		asgs, _ := a.Poll(ctx, 0)
		a.Handle(ctx, asgs)
		e.Clock.Add(time.Second)
		claimed := e.Create("acme", "sleep")
		if claimed.ClaimedAt == 0 || claimed.ID > cold.ID {
			t.Fatalf("want a claim of the older warm sandbox: %+v", claimed)
		}
		items, next, err := e.Svc.List(ctx, sandboxes.ListInput{TenantID: "acme", Limit: 1})
		if err != nil || len(items) != 1 || items[0].ID != claimed.ID || next == "" {
			t.Fatalf("first page: %v %v %q", items, err, next)
		}
		items, _, err = e.Svc.List(ctx, sandboxes.ListInput{TenantID: "acme", Limit: 1, Cursor: next})
		if err != nil || len(items) != 1 || items[0].ID != cold.ID {
			t.Fatalf("second page: %v %v", items, err)
		}
		_, _, err = e.Svc.List(ctx, sandboxes.ListInput{TenantID: "acme", Template: strings.Repeat("x", 5000)})
		if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) || !strings.Contains(err.Error(), "no sandbox template") || len(err.Error()) > 300 {
			t.Errorf("a list by an unknown template: %v", err)
		}
		if items, _, err := e.Svc.List(ctx, sandboxes.ListInput{TenantID: "acme", Template: "py"}); err != nil || len(items) != 2 {
			t.Errorf("a list by template: %d %v", len(items), err)
		}
	})
}

// TestSecretEnvAdvice: a credential in a sandbox's env is refused with the one fix sandboxes
// take, secret://NAME, never vault:// or env://, which they refuse.
func TestSecretEnvAdvice(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		for _, v := range []string{"hunter2", "secret:nope", "vault://kv/api#token"} {
			_, err := e.Svc.Create(context.Background(), sandboxes.CreateInput{TenantID: "root", Template: "py", Env: map[string]string{"API_TOKEN": v}})
			if err == nil || !strings.Contains(err.Error(), "secret://NAME") || strings.Contains(err.Error(), "vault://PATH") || strings.Contains(err.Error(), "env://NAME") {
				t.Errorf("API_TOKEN=%s: %v", v, err)
			}
		}
	})
}
