package cubes

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes/journal"
	"github.com/cubefleet/cubefleet/internal/ionos"
)

// scale apply (docs/ionos.md, "Applying a scale plan"): the Cubes a ScalePlan removes go one
// at a time, each through the roundtrip's removal steps (Roundtrip.RemoveCube), after the
// whole fleet's preflight, an accepted result per Cube and the coordinator's handover; the
// Cubes it adds come one at a time through the roundtrip's adding steps (Roundtrip.AddCube).

// scale apply's workflow names in its journals: a reduction, a growth.
const (
	WorkflowScale       = "scale apply"
	WorkflowScaleGrowth = "scale apply growth"
)

// Steps of scale apply besides the roundtrip's.
const (
	StepAcceptResult = "accept-result" // a sandbox accepted on the departing Cube through the previous configuration
	StepCheckResult  = "check-result"  // its result read through the new and the previous configuration
)

// Handover is the coordinator step of a reduction when the control plane loads a fixed origin
// list: GroupID is the load balancer's target group that routes to it (the profile's
// control_plane.target_group), Replacement the URL of a ready replacement started with the
// reduced origins on the shared database ("" when none was given: the step then stops and
// says how to start one), and Ready checks that the replacement answers as ready.
type Handover struct {
	GroupID     string
	Replacement string
	Ready       func(ctx context.Context) error
}

// Reduction is scale apply removing Cubes: the Roundtrip's tools, whose CP is the new
// configuration's control plane (the replacement's when there is a Handover); Previous is the
// previous configuration's (the profile's control_plane.url), nil when there is only one.
// Handover is nil when the control plane learns membership live. The Roundtrip's Canary
// names the sandbox accepted on each departing Cube (it must exit within the drain).
type Reduction struct {
	*Roundtrip
	Previous ControlPlane
	Handover *Handover
}

// NewScaleJournal starts the journal of run (journal.NewRun), a reduction by plan (accepted,
// with Cubes to remove): each departing Cube in the plan's order (least active first)
// with its server id, private IP and WireGuard peer key (peers, the GPU host's allowed IPs
// -> peer keys), and the target groups' targets as inv has them (the Cubes' and the control
// plane's). It is saved before anything changes. Errors: the plan is rejected or grows the
// fleet; a departing Cube has no WireGuard peer (nothing changed).
func (r *Reduction) NewScaleJournal(run string, plan *ScalePlan, inv *ionos.Inventory, peers map[netip.Prefix]string) (*journal.Journal, error) {
	if !plan.Accepted || plan.Target >= plan.Current {
		return nil, cubefleet.Errorf(cubefleet.CodePlanBlocked, "the scale plan does not remove Cubes: scale plan says why; nothing was changed")
	}
	now := r.now()
	j := &journal.Journal{Workflow: WorkflowScale, Run: run, State: journal.StateOpen, StartedAt: now.UnixMilli()}
	for _, st := range plan.Steps {
		if st.Do != StepDeleteServer {
			continue
		}
		addr, err := netip.ParseAddr(plan.Slots[st.Slot].PrivateIP)
		key, ok := peers[netip.PrefixFrom(addr, 32)]
		if err != nil || !ok {
			return nil, cubefleet.Errorf(cubefleet.CodePlanBlocked, "no WireGuard peer of %s on %s allows %s/32 (Cube %s): roundtrip check lists the peers; nothing was changed",
				r.Profile.GPUWireGuard.Interface, r.Profile.GPUWireGuard.Host, plan.Slots[st.Slot].PrivateIP, st.Cube)
		}
		name := st.Cube // the slot's name; a Cube a growth created carries its run's name
		if i := slices.IndexFunc(inv.Servers, func(s ionos.Server) bool { return strings.EqualFold(s.ID, st.ServerID) }); i >= 0 {
			name = inv.Servers[i].Name
		}
		j.Cubes = append(j.Cubes, journal.Cube{Name: name, Slot: st.Slot, PrivateIP: plan.Slots[st.Slot].PrivateIP, ServerID: st.ServerID, PeerKey: key})
	}
	j.TargetLists = r.targetLists(inv)
	return j, r.Store.Save(j)
}

