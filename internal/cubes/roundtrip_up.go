package cubes

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes/journal"
	"github.com/cubefleet/cubefleet/internal/ionos"
)

// The roundtrip's workflows (docs/ionos.md, "Roundtrip"): Up adds one Cube to the baseline,
// Down removes it again, each journaling every side effect before and after it, so that a run
// killed at any moment is resumed by the next one. Their per-Cube steps are AddCube and
// RemoveCube, which scale apply's growth and reduction take for each of their Cubes.

// Steps of the roundtrip besides those of the scale plan (StepCreateServer, ...).
const (
	StepWaitRunning    = "wait-running"    // the create request DONE, the server RUNNING
	StepReturnTraffic  = "return-traffic"  // the Cube's targets to weight 0
	StepRestoreTargets = "restore-targets" // the Cube's targets removed: the baseline lists again
	StepDeregister     = "deregister"      // the node removed from the control plane's registry
	StepConfirmResult  = "confirm-result"  // the canary's result read after the deletion
)

// Workflow names in the journal.
const (
	WorkflowUp   = "roundtrip up"
	WorkflowDown = "roundtrip down"
)

// Peers is the GPU host's WireGuard, as the workflows use it: AddPeer makes key a peer
// allowing exactly ip/32, live and in the interface's config file (comment names the Cube);
// RemovePeer removes exactly that peer. Both are idempotent.
type Peers interface {
	AddPeer(ctx context.Context, key string, ip netip.Addr, comment string) error
	RemovePeer(ctx context.Context, key string, ip netip.Addr) error
}

// Roundtrip is what roundtrip up and down act on and how. Found is the profile's names
// resolved; Store holds the journal's lock. Wait bounds each cloud wait; NodeWait bounds
// the wait for the new node to be Ready and for its canary to return; Poll is the pause
// between control-plane reads. OriginPort is each Cube's port in the target groups. Boot is
// the new Cube's cloud-init without its join token and node IP; NewKey makes its WireGuard
// key pair; JoinTTL is its join token's lifetime. Canary names the canary's tenant and
// template. StopAtDeadline lets the drain evict what still runs at the profile's drain
// deadline. Progress receives one line per thing seen; Crash, when set, is called at
// "<step>/begun", "<step>/applied" (the side effect done, the journal not yet written) and
// "<step>/done" (tests kill the process there).
type Roundtrip struct {
	Profile        *Profile
	Config         *Config
	Found          *Discovered
	Cloud          Cloud
	CP             ControlPlane
	Peers          Peers
	Store          *journal.Store
	Wait           Wait
	NodeWait       time.Duration
	Poll           time.Duration
	OriginPort     int
	Boot           CubeBoot
	NewKey         func() (private, public string, err error)
	JoinTTL        time.Duration
	Canary         Canary
	StopAtDeadline bool
	Now            func() time.Time
	Progress       func(line string)
	Crash          func(point string)
}

// Canary is the sandbox `roundtrip up` runs on the new Cube: Tenant's Template running
// Command (it must exit), pinned to the node with nodeSelector kubernetes.io/hostname.
type Canary struct {
	Tenant   string
	Template string
	Command  []string
}

func (r *Roundtrip) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

func (r *Roundtrip) say(format string, args ...any) {
	if r.Progress != nil {
		r.Progress(fmt.Sprintf(format, args...))
	}
}

func (r *Roundtrip) crash(step, at string) {
	if r.Crash != nil {
		r.Crash(step + "/" + at)
	}
}

// step runs one journaled step for cube unless it is done: Begin (saved), do, Finish with
// the detail do returns (saved). The journal is written before and after the side effect.
func (r *Roundtrip) step(j *journal.Journal, name, cube string, do func(resumed bool) (string, error)) error {
	if j.Done(name, cube) {
		return nil
	}
	resumed := j.Begun(name, cube) != nil
	if !resumed {
		if err := r.Store.Begin(j, name, cube); err != nil {
			return err
		}
	}
	r.crash(name, "begun")
	r.say("%s %s%s", name, cube, map[bool]string{true: " (resumed: checking what the interrupted run did)", false: ""}[resumed])
	detail, err := do(resumed)
	if err != nil {
		return annotate(err, name+" "+cube+": ", "")
	}
	r.crash(name, "applied")
	if err := r.Store.Finish(j, name, detail); err != nil {
		return err
	}
	r.crash(name, "done")
	return nil
}

