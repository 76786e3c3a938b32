package cli

import (
	"context"
	"slices"
	"time"

	"github.com/cubefleet/cubefleet/api"
	pubclient "github.com/cubefleet/cubefleet/client"
	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/cubes"
)

// controlPlane is cubes.ControlPlane over the control plane's public API (the typed client):
// the one place the fleet workflows' calls meet the wire.
type controlPlane struct{ c *pubclient.Client }

var _ cubes.ControlPlane = controlPlane{}

// profileControlPlane connects to the profile's control plane with its API key file (a
// private file: regular, owned by the caller, mode 0600), with the CA bundle of --ca-file or
// the environment for https.
func profileControlPlane(getenv func(string) string, caFile string, p cubes.ProfileControlPlane) (controlPlane, error) {
	c, err := client.Connect(client.Options{URL: p.URL, TokenFile: p.APIKeyFile, CAFile: caFile, Getenv: getenv}, nil)
	if err != nil {
		return controlPlane{}, err
	}
	return controlPlane{c.API()}, nil
}

// member is what the fleet workflows need of a node as nodes.get answers it: its sandboxes
// running or placed there count as its work.
func member(n api.NodeOutput) cubes.Member {
	m := cubes.Member{ID: n.ID, IP: n.IP, Pool: n.Pool, PoolID: n.PoolID, State: string(n.State), Cordoned: n.Cordoned, Draining: n.Drain != nil}
	if n.Sandboxes != nil {
		m.Running = n.Sandboxes.Running + n.Sandboxes.Pending
		m.SandboxIDs = append(slices.Clone(n.Sandboxes.RunningIDs), n.Sandboxes.PendingIDs...)
	}
	return m
}

func (cp controlPlane) Members(ctx context.Context, pool string) ([]cubes.Member, error) {
	list, err := cp.c.Nodes.List(ctx, api.NodeListInput{Pool: pool})
	if err != nil {
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
	n, err := cp.c.Nodes.Get(ctx, api.NodeRef{NodeID: nodeID})
	if err != nil {
		return cubes.Member{}, err
	}
	return member(n), nil
}

func (cp controlPlane) Cordon(ctx context.Context, nodeID, reason string) error {
	_, err := cp.c.Nodes.Cordon(ctx, api.NodeCordonInput{NodeID: nodeID, Detail: reason})
	return err
}

func (cp controlPlane) Uncordon(ctx context.Context, nodeID string) error {
	_, err := cp.c.Nodes.Uncordon(ctx, api.NodeRef{NodeID: nodeID})
	return err
}

func (cp controlPlane) Drain(ctx context.Context, nodeID, reason string, deadline time.Duration) error {
	_, err := cp.c.Nodes.Drain(ctx, api.NodeDrainInput{NodeID: nodeID, Reason: reason, DeadlineSeconds: int64((deadline + time.Second - 1) / time.Second)})
	return err
}

func (cp controlPlane) DeleteNode(ctx context.Context, nodeID string) error {
	_, err := cp.c.Nodes.Delete(ctx, api.NodeDeleteInput{NodeID: nodeID})
	return err
}

func (cp controlPlane) CreateJoinToken(ctx context.Context, pool, ip string, ttl time.Duration) (string, error) {
	uses := 1
	out, err := cp.c.Nodes.JoinTokens.Create(ctx, api.JoinTokenCreateInput{Pool: pool, IP: ip, Uses: &uses, TTLSeconds: int64(ttl / time.Second)})
	return out.Token, err
}

func (cp controlPlane) CreateSandbox(ctx context.Context, tenant, template, node string, command []string) (string, error) {
	sb, err := cp.c.Sandboxes.Create(ctx, api.SandboxCreateInput{TenantID: tenant, Template: template, Async: true, Command: command,
		NodeSelector: map[string]string{"kubernetes.io/hostname": node}})
	return sb.ID, err
}

func (cp controlPlane) Sandbox(ctx context.Context, tenant, id string) (string, error) {
	sb, err := cp.c.Sandboxes.Get(ctx, api.TenantSandboxRef{TenantID: tenant, ID: id})
	return string(sb.State), err
}