// targetLists are the targets ("ip:port") of the Cubes' target groups and of the control
// plane's (when the profile names one) as inv has them, by group id.
func (r *Roundtrip) targetLists(inv *ionos.Inventory) map[string][]string {
	groups := append(slices.Clone(r.Found.TargetGroupIDs), r.Found.ControlPlaneTargetGroupID)
	out := map[string][]string{}
	for _, tg := range inv.TargetGroups {
		if slices.Contains(groups, tg.ID) {
			out[tg.ID] = Origins(tg.Targets)
		}
	}
	return out
}

// begun reports whether step for cube was ever attempted.
func begun(j *journal.Journal, step, cube string) bool {
	return j.Done(step, cube) || j.Begun(step, cube) != nil
}

// Reduce carries out (or resumes) the reduction of journal j: first, before anything is
// cordoned, every departing Cube's deletion is checked with the cloud (the journaled server,
// its IP, no request pending, not protected); then a sandbox is accepted on each departing
// Cube through the previous configuration and waited for until it is placed; the
// coordinator moves to the reduced membership (Handover); then each Cube in turn, one at a
// time (which every disruption budget allows), goes through Roundtrip.RemoveCube's steps (cordon,
// traffic back, drain within the drain deadline, targets, peer, deregister, delete exactly
// its server id, the accepted result read), and its accepted result is read through the new
// and the previous configuration. The journal is done when Reduce returns nil; a drain past
// its deadline returns RemoveCube's error, the Cube cordoned and kept.
func (r *Reduction) Reduce(ctx context.Context, j *journal.Journal) error {
	for i := range j.Cubes {
		if c := &j.Cubes[i]; !begun(j, StepCordon, c.Name) {
			if err := r.deletable(ctx, c); err != nil {
				return err
			}
		}
	}
	accepting := r.Previous
	if accepting == nil {
		accepting = r.CP
	}
	for i := range j.Cubes {
		c := &j.Cubes[i]
		if err := r.step(j, StepAcceptResult, c.Name, func(bool) (string, error) { return r.accept(ctx, j, accepting, c) }); err != nil {
			return err
		}
	}
	if err := r.step(j, StepCoordinator, "", func(bool) (string, error) {
		if r.Handover == nil {
			return "the control plane learns membership from registration: nothing to move", nil
		}
		return r.handOver(ctx, j, r.Handover, r.Config.Occupied()-len(j.Cubes))
	}); err != nil {
		return err
	}
	for i := range j.Cubes {
		c := &j.Cubes[i]
		if !j.Done(StepConfirmResult, c.Name) {
			if err := r.RemoveCube(ctx, j, c); err != nil {
				return err
			}
		}
		if err := r.step(j, StepCheckResult, c.Name, func(bool) (string, error) { return r.checkResult(ctx, c) }); err != nil {
			return err
		}
	}
	j.State = journal.StateDone
	return r.Store.Save(j)
}

