package cubes

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/ionos"
)

// Discovered is what a profile's names resolve to in one data center's inventory: ids, and the
// private LAN's id as IONOS has it.
type Discovered struct {
	DatacenterID              string
	TemplateID                string
	PrivateLANID              int
	NATGatewayID              string
	ApplicationLoadBalancerID string
	TargetGroupIDs            []string // in the profile's order
	ControlPlaneTargetGroupID string   // control_plane.target_group's; "" when the profile names none
	WorkerSecurityGroupID     string
	BaselineServerIDs         map[string]string // Cube name -> server id
	RuntimeSourceServerID     string
}

// DiscoverDatacenter finds the data center named p.Datacenter among dcs (Client.Datacenters).
// Errors: INVALID_INPUT at "datacenter" when no data center or several carry the name, listing
// what was found.
func DiscoverDatacenter(p *Profile, dcs []ionos.Datacenter) (string, error) {
	var ids, all []string
	for _, dc := range dcs {
		all = append(all, dc.Name)
		if dc.Name == p.Datacenter {
			ids = append(ids, dc.ID)
		}
	}
	if msg := oneNamed("data center", p.Datacenter, ids, all); msg != "" {
		return "", cubefleet.Invalid("datacenter", "%s", msg)
	}
	return ids[0], nil
}

// Discover resolves every IONOS name of p in inv (the data center DiscoverDatacenter found):
// the CUBE template, the private LAN (whose id must be p.PrivateLANID), the NAT gateway, the
// application load balancer, the target groups, the worker security group and the baseline
// Cubes. Every problem is reported at once: an INVALID_INPUT *cubefleet.Error whose
// Details["errors"] names the profile's key with what it found (none, or several, listed).
func Discover(p *Profile, inv *ionos.Inventory) (*Discovered, error) {
	var errs []cubefleet.FieldError
	bad := func(path, msg string) {
		if msg != "" {
			errs = append(errs, cubefleet.FieldError{Path: path, Message: msg})
		}
	}
	d := &Discovered{DatacenterID: inv.Datacenter.ID, BaselineServerIDs: map[string]string{}}
	find := func(path, kind, name string, n int, nameOf func(int) string, idOf func(int) string) string {
		var ids, all []string
		for i := range n {
			all = append(all, nameOf(i))
			if nameOf(i) == name {
				ids = append(ids, idOf(i))
			}
		}
		msg := oneNamed(kind, name, ids, all)
		bad(path, msg)
		if msg != "" {
			return ""
		}
		return ids[0]
	}
	d.TemplateID = find("template", "CUBE template", p.Template, len(inv.CubeTemplates),
		func(i int) string { return inv.CubeTemplates[i].Name }, func(i int) string { return inv.CubeTemplates[i].ID })
	if lan := find("private_lan", "LAN", p.PrivateLAN, len(inv.LANs),
		func(i int) string { return inv.LANs[i].Name }, func(i int) string { return fmt.Sprint(inv.LANs[i].ID) }); lan != "" {
		fmt.Sscan(lan, &d.PrivateLANID)
		if d.PrivateLANID != p.PrivateLANID {
			bad("private_lan_id", fmt.Sprintf("LAN %q has id %d, not %d: correct private_lan_id or private_lan", p.PrivateLAN, d.PrivateLANID, p.PrivateLANID))
		}
	}
	d.NATGatewayID = find("nat_gateway", "NAT gateway", p.NATGateway, len(inv.NATGateways),
		func(i int) string { return inv.NATGateways[i].Name }, func(i int) string { return inv.NATGateways[i].ID })
	d.ApplicationLoadBalancerID = find("application_load_balancer", "application load balancer", p.ApplicationLoadBalancer, len(inv.ApplicationLoadBalancers),
		func(i int) string { return inv.ApplicationLoadBalancers[i].Name }, func(i int) string { return inv.ApplicationLoadBalancers[i].ID })
	for i, tg := range p.TargetGroups {
		d.TargetGroupIDs = append(d.TargetGroupIDs, find(fmt.Sprintf("target_groups[%d]", i), "target group", tg, len(inv.TargetGroups),
			func(i int) string { return inv.TargetGroups[i].Name }, func(i int) string { return inv.TargetGroups[i].ID }))
	}
	if name := p.ControlPlane.TargetGroup; name != "" {
		d.ControlPlaneTargetGroupID = find("control_plane.target_group", "target group", name, len(inv.TargetGroups),
			func(i int) string { return inv.TargetGroups[i].Name }, func(i int) string { return inv.TargetGroups[i].ID })
	}
	d.WorkerSecurityGroupID = find("worker_security_group", "security group", p.WorkerSecurityGroup, len(inv.SecurityGroups),
		func(i int) string { return inv.SecurityGroups[i].Name }, func(i int) string { return inv.SecurityGroups[i].ID })
	for i, c := range p.BaselineCubes {
		if id := find(fmt.Sprintf("baseline_cubes[%d]", i), "server", c, len(inv.Servers),
			func(i int) string { return inv.Servers[i].Name }, func(i int) string { return inv.Servers[i].ID }); id != "" {
			d.BaselineServerIDs[c] = id
		}
	}
	d.RuntimeSourceServerID = d.BaselineServerIDs[p.RuntimeSourceCube]
	if len(errs) > 0 {
		return nil, cubefleet.InvalidAll(errs)
	}
	return d, nil
}

// oneNamed says what is wrong when ids, the objects of kind named name, is not exactly one
// ("" when it is), listing all, the names found.
func oneNamed(kind, name string, ids, all []string) string {
	switch len(ids) {
	case 1:
		return ""
	case 0:
		found := "none"
		if len(all) > 0 {
			slices.Sort(all)
			found = strings.Join(quoteAll(slices.Compact(all)), ", ")
		}
		return fmt.Sprintf("no %s is named %q (found: %s)", kind, name, found)
	}
	return fmt.Sprintf("%d %ss are named %q (%s): give each a unique name", len(ids), kind, name, strings.Join(ids, ", "))
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
