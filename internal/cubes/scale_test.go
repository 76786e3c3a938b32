package cubes_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/cubes"
)

// scaleActions renders a scale plan's decisions as plan letters (R retain, C create, X
// remove, E empty).
func scaleActions(p *cubes.ScalePlan) string {
	var b strings.Builder
	for _, s := range p.Slots {
		b.WriteByte(map[cubes.Action]byte{cubes.Retain: 'R', cubes.Create: 'C', cubes.Remove: 'X', cubes.Empty: 'E'}[s.Action])
	}
	return b.String()
}

// members registers the base world's Cubes 0..2 with running sandboxes as given (-1: not
// registered).
func members(running ...int) []cubes.Member {
	var out []cubes.Member
	for i, n := range running {
		if n >= 0 {
			ip := fmt.Sprintf("10.7.0.%d", 11+i)
			out = append(out, cubes.Member{ID: ip, IP: ip, Pool: "fra", State: "Ready", Running: n})
		}
	}
	return out
}

// TestPlanScaleTable: item 5's choice rules, one row each.
func TestPlanScaleTable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		target  int
		running []int
		edit    func(cfg *cubes.Config, opts *cubes.ScaleOptions)
		actions string // "" when refused
		rule    cubes.Rule
		steps   []string // the steps' Do and slot, "" for none
	}{
		{name: "nothing to do", target: 3, running: []int{1, 1, 1}, actions: "RRREE"},
		{name: "the least active goes", target: 2, running: []int{3, 5, 2}, actions: "RRXEE",
			steps: []string{"coordinator", "cordon 2", "drain 2", "remove-peer 2", "delete-server 2"}},
		{name: "least active first", target: 1, running: []int{4, 0, 2},
			edit:    func(_ *cubes.Config, o *cubes.ScaleOptions) { o.RuntimeSourceServerID = srvID(0) },
			actions: "RXXEE",
			steps:   []string{"coordinator", "cordon 1", "drain 1", "remove-peer 1", "delete-server 1", "cordon 2", "drain 2", "remove-peer 2", "delete-server 2"}},
		{name: "ties go to the highest slot index", target: 2, running: []int{3, 3, 3}, actions: "RRXEE"},
		{name: "an unregistered Cube counts as idle", target: 2, running: []int{1, -1, 1}, actions: "RXREE"},
		{name: "never the runtime source", target: 2, running: []int{5, 5, 0},
			edit:    func(_ *cubes.Config, o *cubes.ScaleOptions) { o.RuntimeSourceServerID = srvID(2) },
			actions: "RXREE"},
		{name: "never a protected server", target: 2, running: []int{5, 5, 0},
			edit: func(c *cubes.Config, _ *cubes.ScaleOptions) {
				c.ProtectedServerIDs = append(c.ProtectedServerIDs, srvID(2))
			}, rule: cubes.RuleProtectedMember},
		{name: "never below minimum_cubes", target: 1, running: []int{0, 0, 0},
			edit: func(c *cubes.Config, _ *cubes.ScaleOptions) { c.MinimumCubes = 2 }, rule: cubes.RuleTargetOutOfRange},
		{name: "the runtime source stays even at no minimum", target: 0, running: []int{0, 0, 0},
			edit: func(c *cubes.Config, o *cubes.ScaleOptions) { c.MinimumCubes = 0; o.RuntimeSourceServerID = srvID(1) },
			rule: cubes.RuleTargetOutOfRange},
		{name: "growth fills the lowest empty slots", target: 4, running: []int{0, 0, 0}, actions: "RRRCE",
			steps: []string{"create-server 3", "attach-group 3", "add-peer 3", "verify-workers 3", "add-targets 3"}},
		{name: "growth beyond the slots", target: 6, running: []int{0, 0, 0}, rule: cubes.RuleTargetOutOfRange},
		{name: "a stale inventory", target: 2, running: []int{0, 0, 0},
			edit: func(_ *cubes.Config, o *cubes.ScaleOptions) { o.Now = now.Add(time.Hour) }, rule: cubes.RuleStaleInventory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, inv := base()
			opts := cubes.ScaleOptions{Target: tc.target, Now: now, DrainDeadline: 30 * time.Minute}
			if tc.edit != nil {
				tc.edit(cfg, &opts)
			}
			p := cubes.PlanScale(cfg, inv, members(tc.running...), opts)
			if tc.rule != "" {
				if p.Accepted || len(p.Steps) != 0 || !slices.ContainsFunc(p.Problems, func(pr cubes.Problem) bool { return pr.Rule == tc.rule }) {
					t.Fatalf("accepted %v, steps %d, problems %+v: want %s", p.Accepted, len(p.Steps), p.Problems, tc.rule)
				}
				return
			}
			if !p.Accepted {
				t.Fatalf("refused: %+v", p.Problems)
			}
			if got := scaleActions(p); got != tc.actions {
				t.Errorf("actions %s, want %s", got, tc.actions)
			}
			if tc.steps != nil {
				var got []string
				for _, s := range p.Steps {
					if s.Slot < 0 {
						got = append(got, s.Do)
					} else {
						got = append(got, fmt.Sprintf("%s %d", s.Do, s.Slot))
					}
				}
				if !slices.Equal(got, tc.steps) {
					t.Errorf("steps %v, want %v", got, tc.steps)
				}
			}
			for _, s := range p.Steps {
				if s.Do == cubes.StepDeleteServer && s.ServerID != cfg.Slots[s.Slot].ServerID {
					t.Errorf("deletes %s, slot %d holds %s", s.ServerID, s.Slot, cfg.Slots[s.Slot].ServerID)
				}
			}
			if p.Capacity == nil || p.Capacity.Cubes != tc.target {
				t.Errorf("capacity %+v for target %d", p.Capacity, tc.target)
			}
		})
	}
}

// BenchmarkScalePlan plans 100 Cubes down to 50 (target: <= 100 ms).
func BenchmarkScalePlan(b *testing.B) {
	cfg, inv := bigWorld(100)
	var ms []cubes.Member
	for i, s := range cfg.Slots {
		ms = append(ms, cubes.Member{ID: s.PrivateIP, IP: s.PrivateIP, State: "Ready", Running: i % 7})
	}
	opts := cubes.ScaleOptions{Target: 50, Now: now, RuntimeSourceServerID: cfg.Slots[0].ServerID}
	if p := cubes.PlanScale(cfg, inv, ms, opts); !p.Accepted {
		b.Fatalf("rejected: %+v", p.Problems)
	}
	b.ReportAllocs()
	for b.Loop() {
		cubes.PlanScale(cfg, inv, ms, opts)
	}
}
