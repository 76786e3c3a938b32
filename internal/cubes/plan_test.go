package cubes_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/ionos"
)

// now is the planning time of every test.
var now = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func id(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

// Identities of the base world.
const (
	dcID       = "00000000-0000-4000-8000-000000000001"
	defaultSG  = "00000000-0000-4000-8000-000000000002"
	workerSG   = "00000000-0000-4000-8000-000000000003"
	protectedP = "00000000-0000-4000-8000-000000000009"
)

func srvID(i int) string { return id(100 + i) }

func cube(i int, name, ip string) ionos.Server {
	return ionos.Server{ID: srvID(i), Name: name, Type: "CUBE", Cores: 4, RAMMiB: 8192, VMState: "RUNNING", State: "AVAILABLE",
		TemplateID: id(52), AvailabilityZone: "AUTO", SecurityGroupIDs: []string{workerSG},
		NICs: []ionos.NIC{{ID: id(200 + i), LANID: 2, IPs: []string{ip}, State: "AVAILABLE"}}}
}

// base returns a configuration of five slots (three held by running Basic Cube M servers,
// two empty) and the matching inventory: private LAN 2, public LAN 1, isolated private LAN
// 3, the default and worker security groups, a protected coordinator and the Basic Cube
// templates.
func base() (*cubes.Config, *ionos.Inventory) {
	cfg := &cubes.Config{
		DatacenterID: dcID, PrivateLANID: 2, MinimumCores: 4, MinimumRAMMiB: 8192, MinimumCubes: 1,
		ProtectedServerIDs: []string{protectedP}, WorkerSecurityGroupIDs: []string{workerSG},
		Slots: []cubes.Slot{
			{Name: "cube-0", PrivateIP: "10.7.0.11", ServerID: srvID(0)},
			{Name: "cube-1", PrivateIP: "10.7.0.12", ServerID: srvID(1)},
			{Name: "cube-2", PrivateIP: "10.7.0.13", ServerID: srvID(2)},
			{Name: "cube-3", PrivateIP: "10.7.0.14"},
			{Name: "cube-4", PrivateIP: "10.7.0.15"},
		},
	}
	coordinator := ionos.Server{ID: protectedP, Name: "coordinator", Type: "ENTERPRISE", Cores: 2, RAMMiB: 4096, VMState: "RUNNING",
		State: "AVAILABLE", SecurityGroupIDs: []string{defaultSG},
		NICs: []ionos.NIC{{ID: id(300), LANID: 2, IPs: []string{"10.7.0.5"}, State: "AVAILABLE"}, {ID: id(301), LANID: 1, IPs: []string{"203.0.113.7"}, State: "AVAILABLE"}}}
	inv := &ionos.Inventory{
		Schema: ionos.InventorySchema, FetchedAt: now.Add(-time.Minute).UnixMilli(), Consistent: true,
		Datacenter: ionos.Datacenter{ID: dcID, Name: "fleet", Location: "de/fra", Version: 9, VersionAtEnd: 9, State: "AVAILABLE", DefaultSecurityGroupID: defaultSG},
		Servers:    []ionos.Server{cube(0, "cube-0", "10.7.0.11"), cube(1, "cube-1", "10.7.0.12"), cube(2, "cube-2", "10.7.0.13"), coordinator},
		LANs: []ionos.LAN{{ID: 1, Name: "public", Public: true, State: "AVAILABLE"}, {ID: 2, Name: "workers", IPv4CIDR: "10.7.0.0/16", State: "AVAILABLE"},
			{ID: 3, Name: "isolated", IPv4CIDR: "10.9.0.0/24", State: "AVAILABLE"}},
		SecurityGroups: []ionos.SecurityGroup{{ID: defaultSG, Name: "Default", Default: true, State: "AVAILABLE"}, {ID: workerSG, Name: "workers", State: "AVAILABLE"}},
		NATGateways: []ionos.NATGateway{{ID: id(400), Name: "nat", PublicIPs: []string{"203.0.113.5"}, State: "AVAILABLE",
			LANs: []ionos.GatewayLAN{{LANID: 2, GatewayIPs: []string{"10.7.0.1/16"}}}}},
		ApplicationLoadBalancers: []ionos.ApplicationLoadBalancer{{ID: id(500), Name: "alb", ListenerLANID: 1, TargetLANID: 2,
			IPs: []string{"203.0.113.9"}, PrivateIPs: []string{"10.7.0.2/16"}, State: "AVAILABLE",
			ForwardingRules: []ionos.ForwardingRule{{ID: id(501), Name: "https", Protocol: "HTTP", ListenerIP: "203.0.113.9", ListenerPort: 443,
				State: "AVAILABLE", HTTPRules: []ionos.HTTPRule{{Name: "fwd", Type: "FORWARD", TargetGroupID: id(600)}}}}}},
		TargetGroups: []ionos.TargetGroup{{ID: id(600), Name: "cubes", Algorithm: "ROUND_ROBIN", Protocol: "HTTP", State: "AVAILABLE",
			Targets: []ionos.Target{{IP: "10.7.0.11", Port: 8080, Weight: 1}}}},
		CubeTemplates: []ionos.Template{
			{ID: id(53), Name: "Basic Cube L", Cores: 8, RAMMiB: 16384, StorageGB: 480},
			{ID: id(50), Name: "Basic Cube XS", Cores: 1, RAMMiB: 2048, StorageGB: 60},
			{ID: id(52), Name: "Basic Cube M", Cores: 4, RAMMiB: 8192, StorageGB: 240},
			{ID: id(51), Name: "Basic Cube S", Cores: 2, RAMMiB: 4096, StorageGB: 120},
			{ID: id(55), Name: "Memory Cube M", Cores: 4, RAMMiB: 16384, StorageGB: 240},
		},
		PendingRequests: []ionos.PendingRequest{},
	}
	return cfg, inv
}

// actions renders a plan's decisions as letters: R retain, C create, X remove, E empty.
func actions(p *cubes.Plan) string {
	var b strings.Builder
	for _, s := range p.Slots {
		b.WriteByte(map[cubes.Action]byte{cubes.Retain: 'R', cubes.Create: 'C', cubes.Remove: 'X', cubes.Empty: 'E'}[s.Action])
	}
	return b.String()
}

func rules(p *cubes.Plan) []cubes.Rule {
	var out []cubes.Rule
	for _, pr := range p.Problems {
		if !slices.Contains(out, pr.Rule) {
			out = append(out, pr.Rule)
		}
	}
	slices.Sort(out)
	return out
}

func TestPlanTable(t *testing.T) {
	type world struct {
		cfg *cubes.Config
		inv *ionos.Inventory
	}
	server := func(w world, id string) *ionos.Server {
		for i := range w.inv.Servers {
			if w.inv.Servers[i].ID == id {
				return &w.inv.Servers[i]
			}
		}
		panic("no server " + id)
	}
	cases := []struct {
		name    string
		edit    func(w world)
		target  int
		maxAge  time.Duration
		actions string
		rules   []cubes.Rule // nil: accepted
		cap     *cubes.Capacity
	}{
		// Accepted layouts.
		{name: "keep the three Cubes", target: 3, actions: "RRREE", cap: &cubes.Capacity{Cubes: 3, Cores: 12, RAMMiB: 24576, WorkerSlots: 9}},
		{name: "grow to every slot", target: 5, actions: "RRRCC", cap: &cubes.Capacity{Cubes: 5, Cores: 20, RAMMiB: 40960, WorkerSlots: 15}},
		{name: "shrink to one: highest slots removed", target: 1, actions: "RXXEE", cap: &cubes.Capacity{Cubes: 1, Cores: 4, RAMMiB: 8192, WorkerSlots: 3}},
		{name: "shrink to two", target: 2, actions: "RRXEE", cap: &cubes.Capacity{Cubes: 2, Cores: 8, RAMMiB: 16384, WorkerSlots: 6}},
		{name: "a gap is kept, not refilled", target: 2, actions: "REREE", edit: func(w world) {
			w.cfg.Slots[1].ServerID = ""
			w.inv.Servers = slices.Delete(w.inv.Servers, 1, 2)
		}, cap: &cubes.Capacity{Cubes: 2, Cores: 8, RAMMiB: 16384, WorkerSlots: 6}},
		{name: "growth fills the lowest empty slots", target: 4, actions: "RCRCE", edit: func(w world) {
			w.cfg.Slots[1].ServerID = ""
			w.inv.Servers = slices.Delete(w.inv.Servers, 1, 2)
		}, cap: &cubes.Capacity{Cubes: 4, Cores: 16, RAMMiB: 32768, WorkerSlots: 12}},
		{name: "no required security groups", target: 3, actions: "RRREE", edit: func(w world) {
			w.cfg.WorkerSecurityGroupIDs = nil
			for i := range w.inv.Servers {
				w.inv.Servers[i].SecurityGroupIDs = []string{defaultSG}
			}
		}, cap: &cubes.Capacity{Cubes: 3, Cores: 12, RAMMiB: 24576, WorkerSlots: 9}},
		{name: "an address on an isolated LAN claims nothing", target: 4, actions: "RRRCE", edit: func(w world) {
			w.inv.Servers = append(w.inv.Servers, ionos.Server{ID: id(900), Name: "db", Type: "ENTERPRISE", VMState: "RUNNING", State: "AVAILABLE",
				NICs: []ionos.NIC{{ID: id(901), LANID: 3, IPs: []string{"10.7.0.14"}, State: "AVAILABLE"}}})
		}, cap: &cubes.Capacity{Cubes: 4, Cores: 16, RAMMiB: 32768, WorkerSlots: 12}},
		{name: "target equal to minimum_cubes", target: 3, actions: "RRREE", edit: func(w world) { w.cfg.MinimumCubes = 3 },
			cap: &cubes.Capacity{Cubes: 3, Cores: 12, RAMMiB: 24576, WorkerSlots: 9}},
		{name: "a longer max inventory age accepts an older inventory", target: 3, maxAge: 30 * time.Minute, actions: "RRREE",
			edit: func(w world) { w.inv.FetchedAt = now.Add(-20 * time.Minute).UnixMilli() }, cap: &cubes.Capacity{Cubes: 3, Cores: 12, RAMMiB: 24576, WorkerSlots: 9}},
		{name: "a suspended Cube beyond the target may be removed", target: 2, actions: "RRXEE",
			edit: func(w world) { server(w, srvID(2)).VMState = "SUSPENDED" }, cap: &cubes.Capacity{Cubes: 2, Cores: 8, RAMMiB: 16384, WorkerSlots: 6}},
		{name: "a smaller minimum picks a smaller template", target: 4, actions: "RRRCE",
			edit: func(w world) { w.cfg.MinimumCores, w.cfg.MinimumRAMMiB = 2, 4096 }, cap: &cubes.Capacity{Cubes: 4, Cores: 14, RAMMiB: 28672, WorkerSlots: 12}},

		// Rejections, one rule at a time.
		{name: "target below minimum_cubes", target: 0, actions: "XXXEE", rules: []cubes.Rule{cubes.RuleTargetOutOfRange}},
		{name: "target above the slots", target: 6, actions: "RRRCC", rules: []cubes.Rule{cubes.RuleTargetOutOfRange}},
		{name: "data center mismatch", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleDatacenterMismatch},
			edit: func(w world) { w.cfg.DatacenterID = id(7) }},
		{name: "stale inventory", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleStaleInventory},
			edit: func(w world) { w.inv.FetchedAt = now.Add(-16 * time.Minute).UnixMilli() }},
		{name: "inventory from the future", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleStaleInventory},
			edit: func(w world) { w.inv.FetchedAt = now.Add(10 * time.Minute).UnixMilli() }},
		{name: "inventory read while the data center changed", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleStaleInventory},
			edit: func(w world) { w.inv.Consistent, w.inv.Datacenter.VersionAtEnd = false, 10 }},
		{name: "duplicate server id", target: 3, actions: "RRRXE", rules: []cubes.Rule{cubes.RuleDuplicateIdentity, cubes.RuleIdentityMismatch},
			edit: func(w world) { w.cfg.Slots[3].ServerID = srvID(0) }},
		{name: "duplicate private IP", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleDuplicateIdentity, cubes.RuleOccupiedAddress},
			edit: func(w world) { w.cfg.Slots[4].PrivateIP = "10.7.0.11" }},
		{name: "duplicate name", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleDuplicateIdentity, cubes.RuleIdentityMismatch},
			edit: func(w world) { w.cfg.Slots[4].Name = "cube-1" }},
		{name: "protected server as a member", target: 3, actions: "RRRXE", rules: []cubes.Rule{cubes.RuleNotCube, cubes.RuleProtectedMember},
			edit: func(w world) { w.cfg.Slots[3].ServerID = protectedP }},
		{name: "slot's server missing from the data center", target: 3, actions: "RRRXE", rules: []cubes.Rule{cubes.RuleMissingResource},
			edit: func(w world) { w.cfg.Slots[3].ServerID = id(777) }},
		{name: "private LAN missing", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleIdentityMismatch, cubes.RuleMissingResource},
			edit: func(w world) { w.cfg.PrivateLANID = 7 }},
		{name: "private LAN is public", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleIdentityMismatch, cubes.RuleMissingResource},
			edit: func(w world) { w.cfg.PrivateLANID = 1 }},
		{name: "required security group missing", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleMissingResource},
			edit: func(w world) { w.cfg.WorkerSecurityGroupIDs = append(w.cfg.WorkerSecurityGroupIDs, id(8)) }},
		{name: "default group named as worker group", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleSecurityGroupMissing},
			edit: func(w world) { w.cfg.WorkerSecurityGroupIDs = []string{defaultSG} }},
		{name: "non-Cube server in a slot", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleNotCube},
			edit: func(w world) { server(w, srvID(1)).Type = "ENTERPRISE" }},
		{name: "server renamed", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleIdentityMismatch},
			edit: func(w world) { server(w, srvID(1)).Name = "other" }},
		{name: "server holds another address", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleIdentityMismatch},
			edit: func(w world) { server(w, srvID(1)).NICs[0].IPs = []string{"10.7.0.99"} }},
		{name: "server holds the address only on another LAN", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleIdentityMismatch},
			edit: func(w world) { server(w, srvID(1)).NICs[0].LANID = 3 }},
		{name: "a name alone claims an empty slot", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleIdentityMismatch},
			edit: func(w world) {
				w.inv.Servers = append(w.inv.Servers, cube(9, "cube-3", "10.9.0.9"))
				w.inv.Servers[len(w.inv.Servers)-1].NICs[0].LANID = 3
			}},
		{name: "address held by another server", target: 4, actions: "RRRCE", rules: []cubes.Rule{cubes.RuleOccupiedAddress},
			edit: func(w world) { w.inv.Servers = append(w.inv.Servers, cube(9, "stray", "10.7.0.14")) }},
		{name: "address held by the protected coordinator", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleOccupiedAddress},
			edit: func(w world) { w.cfg.Slots[4].PrivateIP = "10.7.0.5" }},
		{name: "address held by the NAT gateway", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleOccupiedAddress},
			edit: func(w world) { w.cfg.Slots[4].PrivateIP = "10.7.0.1" }},
		{name: "address held by the load balancer", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleOccupiedAddress},
			edit: func(w world) { w.cfg.Slots[3].PrivateIP = "10.7.0.2" }},
		{name: "server BUSY", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RulePendingOperation},
			edit: func(w world) { server(w, srvID(0)).State = "BUSY" }},
		{name: "data center BUSY", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RulePendingOperation},
			edit: func(w world) { w.inv.Datacenter.State = "BUSY" }},
		{name: "LAN BUSY", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RulePendingOperation},
			edit: func(w world) { w.inv.LANs[1].State = "BUSY" }},
		{name: "target group BUSY", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RulePendingOperation},
			edit: func(w world) { w.inv.TargetGroups[0].State = "BUSY" }},
		{name: "queued request", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RulePendingOperation},
			edit: func(w world) {
				w.inv.PendingRequests = []ionos.PendingRequest{{ID: id(700), Method: "POST", URL: "https://api.ionos.com/cloudapi/v6/datacenters/" + dcID + "/servers/" + srvID(1) + "/suspend",
					Status: "QUEUED", Targets: []ionos.RequestTarget{{ID: srvID(1), Type: "server"}}}}
			}},
		{name: "retained Cube suspended", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleNotRunning},
			edit: func(w world) { server(w, srvID(1)).VMState = "SUSPENDED" }},
		{name: "worker group not attached", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleSecurityGroupMissing},
			edit: func(w world) { server(w, srvID(2)).SecurityGroupIDs = []string{} }},
		{name: "only the default group attached", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleSecurityGroupMissing},
			edit: func(w world) { server(w, srvID(2)).SecurityGroupIDs = []string{defaultSG} }},
		{name: "retained Cube under the minimum", target: 3, actions: "RRREE", rules: []cubes.Rule{cubes.RuleUnderMinimum},
			edit: func(w world) { server(w, srvID(1)).Cores, server(w, srvID(1)).RAMMiB = 2, 4096 }},
		{name: "no template meets the minimums", target: 5, actions: "RRRCC", rules: []cubes.Rule{cubes.RuleUnderMinimum},
			edit: func(w world) {
				w.inv.CubeTemplates = slices.DeleteFunc(w.inv.CubeTemplates, func(t ionos.Template) bool { return t.Cores >= 4 })
			}},
		{name: "every problem at once", target: 3, actions: "RRRXE",
			rules: []cubes.Rule{cubes.RuleDuplicateIdentity, cubes.RuleIdentityMismatch, cubes.RuleNotRunning, cubes.RulePendingOperation, cubes.RuleStaleInventory},
			edit: func(w world) {
				w.inv.FetchedAt = now.Add(-time.Hour).UnixMilli()
				w.cfg.Slots[3].ServerID = srvID(0)
				server(w, srvID(1)).VMState = "SHUTOFF"
				server(w, srvID(2)).State = "BUSY"
			}},
	}
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, inv := base()
			if tc.edit != nil {
				tc.edit(world{cfg, inv})
			}
			plan := cubes.PlanSlots(cfg, inv, cubes.PlanOptions{Target: tc.target, Now: now, MaxInventoryAge: tc.maxAge})
			if got := actions(plan); got != tc.actions {
				t.Errorf("actions %s, want %s", got, tc.actions)
			}
			if got := rules(plan); !slices.Equal(got, tc.rules) {
				t.Errorf("rules %v, want %v\n%s", got, tc.rules, problems(plan))
			}
			if plan.Accepted != (tc.rules == nil) {
				t.Errorf("accepted %v with %d problems", plan.Accepted, len(plan.Problems))
			}
			if tc.cap != nil && (plan.Capacity == nil || *plan.Capacity != *tc.cap) {
				t.Errorf("capacity %+v, want %+v (%s)", plan.Capacity, *tc.cap, plan.CapacityNote)
			}
			for _, pr := range plan.Problems {
				if pr.Slot == "" && pr.ServerID == "" && pr.SlotIndex >= 0 {
					t.Errorf("problem names neither slot nor server: %+v", pr)
				}
			}
		})
	}
}