// accept is the accept-result step: the Canary's sandbox pinned to the Cube's node, created
// through cp (unless an earlier attempt journaled one) and waited for until it is placed
// there, at most the profile's drain deadline. Its id is journaled.
func (r *Reduction) accept(ctx context.Context, j *journal.Journal, cp ControlPlane, c *journal.Cube) (string, error) {
	if c.Canary == "" {
		id, err := cp.CreateSandbox(ctx, r.Canary.Tenant, r.Canary.Template, c.PrivateIP, r.Canary.Command)
		if err != nil {
			return "", fmt.Errorf("a sandbox accepted on %s: %w", c.Name, err)
		}
		c.Canary, c.CanaryTenant = id, r.Canary.Tenant
		if err := r.Store.Save(j); err != nil {
			return "", err
		}
	}
	deadline := r.now().Add(r.Profile.DrainDeadline)
	for {
		state, err := cp.Sandbox(ctx, c.CanaryTenant, c.Canary)
		if err != nil {
			return "", err
		}
		if state != "pending" {
			return fmt.Sprintf("sandbox %s accepted on %s: %s", c.Canary, c.PrivateIP, state), nil
		}
		if !r.now().Before(deadline) {
			return "", cubefleet.Errorf(cubefleet.CodeDeadlineExceeded, "sandbox %s accepted for %s is still pending after %s: the Cube has no free slot; nothing was cordoned", c.Canary, c.Name, r.Profile.DrainDeadline)
		}
		if err := r.Wait.sleep(ctx, r.Poll); err != nil {
			return "", err
		}
	}
}

// handOver is the coordinator step of a control plane loading a fixed origin list: the target
// group routing to it (h) is handed to the ready replacement, started with the origins of the
// n Cubes the fleet holds after the run. Refused without a replacement, or when the replacement
// is the server the group routed to when the run started (that would restart the only routed
// server); a group already routing only to the replacement (a resumed step) is left as it is.
func (r *Roundtrip) handOver(ctx context.Context, j *journal.Journal, h *Handover, n int) (string, error) {
	before := j.TargetLists[h.GroupID]
	if h.Replacement == "" {
		return "", cubefleet.Errorf(cubefleet.CodePlanBlocked, "target group %s routes to %s, a control plane with a fixed origin list: start a ready replacement (cubefleet server --origins FILE --cube-count %d with the origins of the Cubes the fleet holds after this run, on the shared database), then rerun with --replacement URL; the only routed server is never restarted",
			h.GroupID, strings.Join(before, ", "), n)
	}
	target, err := originOf(h.Replacement)
	if err != nil {
		return "", err
	}
	if len(before) == 1 && before[0] == Origin(target.IP, target.Port) {
		return "", cubefleet.Errorf(cubefleet.CodeConflict, "--replacement %s is the server target group %s routes to: restarting the only routed server is refused; start the replacement beside it (another address or port)", h.Replacement, h.GroupID)
	}
	if err := h.Ready(ctx); err != nil {
		return "", fmt.Errorf("the replacement %s is not ready: %w", h.Replacement, err)
	}
	_, acc, err := r.Cloud.UpdateTargets(ctx, h.GroupID, func(ts []ionos.Target) []ionos.Target {
		t := target
		if len(ts) > 0 {
			t.Weight, t.HealthCheckEnabled = max(ts[0].Weight, 1), ts[0].HealthCheckEnabled
		}
		return []ionos.Target{t}
	})
	if err != nil {
		return "", err
	}
	if err := r.Wait.Request(ctx, r.Cloud, "hand target group "+h.GroupID+" to "+h.Replacement, acc.RequestID); err != nil {
		return "", err
	}
	return fmt.Sprintf("target group %s: %s -> %s; stop the previous server once its accepted work is done (SIGTERM)", h.GroupID, strings.Join(before, ", "), Origin(target.IP, target.Port)), nil
}

// originOf is the load balancer target of a control plane URL: its host (an IP address) and
// port (the scheme's default when the URL has none), weight 1, health checked.
func originOf(raw string) (ionos.Target, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return ionos.Target{}, cubefleet.Invalid("--replacement", "%q: want the replacement's http(s) URL, such as http://10.7.0.3:3010", raw)
	}
	if _, err := netip.ParseAddr(u.Hostname()); err != nil {
		return ionos.Target{}, cubefleet.Invalid("--replacement", "%q: the host must be an IP address, as load balancer targets are", raw)
	}
	port := map[string]string{"http": "80", "https": "443"}[u.Scheme]
	if u.Port() != "" {
		port = u.Port()
	}
	p, _ := strconv.Atoi(port)
	return ionos.Target{IP: u.Hostname(), Port: p, Weight: 1, HealthCheckEnabled: true}, nil
}

