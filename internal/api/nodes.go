package api

import (
	"context"
	"maps"
	"time"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodes"
)

// nodeOut is one node as nodes.get, nodes.cordon, nodes.uncordon, nodes.drain, nodes.label and
// nodes.delete answer it (contract.NodeOutput), naming it in the audit row; note is the audit
// row's message (what a forced drain overrode).
func nodeOut(o contract.NodeOutput, note string) audited {
	return audited{out: o, target: o.ID, message: note}
}

// poolExists returns NOT_FOUND unless ref is the id or fleet name of a pool (archived ones
// included): nodes.list with a pool nothing matches is an empty list only when the pool exists.
func poolExists(ctx context.Context, d *deps, ref string) error {
	pools, err := d.compute.Pools(ctx, d.db)
	if err != nil {
		return err
	}
	for _, p := range pools {
		if p.ID == ref || p.Name == ref {
			return nil
		}
	}
	return cubefleet.Errorf(cubefleet.CodeNotFound, "no pool has the id or fleet name %q, and no node reports it as its cluster_label", ref)
}

func needNode(id string) error {
	if id == "" {
		return cubefleet.Invalid("nodeId", "nodeId is required")
	}
	return nil
}

// nodeView is a node as the contract shows it, with the server's clock and the scheduler's room.
func (d *deps) nodeView(v nodes.View) contract.NodeOutput {
	o := contract.NodeOutput{Node: nodeFrom(v), Now: d.now().UnixMilli()}
	if d.scheduler != nil {
		if room, ok := d.scheduler.Scheduler().Room(v.ID); ok {
			o.Room = ptrOf(&room, roomFrom)
		}
	}
	return o
}

// nodeAnswer is the answer of a method that returns one node (naming it in the audit row).
func (d *deps) nodeAnswer(v nodes.View, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return nodeOut(d.nodeView(v), ""), nil
}

// withSandboxes adds to the answer v of nodes.get or nodes.drain the sandboxes the control plane
// runs on the node.
func (d *deps) withSandboxes(ctx context.Context, v any, err error) (any, error) {
	a, ok := v.(audited)
	if err != nil || !ok || d.sandboxes == nil {
		return v, err
	}
	o := a.out.(contract.NodeOutput)
	sbx, err := d.sandboxes.OnNode(ctx, o.ID)
	if err != nil {
		return nil, err
	}
	o.Sandboxes = ptrOf(&sbx, nodeSandboxesFrom)
	// A node whose agent has not yet listed a sandbox placed there (its report comes up
	// to a second after the start) still runs it: it is not drained.
	if live := int64(sbx.Running + sbx.Pending); o.Drain != nil && live > 0 {
		dv := *o.Drain
		dv.State, dv.DrainedAt, dv.SandboxesLeft = contract.DrainDraining, 0, max(dv.SandboxesLeft, live)
		o.Drain = &dv
	}
	a.out = o
	return a, nil
}

// registerNodesMethods registers nodes.* (permission nodes:<verb> on tenant/root; the
// nodes.joinTokens.* methods all decide nodes:join-token) and events.list (events:read on
// tenant/root).
func registerNodesMethods(r *Registry, d *deps) {
	r.Register(Method{Name: "nodes.list", Handle: Typed(d.nodesList)})
	r.Register(Method{Name: "nodes.get", Handle: Typed(d.nodesGet)})
	r.Register(Method{Name: "nodes.cordon", Handle: Typed(d.nodesCordon)})
	r.Register(Method{Name: "nodes.uncordon", Handle: Typed(d.nodesUncordon)})
	r.Register(Method{Name: "nodes.drain", Handle: Typed(d.nodesDrain)})
	r.Register(Method{Name: "nodes.label", Handle: Typed(d.nodesLabel)})
	r.Register(Method{Name: "nodes.delete", Handle: Typed(d.nodesDelete)})
	r.Register(Method{Name: "nodes.joinTokens.create", Handle: Typed(d.nodesJoinTokensCreate)})
	r.Register(Method{Name: "nodes.joinTokens.list", Handle: Typed(d.nodesJoinTokensList)})
	r.Register(Method{Name: "nodes.joinTokens.revoke", Handle: Typed(d.nodesJoinTokensRevoke)})
	r.Register(Method{Name: "events.list", Handle: Typed(d.eventsList)})
}

