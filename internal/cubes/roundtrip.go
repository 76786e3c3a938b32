package cubes

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cubefleet/cubefleet/internal/ionos"
)

// The roundtrip (docs/ionos.md, "Roundtrip"): one Cube added to the baseline and removed
// again. RoundtripPlan says what `roundtrip up` would do; CheckFleet is `roundtrip check`'s
// read-only checks of the cloud side and the control plane's membership.

// RoundtripPlan is what `roundtrip up` would do now: the scale plan to one Cube more than the
// fleet holds, the slot the new Cube takes (-1 when refused), its name (NamePattern:
// <cube_name_prefix><run>-<slot>, the run id chosen when up starts and journaled before the
// create) and the calls it makes, in order (Calls: "IONOS POST /datacenters/{id}/servers",
// "control plane nodes.joinTokens.create", ...).
type RoundtripPlan struct {
	*ScalePlan
	Slot        int      `json:"slot"`
	NamePattern string   `json:"namePattern,omitempty"`
	PrivateIP   string   `json:"privateIp,omitempty"`
	Calls       []string `json:"calls"`
}

// PlanRoundtrip plans `roundtrip up` for profile p on the fleet as it is: every rule of
// PlanScale for one Cube more, and the fleet holding exactly the profile's baseline Cubes
// (found.BaselineServerIDs) in its slots (RuleIdentityMismatch for a baseline Cube in no slot,
// or a slot's Cube beyond the baseline: an earlier run not finished, see roundtrip status).
func PlanRoundtrip(cfg *Config, p *Profile, found *Discovered, sp *ScalePlan) *RoundtripPlan {
	rp := &RoundtripPlan{ScalePlan: sp, Slot: -1, Calls: []string{}}
	baseline := map[string]string{} // server id -> name
	for name, id := range found.BaselineServerIDs {
		baseline[id] = name
	}
	inSlots := map[string]bool{}
	for i, s := range cfg.Slots {
		if s.ServerID == "" {
			continue
		}
		inSlots[s.ServerID] = true
		if _, ok := baseline[s.ServerID]; !ok {
			rp.Problems = append(rp.Problems, Problem{Rule: RuleIdentityMismatch, SlotIndex: i, Slot: s.Name, ServerID: s.ServerID,
				Message: fmt.Sprintf("server %s is not one of baseline_cubes: an earlier roundtrip may not have finished (roundtrip status); the roundtrip adds one Cube to the baseline", s.ServerID)})
		}
	}
	for _, name := range p.BaselineCubes {
		if id := found.BaselineServerIDs[name]; !inSlots[id] {
			rp.Problems = append(rp.Problems, Problem{Rule: RuleIdentityMismatch, SlotIndex: -1, ServerID: id,
				Message: fmt.Sprintf("baseline Cube %q (%s) holds no slot of the configuration: give it its slot's server_id", name, id)})
		}
	}
	rp.Accepted = len(rp.Problems) == 0
	if !rp.Accepted {
		rp.Steps = []Step{}
		return rp
	}
	for _, s := range sp.Slots {
		if s.Action == Create {
			rp.Slot, rp.PrivateIP = s.Index, s.PrivateIP
			rp.NamePattern = fmt.Sprintf("%s<run>-%d", p.CubeNamePrefix, s.Index)
		}
	}
	dc := "/datacenters/" + found.DatacenterID
	cp := "control plane "
	rp.Calls = []string{
		cp + "nodes.joinTokens.create (pool " + p.ControlPlane.Pool + ", one use, from " + rp.PrivateIP + ")",
		"IONOS POST " + dc + "/servers (CUBE, template " + found.TemplateID + ", a DAS volume of image " + p.Image + fmt.Sprintf(", a NIC on LAN %d with %s, cloud-init starting cubefleet agent)", found.PrivateLANID, rp.PrivateIP),
		"IONOS GET /requests/{request}/status until DONE, and GET " + dc + "/servers/{server} until RUNNING",
		"IONOS PUT " + dc + "/servers/{server}/securitygroups (the union with " + found.WorkerSecurityGroupID + ")",
		"SSH " + p.GPUWireGuard.Host + ": add the WireGuard peer to " + p.GPUWireGuard.Interface + " and /etc/wireguard/" + p.GPUWireGuard.Interface + ".conf",
		cp + "nodes.get " + rp.PrivateIP + " until Ready in pool " + p.ControlPlane.Pool,
		cp + "sandboxes.create (a canary pinned to " + rp.PrivateIP + ") and sandboxes.get until it returns",
	}
	for _, tg := range found.TargetGroupIDs {
		rp.Calls = append(rp.Calls, "IONOS PUT /targetgroups/"+tg+" (its targets and "+rp.PrivateIP+")")
	}
	return rp
}