// checkResult is the check-result step: the accepted sandbox's result read through the new
// configuration and the previous one; both must know it, ended, in the same state.
func (r *Reduction) checkResult(ctx context.Context, c *journal.Cube) (string, error) {
	next, err := r.CP.Sandbox(ctx, c.CanaryTenant, c.Canary)
	if err != nil {
		return "", fmt.Errorf("sandbox %s (accepted on %s) through the new configuration: %w", c.Canary, c.Name, err)
	}
	if slices.Contains([]string{"pending", "starting", "running"}, next) {
		return "", cubefleet.Errorf(cubefleet.CodeConflict, "sandbox %s accepted on %s is %s after the Cube's deletion", c.Canary, c.Name, next)
	}
	if r.Previous == nil {
		return fmt.Sprintf("sandbox %s: %s", c.Canary, next), nil
	}
	prev, err := r.Previous.Sandbox(ctx, c.CanaryTenant, c.Canary)
	if err != nil {
		return "", fmt.Errorf("sandbox %s (accepted on %s) through the previous configuration: %w", c.Canary, c.Name, err)
	}
	if prev != next {
		return "", cubefleet.Errorf(cubefleet.CodeConflict, "sandbox %s is %s through the new configuration but %s through the previous one", c.Canary, next, prev)
	}
	return fmt.Sprintf("sandbox %s: %s through both configurations", c.Canary, next), nil
}

// NewGrowJournal starts the journal of run (journal.NewRun), a growth by plan (accepted, with
// slots to fill): each new Cube's unique name (<cube_name_prefix><run>-<slot>), slot and
// private IP, in slot order, and the target groups' targets as inv has them. It is saved
// before anything is created. Errors: the plan is rejected or does not grow the fleet.
func (r *Roundtrip) NewGrowJournal(run string, plan *ScalePlan, inv *ionos.Inventory) (*journal.Journal, error) {
	if !plan.Accepted || plan.Target <= plan.Current {
		return nil, cubefleet.Errorf(cubefleet.CodePlanBlocked, "the scale plan does not add Cubes: scale plan says why; nothing was changed")
	}
	now := r.now()
	j := &journal.Journal{Workflow: WorkflowScaleGrowth, Run: run, State: journal.StateOpen, StartedAt: now.UnixMilli()}
	for _, s := range plan.Slots {
		if s.Action == Create {
			j.Cubes = append(j.Cubes, journal.Cube{Name: journal.CubeName(r.Profile.CubeNamePrefix, run, s.Index), Slot: s.Index, PrivateIP: s.PrivateIP})
		}
	}
	j.TargetLists = r.targetLists(inv)
	return j, r.Store.Save(j)
}

// Grow carries out (or resumes) the growth of journal j (NewGrowJournal): when h is not nil
// (a control plane loading a fixed origin list), first the coordinator step hands its target
// group to the ready replacement started with the grown membership's origins; then each new
// Cube in slot order, one at a time, through Roundtrip.AddCube's steps (create with the name
// journaled first and never POSTed twice, wait until running, attach the worker group, add
// its WireGuard peer, verify the worker with a canary, add its targets). The journal is done
// when Grow returns nil.
func (r *Roundtrip) Grow(ctx context.Context, j *journal.Journal, h *Handover) error {
	if h != nil {
		if err := r.step(j, StepCoordinator, "", func(bool) (string, error) { return r.handOver(ctx, j, h, r.Config.Occupied()+len(j.Cubes)) }); err != nil {
			return err
		}
	}
	order := make([]int, len(j.Cubes))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return j.Cubes[a].Slot - j.Cubes[b].Slot })
	for _, i := range order {
		if err := r.AddCube(ctx, j, &j.Cubes[i]); err != nil {
			return err
		}
	}
	j.State = journal.StateDone
	return r.Store.Save(j)
}