// nodesList is the handler of nodes.list.
func (d *deps) nodesList(ctx context.Context, c *Call, in contract.NodeListInput) (any, error) {
	items, err := d.nodes.List(ctx, nodes.ListFilter{Pool: in.Pool, State: nodes.State(in.State)})
	if err != nil {
		return nil, err
	}
	if in.Pool != "" && len(items) == 0 {
		if err := poolExists(ctx, d, in.Pool); err != nil {
			return nil, err
		}
	}
	list := contract.NodeList{Items: sliceOf(items, nodeFrom), Now: d.now().UnixMilli(), HeartbeatTimeout: d.nodes.HeartbeatTimeout().Milliseconds(),
		LostAfter: d.nodes.LostAfter().Milliseconds()}
	if d.scheduler != nil {
		for _, v := range items {
			if room, ok := d.scheduler.Scheduler().Room(v.ID); ok {
				if list.Rooms == nil {
					list.Rooms = map[string]*contract.Room{}
				}
				list.Rooms[v.ID] = ptrOf(&room, roomFrom)
			}
		}
	}
	return list, nil
}

// nodesGet is the handler of nodes.get.
func (d *deps) nodesGet(ctx context.Context, c *Call, in contract.NodeRef) (any, error) {
	if err := needNode(in.NodeID); err != nil {
		return nil, err
	}
	v, err := d.nodeAnswer(d.nodes.Get(ctx, in.NodeID))
	return d.withSandboxes(ctx, v, err)
}

// nodesCordon is the handler of nodes.cordon.
func (d *deps) nodesCordon(ctx context.Context, c *Call, in contract.NodeCordonInput) (any, error) {
	return d.setCordon(ctx, in.NodeID, func() (nodes.View, error) {
		return d.nodes.Cordon(ctx, in.NodeID, in.Detail, nodes.Actor(c.Principal.ID))
	})
}

// nodesUncordon is the handler of nodes.uncordon.
func (d *deps) nodesUncordon(ctx context.Context, c *Call, in contract.NodeRef) (any, error) {
	return d.setCordon(ctx, in.NodeID, func() (nodes.View, error) {
		return d.nodes.Uncordon(ctx, in.NodeID, nodes.Actor(c.Principal.ID))
	})
}

// setCordon runs set, a cordon or an uncordon of node id, and answers the node after it and
// whether set changed its cordon (state, detail, who set it) or ended a drain.
func (d *deps) setCordon(ctx context.Context, id string, set func() (nodes.View, error)) (any, error) {
	if err := needNode(id); err != nil {
		return nil, err
	}
	before, err := d.nodes.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	after, err := set()
	if err != nil {
		return nil, err
	}
	changed := before.Cordoned != after.Cordoned || before.CordonDetail != after.CordonDetail ||
		before.CordonedBy != after.CordonedBy || (before.Drain != nil) != (after.Drain != nil)
	return audited{out: contract.NodeCordonOutput{NodeOutput: d.nodeView(after), Changed: changed}, target: after.ID}, nil
}

// nodesDrain is the handler of nodes.drain.
func (d *deps) nodesDrain(ctx context.Context, c *Call, in contract.NodeDrainInput) (any, error) {
	if err := needNode(in.NodeID); err != nil {
		return nil, err
	}
	if in.DeadlineSeconds < 0 || in.DeadlineSeconds > contract.MaxDrainDeadlineSeconds {
		return nil, cubefleet.Invalid("deadlineSeconds", "deadlineSeconds must be 1 to %d (7 days), or absent for no deadline (nothing is evicted)", contract.MaxDrainDeadlineSeconds)
	}
	note, err := drainBudget(ctx, d, c, in)
	if err != nil {
		return nil, err
	}
	v, err := d.nodeAnswer(d.nodes.DrainWithin(ctx, in.NodeID, in.Reason, nodes.Actor(c.Principal.ID), time.Duration(in.DeadlineSeconds)*time.Second))
	if a, ok := v.(audited); ok {
		a.message = note
		v = a
	}
	return d.withSandboxes(ctx, v, err)
}

