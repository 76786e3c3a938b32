package cli

import (
	"context"
	"time"

	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
)

// controlPlane is cubes.ControlPlane over the control plane's HTTP API (internal/client): the
// one place the fleet workflows' calls meet the wire.
type controlPlane struct{ c *client.Client }

var _ cubes.ControlPlane = controlPlane{}

// profileControlPlane connects to the profile's control plane with its API key file (a
// private file: regular, owned by the caller, mode 0600), with the CA bundle of --ca-file or
// the environment for https.
func profileControlPlane(getenv func(string) string, caFile string, p cubes.ProfileControlPlane) (controlPlane, error) {
	c, err := client.Connect(client.Options{URL: p.URL, TokenFile: p.APIKeyFile, CAFile: caFile, Getenv: getenv}, nil)
	return controlPlane{c}, err
}

// nodeGet is the part of nodes.get's output a Member needs.
type nodeGet struct {
	nodes.View
	Sandboxes *sandboxes.NodeSandboxes `json:"sandboxes,omitempty"`
}

func member(n nodeGet) cubes.Member {
	m := cubes.Member{ID: n.ID, IP: n.IP, Pool: n.Pool, PoolID: n.PoolID, State: string(n.State), Cordoned: n.Cordoned, Draining: n.Drain != nil}
	if n.Sandboxes != nil {
		m.Running = n.Sandboxes.Running + n.Sandboxes.Pending
	}
	return m
}

func (cp controlPlane) Members(ctx context.Context, pool string) ([]cubes.Member, error) {
	var list struct {
		Items []nodes.View `json:"items"`
	}
	if err := cp.c.Call(ctx, "nodes.list", map[string]any{"pool": pool}, &list); err != nil {
		return nil, err
	}
	out := make([]cubes.Member, 0, len(list.Items))
	for _, n := range list.Items {
		m, err := cp.Member(ctx, n.ID) // nodes.get counts the sandboxes placed there
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func (cp controlPlane) Member(ctx context.Context, nodeID string) (cubes.Member, error) {
	var n nodeGet
	if err := cp.c.Call(ctx, "nodes.get", map[string]any{"nodeId": nodeID}, &n); err != nil {
		return cubes.Member{}, err
	}
	return member(n), nil
}

func (cp controlPlane) Cordon(ctx context.Context, nodeID, reason string) error {
	return cp.c.Call(ctx, "nodes.cordon", map[string]any{"nodeId": nodeID, "detail": reason}, nil)
}

func (cp controlPlane) Uncordon(ctx context.Context, nodeID string) error {
	return cp.c.Call(ctx, "nodes.uncordon", map[string]any{"nodeId": nodeID}, nil)
}

func (cp controlPlane) Drain(ctx context.Context, nodeID, reason string, deadline time.Duration) error {
	in := map[string]any{"nodeId": nodeID, "reason": reason}
	if deadline > 0 {
		in["deadlineSeconds"] = int64((deadline + time.Second - 1) / time.Second)
	}
	return cp.c.Call(ctx, "nodes.drain", in, nil)
}

func (cp controlPlane) CreateJoinToken(ctx context.Context, pool, ip string, ttl time.Duration) (string, error) {
	var out struct {
		Token string `json:"token"`
	}
	uses := 1
	err := cp.c.Call(ctx, "nodes.joinTokens.create", map[string]any{"pool": pool, "ip": ip, "uses": uses, "ttlSeconds": int64(ttl / time.Second)}, &out)
	return out.Token, err
}

func (cp controlPlane) CreateSandbox(ctx context.Context, tenant, template, node string) (string, error) {
	var sb sandboxes.Sandbox
	err := cp.c.Call(ctx, "sandboxes.create", map[string]any{"tenantId": tenant, "template": template, "async": true,
		"nodeSelector": map[string]string{"kubernetes.io/hostname": node}}, &sb)
	return sb.ID, err
}

func (cp controlPlane) Sandbox(ctx context.Context, tenant, id string) (string, error) {
	var sb sandboxes.Sandbox
	err := cp.c.Call(ctx, "sandboxes.get", map[string]any{"tenantId": tenant, "id": id}, &sb)
	return string(sb.State), err
}
