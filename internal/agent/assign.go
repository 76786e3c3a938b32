package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/atomicfile"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// How the agent carries out the control plane's assignments (nodeapi.Assignment). Each one is
// carried out once per offer, in the background; those about one sandbox (or one template) in
// the order they came. An assignment is done, and listed in the next work request's Done, once
// its action is over and the control plane accepted the event it led to: a start once the
// sandbox's running (or failed) event is, a warm once its running event (ready for a claim) is,
// a claim once the second running event (its command runs) is, a stop once the final event is,
// a prepare once the template is recorded.

// dispatch starts carrying out the assignments of a work answer that are neither being carried
// out nor done already (the control plane offers each one again until a work request lists it
// in Done), and returns how many it started.
func (r *runner) dispatch(asgs []nodeapi.Assignment) int {
	fresh := 0
	for _, a := range asgs {
		r.mu.Lock()
		seen := a.ID == "" || r.inflight[a.ID] || slices.Contains(r.done, a.ID)
		if !seen {
			r.inflight[a.ID] = true
		}
		r.mu.Unlock()
		if seen {
			continue
		}
		fresh++
		r.wg.Add(1)
		r.queue.do(assignmentKey(a), func() {
			defer r.wg.Done()
			done := r.ctx.Err() == nil && r.carryOut(a)
			r.mu.Lock()
			delete(r.inflight, a.ID)
			if done {
				r.done = append(r.done, a.ID)
			}
			r.mu.Unlock()
			select {
			case r.completed <- struct{}{}:
			default:
			}
		})
	}
	return fresh
}

// assignmentKey is what orders assignments: those of one sandbox, or one template, one after
// the other.
func assignmentKey(a nodeapi.Assignment) string {
	switch {
	case a.Sandbox != nil:
		return "sandbox/" + a.Sandbox.ID
	case a.SandboxID != "":
		return "sandbox/" + a.SandboxID
	case a.Template != nil:
		return "template/" + a.Template.ID
	}
	return "assignment/" + a.ID
}

// inProgress returns the assignments being carried out, sorted, for WorkRequest.InProgress (at
// most nodeapi.MaxWorkIDs: the rest are offered again, and skipped).
func (r *runner) inProgress() []string {
	r.mu.Lock()
	ids := make([]string, 0, len(r.inflight))
	for id := range r.inflight {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	slices.Sort(ids)
	return ids[:min(len(ids), nodeapi.MaxWorkIDs)]
}

// doneIDs returns the assignments carried out and not yet acknowledged, for WorkRequest.Done.
func (r *runner) doneIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.done)
}

// acknowledge forgets ids, which a work request the control plane answered listed as done.
func (r *runner) acknowledge(ids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = slices.DeleteFunc(r.done, func(id string) bool { return slices.Contains(ids, id) })
}

// carryOut carries out a and reports whether it is done (false: it may be offered again).
func (r *runner) carryOut(a nodeapi.Assignment) bool {
	switch a.Kind {
	case nodeapi.KindStart:
		return r.start(a.ID, a.Sandbox, false)
	case nodeapi.KindWarm:
		return r.start(a.ID, a.Sandbox, true)
	case nodeapi.KindClaim:
		return r.claim(a.ID, a.Sandbox)
	case nodeapi.KindStop:
		return r.stop(a.ID, a.SandboxID)
	case nodeapi.KindPrepare:
		return r.prepare(a.ID, a.Template)
	}
	r.log.Error("cannot carry out an assignment of an unknown kind (the control plane is newer than this agent); reporting it done", "assignment", a.ID, "kind", a.Kind)
	return true
}

// known returns the sandbox id the agent took, or nil.
func (r *runner) known(id string) *tracked {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.boxes[id]
}