func problems(p *cubes.Plan) string {
	var b strings.Builder
	for _, pr := range p.Problems {
		fmt.Fprintf(&b, "  [%s] slot %d %s server %s: %s\n", pr.Rule, pr.SlotIndex, pr.Slot, pr.ServerID, pr.Message)
	}
	return b.String()
}

func TestPlanDetails(t *testing.T) {
	cfg, inv := base()
	plan := cubes.PlanSlots(cfg, inv, cubes.PlanOptions{Target: 4, Now: now})
	if !plan.Accepted {
		t.Fatalf("rejected:\n%s", problems(plan))
	}
	if plan.Template == nil || plan.Template.Name != "Basic Cube M" {
		t.Errorf("template %+v, want the smallest meeting 4 cores and 8192 MiB: Basic Cube M", plan.Template)
	}
	if s := plan.Slots[0]; s.Status != "running; application readiness not verified" {
		t.Errorf("retained status %q", s.Status)
	}
	if s := plan.Slots[3]; s.Action != cubes.Create || !strings.Contains(s.Reason, "Basic Cube M") || s.WorkerSlots != 3 {
		t.Errorf("created slot %+v", s)
	}
	if plan.InventoryAge != time.Minute.Milliseconds() {
		t.Errorf("inventory age %d ms", plan.InventoryAge)
	}
	// Problems name the slot and the server.
	server := &inv.Servers[1]
	server.VMState = "SUSPENDED"
	plan = cubes.PlanSlots(cfg, inv, cubes.PlanOptions{Target: 4, Now: now})
	if len(plan.Problems) != 1 || plan.Problems[0].Slot != "cube-1" || plan.Problems[0].SlotIndex != 1 || plan.Problems[0].ServerID != srvID(1) {
		t.Errorf("problem %+v does not name slot cube-1 and its server", plan.Problems)
	}
	// Under the minimum, capacity is not reported.
	server.VMState, server.RAMMiB = "RUNNING", 4096
	plan = cubes.PlanSlots(cfg, inv, cubes.PlanOptions{Target: 4, Now: now})
	if plan.Capacity != nil || !strings.Contains(plan.CapacityNote, "not reported") {
		t.Errorf("capacity %+v reported with a Cube under the minimum", plan.Capacity)
	}
}

