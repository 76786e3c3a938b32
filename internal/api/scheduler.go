package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/scheduler"
	"github.com/cubefleet/cubefleet/internal/strictjson"
)

// resolvePlacement turns the template and pool of a scheduler.place input into ids, and sets
// the pool's fleet name (for messages). in.Template is a sandbox template id (tpl_...) or name,
// which must exist and lends its pool when in.Pool is empty, or any other template some node
// holds; in.Pool is a pool id or a pool's fleet name (docs/scheduler.md). Errors:
// INVALID_INPUT for a missing pool, a name that several pools or templates share, or a
// template of another pool; NOT_FOUND for a pool or template that does not exist.
func resolvePlacement(ctx context.Context, d *deps, in *scheduler.Request) error {
	if in.Template != "" {
		tpl, err := sandboxTemplate(ctx, d, in.Template)
		if err != nil {
			return err
		}
		if tpl != nil {
			in.Template = tpl.ID
			var spec compute.SandboxTemplateSpec
			if err := json.Unmarshal(tpl.Spec, &spec); err == nil && spec.PoolID != "" {
				if in.Pool == "" {
					in.Pool = spec.PoolID
				}
				if err := samePool(ctx, d, in.Pool, spec.PoolID, in.Template); err != nil {
					return err
				}
			}
		}
	}
	if in.Pool == "" {
		return cubefleet.Invalid("pool", "pool is required: the pool id or fleet name of the sandbox's template (or give a template that has a pool)")
	}
	id, name, err := poolID(ctx, d, in.Pool)
	if err != nil {
		return err
	}
	in.Pool, in.PoolName = id, name
	return nil
}

// sandboxTemplate returns the sandbox template ref names: by id (tpl_...) or by name. A name
// no template has but some node holds is a template of the nodes' own (nil, nil). Errors:
// NOT_FOUND when neither; INVALID_INPUT when templates of several tenants share the name.
func sandboxTemplate(ctx context.Context, d *deps, ref string) (*compute.Object, error) {
	if cubefleet.IsID(ref, "tpl") {
		t, err := compute.Load(ctx, d.db, ref)
		if err != nil || t.Kind != compute.KindSandboxTemplate {
			if err == nil || cubefleet.IsCode(err, cubefleet.CodeNotFound) {
				return nil, cubefleet.Errorf(cubefleet.CodeNotFound, "no sandbox template %s", ref)
			}
			return nil, err
		}
		return &t, nil
	}
	named, err := compute.LoadNamed(ctx, d.db, compute.KindSandboxTemplate, ref)
	if err != nil {
		return nil, err
	}
	switch {
	case len(named) == 1:
		return &named[0], nil
	case len(named) > 1:
		ids := make([]string, len(named))
		for i, t := range named {
			ids[i] = t.ID
		}
		return nil, cubefleet.Invalid("template", "sandbox templates %s share the name %q: give the template id", strings.Join(ids, ", "), ref)
	case d.scheduler.Scheduler().HoldsTemplate(ref):
		return nil, nil
	}
	return nil, cubefleet.Errorf(cubefleet.CodeNotFound, "no sandbox template has the id or name %q and no node holds a template of that id", ref)
}

// samePool refuses a template whose pool (poolID) is not ref (a pool id or fleet name).
func samePool(ctx context.Context, d *deps, ref, want, template string) error {
	id, _, err := poolID(ctx, d, ref)
	if err != nil {
		return err
	}
	if id != want {
		return cubefleet.Invalid("pool", "template %s is on pool %s, not %s: leave pool out or give the template's", template, want, ref)
	}
	return nil
}

// poolID returns the id and fleet name ("" for none) of the pool whose id or fleet name is
// ref. Errors: NOT_FOUND when no pool has it; INVALID_INPUT when pools of several tenants share
// the fleet name.
func poolID(ctx context.Context, d *deps, ref string) (id, name string, err error) {
	pools, err := d.compute.Pools(ctx, d.db)
	if err != nil {
		return "", "", err
	}
	var named []string
	for _, p := range pools {
		if p.ID == ref {
			return p.ID, p.Name, nil
		}
		if p.Name == ref && p.ArchivedAt == nil {
			named = append(named, p.ID)
		}
	}
	switch len(named) {
	case 0:
		return "", "", cubefleet.Errorf(cubefleet.CodeNotFound, "no pool has the id or fleet name %q; compute.pools.list shows them with their names", ref)
	case 1:
		return named[0], ref, nil
	}
	return "", "", cubefleet.Invalid("pool", "pools %s share the fleet name %q: give the pool id", strings.Join(named, ", "), ref)
}

