package sandboxes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
)

// TestWarmTemplateChanged: an idle warm sandbox runs with what its template said when it was
// made (its network, egressAllow, image, size). Once the template changes (here: private to
// public with an egressAllow, as an operator would the other way round to take a network
// away), a create does not claim it: KeepWarm replaces it (killed, warm_surplus, saying why) with one of the
// template as it is now, which the next create claims.
func TestWarmTemplateChanged(t *testing.T) {
	o := sandboxtest.Options{Offer: map[string]int64{"sandboxes": 10}, Warm: &compute.Warm{Min: 1, Max: 1}}
	sandboxtest.Each(t, o, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 4)
		a.Start(50 * time.Millisecond)
		// ready waits for one idle warm sandbox, ready, other than not, and returns it.
		ready := func(not string) sandboxes.Sandbox {
			t.Helper()
			var got sandboxes.Sandbox
			e.Eventually(5*time.Second, func() string {
				if err := e.Svc.KeepWarm(ctx); err != nil {
					return err.Error()
				}
				items := idleWarm(t, e)
				if len(items) != 1 || items[0].ID == not || items[0].State != sandboxes.StateRunning || items[0].Reason != sandboxes.ReasonWarmReady {
					var states []string
					for _, s := range items {
						states = append(states, fmt.Sprintf("%s:%s/%s", s.ID, s.State, s.Reason))
					}
					return fmt.Sprintf("idle warm sandboxes %v, want one ready other than %q", states, not)
				}
				got = items[0]
				return ""
			})
			return got
		}
		old := ready("")
		e.Clock.Add(time.Second)
		upd, _ := json.Marshal(map[string]any{"tenantId": "acme", "id": e.Templates["acme"], "network": "public", "egressAllow": []string{"10.20.0.0/16"}})
		if _, err := e.Compute.Update(ctx, e.DB, compute.KindSandboxTemplate, "svc_test", upd); err != nil {
			t.Fatal(err)
		}
		e.Clock.Add(time.Second)
		s := e.Create("acme", "echo", "after the change")
		if s.ClaimedAt != 0 && s.ID == old.ID {
			t.Errorf("a create after the template changed claimed the warm sandbox %s made before it: %+v", old.ID, s)
		}
		if _, _, err := e.Svc.Wait(ctx, "acme", s.ID, false, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		fresh := ready(old.ID)
		if got := e.Get("acme", old.ID); got.State != sandboxes.StateKilled || got.Reason != sandboxes.ReasonWarmSurplus || !strings.Contains(got.Message, "template py changed") {
			t.Errorf("the warm sandbox made before the change: %s/%s %q, want killed, warm_surplus: its template changed", got.State, got.Reason, got.Message)
		}
		e.Clock.Add(time.Second)
		if s := e.Create("acme", "echo", "claims the fresh one"); s.ClaimedAt == 0 || s.ID != fresh.ID {
			t.Errorf("a create did not claim the warm sandbox of the template as it is: %+v", s)
		}
	})
}