// Check is one read-only check of `roundtrip check`: its name, whether it passed, and what it
// found (why, when it failed).
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// CheckFleet checks the cloud side and the control plane's membership of the fleet as it is:
// the planning rules (PlanSlots at the current size, with opts's Now and MaxInventoryAge), per
// Cube the worker security group attached and its origin (private IP, port) a healthy target
// (weight above 0, health check on, not in maintenance) of every target group, the NAT
// gateway on the private LAN, the load balancer on the private LAN forwarding to every target
// group, and every Cube registered and Ready in the pool and uncordoned, with nothing
// registered there that the fleet lacks. Checks come in that order.
func CheckFleet(cfg *Config, inv *ionos.Inventory, found *Discovered, members []Member, port int, opts PlanOptions) []Check {
	var out []Check
	add := func(name string, ok bool, format string, args ...any) {
		out = append(out, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
	var cubes []Slot
	for _, s := range cfg.Slots {
		if s.ServerID != "" {
			cubes = append(cubes, s)
		}
	}
	opts.Target = len(cubes)
	plan := PlanSlots(cfg, inv, opts)
	if plan.Accepted {
		add("fleet plan", true, "%d Cubes hold their slots, running; no pending request", len(cubes))
	} else {
		var msgs []string
		for _, pr := range plan.Problems {
			msgs = append(msgs, string(pr.Rule)+": "+pr.Message)
		}
		add("fleet plan", false, "%s", strings.Join(msgs, "; "))
	}

	servers := map[string]*ionos.Server{}
	for i := range inv.Servers {
		servers[inv.Servers[i].ID] = &inv.Servers[i]
	}
	groups := map[string]*ionos.TargetGroup{}
	for i := range inv.TargetGroups {
		groups[inv.TargetGroups[i].ID] = &inv.TargetGroups[i]
	}
	for _, s := range cubes {
		name := "security group " + s.Name
		switch srv := servers[s.ServerID]; {
		case srv == nil:
			add(name, false, "server %s is not in the data center", s.ServerID)
		case slices.Contains(srv.SecurityGroupIDs, found.WorkerSecurityGroupID):
			add(name, true, "worker group %s attached", found.WorkerSecurityGroupID)
		default:
			add(name, false, "worker group %s not attached (attached: %s)", found.WorkerSecurityGroupID, orNone(srv.SecurityGroupIDs))
		}
		for _, id := range found.TargetGroupIDs {
			name := "target " + s.Name + " in " + groups[id].Name
			var t *ionos.Target
			for i, x := range groups[id].Targets {
				if x.IP == s.PrivateIP && x.Port == port {
					t = &groups[id].Targets[i]
				}
			}
			switch {
			case t == nil:
				add(name, false, "%s:%d is not a target of group %s", s.PrivateIP, port, id)
			case t.Weight == 0 || !t.HealthCheckEnabled || t.MaintenanceEnabled:
				add(name, false, "%s:%d has weight %d, health check %v, maintenance %v: want weight above 0, health check on, no maintenance", s.PrivateIP, port, t.Weight, t.HealthCheckEnabled, t.MaintenanceEnabled)
			default:
				add(name, true, "%s:%d, weight %d, health checked", s.PrivateIP, port, t.Weight)
			}
		}
	}

	for _, ng := range inv.NATGateways {
		if ng.ID != found.NATGatewayID {
			continue
		}
		ok := slices.ContainsFunc(ng.LANs, func(l ionos.GatewayLAN) bool { return l.LANID == found.PrivateLANID })
		add("NAT gateway "+ng.Name, ok, "private LAN %d %s (public %s)", found.PrivateLANID, map[bool]string{true: "routed", false: "NOT routed: add it to the gateway's LANs"}[ok], strings.Join(ng.PublicIPs, ", "))
	}
	for _, alb := range inv.ApplicationLoadBalancers {
		if alb.ID != found.ApplicationLoadBalancerID {
			continue
		}
		add("load balancer "+alb.Name+" target LAN", alb.TargetLANID == found.PrivateLANID, "target LAN %d, the private LAN is %d", alb.TargetLANID, found.PrivateLANID)
		for _, id := range found.TargetGroupIDs {
			var rules []string
			for _, fr := range alb.ForwardingRules {
				for _, hr := range fr.HTTPRules {
					if hr.Type == "FORWARD" && hr.TargetGroupID == id {
						rules = append(rules, fmt.Sprintf("%s/%s (%s:%d)", fr.Name, hr.Name, fr.ListenerIP, fr.ListenerPort))
					}
				}
			}
			if len(rules) > 0 {
				add("load balancer "+alb.Name+" forwards to "+groups[id].Name, true, "%s", strings.Join(rules, ", "))
			} else {
				add("load balancer "+alb.Name+" forwards to "+groups[id].Name, false, "no FORWARD rule to target group %s", id)
			}
		}
	}

	byIP := map[string]*Member{}
	for i := range members {
		byIP[members[i].IP] = &members[i]
	}
	slotIPs := map[string]bool{}
	for _, s := range cubes {
		slotIPs[s.PrivateIP] = true
		name := "member " + s.Name
		switch m := byIP[s.PrivateIP]; {
		case m == nil:
			add(name, false, "no node with IP %s is registered in the pool", s.PrivateIP)
		case m.State != "Ready" || m.Cordoned:
			add(name, false, "node %s is %s%s", m.ID, m.State, map[bool]string{true: ", cordoned", false: ""}[m.Cordoned])
		default:
			add(name, true, "node %s Ready, %d sandboxes", m.ID, m.Running)
		}
	}
	for _, m := range members {
		if !slotIPs[m.IP] {
			add("member "+m.ID, false, "node %s (IP %s) is registered in the pool, but no Cube of the fleet has that address", m.ID, m.IP)
		}
	}
	return out
}

// orNone joins ids, or says "none".
func orNone(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}