// decodePlace decodes a scheduler.place input and checks its fields: every problem, a value of
// the wrong type and a rule broken (scheduler.Request.Problems), is reported in one
// INVALID_INPUT error, each field once.
func decodePlace(raw json.RawMessage, in *scheduler.Request) error {
	var errs []cubefleet.FieldError
	var wire contract.PlaceInput
	err := strictjson.DecodeAll(raw, &wire)
	*in = scheduler.Request{SandboxID: wire.SandboxID, Pool: wire.Pool, Template: wire.Template, CPU: wire.CPU, MemoryMiB: wire.MemoryMiB,
		DiskMiB: wire.DiskMiB, NodeSelector: wire.NodeSelector, Exclude: wire.Exclude}
	if err != nil {
		var e *cubefleet.Error
		if !errors.As(err, &e) || e.Code != cubefleet.CodeInvalidInput {
			return err
		}
		errs, _ = e.Details["errors"].([]cubefleet.FieldError)
		if len(errs) == 0 || errs[0].Path == "" {
			return err
		}
	}
	for _, p := range in.Problems() {
		if !slices.ContainsFunc(errs, func(fe cubefleet.FieldError) bool { return fe.Path == p.Path }) {
			errs = append(errs, p)
		}
	}
	if len(errs) > 0 {
		return cubefleet.InvalidAll(errs)
	}
	return nil
}

// noScheduler is the answer of a scheduler method on a server that runs none.
func noScheduler() error {
	return cubefleet.Errorf(cubefleet.CodeUnsupported, "this server runs no scheduler")
}

// recordPlacement writes the audit row of a composite scheduler method (it writes no rows of
// its own in the caller's transaction: the reservation is the lane's group commit).
func (d *deps) recordPlacement(ctx context.Context, c *Call, target string) error {
	row := c.AuditEntry()
	row.Target = target
	return audit.Record(ctx, d.db, row)
}

// registerSchedulerMethods registers scheduler.* (permission scheduler:<verb> on tenant/root):
// the placement lane the sandboxes call, a release by sandbox id, and the status.
func registerSchedulerMethods(r *Registry, d *deps) {
	r.Register(Method{Name: "scheduler.place", Composite: true, Handle: d.schedulerPlace})
	r.Register(Method{Name: "scheduler.release", Composite: true, Handle: Typed(d.schedulerRelease)})
	r.Register(Method{Name: "scheduler.status", Handle: Typed(d.schedulerStatus)})
}

// schedulerPlace is the handler of scheduler.place. It decodes its input itself (decodePlace)
// to report every problem at once.
func (d *deps) schedulerPlace(ctx context.Context, c *Call, raw json.RawMessage) (any, error) {
	var in scheduler.Request
	if err := decodePlace(raw, &in); err != nil {
		return nil, err
	}
	if d.scheduler == nil {
		return nil, noScheduler()
	}
	if err := resolvePlacement(ctx, d, &in); err != nil {
		return nil, err
	}
	dec, err := d.scheduler.Place(ctx, in)
	if err != nil {
		return nil, err
	}
	return contract.PlaceOutput{Placement: placementFrom(dec), PoolName: in.PoolName}, d.recordPlacement(ctx, c, in.SandboxID)
}

// schedulerRelease is the handler of scheduler.release.
func (d *deps) schedulerRelease(ctx context.Context, c *Call, in contract.SandboxRef) (any, error) {
	if msg := fieldrules.CheckID(in.SandboxID); msg != "" {
		return nil, cubefleet.Invalid("sandboxId", "sandboxId %s", msg)
	}
	if d.scheduler == nil {
		return nil, noScheduler()
	}
	ok, err := d.scheduler.Release(ctx, in.SandboxID)
	if err != nil {
		return nil, err
	}
	return contract.ReleaseOutput{SandboxID: in.SandboxID, Released: ok}, d.recordPlacement(ctx, c, in.SandboxID)
}

// schedulerStatus is the handler of scheduler.status.
func (d *deps) schedulerStatus(ctx context.Context, c *Call, _ struct{}) (any, error) {
	if d.scheduler == nil {
		return nil, noScheduler()
	}
	s := d.scheduler.Scheduler()
	src := s.ConfigSource()
	out := contract.SchedulerStatus{Config: schedulerConfigFrom(s.Config()), ConfigFile: src.File, ConfigLoadedAt: src.LoadedAt.UnixMilli(),
		ReloadError: src.ReloadError, LeaseHolder: d.scheduler.Holding(), Now: d.now().UnixMilli(), Reservations: []contract.ReservationView{}}
	if !src.ReloadFailedAt.IsZero() {
		out.ReloadFailedAt = src.ReloadFailedAt.UnixMilli()
	}
	rs := s.Reservations()
	if len(rs) > 0 {
		pools, err := d.compute.Pools(ctx, d.db)
		if err != nil {
			return nil, err
		}
		names := make(map[string]string, len(pools))
		for _, p := range pools {
			names[p.ID] = p.Name
		}
		for _, r := range rs {
			out.Reservations = append(out.Reservations, contract.ReservationView{Reservation: reservationFrom(r), PoolName: names[r.Pool], ReservedAt: r.At.UnixMilli()})
		}
		slices.SortStableFunc(out.Reservations, func(a, b contract.ReservationView) int { return cmp.Compare(a.ReservedAt, b.ReservedAt) })
	}
	return out, nil
}
