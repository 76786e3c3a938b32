package cubes

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes/journal"
)

// EvictionGrace is how long `roundtrip down --stop-at-deadline` waits after the drain
// deadline for the evicted sandboxes to end (each is stopped with its own grace, at most an
// hour; most end within seconds).
const EvictionGrace = 2 * time.Minute

// StartDown turns the journal of a finished `roundtrip up` into the journal of its `roundtrip
// down` (saved), or returns an open `roundtrip down` journal as it is, to resume. Errors:
// INVALID_INPUT when there is no journal, or it is of an unfinished up (rerun up: it
// resumes), or of a finished down.
func (r *Roundtrip) StartDown(j *journal.Journal) (*journal.Journal, error) {
	switch {
	case j == nil || j.State == journal.StateAbandoned:
		return nil, cubefleet.Invalid("journal", "%s holds no roundtrip to take down: roundtrip up first", r.Store.Path())
	case j.Workflow == WorkflowDown && j.State == journal.StateOpen:
		return j, nil
	case j.Workflow == WorkflowDown:
		return nil, cubefleet.Invalid("journal", "run %s is down already (%s): nothing to do", j.Run, r.Store.Path())
	case j.Workflow == WorkflowUp && j.State == journal.StateOpen:
		return nil, cubefleet.Invalid("journal", "run %s's roundtrip up did not finish: rerun roundtrip up (it resumes), or clean up and roundtrip status --abandon", j.Run)
	case j.Workflow != WorkflowUp || len(j.Cubes) != 1 || j.Cubes[0].ServerID == "":
		return nil, cubefleet.Invalid("journal", "%s is not a finished roundtrip up journal", r.Store.Path())
	}
	j.Workflow, j.State = WorkflowDown, journal.StateOpen
	return j, r.Store.Save(j)
}

// Down carries out (or resumes) the `roundtrip down` of journal j: first a check that the
// deletion will be possible (the server is the journaled one, AVAILABLE, not protected), then
// RemoveCube for its Cube. The journal is done when Down returns nil.
func (r *Roundtrip) Down(ctx context.Context, j *journal.Journal) error {
	c := &j.Cubes[0]
	if !j.Done(StepDeleteServer, c.Name) && j.Begun(StepDeleteServer, c.Name) == nil {
		if err := r.deletable(ctx, c); err != nil {
			return err
		}
	}
	if err := r.RemoveCube(ctx, j, c); err != nil {
		return err
	}
	j.State = journal.StateDone
	return r.Store.Save(j)
}