// take tracks a sandbox the agent took (live: the driver holds it, warm or running); keep
// records it in the state directory. Between the two the sandbox's first event is queued, so
// that it is sent while the record is written: an agent that stops before the record is
// written finds the sandbox again in its driver (recover).
func (r *runner) take(rec sandboxRecord, st driver.Status) *tracked {
	t := newTracked(rec)
	t.live, t.warm = !st.Ended() && st.State != "", st.State == driver.StateWarm
	r.mu.Lock()
	r.boxes[rec.ID] = t
	r.mu.Unlock()
	return t
}

// keep writes the record of t, which take tracks.
func (r *runner) keep(t *tracked) {
	if err := r.persist(t); err != nil {
		r.log.Error("cannot record a sandbox in the state directory: a restart of the agent finds it without its limits", "sandbox", t.rec.ID, "error", err.Error())
	}
}

// bad logs an assignment the agent cannot make sense of; it is reported done (offering it again
// would not change it).
func (r *runner) bad(asg string, kind nodeapi.AssignmentKind, why string) bool {
	r.log.Error("cannot carry out an assignment: "+why+"; reporting it done", "assignment", asg, "kind", kind)
	return true
}

// start carries out a start (or, with warm, a warm) assignment, done once the control plane
// accepted the sandbox's running event (for a warm one: it is ready) or its end. A sandbox id
// the agent took before starts nothing; on a draining node, without a driver, or for a spec
// the driver refuses, the sandbox fails at once with the reason.
func (r *runner) start(asg string, s *nodeapi.SandboxSpec, warm bool) bool {
	kind := nodeapi.KindStart
	if warm {
		kind = nodeapi.KindWarm
	}
	if s == nil || !driver.ValidID(s.ID) {
		return r.bad(asg, kind, "it names no valid sandbox id")
	}
	if t := r.known(s.ID); t != nil { // delivered again: it started once already
		return r.waitFor(t, keyRunning)
	}
	rec := sandboxRecord{ID: s.ID, TemplateID: s.TemplateID, Warm: warm, CPUMillicores: s.CPUMillicores, MemoryMiB: s.MemoryMiB, DiskMiB: s.DiskMiB, At: r.now().UTC()}
	spec, err := r.specOf(s, warm)
	switch why := refuseRuntime(r.runtime, s.Runtime, "sandbox "+s.ID); {
	case why != "":
		err = errors.New(why)
	case r.isDraining():
		err = fmt.Errorf("the node drains: it takes no new sandbox")
	case r.drv == nil:
		err = fmt.Errorf("the node's runtime has no sandbox driver (%s)", r.noDriver)
	case err == nil:
		var st driver.Status
		if warm {
			st, err = r.drv.Warm(r.ctx, spec) // its environment is the claim's
		} else {
			st, err = r.drv.Start(r.ctx, spec)
		}
		if err == nil {
			t := r.take(rec, st)
			r.queueRunning(t, st)
			r.keep(t)
			r.watch(s.ID)
			return r.waitFor(t, keyRunning)
		}
	}
	if r.ctx.Err() != nil {
		return false
	}
	// It cannot run here: it fails, and its record keeps a later delivery from starting it.
	t := r.take(rec, driver.Status{})
	r.queue1(s.ID, string(nodeapi.StateFailed), nodeapi.SandboxEvent{State: nodeapi.StateFailed, At: nodeapi.WireTime{Time: r.now().UTC()}, Reason: string(driver.ReasonFailed), Message: err.Error()}, false)
	r.keep(t)
	r.log.Warn("a sandbox could not be started", "assignment", asg, "kind", kind, "sandbox", s.ID, "error", err.Error())
	return r.waitFor(t)
}