// NewUpJournal starts the journal of a new `roundtrip up` for the plan's slot: the run id
// from the clock, the Cube's name <cube_name_prefix><run>-<slot> and private IP, and the
// target groups' targets as they are (inv). It is saved before anything is created. Errors:
// PLAN_BLOCKED when the plan is rejected, or LiveMembership's.
func (r *Roundtrip) NewUpJournal(plan *RoundtripPlan, inv *ionos.Inventory) (*journal.Journal, error) {
	if !plan.Accepted || plan.Slot < 0 {
		return nil, cubefleet.Errorf(cubefleet.CodePlanBlocked, "the roundtrip plan is rejected: roundtrip plan says why; nothing was changed")
	}
	if err := r.LiveMembership(); err != nil {
		return nil, err
	}
	now := r.now()
	run := journal.NewRun(now)
	j := &journal.Journal{Workflow: WorkflowUp, Run: run, State: journal.StateOpen, StartedAt: now.UnixMilli(),
		Cubes:       []journal.Cube{{Name: journal.CubeName(r.Profile.CubeNamePrefix, run, plan.Slot), Slot: plan.Slot, PrivateIP: plan.PrivateIP}},
		TargetLists: r.targetLists(inv)}
	return j, r.Store.Save(j)
}

// LiveMembership refuses a `roundtrip up` of a fleet whose control plane loads a fixed
// origin list (the profile names control_plane.target_group: cubefleet server --origins): it
// would never schedule on the new Cube, and the roundtrip has no replacement server to hand
// that group to. The error (PLAN_BLOCKED) names scale apply, which grows such a fleet.
func (r *Roundtrip) LiveMembership() error {
	id := r.Found.ControlPlaneTargetGroupID
	if id == "" {
		return nil
	}
	n := r.Config.Occupied() + 1
	return cubefleet.Errorf(cubefleet.CodePlanBlocked, "control_plane.target_group %q (%s) routes to a control plane with a fixed origin list (cubefleet server --origins): roundtrip up would leave the new Cube outside its membership; nothing was changed. Grow with scale apply --target-cubes %d --replacement URL (a ready server started beside it with the %d Cubes' origins on the shared database)",
		r.Profile.ControlPlane.TargetGroup, id, n, n)
}

// spec is the create body of the journal's Cube (the user data is filled in at the POST).
func (r *Roundtrip) spec(c *journal.Cube) ionos.CubeSpec {
	return ionos.CubeSpec{Name: c.Name, TemplateID: r.Found.TemplateID, Image: r.Profile.Image, LANID: r.Found.PrivateLANID, PrivateIP: c.PrivateIP}
}

// Up carries out (or resumes) the `roundtrip up` of journal j: AddCube for its Cube. The
// journal is done when Up returns nil.
func (r *Roundtrip) Up(ctx context.Context, j *journal.Journal) error {
	if err := r.AddCube(ctx, j, &j.Cubes[0]); err != nil {
		return err
	}
	j.State = journal.StateDone
	return r.Store.Save(j)
}

