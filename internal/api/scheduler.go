package api

import (
	"context"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/scheduler"
)

// PlaceOutput is the output of scheduler.place: where the sandbox goes and the room reserved
// for it there (docs/scheduler.md).
type PlaceOutput struct {
	scheduler.Decision
}

// AuditTarget names the sandbox in the audit row.
func (p PlaceOutput) AuditTarget() string { return p.Reservation.SandboxID }

// SandboxRef names one sandbox by its id.
type SandboxRef struct {
	SandboxID string `json:"sandboxId"`
}

// ReleaseOutput is the output of scheduler.release: whether the sandbox held a reservation.
type ReleaseOutput struct {
	SandboxID string `json:"sandboxId"`
	Released  bool   `json:"released"`
}

// AuditTarget names the sandbox in the audit row.
func (r ReleaseOutput) AuditTarget() string { return r.SandboxID }

// SchedulerStatus is the output of scheduler.status: the configuration in force, whether this
// replica holds the scheduler lease (it decides), and the reservations outstanding.
type SchedulerStatus struct {
	Config       scheduler.Config        `json:"config"`
	LeaseHolder  bool                    `json:"leaseHolder"`
	Reservations []scheduler.Reservation `json:"reservations"`
}

// registerSchedulerMethods registers scheduler.* (permission scheduler:<verb> on tenant/root):
// the placement lane the sandboxes call, a release by sandbox id, and the status.
func registerSchedulerMethods(r *Registry, d *deps) {
	unsupported := func() error {
		return cubefleet.Errorf(cubefleet.CodeUnsupported, "this server runs no scheduler")
	}
	// record writes the audit row of a composite scheduler method (it writes no rows of its own
	// in the caller's transaction: the reservation is the lane's group commit).
	record := func(ctx context.Context, c *Call, target string) error {
		row := c.AuditEntry()
		row.Target = target
		return audit.Record(ctx, d.db, row)
	}
	r.Register(Method{
		Name: "scheduler.place", Summary: "Place a sandbox: choose its node and reserve the room there (released by sandbox id)",
		Permission: "scheduler:place", Scope: OnRoot, Write: true, Composite: true,
		Handle: Typed(func(ctx context.Context, c *Call, in scheduler.Request) (any, error) {
			if d.scheduler == nil {
				return nil, unsupported()
			}
			dec, err := d.scheduler.Place(ctx, in)
			if err != nil {
				return nil, err
			}
			return PlaceOutput{dec}, record(ctx, c, in.SandboxID)
		}),
		Input: scheduler.Request{}, Output: PlaceOutput{},
	})
	r.Register(Method{
		Name: "scheduler.release", Summary: "Release a sandbox's reservation (its create failed or was given up)",
		Permission: "scheduler:release", Scope: OnRoot, Write: true, Composite: true,
		Handle: Typed(func(ctx context.Context, c *Call, in SandboxRef) (any, error) {
			if in.SandboxID == "" {
				return nil, cubefleet.Invalid("sandboxId", "sandboxId is required")
			}
			if d.scheduler == nil {
				return nil, unsupported()
			}
			ok, err := d.scheduler.Release(ctx, in.SandboxID)
			if err != nil {
				return nil, err
			}
			return ReleaseOutput{SandboxID: in.SandboxID, Released: ok}, record(ctx, c, in.SandboxID)
		}),
		Input: SandboxRef{}, Output: ReleaseOutput{},
	})
	r.Register(Method{
		Name: "scheduler.status", Summary: "The scheduler's configuration in force, lease holder and reservations",
		Permission: "scheduler:read", Scope: OnRoot,
		Handle: Typed(func(ctx context.Context, c *Call, _ struct{}) (any, error) {
			if d.scheduler == nil {
				return nil, unsupported()
			}
			s := d.scheduler.Scheduler()
			rs := s.Reservations()
			if rs == nil {
				rs = []scheduler.Reservation{}
			}
			return SchedulerStatus{Config: s.Config(), LeaseHolder: d.scheduler.Holding(), Reservations: rs}, nil
		}),
		Input: struct{}{}, Output: SchedulerStatus{},
	})
}