// claim carries out a claim: the warm sandbox runs the claim's command (and sends running
// again); done once the control plane accepted that event or the sandbox's end. A claim of a
// sandbox that is not on the node reports it lost; of one that ended, or was claimed before,
// changes nothing; on a draining node the warm sandbox is stopped instead.
func (r *runner) claim(asg string, s *nodeapi.SandboxSpec) bool {
	if s == nil || !driver.ValidID(s.ID) {
		return r.bad(asg, nodeapi.KindClaim, "it names no valid sandbox id")
	}
	t := r.known(s.ID)
	if t == nil {
		t = r.take(sandboxRecord{ID: s.ID, TemplateID: s.TemplateID, Warm: true, At: r.now().UTC()}, driver.Status{})
		r.queue1(s.ID, string(nodeapi.StateLost), nodeapi.SandboxEvent{State: nodeapi.StateLost, At: nodeapi.WireTime{Time: r.now().UTC()}, Reason: string(driver.ReasonLost), Message: "there is no warm sandbox " + s.ID + " on this node"}, false)
		r.keep(t)
		return r.waitFor(t)
	}
	r.mu.Lock()
	live, warm := t.live, t.warm
	r.mu.Unlock()
	switch {
	case !live:
		return r.waitFor(t)
	case !warm:
		return r.waitFor(t, keyClaimed)
	case r.isDraining():
		r.stopWarm(s.ID)
		return r.waitFor(t)
	}
	spec, err := specOf(s, r.outputLimit, false) // its network (and egressAllow) are the warm sandbox's
	var st driver.Status
	if err == nil {
		st, err = r.drv.Claim(r.ctx, spec)
	}
	switch {
	case r.ctx.Err() != nil:
		return false
	case cubefleet.IsCode(err, cubefleet.CodeInvalidInput):
		// A claim that cannot run: the sandbox fails with why, and goes.
		r.queue1(s.ID, string(nodeapi.StateFailed), nodeapi.SandboxEvent{State: nodeapi.StateFailed, At: nodeapi.WireTime{Time: r.now().UTC()}, Reason: string(driver.ReasonFailed), Message: "the claim: " + err.Error()}, false)
		r.stopWarm(s.ID)
		return r.waitFor(t)
	case cubefleet.IsCode(err, cubefleet.CodeConflict): // it ended meanwhile
		return r.waitFor(t)
	case err != nil:
		r.log.Error("cannot claim a warm sandbox; it stays warm until the claim is offered again", "assignment", asg, "sandbox", s.ID, "error", err.Error())
		return false
	}
	r.mu.Lock()
	t.warm = false
	live = t.live
	r.mu.Unlock()
	if live { // else its watcher queued the claim's running event before its end
		r.queueRunning(t, st)
	}
	return r.waitFor(t, keyClaimed)
}

// stop carries out a stop: SIGTERM, then SIGKILL after the sandbox's grace; done once its final
// event is accepted. A sandbox the node never held is nothing to stop.
func (r *runner) stop(asg, id string) bool {
	if !driver.ValidID(id) {
		return r.bad(asg, nodeapi.KindStop, "it names no valid sandbox id")
	}
	t := r.known(id)
	if t == nil {
		r.log.Info("a stop of a sandbox this node never held: nothing to do", "assignment", asg, "sandbox", id)
		return true
	}
	r.mu.Lock()
	live := t.live
	r.mu.Unlock()
	if live {
		if _, err := r.drv.Stop(r.ctx, id); err != nil && !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
			if r.ctx.Err() != nil {
				return false
			}
			r.log.Error("cannot stop a sandbox", "assignment", asg, "sandbox", id, "error", err.Error())
			return false
		}
	}
	return r.waitFor(t)
}