// nodesLabel is the handler of nodes.label.
func (d *deps) nodesLabel(ctx context.Context, c *Call, in contract.NodeLabelInput) (any, error) {
	if err := needNode(in.NodeID); err != nil {
		return nil, err
	}
	if len(in.Set) == 0 && len(in.Remove) == 0 {
		return nil, cubefleet.Invalid("set", "give labels to set or keys to remove")
	}
	before, err := d.nodes.Get(ctx, in.NodeID)
	if err != nil {
		return nil, err
	}
	after, err := d.nodes.Label(ctx, in.NodeID, in.Set, in.Remove)
	if err != nil {
		return nil, err
	}
	return audited{out: contract.NodeLabelOutput{NodeOutput: contract.NodeOutput{Node: nodeFrom(after), Now: d.now().UnixMilli()},
		Changed: !maps.Equal(before.Labels, after.Labels)}, target: after.ID}, nil
}

// nodesDelete is the handler of nodes.delete.
func (d *deps) nodesDelete(ctx context.Context, c *Call, in contract.NodeDeleteInput) (any, error) {
	if err := needNode(in.NodeID); err != nil {
		return nil, err
	}
	return d.nodeAnswer(d.nodes.Delete(ctx, in.NodeID, in.Force, nodes.Actor(c.Principal.ID)))
}

// nodesJoinTokensCreate is the handler of nodes.joinTokens.create.
func (d *deps) nodesJoinTokensCreate(ctx context.Context, c *Call, in contract.JoinTokenCreateInput) (any, error) {
	if in.TTLSeconds < 0 || in.TTLSeconds > int64(nodes.MaxJoinTokenTTL/time.Second) {
		return nil, cubefleet.Invalid("ttlSeconds", "ttlSeconds is 1 to %d", int64(nodes.MaxJoinTokenTTL/time.Second))
	}
	uses := 1
	if in.Uses != nil {
		if uses = *in.Uses; uses < 1 || uses > nodes.MaxJoinTokenUses {
			return nil, cubefleet.Invalid("uses", "uses must be 1 to %d (got %d)", nodes.MaxJoinTokenUses, uses)
		}
	}
	t, secret, err := d.nodeStore.CreateJoinToken(ctx, c.Q, nodes.JoinTokenInput{
		Pool: in.Pool, Uses: uses, TTL: time.Duration(in.TTLSeconds) * time.Second, IP: in.IP, AnyIP: in.AnyIP,
	}, c.Principal.ID)
	if err != nil {
		return nil, err
	}
	return audited{out: contract.JoinTokenCreated{JoinToken: joinTokenFrom(t), Token: secret}, target: t.ID}, nil
}

// nodesJoinTokensList is the handler of nodes.joinTokens.list.
func (d *deps) nodesJoinTokensList(ctx context.Context, c *Call, in contract.JoinTokenListInput) (any, error) {
	items, err := d.nodeStore.ListJoinTokens(ctx, c.Q, in.All)
	if err != nil {
		return nil, err
	}
	return contract.JoinTokenList{Items: sliceOf(items, joinTokenFrom), Now: d.now().UnixMilli()}, nil
}

// nodesJoinTokensRevoke is the handler of nodes.joinTokens.revoke.
func (d *deps) nodesJoinTokensRevoke(ctx context.Context, c *Call, in contract.JoinTokenRef) (any, error) {
	t, err := d.nodeStore.RevokeJoinToken(ctx, c.Q, in.ID, c.Principal.ID)
	if err != nil {
		return nil, err
	}
	return audited{out: contract.JoinTokenOutput{JoinToken: joinTokenFrom(t)}, target: t.ID}, nil
}

// eventsList is the handler of events.list.
func (d *deps) eventsList(ctx context.Context, c *Call, in contract.EventListInput) (any, error) {
	if err := logPage(in.Limit, in.Since, in.Cursor, in.Newest, "evt", "an event id"); err != nil {
		return nil, err
	}
	f := events.Filter{TenantID: iam.RootTenant, Type: in.Type, Subject: in.Subject, Since: in.Since, Limit: in.Limit, Cursor: in.Cursor}
	if in.Newest {
		items, older, err := events.Newest(ctx, c.Q, f)
		return contract.EventList{Items: sliceOf(items, eventFrom), OlderExist: older}, err
	}
	items, next, err := events.List(ctx, c.Q, f)
	return contract.EventList{Items: sliceOf(items, eventFrom), NextCursor: next}, err
}
