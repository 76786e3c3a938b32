package cubes

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/ionos"
)

// The scale plan (docs/ionos.md, "Scaling the fleet"): which Cubes go, or which slots get new
// Cubes, to reach a target, and the steps that do it.

// ScaleOptions are the inputs of PlanScale besides the configuration, the inventory and the
// control plane's members.
type ScaleOptions struct {
	// Target is the number of Cubes wanted.
	Target int
	// RuntimeSourceServerID is the server id of the profile's runtime_source_cube (the healthy
	// Cube new ones bootstrap from): it never goes.
	RuntimeSourceServerID string
	// DrainDeadline bounds each departing Cube's drain (the profile's drain_deadline).
	DrainDeadline time.Duration
	// Now, MaxInventoryAge and CubeNamePrefix are as PlanOptions's.
	Now             time.Time
	MaxInventoryAge time.Duration
	CubeNamePrefix  string
}

// ScaleSlot is one slot of a scale plan: the slot plan, and for an occupied slot whether its
// Cube is registered with the control plane (by its private IP as node IP) and how many
// sandboxes run there (running or placed; Running is 0 when it is not registered).
type ScaleSlot struct {
	SlotPlan
	Registered bool `json:"registered"`
	Running    int  `json:"running"`
}

// Step is one step of a scale plan, in order: Slot is the slot's index (-1 for a step of the
// whole fleet), Cube its name, ServerID the server concerned (for a deletion: exactly this id,
// never a name), Do the step's name and Detail what it does.
type Step struct {
	Slot     int    `json:"slot"`
	Cube     string `json:"cube,omitempty"`
	ServerID string `json:"serverId,omitempty"`
	Do       string `json:"do"`
	Detail   string `json:"detail"`
}

// The steps of a scale plan.
const (
	StepCoordinator   = "coordinator"    // move the coordinator to the new membership
	StepCordon        = "cordon"         // stop dispatch to the Cube
	StepDrain         = "drain"          // wait until the Cube runs no sandboxes
	StepRemovePeer    = "remove-peer"    // remove the Cube's WireGuard peer on the GPU host
	StepDeleteServer  = "delete-server"  // delete exactly the planned server id
	StepCreateServer  = "create-server"  // create the Cube (its name journaled first)
	StepAttachGroup   = "attach-group"   // attach the worker security group
	StepAddPeer       = "add-peer"       // add the Cube's WireGuard peer on the GPU host
	StepVerifyWorkers = "verify-workers" // node Ready with all its slots, a canary runs
	StepAddTargets    = "add-targets"    // the Cube's origin into the ALB target groups
)

// ScalePlan is the plan to go from Current Cubes (occupied slots) to Target. Accepted is true
// exactly when Problems is empty; Steps is empty when it is not, or when nothing changes.
// Capacity and Template are as Plan's, for the fleet after the change.
type ScalePlan struct {
	DatacenterID string          `json:"datacenterId"`
	Current      int             `json:"current"`
	Target       int             `json:"target"`
	Accepted     bool            `json:"accepted"`
	InventoryAge int64           `json:"inventoryAgeMs"`
	Slots        []ScaleSlot     `json:"slots"`
	Steps        []Step          `json:"steps"`
	Capacity     *Capacity       `json:"capacity"`
	CapacityNote string          `json:"capacityNote,omitempty"`
	Template     *ionos.Template `json:"template"`
	Problems     []Problem       `json:"problems"`
}

// PlanScale decides how to reach opts.Target Cubes, checking every planning rule of PlanSlots
// on the fleet as it is (and, for growth, on the new slots). A reduction removes the least
// active Cubes by running sandboxes (members, matched to slots by IP), ties going to the
// highest slot index; it never removes the runtime source or a protected server and never goes
// below minimum_cubes (RuleTargetOutOfRange when it would, or when too few Cubes may go).
// Growth fills the lowest-index empty slots, as PlanSlots does. cfg, inv and members are not
// modified; the plan is O(slots log slots + servers + members).
func PlanScale(cfg *Config, inv *ionos.Inventory, members []Member, opts ScaleOptions) *ScalePlan {
	current := cfg.Occupied()
	base := PlanSlots(cfg, inv, PlanOptions{Target: max(opts.Target, current), Now: opts.Now, MaxInventoryAge: opts.MaxInventoryAge, CubeNamePrefix: opts.CubeNamePrefix})
	sp := &ScalePlan{DatacenterID: base.DatacenterID, Current: current, Target: opts.Target, InventoryAge: base.InventoryAge,
		Capacity: base.Capacity, CapacityNote: base.CapacityNote, Template: base.Template, Problems: base.Problems, Steps: []Step{}}
	byIP := make(map[string]*Member, len(members))
	for i := range members {
		byIP[members[i].IP] = &members[i]
	}
	sp.Slots = make([]ScaleSlot, len(base.Slots))
	for i, s := range base.Slots {
		sp.Slots[i] = ScaleSlot{SlotPlan: s}
		if m := byIP[s.PrivateIP]; m != nil && s.ServerID != "" {
			sp.Slots[i].Registered, sp.Slots[i].Running = true, m.Running
		}
	}
	if opts.Target < current {
		for i := range sp.Slots {
			s := &sp.Slots[i]
			switch {
			case s.ServerID == "":
				s.Reason = fmt.Sprintf("no Cube and none needed for target %d", opts.Target)
			case s.ServerID == opts.RuntimeSourceServerID:
				s.Reason = "the runtime source Cube new ones bootstrap from: never removed"
			default:
				s.Reason = fmt.Sprintf("stays for target %d: more active, or a lower slot index, than the Cubes that go", opts.Target)
			}
		}
		sp.reduce(cfg, opts)
	}
	sp.Accepted = len(sp.Problems) == 0
	if sp.Accepted {
		sp.steps(opts)
	}
	return sp
}