// AddCube carries out (or resumes) the steps adding Cube c of journal j (c points into
// j.Cubes): create it (its name is journaled before the POST, which is never repeated: after
// an unknown outcome the name is looked up), wait until it runs, attach the worker security
// group, add its WireGuard peer, verify the worker (the node Ready in the pool, a canary
// pinned to it returns) and add its origin to every target group. Steps done already are
// skipped; the journal's state is left to the caller.
func (r *Roundtrip) AddCube(ctx context.Context, j *journal.Journal, c *journal.Cube) error {
	ip, err := netip.ParseAddr(c.PrivateIP)
	if err != nil {
		return cubefleet.Invalid("journal", "the journal's Cube IP %q is not an address", c.PrivateIP)
	}
	steps := []struct {
		name string
		do   func(resumed bool) (string, error)
	}{
		{StepCreateServer, func(resumed bool) (string, error) { return r.create(ctx, j, c, resumed) }},
		{StepWaitRunning, func(bool) (string, error) {
			srv, err := r.Wait.Running(ctx, r.Cloud, r.Found.DatacenterID, c.ServerID, c.RequestID)
			if errors.Is(err, ErrRequestFailed) {
				// IONOS rolled the create back: the next run creates the Cube again.
				c.ServerID, c.RequestID = "", ""
				if berr := r.Store.Begin(j, StepCreateServer, c.Name); berr != nil {
					return "", berr
				}
				return "", annotate(err, "", "; rerun: the name is looked up again and the Cube created once more")
			}
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("server %s %s", srv.ID, srv.VMState), VerifyCube(srv, r.spec(c))
		}},
		{StepAttachGroup, func(bool) (string, error) {
			changed, err := AttachGroup(ctx, r.Cloud, r.Wait, r.Found.DatacenterID, c.ServerID, r.Found.WorkerSecurityGroupID)
			return fmt.Sprintf("group %s attached (changed %v)", r.Found.WorkerSecurityGroupID, changed), err
		}},
		{StepAddPeer, func(bool) (string, error) {
			return "peer " + c.PeerKey + " allows " + c.PrivateIP + "/32", r.Peers.AddPeer(ctx, c.PeerKey, ip, c.Name)
		}},
		{StepVerifyWorkers, func(bool) (string, error) { return r.verify(ctx, j, c) }},
		{StepAddTargets, func(bool) (string, error) { return r.addTargets(ctx, j, c) }},
	}
	for _, s := range steps {
		if err := r.step(j, s.name, c.Name, s.do); err != nil {
			return err
		}
	}
	return nil
}

// create is the create-server step: after an interrupted attempt (resumed) the journaled
// name is looked up first; only when no server carries it is one POST made, with a new key
// pair and join token.
func (r *Roundtrip) create(ctx context.Context, j *journal.Journal, c *journal.Cube, resumed bool) (string, error) {
	spec := r.spec(c)
	if resumed || c.ServerID != "" {
		srv, err := FindCreated(ctx, r.Cloud, r.Found.DatacenterID, spec)
		if err != nil {
			return "", err
		}
		if srv != nil {
			c.ServerID = srv.ID
			r.say("%s: found server %s by its name; not creating another", c.Name, srv.ID)
			return "found by name: server " + srv.ID, nil
		}
	}
	private, public, err := r.NewKey()
	if err != nil {
		return "", err
	}
	token, err := r.CP.CreateJoinToken(ctx, r.Profile.ControlPlane.Pool, c.PrivateIP, r.JoinTTL)
	if err != nil {
		return "", fmt.Errorf("join token for %s: %w", c.PrivateIP, err)
	}
	c.PeerKey, c.ServerID, c.RequestID = public, "", ""
	if err := r.Store.Save(j); err != nil { // the peer key is journaled before the POST
		return "", err
	}
	boot := r.Boot
	boot.JoinToken, boot.NodeIP, boot.WireGuardPrivateKey = token, c.PrivateIP, private
	spec.UserData = CubeUserData(boot)
	acc, err := r.Cloud.CreateCube(ctx, r.Found.DatacenterID, spec)
	if err != nil {
		if errors.Is(err, ionos.ErrOutcomeUnknown) {
			return "", annotate(err, "", "; rerun: it looks the name "+c.Name+" up and creates nothing twice")
		}
		return "", err
	}
	c.ServerID, c.RequestID = acc.ServerID, acc.RequestID
	r.say("%s: POST accepted: %s", c.Name, acc)
	return acc.String(), nil
}