// RemoveCube carries out (or resumes) the steps removing Cube c of journal j (c points into
// j.Cubes), in this order: cordon its node, take its targets to weight 0, drain it (progress
// lines; bounded by the profile's drain deadline counted from the drain's start, across
// resumes), remove its targets (the result compared with the journal's target lists without
// this Cube and the journal's Cubes deleted before it), remove exactly its WireGuard peer,
// remove its node from the registry, re-check the server's id, private IP and idleness and
// delete exactly that id, then read the canary's result through the control plane. Steps
// done already are skipped; the caller checks first that the deletion will be possible
// (deletable) and sets the journal's state.
func (r *Roundtrip) RemoveCube(ctx context.Context, j *journal.Journal, c *journal.Cube) error {
	ip, err := netip.ParseAddr(c.PrivateIP)
	if err != nil {
		return cubefleet.Invalid("journal", "the journal's Cube IP %q is not an address", c.PrivateIP)
	}
	reason := j.Workflow + " " + j.Run
	steps := []struct {
		name string
		do   func(resumed bool) (string, error)
	}{
		{StepCordon, func(bool) (string, error) {
			if err := r.CP.Cordon(ctx, c.PrivateIP, reason); err != nil && !IsNotFound(err) {
				return "", err
			}
			return "node " + c.PrivateIP + " cordoned", nil
		}},
		{StepReturnTraffic, func(bool) (string, error) {
			for _, id := range r.Found.TargetGroupIDs {
				if err := SetTargetWeight(ctx, r.Cloud, r.Wait, id, c.PrivateIP, r.OriginPort, 0); err != nil {
					return "", err
				}
			}
			return Origin(c.PrivateIP, r.OriginPort) + " at weight 0", nil
		}},
		{StepDrain, func(bool) (string, error) { return r.drain(ctx, j, c, reason) }},
		{StepRestoreTargets, func(bool) (string, error) {
			for _, id := range r.Found.TargetGroupIDs {
				after, err := RemoveTarget(ctx, r.Cloud, r.Wait, id, c.PrivateIP, r.OriginPort)
				if err != nil {
					return "", err
				}
				if want, ok := expectedTargets(j, c, id); ok && !slices.Equal(Origins(after), want) {
					r.say("target group %s: now %s; before the run it was %s (changed meanwhile by someone else: left as it is)", id, strings.Join(Origins(after), ", "), strings.Join(want, ", "))
				}
			}
			return "baseline target lists", nil
		}},
		{StepRemovePeer, func(bool) (string, error) {
			return "peer " + c.PeerKey + " removed", r.Peers.RemovePeer(ctx, c.PeerKey, ip)
		}},
		{StepDeregister, func(bool) (string, error) {
			if err := r.CP.DeleteNode(ctx, c.PrivateIP); err != nil && !IsNotFound(err) {
				return "", err
			}
			return "node " + c.PrivateIP + " removed from the registry", nil
		}},
		{StepDeleteServer, func(resumed bool) (string, error) { return r.deleteServer(ctx, c, resumed) }},
		{StepConfirmResult, func(bool) (string, error) {
			if c.Canary == "" {
				return "no canary was journaled", nil
			}
			state, err := r.CP.Sandbox(ctx, c.CanaryTenant, c.Canary)
			if err != nil {
				return "", fmt.Errorf("the canary's result (%s, accepted on the departed Cube) does not resolve: %w", c.Canary, err)
			}
			return fmt.Sprintf("canary %s still resolves: %s", c.Canary, state), nil
		}},
	}
	for _, s := range steps {
		if err := r.step(j, s.name, c.Name, s.do); err != nil {
			return err
		}
	}
	return nil
}

// expectedTargets is what target group id should hold once Cube c's targets are removed: the
// journal's list from before the run without c and without the journal's Cubes deleted
// already (false when the journal has no list for the group).
func expectedTargets(j *journal.Journal, c *journal.Cube, id string) ([]string, bool) {
	want, ok := j.TargetLists[id]
	if !ok {
		return nil, false
	}
	gone := []string{c.PrivateIP}
	for _, o := range j.Cubes {
		if j.Done(StepDeleteServer, o.Name) {
			gone = append(gone, o.PrivateIP)
		}
	}
	return slices.DeleteFunc(slices.Clone(want), func(o string) bool {
		host, _, _ := strings.Cut(o, ":")
		return slices.Contains(gone, host)
	}), true
}

// deletable checks with the cloud, before anything is cordoned, that the deletion will be
// possible: the journaled server exists with the journaled IP, has no request pending
// (AVAILABLE) and is not protected. A Cube is never drained for nothing.
func (r *Roundtrip) deletable(ctx context.Context, c *journal.Cube) error {
	srv, err := r.Cloud.Server(ctx, r.Found.DatacenterID, c.ServerID)
	if err != nil {
		return fmt.Errorf("server %s of %s: %w", c.ServerID, c.Name, err)
	}
	switch {
	case slices.Contains(r.Config.ProtectedServerIDs, srv.ID):
		return cubefleet.Errorf(cubefleet.CodeConflict, "server %s (%s) is protected: it is never deleted; nothing was changed", srv.ID, c.Name)
	case !HasIP(srv, r.Found.PrivateLANID, c.PrivateIP) || srv.Name != c.Name:
		return cubefleet.Errorf(cubefleet.CodeConflict, "server %s is %q without %s on LAN %d: not the journaled Cube %s; nothing was changed", srv.ID, srv.Name, c.PrivateIP, r.Found.PrivateLANID, c.Name)
	case srv.State != "AVAILABLE":
		return cubefleet.Errorf(cubefleet.CodeConflict, "server %s is %s (a request is pending): rerun once it is AVAILABLE; nothing was changed", srv.ID, srv.State)
	}
	return nil
}

