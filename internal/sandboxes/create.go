package sandboxes

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/secretref"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
)

// Limits of a create's input.
const (
	// MaxArgs bounds the command's arguments (256), MaxArgBytes each one (4,096 bytes) and
	// MaxCommandBytes all of them (64 KiB).
	MaxArgs         = 256
	MaxArgBytes     = 4096
	MaxCommandBytes = 64 << 10
	// MaxTimeoutSeconds bounds a sandbox's timeout (7 days); 0 means none.
	MaxTimeoutSeconds = 7 * 24 * 3600
)

// IdleCommand is what a sandbox created without a command runs: it idles until its timeout or
// a delete (sleep of the longest time every sleep(1) takes).
var IdleCommand = []string{"sleep", "2147483647"}

// CreateInput is a sandbox to create. Template is the tenant's template id (tpl_...) or name.
// Command is the argv (absent: IdleCommand, a sandbox that idles until its timeout or a
// delete). Env is laid over the template's (at
// most 256 variables; names of credentials take secret:// references, which are resolved only
// when the sandbox is handed to its node). TimeoutSeconds ends it (0 to MaxTimeoutSeconds, 0:
// none). TerminationGraceSeconds is the time between SIGTERM and SIGKILL when it is stopped (1
// to 3600, fieldrules.TerminationGrace; 0: its template's, else 10). Labels are its own; NodeSelector the labels its node must carry. Audit, when set, is
// the caller's audit row, written in the create's transaction with the sandbox as its target.
type CreateInput struct {
	TenantID       string
	Template       string
	Command        []string
	Env            map[string]string
	TimeoutSeconds int64
	// TerminationGraceSeconds: see above.
	TerminationGraceSeconds int64
	Labels                  map[string]string
	NodeSelector            map[string]string
	CreatedBy               string
	Audit                   *audit.Entry
	// warm makes an idle sandbox of the template's warm pool (the warm loop's creates).
	warm bool
}

