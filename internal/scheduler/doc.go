// Package scheduler places sandboxes on compute nodes: CubeMaster's scheduler (docs/scheduler.md,
// "Configuration") with its configuration keys, without its defects (docs/scheduler.md,
// "Differences from CubeMaster").
//
// A decision runs, over every node of the request's pool (no sampling unless pre_select_num
// asks for it): the candidate check (Ready with a report since this server started, schedulable,
// running cubefleet's agent, metrics fresh), the quota and microVM-slot room (always), the
// enabled filters, one weighted score with every factor on the scale [0,1], and the pick among
// the top priority_select_num nodes. The chosen node's room is reserved for the sandbox in the
// same critical section, so concurrent decisions never overbook a node; the reservation is
// released by sandbox id when the node's report lists the sandbox, or by [Scheduler.Release]
// when the create fails.
//
// The configuration is a cubemaster.yaml-shaped file ([Load]); the node states come from the
// node registry through [Source]; [Scheduler.Decide] is the decision; the simulate sub-package
// replays synthetic work against this same code. docs/scheduler.md describes every key, the
// profiles, upstream's scoring formula beside ours, and every deliberate difference.
package scheduler
