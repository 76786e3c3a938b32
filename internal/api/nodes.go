package api

import (
	"context"
	"maps"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/scheduler"
)

// NodeListInput is the input of nodes.list: Pool (a pool id or fleet name) and State (Ready,
// NotReady, Suspect, Down, Lost, Unknown) narrow the list; empty means every node. A Pool that matches
// no node and names no pool is NOT_FOUND.
type NodeListInput struct {
	Pool  string `json:"pool,omitempty"`
	State string `json:"state,omitempty"`
}

// NodeList is the output of nodes.list: the nodes sorted by id, the server's clock when it
// answered (Now, Unix ms: a report's age is Now - lastReportAt), the health settings in
// milliseconds (the heartbeat timeout is the shortest window; each node's is its
// heartbeatWindowMs), and Rooms: by node id, the scheduler's view of each listed node it knows
// (reported use, use reserved for sandboxes placed and not yet reported, what is left;
// docs/scheduler.md), as nodes.get's room.
type NodeList struct {
	Items            []nodes.View               `json:"items"`
	Now              int64                      `json:"now"`
	HeartbeatTimeout int64                      `json:"heartbeatTimeoutMs"`
	LostAfter        int64                      `json:"lostAfterMs"`
	Rooms            map[string]*scheduler.Room `json:"rooms,omitempty"`
}

// NodeRef names one node by its id (a Cubelet's is its IP address).
type NodeRef struct {
	NodeID string `json:"nodeId"`
}

// NodeOutput is one node as nodes.get, nodes.cordon, nodes.uncordon, nodes.drain, nodes.label
// and nodes.delete return it, with the server's clock (Now, Unix ms) and, when the scheduler
// knows the node, its room: reported use, use reserved for sandboxes placed and not yet
// reported, and what is left (docs/scheduler.md). nodes.get and nodes.drain add the sandboxes
// the control plane runs there (Sandboxes: running, and placed but not yet running, with their
// ids).
type NodeOutput struct {
	nodes.View
	Now       int64                    `json:"now"`
	Room      *scheduler.Room          `json:"room,omitempty"`
	Sandboxes *sandboxes.NodeSandboxes `json:"sandboxes,omitempty"`
	note      string                   // the audit row's message
}

// AuditTarget names the node in the audit row.
func (n NodeOutput) AuditTarget() string { return n.ID }

// AuditMessage is the audit row's message: what a forced drain overrode.
func (n NodeOutput) AuditMessage() string { return n.note }

// NodeCordonInput is the input of nodes.cordon: Detail (at most 200 characters) says why.
type NodeCordonInput struct {
	NodeID string `json:"nodeId"`
	Detail string `json:"detail,omitempty"`
}

// NodeDrainInput is the input of nodes.drain: the node to drain and, optionally, why (Reason,
// at most 200 characters; it becomes the cordon's detail unless the node is already
// cordoned). Draining a node that is already draining changes nothing. A drain that would take
// more of the pool's nodes out at once than its policy.disruptionBudget allows is CONFLICT
// naming the budget, unless Force (then the audit row says what it overrode). DeadlineSeconds
// (1 to 604800, 7 days; 0: none) sets the drain's deadline that long from now: once it passes,
// the sandboxes still running there are stopped (SIGTERM, then SIGKILL after each one's
// terminationGraceSeconds) and end killed with reason node_drained, their results kept. Without
// it nothing is evicted. A drain of a node that drains already may bring its deadline forward,
// never push it back.
type NodeDrainInput struct {
	NodeID          string `json:"nodeId"`
	Reason          string `json:"reason,omitempty"`
	Force           bool   `json:"force,omitempty"`
	DeadlineSeconds int64  `json:"deadlineSeconds,omitempty"`
}

// maxDrainDeadlineSeconds bounds nodes.drain's deadlineSeconds (7 days).
const maxDrainDeadlineSeconds = 7 * 24 * 3600

// NodeLabelInput is the input of nodes.label: Set is merged into the node's labels, then the
// keys in Remove are removed. Labels follow Kubernetes' rules (key [prefix/]name, value at most
// 63 characters, at most 64 labels); the isolation label is refused (FORBIDDEN).
type NodeLabelInput struct {
	NodeID string            `json:"nodeId"`
	Set    map[string]string `json:"set,omitempty"`
	Remove []string          `json:"remove,omitempty"`
}

// NodeLabelOutput is the output of nodes.label: the node after the change, and whether its
// labels changed (false when every label set already had its value and every key removed was
// absent).
type NodeLabelOutput struct {
	NodeOutput
	Changed bool `json:"changed"`
}

