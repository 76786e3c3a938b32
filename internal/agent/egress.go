package agent

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// controlPlaneTTL is how long the agent keeps the control plane's resolved addresses before it
// resolves its names again.
const controlPlaneTTL = 5 * time.Minute

// controlPlane is the control plane's addresses, which a public sandbox never reaches even
// inside its template's egressAllow (driver.Spec.EgressDeny): its base URLs' hosts, IP
// addresses as they are and names resolved when a sandbox with egressAllow starts (kept for
// controlPlaneTTL). Safe for concurrent use.
type controlPlane struct {
	urls []string
	// lookup resolves a name (net.DefaultResolver.LookupNetIP's shape).
	lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)
	now    func() time.Time

	mu       sync.Mutex
	addrs    []netip.Addr
	resolved time.Time
}

// Addrs returns the control plane's addresses. A name that cannot be resolved is an error
// naming it: a sandbox cannot be kept from an address the agent does not know.
func (c *controlPlane) Addrs(ctx context.Context) ([]netip.Addr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.resolved.IsZero() && c.now().Sub(c.resolved) < controlPlaneTTL {
		return c.addrs, nil
	}
	var out []netip.Addr
	for _, raw := range c.urls {
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" {
			return nil, fmt.Errorf("the control plane address %q has no host", raw)
		}
		host := u.Hostname()
		if a, err := netip.ParseAddr(host); err == nil {
			out = append(out, a.Unmap())
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		addrs, err := c.lookup(lctx, "ip", host)
		cancel()
		if err != nil || len(addrs) == 0 {
			return nil, fmt.Errorf("resolve the control plane's host %s, which a sandbox with egressAllow must be kept from: %v", host, err)
		}
		for _, a := range addrs {
			out = append(out, a.Unmap())
		}
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	c.addrs, c.resolved = slices.Compact(out), c.now()
	return c.addrs, nil
}

func newControlPlane(urls []string, now func() time.Time) *controlPlane {
	return &controlPlane{urls: urls, lookup: net.DefaultResolver.LookupNetIP, now: now}
}

// egressAllow parses an assignment's egress_allow: each entry fieldrules.CheckEgressPrefix (the
// control plane checked them too; the node does not trust that). Errors name the entry.
func egressAllow(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, s := range list {
		p, msg := fieldrules.CheckEgressPrefix(s)
		if msg != "" {
			return nil, fmt.Errorf("egress_allow[%d]: %s", i, msg)
		}
		out = append(out, p)
	}
	return out, nil
}

// refuseRuntime returns why a node of runtime mine does not take work for runtime theirs (an
// assignment's, "" for any), or "".
func refuseRuntime(mine Runtime, theirs, what string) string {
	if theirs == "" || theirs == string(mine) {
		return ""
	}
	return fmt.Sprintf("this node runs the %s runtime (%s=%s), and %s is for the %s runtime; it is placed on a node of that runtime, so the control plane placed it wrongly or the node's runtime changed", mine, nodeapi.LabelRuntime, mine, what, theirs)
}