// reduce chooses the Cubes that go and marks their slots Remove.
func (sp *ScalePlan) reduce(cfg *Config, opts ScaleOptions) {
	if opts.Target < cfg.MinimumCubes {
		sp.Problems = append(sp.Problems, Problem{Rule: RuleTargetOutOfRange, SlotIndex: -1,
			Message: fmt.Sprintf("target %d is below minimum_cubes %d: the fleet keeps at least %d %s", opts.Target, cfg.MinimumCubes, cfg.MinimumCubes, cubefleet.Plural(cfg.MinimumCubes, "Cube", "Cubes"))})
		return
	}
	var candidates []*ScaleSlot
	for i := range sp.Slots {
		s := &sp.Slots[i]
		if s.ServerID == "" || s.ServerID == opts.RuntimeSourceServerID || slices.Contains(cfg.ProtectedServerIDs, s.ServerID) {
			continue
		}
		candidates = append(candidates, s)
	}
	n := sp.Current - opts.Target
	if len(candidates) < n {
		sp.Problems = append(sp.Problems, Problem{Rule: RuleTargetOutOfRange, SlotIndex: -1,
			Message: fmt.Sprintf("target %d needs %d Cubes to go, but only %d may (the runtime source and protected servers stay)", opts.Target, n, len(candidates))})
		return
	}
	slices.SortStableFunc(candidates, func(a, b *ScaleSlot) int {
		return cmp.Or(cmp.Compare(a.Running, b.Running), cmp.Compare(b.Index, a.Index))
	})
	for _, s := range candidates[:n] {
		s.Action = Remove
		s.Reason = fmt.Sprintf("among the %d least active by running sandboxes (%d here; ties go to the highest slot index)", n, s.Running)
		if !s.Registered {
			s.Reason = fmt.Sprintf("among the %d least active: not registered with the control plane (ties go to the highest slot index)", n)
		}
		if sp.Capacity != nil {
			sp.Capacity.Cubes--
			sp.Capacity.Cores -= s.Cores
			sp.Capacity.RAMMiB -= s.RAMMiB
			sp.Capacity.WorkerSlots -= s.WorkerSlots
		}
		s.Cores, s.RAMMiB, s.WorkerSlots = 0, 0, 0
	}
}

// steps lists what apply does, in order: for a reduction the coordinator first, then each
// departing Cube from the least active on; for growth each new Cube in slot order.
func (sp *ScalePlan) steps(opts ScaleOptions) {
	add := func(s *ScaleSlot, do, format string, args ...any) {
		st := Step{Slot: -1, Do: do, Detail: fmt.Sprintf(format, args...)}
		if s != nil {
			st.Slot, st.Cube, st.ServerID = s.Index, s.Name, s.ServerID
		}
		sp.Steps = append(sp.Steps, st)
	}
	var removed []*ScaleSlot
	for i := range sp.Slots {
		if sp.Slots[i].Action == Remove {
			removed = append(removed, &sp.Slots[i])
		}
	}
	slices.SortStableFunc(removed, func(a, b *ScaleSlot) int {
		return cmp.Or(cmp.Compare(a.Running, b.Running), cmp.Compare(b.Index, a.Index))
	})
	if len(removed) > 0 {
		add(nil, StepCoordinator, "move the coordinator to the reduced membership of %d Cubes (a ready replacement, then the ALB target group handed over)", opts.Target)
	}
	for _, s := range removed {
		add(s, StepCordon, "cordon node %s: no new work", s.PrivateIP)
		add(s, StepDrain, "drain node %s within the pool's disruption budget, at most %s; at the deadline it stays cordoned", s.PrivateIP, opts.DrainDeadline)
		add(s, StepRemovePeer, "remove the WireGuard peer of %s on the GPU host", s.PrivateIP)
		add(s, StepDeleteServer, "re-check id, private IP and idleness, then delete server %s", s.ServerID)
	}
	for i := range sp.Slots {
		s := &sp.Slots[i]
		if s.Action != Create {
			continue
		}
		tpl := ""
		if sp.Template != nil {
			tpl = sp.Template.Name
		}
		add(s, StepCreateServer, "create CUBE server %q from template %q with %s on the private LAN (name journaled before the POST)", s.Name, tpl, s.PrivateIP)
		add(s, StepAttachGroup, "attach the worker security group")
		add(s, StepAddPeer, "add the WireGuard peer of %s on the GPU host", s.PrivateIP)
		add(s, StepVerifyWorkers, "node %s Ready in its pool with all its slots, a canary sandbox pinned to it returns", s.PrivateIP)
		add(s, StepAddTargets, "add %s to the ALB target groups", s.PrivateIP)
	}
}