// NodeDeleteInput is the input of nodes.delete: the node must be cordoned; without Force it
// must also be Ready and run no sandboxes.
type NodeDeleteInput struct {
	NodeID string `json:"nodeId"`
	Force  bool   `json:"force,omitempty"`
}

// JoinTokenCreateInput is the input of nodes.joinTokens.create: the pool the node joins (id or
// fleet name), how many registrations the token allows (Uses: absent means 1, else 1 to
// 10,000), its lifetime in seconds (default 3600, at most 7 days), and the address it is
// accepted from and registers (IP: not unspecified, multicast or broadcast; without it the
// token binds itself to the address of its first successful registration, unless AnyIP).
type JoinTokenCreateInput struct {
	Pool       string `json:"pool"`
	Uses       *int   `json:"uses,omitempty"`
	TTLSeconds int64  `json:"ttlSeconds,omitempty"`
	IP         string `json:"ip,omitempty"`
	AnyIP      bool   `json:"anyIp,omitempty"`
}

// JoinTokenCreated is the output of nodes.joinTokens.create: the token's metadata and the
// token itself, shown only here.
type JoinTokenCreated struct {
	JoinToken nodes.JoinToken `json:"joinToken"`
	Token     string          `json:"token"`
}

// AuditTarget names the join token (never its secret) in the audit row.
func (j JoinTokenCreated) AuditTarget() string { return j.JoinToken.ID }

// JoinTokenListInput is the input of nodes.joinTokens.list: without All only the usable
// tokens (not revoked, not expired, uses left), with it every one.
type JoinTokenListInput struct {
	All bool `json:"all,omitempty"`
}

// JoinTokenList is the output of nodes.joinTokens.list: the tokens oldest first (never a
// token or its hash), and the server's clock (Now, Unix ms).
type JoinTokenList struct {
	Items []nodes.JoinToken `json:"items"`
	Now   int64             `json:"now"`
}

// JoinTokenRef names one join token by its id (jtk_...).
type JoinTokenRef struct {
	ID string `json:"id"`
}

// JoinTokenOutput is the output of nodes.joinTokens.revoke: the token as it is now (state
// revoked, with revokedAt and revokedBy).
type JoinTokenOutput struct {
	JoinToken nodes.JoinToken `json:"joinToken"`
}

// AuditTarget names the join token in the audit row.
func (j JoinTokenOutput) AuditTarget() string { return j.JoinToken.ID }

// EventListInput is the input of events.list: Type is exact (node.lost) or a prefix ending in a
// dot (node.); Subject an exact subject (a node id); Since Unix ms; Limit 1-1000 (default 100);
// Cursor the previous page's nextCursor. Newest asks for the newest Limit events instead of the
// oldest (the tail of the log, still oldest first; no Cursor then).
type EventListInput struct {
	Type    string `json:"type,omitempty"`
	Subject string `json:"subject,omitempty"`
	Since   int64  `json:"since,omitempty"`
	Limit   int    `json:"limit,omitempty"`
	Cursor  string `json:"cursor,omitempty"`
	Newest  bool   `json:"newest,omitempty"`
}