// verify is the verify-workers step: the node registered from the Cube's IP is Ready in the
// pool, uncordoned and idle, and a canary sandbox pinned to it (nodeSelector
// kubernetes.io/hostname) runs and exits. The canary's id is journaled as soon as it exists.
func (r *Roundtrip) verify(ctx context.Context, j *journal.Journal, c *journal.Cube) (string, error) {
	deadline := r.now().Add(r.NodeWait)
	if err := r.waitReady(ctx, c, deadline); err != nil {
		return "", err
	}
	if c.Canary == "" {
		id, err := r.CP.CreateSandbox(ctx, r.Canary.Tenant, r.Canary.Template, c.PrivateIP, r.Canary.Command)
		if err != nil {
			return "", fmt.Errorf("canary: %w", err)
		}
		c.Canary, c.CanaryTenant = id, r.Canary.Tenant
		if err := r.Store.Save(j); err != nil {
			return "", err
		}
		r.say("%s: canary %s started on %s", c.Name, id, c.PrivateIP)
	}
	last := ""
	for {
		state, err := r.CP.Sandbox(ctx, c.CanaryTenant, c.Canary)
		if err != nil {
			return "", fmt.Errorf("canary %s: %w", c.Canary, err)
		}
		if state != last {
			r.say("%s: canary %s %s", c.Name, c.Canary, state)
			last = state
		}
		switch state {
		case "exited":
			return fmt.Sprintf("node Ready; canary %s exited", c.Canary), nil
		case "failed", "killed", "lost":
			return "", cubefleet.Errorf(cubefleet.CodeConflict, "canary %s on %s ended %s: the Cube does not run sandboxes; look at it (cubefleet sandboxes get %s), then rerun or run roundtrip down", c.Canary, c.PrivateIP, state, c.Canary)
		}
		if !r.now().Before(deadline) {
			return "", cubefleet.Errorf(cubefleet.CodeDeadlineExceeded, "canary %s is still %s after %s: rerun to wait again", c.Canary, state, r.NodeWait)
		}
		if err := r.Wait.sleep(ctx, r.Poll); err != nil {
			return "", err
		}
	}
}

// waitReady waits until the node of the Cube's IP is Ready in the profile's pool, uncordoned
// and idle, until deadline.
func (r *Roundtrip) waitReady(ctx context.Context, c *journal.Cube, deadline time.Time) error {
	last := ""
	for {
		m, err := r.CP.Member(ctx, c.PrivateIP)
		state := "not registered"
		switch {
		case err == nil:
			state = fmt.Sprintf("%s in pool %s, cordoned %v, %d sandboxes", m.State, m.Pool, m.Cordoned, m.Running)
			if m.State == "Ready" && !m.Cordoned && m.Running == 0 && (m.PoolID == r.Profile.ControlPlane.Pool || m.Pool == r.Profile.ControlPlane.Pool) {
				return nil
			}
		case !IsNotFound(err):
			return err
		}
		if state != last {
			r.say("%s: node %s %s", c.Name, c.PrivateIP, state)
			last = state
		}
		if !r.now().Before(deadline) {
			return cubefleet.Errorf(cubefleet.CodeDeadlineExceeded, "node %s is %s after %s: rerun to wait again (roundtrip status shows the journal)", c.PrivateIP, state, r.NodeWait)
		}
		if err := r.Wait.sleep(ctx, r.Poll); err != nil {
			return err
		}
	}
}

// addTargets is the add-targets step: the Cube's origin (its IP, OriginPort) into every
// target group, weighted and health-checked as the group's first other target is (weight 1
// and health checks on for a group without one). A group that has it already is not written.
func (r *Roundtrip) addTargets(ctx context.Context, _ *journal.Journal, c *journal.Cube) (string, error) {
	for _, id := range r.Found.TargetGroupIDs {
		_, acc, err := r.Cloud.UpdateTargets(ctx, id, func(ts []ionos.Target) []ionos.Target {
			t := ionos.Target{IP: c.PrivateIP, Port: r.OriginPort, Weight: 1, HealthCheckEnabled: true}
			for _, x := range ts {
				if x.IP != c.PrivateIP {
					t.Weight, t.HealthCheckEnabled = x.Weight, x.HealthCheckEnabled
					break
				}
			}
			for i, x := range ts {
				if x.IP == t.IP && x.Port == t.Port {
					ts[i] = t
					return ts
				}
			}
			return append(ts, t)
		})
		if err != nil {
			return "", err
		}
		if err := r.Wait.Request(ctx, r.Cloud, "add "+Origin(c.PrivateIP, r.OriginPort)+" to target group "+id, acc.RequestID); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%s in %d target groups", Origin(c.PrivateIP, r.OriginPort), len(r.Found.TargetGroupIDs)), nil
}

// annotate puts prefix and suffix around err's message: a *cubefleet.Error keeps its code
// (the CLI prints its message) and wraps the original; any other error is wrapped.
func annotate(err error, prefix, suffix string) error {
	var ce *cubefleet.Error
	if errors.As(err, &ce) {
		return &cubefleet.Error{Code: ce.Code, Message: prefix + ce.Message + suffix, Details: ce.Details, Err: err}
	}
	return fmt.Errorf("%s%w%s", prefix, err, suffix)
}