// validate checks what the input says by itself (INVALID_INPUT listing every problem).
func (in *CreateInput) validate() error {
	var errs []cubefleet.FieldError
	add := func(path, format string, args ...any) {
		errs = append(errs, cubefleet.FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if in.Template == "" {
		add("template", "template is required: a sandbox template of the tenant, by id (tpl_...) or name")
	}
	if len(in.Command) > MaxArgs {
		add("command", "command has %d arguments; at most %d", len(in.Command), MaxArgs)
	}
	total := 0
	for i, a := range in.Command {
		total += len(a)
		switch {
		case i == 0 && a == "":
			add("command[0]", "command[0], the program, must not be empty")
		case len(a) > MaxArgBytes:
			add(fmt.Sprintf("command[%d]", i), "an argument is at most %d bytes", MaxArgBytes)
		case strings.IndexByte(a, 0) >= 0:
			add(fmt.Sprintf("command[%d]", i), "an argument must not hold a NUL byte")
		}
	}
	if total > MaxCommandBytes {
		add("command", "the command's arguments take %d bytes; at most %d", total, MaxCommandBytes)
	}
	if len(in.Env) > fieldrules.MaxKeys {
		add("env", "%s", fieldrules.TooMany("env", len(in.Env), fieldrules.MaxKeys, "keys"))
	}
	for _, k := range slices.Sorted(maps.Keys(in.Env)) {
		v := in.Env[k]
		path := "env." + k
		switch {
		case !fieldrules.EnvName.Match(k):
			add(path, "variable names must be %s", fieldrules.EnvName.Rule())
		case fieldrules.CheckValueLen(v) != "":
			add(path, "%s", fieldrules.CheckValueLen(v))
		case checkCredential(k, v) != "":
			add(path, "%s", checkCredential(k, v))
		case strings.IndexByte(v, 0) >= 0:
			add(path, "a value must not hold a NUL byte")
		}
	}
	if in.TimeoutSeconds < 0 || in.TimeoutSeconds > MaxTimeoutSeconds {
		add("timeoutSeconds", "timeoutSeconds must be 0 (none) to %d (7 days)", MaxTimeoutSeconds)
	}
	if g := in.TerminationGraceSeconds; g != 0 && !fieldrules.TerminationGrace.Contains(g) {
		add("terminationGraceSeconds", "terminationGraceSeconds must be %s, or absent for the template's (default %d)",
			fieldrules.TerminationGrace.Rule(), fieldrules.DefaultTerminationGraceSeconds)
	}
	for field, m := range map[string]map[string]string{"labels": in.Labels, "nodeSelector": in.NodeSelector} {
		if err := nodeapi.CheckLabels(m); err != nil {
			for _, fe := range err.(*cubefleet.Error).Details["errors"].([]cubefleet.FieldError) {
				add(field+strings.TrimPrefix(fe.Path, "labels"), "%s", fe.Message)
			}
		}
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, func(a, b cubefleet.FieldError) int { return strings.Compare(a.Path, b.Path) })
		return cubefleet.InvalidAll(errs)
	}
	return nil
}

// storeSecret is the fix for a literal secret in a sandbox's env: sandboxes resolve only
// secret:// references (not vault:// or env://).
const storeSecret = "store it with `cubefleet secrets create NAME` and reference it as secret://NAME"

// checkCredential is fieldrules.CheckCredential for a sandbox's env, whose fix names the one
// reference sandboxes resolve: what is wrong with value v of variable key, or "".
func checkCredential(key, v string) string {
	if fieldrules.CheckCredential(key, v) == "" {
		return ""
	}
	for _, scheme := range []string{secretref.SchemeSecret, secretref.SchemeVault, secretref.SchemeEnv} {
		if strings.HasPrefix(v, scheme+":") {
			return key + " is not a well-formed secret reference; write it as secret://NAME"
		}
	}
	return key + " names a credential, so its value must be a secret reference, not a literal secret: " + storeSecret
}

// template is a sandbox template as a create reads it, with its flavor's size and pool's owner.
type template struct {
	ID, Name, TenantID, PoolID, Owner, FlavorID, Image string
	Env                                                map[string]string
	Warm                                               *compute.Warm
	Res                                                Resources
	Runtime                                            string // its runtime; "": any node's own
	GraceSeconds                                       int64  // its terminationGraceSeconds; 0: the default
	DisconnectGraceSeconds                             int64  // its disconnectGraceSeconds; 0: --disconnect-grace
	UpdatedAt                                          int64  // its last change, Unix ms (madeFromCurrent)
}

// runtimeSelector is the nodeSelector of a sandbox of t created with selector: selector with
// nodeapi.LabelRuntime set to t's runtime, when t names one, so that the sandbox (and a warm
// sandbox it claims) runs only on a node of that runtime. A selector that asks for another
// runtime is INVALID_INPUT naming both (the selector's values are label values, checked
// before). selector itself is not changed.
func runtimeSelector(selector map[string]string, t template) (map[string]string, error) {
	if t.Runtime == "" {
		return selector, nil
	}
	if asked, ok := selector[nodeapi.LabelRuntime]; ok && asked != t.Runtime {
		return nil, cubefleet.Invalid("nodeSelector."+nodeapi.LabelRuntime,
			"nodeSelector asks for %s=%s, but template %s runs on the %s runtime (its runtime); leave %s out of nodeSelector, or use a template of runtime %s",
			nodeapi.LabelRuntime, asked, t.Name, t.Runtime, nodeapi.LabelRuntime, asked)
	}
	out := maps.Clone(selector)
	if out == nil {
		out = make(map[string]string, 1)
	}
	out[nodeapi.LabelRuntime] = t.Runtime
	return out, nil
}

// graceFor is the terminationGraceSeconds of a sandbox created with in from t: the create's,
// else the template's, else the default.
func graceFor(in CreateInput, t template) int64 {
	switch {
	case in.TerminationGraceSeconds != 0:
		return in.TerminationGraceSeconds
	case t.GraceSeconds != 0:
		return t.GraceSeconds
	}
	return fieldrules.DefaultTerminationGraceSeconds
}

// loadTemplate returns tenant's template ref (id or name) with its flavor and pool. Errors:
// INVALID_INPUT naming template.
func (s *Service) loadTemplate(ctx context.Context, q store.Querier, tenant, ref string) (template, error) {
	o, err := compute.FindNamed(ctx, q, tenant, compute.KindSandboxTemplate, ref)
	if cubefleet.IsCode(err, cubefleet.CodeNotFound) {
		return template{}, cubefleet.Invalid("template", "tenant %s has no sandbox template %s (cubefleet templates list --tenant %s shows them)", tenant, fieldrules.Quoted(ref), tenant)
	}
	if err != nil {
		return template{}, err
	}
	return s.templateOf(ctx, q, o)
}

// templateOf completes template object o with its flavor and pool.
func (s *Service) templateOf(ctx context.Context, q store.Querier, o compute.Object) (template, error) {
	var ts compute.SandboxTemplateSpec
	if err := o.DecodeSpec(&ts); err != nil {
		return template{}, err
	}
	t := template{ID: o.ID, Name: o.Name, TenantID: o.TenantID, PoolID: ts.PoolID, FlavorID: ts.FlavorID, Image: ts.ImageID, Env: ts.Env, Warm: ts.Warm, GraceSeconds: ts.TerminationGraceSeconds,
		DisconnectGraceSeconds: ts.DisconnectGraceSeconds, Runtime: ts.Runtime, UpdatedAt: o.UpdatedAt}
	flavor, err := compute.Load(ctx, q, ts.FlavorID)
	if err != nil {
		return template{}, fmt.Errorf("the flavor of template %s: %w", o.ID, err)
	}
	var fs compute.FlavorSpec
	if err := flavor.DecodeSpec(&fs); err != nil {
		return template{}, err
	}
	t.Res = Resources{VCPU: int64(fs.VCPU), MemoryGiB: int64(fs.MemoryGiB), DiskGiB: int64(fs.DiskGiB), GPU: int64(fs.GPU)}
	pool, err := compute.Load(ctx, q, ts.PoolID)
	if err != nil {
		return template{}, fmt.Errorf("the pool of template %s: %w", o.ID, err)
	}
	if pool.Archived() {
		return template{}, cubefleet.Invalid("template", "template %s runs on pool %s, which is archived", o.Name, pool.ID)
	}
	t.Owner = pool.TenantID
	return t, nil
}

// checkRefs checks the references among env (the create's, and the template's it is laid
// over) as the hand-off will resolve them: secret:// names a secret of tenant; vault:// and
// env:// are not resolved for sandboxes (UNSUPPORTED naming the variable).
func (s *Service) checkRefs(ctx context.Context, tenant string, env, tplEnv map[string]string) error {
	for _, src := range []struct {
		path string
		m    map[string]string
	}{{"env", env}, {"template env", tplEnv}} {
		for _, k := range slices.Sorted(maps.Keys(src.m)) {
			ref, ok := secretref.Parse(src.m[k])
			if !ok {
				continue
			}
			if ref.Scheme != secretref.SchemeSecret {
				return &cubefleet.Error{Code: cubefleet.CodeUnsupported, Details: map[string]any{"path": src.path + "." + k},
					Message: fmt.Sprintf("%s.%s is a %s:// reference; sandboxes resolve secret:// references only: %s", src.path, k, ref.Scheme, storeSecret)}
			}
			msg, err := fieldrules.CheckSecretRef(k, src.m[k], tenant, false, func(name string) (bool, error) {
				return secrets.Exists(ctx, s.db, tenant, name)
			})
			if err != nil {
				return err
			}
			if msg != "" {
				return cubefleet.Invalid(src.path+"."+k, "%s", msg)
			}
		}
	}
	return nil
}

// Create creates a sandbox (CreateInput says what it runs) and returns it at once: running
// already when it claimed a warm sandbox of its template (which then starts its command),
// starting when it was placed on a node and queued for the node's agent, pending when its pool
// has no room now (it is placed in offer priority order, then age, as room frees, or fails
// after --pending-timeout). Wait waits for it to run or end. Errors: INVALID_INPUT (the input,
// an unknown template, a secret:// the tenant lacks), UNSUPPORTED (a vault:// or env://
// reference), RESOURCE_EXHAUSTED (a quota: details name it, its limit and use, and a retry
// hint).
func (s *Service) Create(ctx context.Context, in CreateInput) (Sandbox, error) {
	if err := in.validate(); err != nil {
		return Sandbox{}, err
	}
	if len(in.Command) == 0 && !in.warm {
		in.Command = IdleCommand
	}
	tpl, err := s.loadTemplate(ctx, s.db, in.TenantID, in.Template)
	if err != nil {
		return Sandbox{}, err
	}
	if in.NodeSelector, err = runtimeSelector(in.NodeSelector, tpl); err != nil {
		return Sandbox{}, err
	}
	if err := s.checkRefs(ctx, in.TenantID, in.Env, tpl.Env); err != nil {
		return Sandbox{}, err
	}
	t, err := s.termsOf(ctx, in.TenantID, tpl.PoolID, tpl.Owner)
	if err != nil {
		return Sandbox{}, err
	}
	// A create claims an idle warm sandbox of its template only when no create of the template
	// waits ahead of it (priority, then age): it never overtakes them.
	if !in.warm && tpl.Warm != nil && tpl.Warm.Max > 0 {
		ahead, err := s.waitingAhead(ctx, "template_id", tpl.ID, t.priority)
		if err != nil {
			return Sandbox{}, err
		}
		if ahead == 0 {
			if sbx, ok, err := s.claim(ctx, in, tpl); ok || err != nil {
				return sbx, err
			}
		}
	}
	now := s.now()
	id := cubefleet.NewID("sbx")
	r := &record{
		ID: id, RunsAs: id, TenantID: in.TenantID, TemplateID: tpl.ID, TemplateName: tpl.Name, PoolID: tpl.PoolID, FlavorID: tpl.FlavorID,
		State: StatePending, Warm: in.warm, Res: tpl.Res, Charged: true, Priority: t.priority, CreatedBy: in.CreatedBy, CreatedAt: now,
		PendingReason: ReasonCreated, UpdatedAt: now,
		Spec: spec{Command: in.Command, Env: in.Env, Labels: in.Labels, NodeSelector: in.NodeSelector, TimeoutSeconds: in.TimeoutSeconds, GraceSeconds: graceFor(in, tpl),
			DisconnectGraceSeconds: tpl.DisconnectGraceSeconds},
	}
	kind := nodeapi.KindStart
	if in.warm {
		kind, r.Priority = nodeapi.KindWarm, waitingPriority
	}
	// Waiting creates of the pool go first: a new one joins them rather than taking room
	// that frees before their turn, and a warm pool top-up waits behind every tenant's create.
	placed := false
	ahead, err := s.waitingAhead(ctx, "pool_id", r.PoolID, r.Priority)
	if err != nil {
		return Sandbox{}, err
	}
	if ahead > 0 {
		r.Queued, r.PendingReason = true, ReasonWaitingForRoom
		r.Message = fmt.Sprintf("waiting for room in pool %s (%s ahead)", s.poolName(ctx, r.PoolID), cubefleet.Count(ahead, "create", "creates"))
	} else {
		node, err := s.cfg.Placer.Place(ctx, placementOf(r))
		switch {
		case err == nil:
			placed = true
			r.NodeID, r.State, r.StartingAt, r.StartingReason = node, StateStarting, now, ReasonPlaced
		case cubefleet.IsCode(err, cubefleet.CodeResourceExhausted):
			r.Queued, r.PendingReason, r.Message = true, ReasonWaitingForRoom, waitingMessage(err, s.poolName(ctx, r.PoolID))
		default:
			return Sandbox{}, err
		}
	}
	err = s.db.InGroupTx(ctx, func(tx *sql.Tx) error {
		if err := s.admit(ctx, tx, r, t); err != nil {
			return err
		}
		if err := insert(ctx, tx, r); err != nil {
			return err
		}
		if placed {
			if err := enqueue(ctx, tx, r.NodeID, kind, r.ID, r.TemplateID, now); err != nil {
				return err
			}
		}
		return recordAudit(ctx, tx, in.Audit, r.ID)
	})
	if err != nil {
		if placed {
			s.release(ctx, r.RunsAs)
		}
		return Sandbox{}, err
	}
	s.m.created(r, placed)
	if placed {
		s.hub.work(r.NodeID)
	} else {
		s.hub.kickLoops()
	}
	return r.view(), nil
}

// recordAudit writes the caller's audit row e (if any) in tx, naming sandbox id.
func recordAudit(ctx context.Context, tx *sql.Tx, e *audit.Entry, id string) error {
	if e == nil {
		return nil
	}
	row := *e
	row.Target = id
	return audit.Record(ctx, tx, row)
}

// waitingMessage is what a waiting sandbox's message says about the scheduler's refusal to
// place it in pool (its fleet name).
func waitingMessage(err error, pool string) string {
	if ce, ok := err.(*cubefleet.Error); ok {
		return "waiting for room in pool " + pool + ": " + ce.Message
	}
	return "waiting for room in pool " + pool
}

// placementOf is r's request to the scheduler, its flavor in the scheduler's units.
func placementOf(r *record) Placement {
	return Placement{SandboxID: r.ID, PoolID: r.PoolID, TemplateID: r.TemplateID, CPUMillicores: r.Res.VCPU * 1000,
		MemoryMiB: r.Res.MemoryGiB * 1024, DiskMiB: r.Res.DiskGiB * 1024, NodeSelector: r.Spec.NodeSelector}
}

// waitingAhead counts the creates that wait for room (queued) where column (pool_id or
// template_id) is value, at priority or above: those a new create of priority must not
// overtake.
func (s *Service) waitingAhead(ctx context.Context, column, value string, priority int) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sandboxes WHERE queued = 1 AND `+column+` = $1 AND priority >= $2`, value, priority).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("look for waiting creates: %w", err)
	}
	return n, nil
}

// plural is "1 create", "2 creates".
// selects reports whether a node with labels carries every label of selector.
func selects(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// release frees the reservation of the sandbox its node knows as id (record.RunsAs); a failure is logged (the reservation expires).
func (s *Service) release(ctx context.Context, id string) {
	if err := s.cfg.Placer.Release(context.WithoutCancel(ctx), id); err != nil {
		s.log.Warn("releasing a sandbox's reservation failed; it expires", "sandbox", id, "err", err)
	}
}

// claim gives a create an idle warm sandbox of its template on a Ready node that is not
// draining, if there is one: the sandbox takes the create's command, environment, labels and
// timeout, its state is starting again (the agent starts the command: kind claim), and it
// keeps its id and its place in the quotas. ok is false when none could be claimed.
func (s *Service) claim(ctx context.Context, in CreateInput, tpl template) (Sandbox, bool, error) {
	cands, err := query(ctx, s.db, `template_id = $1 AND warm = 1 AND claimed_at = 0 AND state = $2 AND deleted_at = 0 AND stop_requested_at = 0
		AND created_at >= $3 ORDER BY running_at LIMIT 16`, tpl.ID, string(StateRunning), tpl.UpdatedAt) // madeFromCurrent
	if err != nil {
		return Sandbox{}, false, err
	}
	for _, r := range cands {
		n, ok, err := s.cfg.Nodes.WorkNode(ctx, r.NodeID)
		if err != nil {
			return Sandbox{}, false, err
		}
		if !ok || n.State != nodes.StateReady || n.Draining || n.Cordoned || !selects(n.Labels, in.NodeSelector) {
			continue
		}
		now := s.now()
		r.ClaimedAt, r.CreatedBy, r.CreatedAt, r.PendingReason = now, in.CreatedBy, now, ReasonCreated
		r.State, r.StartingAt, r.StartingReason, r.RunningAt, r.RunningReason, r.Message = StateStarting, now, ReasonClaimed, 0, "", ""
		r.Spec = spec{Command: in.Command, Env: in.Env, Labels: in.Labels, NodeSelector: in.NodeSelector, TimeoutSeconds: in.TimeoutSeconds, GraceSeconds: graceFor(in, tpl),
			DisconnectGraceSeconds: tpl.DisconnectGraceSeconds}
		claimed := false
		err = s.db.InGroupTx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `UPDATE sandboxes SET claimed_at = $2, created_by = $3, created_at = $4, pending_reason = $5, state = $6,
				starting_at = $7, starting_reason = $8, running_at = 0, running_reason = '', message = '', spec = $9, updated_at = $10
				WHERE id = $1 AND claimed_at = 0 AND state = 'running' AND deleted_at = 0 AND stop_requested_at = 0`,
				r.ID, now, r.CreatedBy, now, r.PendingReason, string(r.State), now, r.StartingReason, mustJSON(r.Spec), now)
			if err != nil {
				return fmt.Errorf("claim %s: %w", r.ID, err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return nil // claimed (or ended) meanwhile
			}
			claimed = true
			if err := enqueue(ctx, tx, r.NodeID, nodeapi.KindClaim, r.ID, r.TemplateID, now); err != nil {
				return err
			}
			return recordAudit(ctx, tx, in.Audit, r.ID)
		})
		if err != nil {
			return Sandbox{}, false, err
		}
		if claimed {
			s.m.claimed()
			s.hub.work(r.NodeID)
			s.hub.changed(r.ID)
			s.hub.kickLoops() // the warm pool tops up
			return r.view(), true, nil
		}
	}
	return Sandbox{}, false, nil
}

// errClaimLost rolls a claim back whose waiting create or warm sandbox changed meanwhile.
var errClaimLost = errors.New("claimed, placed or deleted meanwhile")

// claimWaiting gives waiting create w the idle warm sandbox x of its template: x takes w's id
// (the id w's create answered; x's own stays the one its node knows it by, RunsAs), command,
// environment, labels, timeout, creator and creation time, and its state is starting again
// (kind claim); w's row is removed and its share of the quotas given back (x keeps its own).
// ok is false when either changed meanwhile.
func (s *Service) claimWaiting(ctx context.Context, w, x *record) (ok bool, err error) {
	now := s.now()
	err = s.db.InGroupTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = $1 AND queued = 1 AND state = $2 AND deleted_at = 0`, w.ID, string(StatePending))
		if err != nil {
			return fmt.Errorf("hand %s over to %s: %w", w.ID, x.ID, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return errClaimLost
		}
		res, err = tx.ExecContext(ctx, `UPDATE sandboxes SET id = $2, claimed_at = $3, created_by = $4, created_at = $5, pending_reason = $6,
			state = $7, starting_at = $3, starting_reason = $8, running_at = 0, running_reason = '', message = '', spec = $9, updated_at = $3
			WHERE id = $1 AND claimed_at = 0 AND state = 'running' AND deleted_at = 0 AND stop_requested_at = 0`,
			x.ID, w.ID, now, w.CreatedBy, w.CreatedAt, w.PendingReason, string(StateStarting), ReasonClaimed, mustJSON(w.Spec))
		if err != nil {
			return fmt.Errorf("claim %s for %s: %w", x.ID, w.ID, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return errClaimLost
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sandboxes_assignments SET sandbox_id = $2 WHERE sandbox_id = $1`, x.ID, w.ID); err != nil {
			return fmt.Errorf("claim %s for %s: its work: %w", x.ID, w.ID, err)
		}
		if w.Charged {
			if err := charge(ctx, tx, w.TenantID, w.PoolID, w.usage(), -1); err != nil {
				return err
			}
		}
		return enqueue(ctx, tx, x.NodeID, nodeapi.KindClaim, w.ID, x.TemplateID, now)
	})
	if errors.Is(err, errClaimLost) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	s.m.claimed()
	s.hub.work(x.NodeID)
	s.hub.changed(w.ID, x.ID)
	s.hub.kickLoops() // the warm pool tops up
	return true, nil
}