// EventList is a page of events, oldest first; NextCursor is absent on the last page. With
// Newest, OlderExist says whether older events match too (and NextCursor is absent).
type EventList struct {
	Items      []events.Event `json:"items"`
	NextCursor string         `json:"nextCursor,omitempty"`
	OlderExist bool           `json:"olderExist,omitempty"`
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

// registerNodesMethods registers nodes.* (permission nodes:<verb> on tenant/root; the
// nodes.joinTokens.* methods all decide nodes:join-token) and events.list (events:read on
// tenant/root).
func registerNodesMethods(r *Registry, d *deps) {
	reg := d.nodes
	out := func(v nodes.View, err error) (any, error) {
		if err != nil {
			return nil, err
		}
		o := NodeOutput{View: v, Now: d.now().UnixMilli()}
		if d.scheduler != nil {
			if room, ok := d.scheduler.Scheduler().Room(v.ID); ok {
				o.Room = &room
			}
		}
		return o, nil
	}
	r.Register(Method{
		Name: "nodes.list", Summary: "List the registered compute nodes with their health, pool and usage",
		Permission: "nodes:list", Scope: OnRoot,
		Handle: Typed(func(ctx context.Context, c *Call, in NodeListInput) (any, error) {
			items, err := reg.List(ctx, nodes.ListFilter{Pool: in.Pool, State: nodes.State(in.State)})
			if err != nil {
				return nil, err
			}
			if in.Pool != "" && len(items) == 0 {
				if err := poolExists(ctx, d, in.Pool); err != nil {
					return nil, err
				}
			}
			list := NodeList{Items: items, Now: d.now().UnixMilli(), HeartbeatTimeout: reg.HeartbeatTimeout().Milliseconds(),
				LostAfter: reg.LostAfter().Milliseconds()}
			if d.scheduler != nil {
				for _, v := range items {
					if room, ok := d.scheduler.Scheduler().Room(v.ID); ok {
						if list.Rooms == nil {
							list.Rooms = map[string]*scheduler.Room{}
						}
						list.Rooms[v.ID] = &room
					}
				}
			}
			return list, nil
		}),
		Input: NodeListInput{}, Output: NodeList{},
	})
	withSandboxes := func(ctx context.Context, v any, err error) (any, error) {
		o, ok := v.(NodeOutput)
		if err != nil || !ok || d.sandboxes == nil {
			return v, err
		}
		sbx, err := d.sandboxes.OnNode(ctx, o.ID)
		if err != nil {
			return nil, err
		}
		o.Sandboxes = &sbx
		// A node whose agent has not yet listed a sandbox placed there (its report comes up
		// to a second after the start) still runs it: it is not drained.
		if live := int64(sbx.Running + sbx.Pending); o.Drain != nil && live > 0 {
			dv := *o.Drain
			dv.State, dv.DrainedAt, dv.SandboxesLeft = nodes.DrainDraining, 0, max(dv.SandboxesLeft, live)
			o.Drain = &dv
		}
		return o, nil
	}
	r.Register(Method{
		Name: "nodes.get", Summary: "Get one compute node, with the sandboxes it runs",
		Permission: "nodes:get", Scope: OnRoot,
		Handle: Typed(func(ctx context.Context, c *Call, in NodeRef) (any, error) {
			if err := needNode(in.NodeID); err != nil {
				return nil, err
			}
			v, err := out(reg.Get(ctx, in.NodeID))
			return withSandboxes(ctx, v, err)
		}),
		Input: NodeRef{}, Output: NodeOutput{},
	})
	r.Register(Method{
		Name: "nodes.cordon", Summary: "Cordon a node: it keeps running what it has but receives no new work (idempotent)", Write: true,
		Permission: "nodes:cordon", Scope: OnRoot,
		Handle: Typed(func(ctx context.Context, c *Call, in NodeCordonInput) (any, error) {
			if err := needNode(in.NodeID); err != nil {
				return nil, err
			}
			return out(reg.Cordon(ctx, in.NodeID, in.Detail, nodes.Actor(c.Principal.ID)))
		}),
		Input: NodeCordonInput{}, Output: NodeOutput{},
	})
	r.Register(Method{
		Name: "nodes.uncordon", Summary: "Uncordon a node (idempotent)", Write: true,
		Permission: "nodes:uncordon", Scope: OnRoot,
		Handle: Typed(func(ctx context.Context, c *Call, in NodeRef) (any, error) {
			if err := needNode(in.NodeID); err != nil {
				return nil, err
			}
			return out(reg.Uncordon(ctx, in.NodeID, nodes.Actor(c.Principal.ID)))
		}),
		Input: NodeRef{}, Output: NodeOutput{},
	})
	r.Register(Method{
		Name: "nodes.drain", Summary: "Drain a node: cordon it and mark it draining until its agent reports no sandboxes running (idempotent; uncordon ends it; force: past the pool's disruption budget)", Write: true,
		Permission: "nodes:drain", Scope: OnRoot,
		Handle: Typed(func(ctx context.Context, c *Call, in NodeDrainInput) (any, error) {
			if err := needNode(in.NodeID); err != nil {
				return nil, err
			}
			if in.DeadlineSeconds < 0 || in.DeadlineSeconds > maxDrainDeadlineSeconds {
				return nil, cubefleet.Invalid("deadlineSeconds", "deadlineSeconds must be 1 to %d (7 days), or absent for no deadline (nothing is evicted)", maxDrainDeadlineSeconds)
			}
			note, err := drainBudget(ctx, d, c, in)
			if err != nil {
				return nil, err
			}
			v, err := out(reg.DrainWithin(ctx, in.NodeID, in.Reason, nodes.Actor(c.Principal.ID), time.Duration(in.DeadlineSeconds)*time.Second))
			if o, ok := v.(NodeOutput); ok {
				o.note = note
				v = o
			}
			return withSandboxes(ctx, v, err)
		}),
		Input: NodeDrainInput{}, Output: NodeOutput{},
	})
	r.Register(Method{
		Name: "nodes.label", Summary: "Set (merge) and remove a node's labels", Write: true,
		Permission: "nodes:label", Scope: OnRoot,
		Handle: Typed(func(ctx context.Context, c *Call, in NodeLabelInput) (any, error) {
			if err := needNode(in.NodeID); err != nil {
				return nil, err
			}
			if len(in.Set) == 0 && len(in.Remove) == 0 {
				return nil, cubefleet.Invalid("set", "give labels to set or keys to remove")
			}
			before, err := reg.Get(ctx, in.NodeID)
			if err != nil {
				return nil, err
			}
			after, err := reg.Label(ctx, in.NodeID, in.Set, in.Remove)
			if err != nil {
				return nil, err
			}
			return NodeLabelOutput{NodeOutput: NodeOutput{View: after, Now: d.now().UnixMilli()}, Changed: !maps.Equal(before.Labels, after.Labels)}, nil
		}),
		Input: NodeLabelInput{}, Output: NodeLabelOutput{},
	})
	r.Register(Method{
		Name: "nodes.delete", Summary: "Delete a cordoned node and revoke its credential (force: even while it is not Ready or runs sandboxes)", Write: true,
		Permission: "nodes:delete", Scope: OnRoot,
		Handle: Typed(func(ctx context.Context, c *Call, in NodeDeleteInput) (any, error) {
			if err := needNode(in.NodeID); err != nil {
				return nil, err
			}
			return out(reg.Delete(ctx, in.NodeID, in.Force, nodes.Actor(c.Principal.ID)))
		}),
		Input: NodeDeleteInput{}, Output: NodeOutput{},
	})
	r.Register(Method{
		Name: "nodes.joinTokens.create", Summary: "Create a join token for `cubefleet agent` (single-use, short-lived, bound to an address by default; shown once)", Write: true,
		Permission: "nodes:join-token", Scope: OnRoot,
		Handle: Typed(func(ctx context.Context, c *Call, in JoinTokenCreateInput) (any, error) {
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
			return JoinTokenCreated{JoinToken: t, Token: secret}, nil
		}),
		Input: JoinTokenCreateInput{}, Output: JoinTokenCreated{},
	})
	r.Register(Method{
		Name: "nodes.joinTokens.list", Summary: "List join tokens (never the token or its hash): the usable ones, or with all every one (used, expired, revoked)",
		Permission: "nodes:join-token", Scope: OnRoot,
		Handle: Typed(func(ctx context.Context, c *Call, in JoinTokenListInput) (any, error) {
			items, err := d.nodeStore.ListJoinTokens(ctx, c.Q, in.All)
			if err != nil {
				return nil, err
			}
			return JoinTokenList{Items: items, Now: d.now().UnixMilli()}, nil
		}),
		Input: JoinTokenListInput{}, Output: JoinTokenList{},
	})
	r.Register(Method{
		Name: "nodes.joinTokens.revoke", Summary: "Revoke a join token: every replica refuses it from then on (idempotent; nodes that joined with it stay)", Write: true,
		Permission: "nodes:join-token", Scope: OnRoot,
		Handle: Typed(func(ctx context.Context, c *Call, in JoinTokenRef) (any, error) {
			t, err := d.nodeStore.RevokeJoinToken(ctx, c.Q, in.ID, c.Principal.ID)
			if err != nil {
				return nil, err
			}
			return JoinTokenOutput{JoinToken: t}, nil
		}),
		Input: JoinTokenRef{}, Output: JoinTokenOutput{},
	})
	r.Register(Method{
		Name: "events.list", Summary: "Read the event log (node lifecycle: joined, suspect, down, lost, recovered, cordoned, uncordoned, draining, drained, deleted), oldest first",
		Permission: "events:read", Scope: OnRoot,
		Handle: Typed(func(ctx context.Context, c *Call, in EventListInput) (any, error) {
			if in.Limit < 0 || in.Limit > 1000 {
				return nil, cubefleet.Invalid("limit", "limit is 1 to 1000")
			}
			if in.Since < 0 {
				return nil, cubefleet.Invalid("since", "since is a Unix time in milliseconds")
			}
			if in.Cursor != "" && !cubefleet.IsID(in.Cursor, "evt") {
				return nil, cubefleet.Invalid("cursor", "cursor %q is not a page's nextCursor (an event id, evt_...): pass the nextCursor of the previous page", in.Cursor)
			}
			f := events.Filter{TenantID: iam.RootTenant, Type: in.Type, Subject: in.Subject, Since: in.Since, Limit: in.Limit, Cursor: in.Cursor}
			if in.Newest {
				if in.Cursor != "" {
					return nil, cubefleet.Invalid("cursor", "cursor pages forward from an event; newest reads the tail of the log: give one or the other")
				}
				items, older, err := events.Newest(ctx, c.Q, f)
				return EventList{Items: items, OlderExist: older}, err
			}
			items, next, err := events.List(ctx, c.Q, f)
			return EventList{Items: items, NextCursor: next}, err
		}),
		Input: EventListInput{}, Output: EventList{},
	})
}