// TestPlanGrownCubeNames: with the profile's cube_name_prefix, a slot's Cube may carry the
// name a growth run gave it for that slot (<prefix><run>-<slot>) when it holds the slot's
// private IP; any other name, another slot's index, a run id not of the journal's form, an
// address not the slot's, or no prefix is an identity mismatch.
func TestPlanGrownCubeNames(t *testing.T) {
	for _, tc := range []struct {
		name, ip, prefix string
		ok               bool
	}{
		{name: "cube-2", ip: "10.7.0.13", ok: true},
		{name: "cube-2", ip: "10.7.0.13", prefix: "cube-", ok: true},
		{name: "cube-rtpe840-2", ip: "10.7.0.13", prefix: "cube-", ok: true},
		{name: "cube-r0-2", ip: "10.7.0.13", prefix: "cube-", ok: true},
		{name: "cube-rtpe840-2", ip: "10.7.0.13"},
		{name: "cube-rtpe840-3", ip: "10.7.0.13", prefix: "cube-"},
		{name: "cube-rtpe840-2", ip: "10.7.0.99", prefix: "cube-"},
		{name: "cube-xtpe840-2", ip: "10.7.0.13", prefix: "cube-"},
		{name: "cube-rTPE-2", ip: "10.7.0.13", prefix: "cube-"},
		{name: "cube-r-2", ip: "10.7.0.13", prefix: "cube-"},
		{name: "other-rtpe840-2", ip: "10.7.0.13", prefix: "cube-"},
		{name: "cube-rtpe840-2x", ip: "10.7.0.13", prefix: "cube-"},
	} {
		cfg, inv := base()
		inv.Servers[2].Name, inv.Servers[2].NICs[0].IPs = tc.name, []string{tc.ip}
		plan := cubes.PlanSlots(cfg, inv, cubes.PlanOptions{Target: 3, Now: now, CubeNamePrefix: tc.prefix})
		mismatch := slices.ContainsFunc(plan.Problems, func(p cubes.Problem) bool {
			return p.Rule == cubes.RuleIdentityMismatch && p.SlotIndex == 2 && strings.Contains(p.Message, "is named")
		})
		if mismatch == tc.ok {
			t.Errorf("%s at %s, prefix %q: name accepted %v, want %v\n%s", tc.name, tc.ip, tc.prefix, !mismatch, tc.ok, problems(plan))
		}
		if tc.ok && !plan.Accepted {
			t.Errorf("%s: rejected:\n%s", tc.name, problems(plan))
		}
	}
}