// prepare carries out a prepare: the template is recorded as ready on the node (the process
// driver needs nothing else; the microvm driver its image), and every status report lists it in
// local_templates from then on.
func (r *runner) prepare(asg string, tpl *nodeapi.TemplateSpec) bool {
	if tpl == nil || tpl.ID == "" {
		return r.bad(asg, nodeapi.KindPrepare, "it names no template")
	}
	lt := nodeapi.LocalTemplate{TemplateID: tpl.ID}
	if err := nodeapi.CheckTemplates([]nodeapi.LocalTemplate{lt}); err != nil {
		return r.bad(asg, nodeapi.KindPrepare, "its template id cannot be reported: "+err.Error())
	}
	if r.drv == nil {
		return r.bad(asg, nodeapi.KindPrepare, "the node's runtime has no sandbox driver ("+r.noDriver+")")
	}
	if why := refuseRuntime(r.runtime, tpl.Runtime, "template "+tpl.ID); why != "" {
		return r.bad(asg, nodeapi.KindPrepare, why)
	}
	// A driver that boots images (microvm) has a template ready only once its image is here:
	// until then the node does not list it, and the scheduler's template locality says so.
	if img, ok := r.drv.(interface{ HasImage(id string) error }); ok {
		if err := img.HasImage(tpl.Image); err != nil {
			return r.bad(asg, nodeapi.KindPrepare, "template "+tpl.ID+" is not prepared: "+err.Error())
		}
	}
	r.mu.Lock()
	if slices.ContainsFunc(r.prepared, func(p nodeapi.LocalTemplate) bool { return p.TemplateID == tpl.ID }) {
		r.mu.Unlock()
		return true
	}
	r.prepared = append(r.prepared, lt)
	data, err := json.Marshal(r.prepared)
	if err == nil {
		err = atomicfile.WriteFile(r.templates, data, 0o600)
	}
	r.mu.Unlock()
	if err != nil {
		r.log.Error("cannot record a prepared template: it is reported until the agent restarts", "template", tpl.ID, "error", err.Error())
	}
	r.log.Info("template prepared", "template", tpl.ID, "name", tpl.Name, "image", tpl.Image)
	return true
}

// maxSeconds bounds the timeout and grace of a spec: ten years, far inside a time.Duration.
const maxSeconds = 10 * 365 * 24 * 3600

// specOf is specOf with the runner's output limit, and for a sandbox with egress_allow the
// prefixes parsed and the control plane's addresses to keep it from (EgressDeny).
func (r *runner) specOf(s *nodeapi.SandboxSpec, warm bool) (driver.Spec, error) {
	spec, err := specOf(s, r.outputLimit, warm)
	if err != nil || len(s.EgressAllow) == 0 {
		return spec, err
	}
	if spec.EgressAllow, err = egressAllow(s.EgressAllow); err != nil {
		return driver.Spec{}, cubefleet.Invalid("egress_allow", "%s", err.Error())
	}
	if r.controlPlane != nil {
		if spec.EgressDeny, err = r.controlPlane.Addrs(r.ctx); err != nil {
			return driver.Spec{}, err
		}
	}
	return spec, nil
}

// specOf returns the driver's spec of s: its limits, its timeout and grace in seconds, and its
// output limit, defaultOutput bytes per stream when it sets none. A warm sandbox gets no command
// or environment (the claim brings them). Errors are INVALID_INPUT naming the field.
func specOf(s *nodeapi.SandboxSpec, defaultOutput int64, warm bool) (driver.Spec, error) {
	for field, v := range map[string]int64{"timeout_seconds": s.TimeoutSeconds, "grace_seconds": s.GraceSeconds} {
		if v > maxSeconds {
			return driver.Spec{}, cubefleet.Invalid(field, "%s: %d is more than %d (ten years)", field, v, maxSeconds)
		}
	}
	spec := driver.Spec{
		ID: s.ID, Image: s.Image, Argv: s.Argv, Env: s.Env, CPUMillicores: s.CPUMillicores, MemoryMiB: s.MemoryMiB, DiskMiB: s.DiskMiB,
		Timeout: time.Duration(s.TimeoutSeconds) * time.Second, Grace: time.Duration(s.GraceSeconds) * time.Second,
		OutputLimitBytes: s.OutputLimitBytes, Network: driver.Network(s.Network),
	}
	if spec.OutputLimitBytes == 0 {
		spec.OutputLimitBytes = defaultOutput
	}
	if warm {
		spec.Argv, spec.Env = nil, nil
	}
	return spec, nil
}