// drain is the drain step: the node draining (with the profile's deadline as its eviction
// deadline under StopAtDeadline), then its sandboxes counted down to zero as its agent
// reports them, one progress line per change, until the deadline (from the step's start).
// At the deadline without StopAtDeadline it fails naming what still runs, and the Cube stays
// cordoned.
func (r *Roundtrip) drain(ctx context.Context, j *journal.Journal, c *journal.Cube, reason string) (string, error) {
	started := time.UnixMilli(j.Begun(StepDrain, c.Name).Started)
	deadline := started.Add(r.Profile.DrainDeadline)
	evict := time.Duration(0)
	if r.StopAtDeadline {
		evict = max(deadline.Sub(r.now()), time.Second)
	}
	if err := r.CP.Drain(ctx, c.PrivateIP, reason, evict); err != nil {
		if IsNotFound(err) {
			return "node not registered: nothing runs there", nil
		}
		return "", err
	}
	limit := deadline
	if r.StopAtDeadline {
		limit = deadline.Add(EvictionGrace)
	}
	last := -1
	for {
		m, err := r.CP.Member(ctx, c.PrivateIP)
		if IsNotFound(err) {
			return "node not registered", nil
		}
		if err != nil {
			return "", err
		}
		if m.Running == 0 {
			return "no sandboxes left", nil
		}
		if m.Running != last {
			r.say("%s: %s left (deadline %s)", c.Name, cubefleet.Count(m.Running, "sandbox", "sandboxes"), deadline.UTC().Format(time.RFC3339))
			last = m.Running
		}
		if !r.now().Before(limit) {
			return "", cubefleet.Errorf(cubefleet.CodeDeadlineExceeded, "node %s still runs %s (%s) at the drain deadline (%s): the Cube stays cordoned and is not deleted; rerun with --stop-at-deadline to stop them (they end killed, reason node_drained, results kept)",
				c.PrivateIP, cubefleet.Count(m.Running, "sandbox", "sandboxes"), strings.Join(m.SandboxIDs, ", "), r.Profile.DrainDeadline)
		}
		if err := r.Wait.sleep(ctx, r.Poll); err != nil {
			return "", err
		}
	}
}

// deleteServer is the delete-server step: just before the DELETE, the server is read again
// by its journaled id and must still hold the journaled IP and name, and its node must run
// nothing (or be gone from the registry); then exactly that id is deleted and its absence
// confirmed. On a resumed step a server already gone is the deletion done.
func (r *Roundtrip) deleteServer(ctx context.Context, c *journal.Cube, resumed bool) (string, error) {
	srv, err := r.Cloud.Server(ctx, r.Found.DatacenterID, c.ServerID)
	if IsNotFound(err) && resumed {
		return "server " + c.ServerID + " already deleted", nil
	}
	if err != nil {
		return "", err
	}
	if srv.ID != c.ServerID || srv.Name != c.Name || !HasIP(srv, r.Found.PrivateLANID, c.PrivateIP) {
		return "", cubefleet.Errorf(cubefleet.CodeConflict, "server %s is %q without %s: not the journaled Cube; nothing was deleted", srv.ID, srv.Name, c.PrivateIP)
	}
	if m, err := r.CP.Member(ctx, c.PrivateIP); err == nil && m.Running > 0 {
		return "", cubefleet.Errorf(cubefleet.CodeConflict, "node %s runs %s again: nothing was deleted; rerun to drain it", c.PrivateIP, cubefleet.Count(m.Running, "sandbox", "sandboxes"))
	} else if err != nil && !IsNotFound(err) {
		return "", err
	}
	if err := DeleteCube(ctx, r.Cloud, r.Wait, r.Found.DatacenterID, c.ServerID); err != nil {
		return "", err
	}
	return "server " + c.ServerID + " deleted", nil
}
