package cubes

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet/internal/cubes/journal"
	"github.com/cubefleet/cubefleet/internal/ionos"
)

// DefaultMaxInventoryAge is how old an inventory PlanSlots accepts by default
// (--max-inventory-age, default 15 minutes).
const DefaultMaxInventoryAge = 15 * time.Minute

// maxClockSkew is how far in the future an inventory's fetchedAt may lie.
const maxClockSkew = time.Minute

// WorkersPerCube is the number of Coordinator worker slots one Cube provides
// (docs/ionos.md: each Cube keeps three coordinator slots).
const WorkersPerCube = 3

// StatusRunning is what a plan says of a retained, running Cube: running does not prove the
// application is ready (docs/ionos.md).
const StatusRunning = "running; application readiness not verified"

// Action is what the plan does with a slot.
type Action string

// The four slot decisions.
const (
	Retain Action = "retain" // keep the slot's Cube
	Create Action = "create" // create a Cube for the empty slot
	Remove Action = "remove" // remove the slot's Cube
	Empty  Action = "empty"  // the slot stays empty
)

// Rule names one planning rule; every Problem carries the rule it breaks.
type Rule string

// The planning rules (docs/ionos.md, "Plan").
const (
	RuleStaleInventory       Rule = "stale_inventory"        // inventory too old, from the future, or read while the data center changed
	RuleDatacenterMismatch   Rule = "datacenter_mismatch"    // the configuration's data center is not the inventory's
	RuleTargetOutOfRange     Rule = "target_out_of_range"    // target outside minimum_cubes..len(slots)
	RuleDuplicateIdentity    Rule = "duplicate_identity"     // a server id, private IP or name used by two slots
	RuleProtectedMember      Rule = "protected_member"       // a protected server configured as a fleet member
	RuleMissingResource      Rule = "missing_resource"       // a slot's server, the private LAN or a required group absent
	RuleNotCube              Rule = "not_cube"               // a slot's server is not of type CUBE
	RuleIdentityMismatch     Rule = "identity_mismatch"      // a slot's server does not hold its name and address, or a name claims an empty slot
	RuleOccupiedAddress      Rule = "occupied_address"       // a slot's address is held on the private LAN by something else
	RulePendingOperation     Rule = "pending_operation"      // a BUSY resource or a queued or running request
	RuleNotRunning           Rule = "not_running"            // a retained Cube is not RUNNING
	RuleSecurityGroupMissing Rule = "security_group_missing" // a required group not attached to a managed Cube
	RuleUnderMinimum         Rule = "under_minimum"          // a Cube, or every template for a new one, below the minimums
)

// Problem is one broken rule. Slot and SlotIndex name the slot concerned (SlotIndex is -1 for
// problems of no slot); ServerID names the server when there is one.
type Problem struct {
	Rule      Rule   `json:"rule"`
	SlotIndex int    `json:"slotIndex"`
	Slot      string `json:"slot,omitempty"`
	ServerID  string `json:"serverId,omitempty"`
	Message   string `json:"message"`
}

// SlotPlan is the decision for one slot: the capacity it yields (Cores, RAMMiB in MiB,
// WorkerSlots; zero for remove and empty, and for create when no template meets the
// minimums), Status (for a Cube in the inventory: StatusRunning or its vmState) and the
// Reason for the decision.
type SlotPlan struct {
	Index       int    `json:"index"`
	Name        string `json:"name"`
	PrivateIP   string `json:"privateIp"`
	ServerID    string `json:"serverId,omitempty"`
	Action      Action `json:"action"`
	Status      string `json:"status,omitempty"`
	Cores       int    `json:"cores"`
	RAMMiB      int    `json:"ramMiB"`
	WorkerSlots int    `json:"workerSlots"`
	Reason      string `json:"reason"`
}

// Capacity is what the planned fleet provides: Cubes, Cores, RAMMiB (MiB) and WorkerSlots.
type Capacity struct {
	Cubes       int `json:"cubes"`
	Cores       int `json:"cores"`
	RAMMiB      int `json:"ramMiB"`
	WorkerSlots int `json:"workerSlots"`
}

// Plan is the slot plan for one target. Accepted is true exactly when Problems is empty.
// Capacity is nil when some Cube of the planned fleet (retained, or to be created from
// Template) does not meet both minimums; CapacityNote then says why. Template is the smallest
// CUBE template meeting both minimums (nil when none does). InventoryAge is in milliseconds.
type Plan struct {
	DatacenterID string          `json:"datacenterId"`
	Target       int             `json:"target"`
	Accepted     bool            `json:"accepted"`
	InventoryAge int64           `json:"inventoryAgeMs"`
	Slots        []SlotPlan      `json:"slots"`
	Capacity     *Capacity       `json:"capacity"`
	CapacityNote string          `json:"capacityNote,omitempty"`
	Template     *ionos.Template `json:"template"`
	Problems     []Problem       `json:"problems"`
}

// PlanOptions are the inputs of PlanSlots besides the configuration and the inventory.
type PlanOptions struct {
	// Target is the number of Cubes wanted.
	Target int
	// Now is the time the plan is made, for the inventory's age. Zero means time.Now().
	Now time.Time
	// MaxInventoryAge is the oldest inventory accepted. Zero means DefaultMaxInventoryAge.
	MaxInventoryAge time.Duration
	// CubeNamePrefix is the profile's cube_name_prefix: a slot's Cube may then carry the name
	// a growth run gave it (<prefix><run>-<slot index>, journal.CubeName) instead of the
	// slot's, when it holds the slot's private IP. "" accepts only the slot's name.
	CubeNamePrefix string
}

// PlanSlots decides, slot by slot in order, which Cubes to retain, create or remove to reach
// opts.Target Cubes, and checks every planning rule, reporting all problems at once. The
// first Target occupied slots (those with a server_id) are retained, lower indexes first;
// when fewer are occupied, the lowest-index empty slots are created; the remaining occupied
// slots are removed and the remaining empty ones stay empty. A Cube is adopted only by its
// server id, never by its name; a slot's Cube carries the slot's name, or the name a growth
// run gave it for that slot (PlanOptions.CubeNamePrefix). The planner has no activity data; choosing the least active
// Cubes is the scaling workflow's job. cfg and inv are not modified.
func PlanSlots(cfg *Config, inv *ionos.Inventory, opts PlanOptions) *Plan {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	maxAge := opts.MaxInventoryAge
	if maxAge == 0 {
		maxAge = DefaultMaxInventoryAge
	}
	p := &planner{cfg: cfg, inv: inv, target: opts.Target, prefix: opts.CubeNamePrefix}
	p.index()
	plan := &Plan{DatacenterID: cfg.DatacenterID, Target: opts.Target, Problems: []Problem{}}
	age := now.Sub(time.UnixMilli(inv.FetchedAt))
	plan.InventoryAge = age.Milliseconds()

	p.checkInventory(age, maxAge)
	p.checkTarget()
	p.checkDuplicates()
	p.checkNetwork()
	plan.Template = p.smallestTemplate()
	plan.Slots = p.decide(plan.Template)
	p.checkSlots(plan.Slots)
	p.checkPending()
	plan.Capacity, plan.CapacityNote = p.capacity(plan.Slots, plan.Template)

	plan.Problems = p.problems
	plan.Accepted = len(p.problems) == 0
	return plan
}

// planner holds the indexes one plan needs; each is built once, so a plan is O(slots +
// servers).
type planner struct {
	cfg      *Config
	inv      *ionos.Inventory
	target   int
	prefix   string // PlanOptions.CubeNamePrefix
	problems []Problem

	servers   map[string]*ionos.Server
	byName    map[string][]*ionos.Server
	holders   map[string][]holder // private-LAN address -> what holds it
	protected map[string]bool
	slotOf    map[string]int // server id -> slot index
	lan       *ionos.LAN
	groups    map[string]*ionos.SecurityGroup
}

// holder is something holding an address on the private LAN: a server (serverID set), a NAT
// gateway or a load balancer.
type holder struct {
	serverID string
	what     string
}

func (p *planner) add(rule Rule, slot int, serverID, format string, args ...any) {
	pr := Problem{Rule: rule, SlotIndex: slot, ServerID: serverID, Message: fmt.Sprintf(format, args...)}
	if slot >= 0 {
		pr.Slot = p.cfg.Slots[slot].Name
	}
	p.problems = append(p.problems, pr)
}

func (p *planner) index() {
	inv, cfg := p.inv, p.cfg
	p.servers = make(map[string]*ionos.Server, len(inv.Servers))
	p.byName = make(map[string][]*ionos.Server, len(inv.Servers))
	p.holders = map[string][]holder{}
	for i := range inv.Servers {
		s := &inv.Servers[i]
		p.servers[strings.ToLower(s.ID)] = s
		p.byName[s.Name] = append(p.byName[s.Name], s)
		for _, n := range s.NICs {
			if n.LANID != cfg.PrivateLANID {
				continue // addresses on other, isolated LANs claim nothing
			}
			for _, ip := range n.IPs {
				p.holders[ip] = append(p.holders[ip], holder{strings.ToLower(s.ID), fmt.Sprintf("server %s (%s)", s.ID, s.Name)})
			}
		}
	}
	for _, ng := range inv.NATGateways {
		for _, l := range ng.LANs {
			if l.LANID == cfg.PrivateLANID {
				for _, ip := range l.GatewayIPs {
					p.holders[hostOf(ip)] = append(p.holders[hostOf(ip)], holder{"", fmt.Sprintf("NAT gateway %s (%s)", ng.ID, ng.Name)})
				}
			}
		}
	}
	for _, a := range inv.ApplicationLoadBalancers {
		if a.TargetLANID == cfg.PrivateLANID {
			for _, ip := range a.PrivateIPs {
				p.holders[hostOf(ip)] = append(p.holders[hostOf(ip)], holder{"", fmt.Sprintf("application load balancer %s (%s)", a.ID, a.Name)})
			}
		}
	}
	p.protected = make(map[string]bool, len(cfg.ProtectedServerIDs))
	for _, id := range cfg.ProtectedServerIDs {
		p.protected[id] = true
	}
	p.slotOf = make(map[string]int, len(cfg.Slots))
	for i, s := range cfg.Slots {
		if _, dup := p.slotOf[s.ServerID]; s.ServerID != "" && !dup {
			p.slotOf[s.ServerID] = i
		}
	}
	for i := range inv.LANs {
		if inv.LANs[i].ID == cfg.PrivateLANID {
			p.lan = &inv.LANs[i]
		}
	}
	p.groups = make(map[string]*ionos.SecurityGroup, len(inv.SecurityGroups))
	for i := range inv.SecurityGroups {
		p.groups[strings.ToLower(inv.SecurityGroups[i].ID)] = &inv.SecurityGroups[i]
	}
}

// hostOf returns the address of "10.7.0.5/24" (or the string itself when it has no prefix).
func hostOf(s string) string {
	if pfx, err := netip.ParsePrefix(s); err == nil {
		return pfx.Addr().String()
	}
	return s
}

func (p *planner) checkInventory(age, maxAge time.Duration) {
	switch {
	case age > maxAge:
		p.add(RuleStaleInventory, -1, "", "the inventory was fetched %s ago, more than the %s allowed; run `cubefleet ionos inventory` again",
			age.Round(time.Second), maxAge)
	case age < -maxClockSkew:
		p.add(RuleStaleInventory, -1, "", "the inventory's fetchedAt lies %s in the future; check the clocks and refresh it", (-age).Round(time.Second))
	}
	if !p.inv.Consistent {
		p.add(RuleStaleInventory, -1, "", "the data center changed while the inventory was read (version %d, then %d); run `cubefleet ionos inventory` again",
			p.inv.Datacenter.Version, p.inv.Datacenter.VersionAtEnd)
	}
	if !strings.EqualFold(p.cfg.DatacenterID, p.inv.Datacenter.ID) {
		p.add(RuleDatacenterMismatch, -1, "", "the configuration is for data center %s but the inventory is of %s",
			p.cfg.DatacenterID, p.inv.Datacenter.ID)
	}
}

func (p *planner) checkTarget() {
	if p.target < p.cfg.MinimumCubes || p.target > len(p.cfg.Slots) {
		p.add(RuleTargetOutOfRange, -1, "", "target %d is outside %d..%d (minimum_cubes..number of slots)",
			p.target, p.cfg.MinimumCubes, len(p.cfg.Slots))
	}
}

func (p *planner) checkDuplicates() {
	first := map[string]int{}
	for i, s := range p.cfg.Slots {
		for _, id := range []struct{ kind, value string }{{"server id", s.ServerID}, {"private IP", s.PrivateIP}, {"name", s.Name}} {
			if id.value == "" {
				continue
			}
			key := id.kind + "\x00" + id.value
			if j, dup := first[key]; dup {
				serverID := ""
				if id.kind == "server id" {
					serverID = id.value
				}
				p.add(RuleDuplicateIdentity, i, serverID, "%s %s is also used by slot %d (%s)", id.kind, id.value, j, p.cfg.Slots[j].Name)
				continue
			}
			first[key] = i
		}
	}
}

func (p *planner) checkNetwork() {
	cfg, inv := p.cfg, p.inv
	switch {
	case p.lan == nil:
		p.add(RuleMissingResource, -1, "", "private LAN %d is not in data center %s", cfg.PrivateLANID, inv.Datacenter.ID)
	case p.lan.Public:
		p.add(RuleMissingResource, -1, "", "LAN %d is public; private_lan_id must name a private LAN", cfg.PrivateLANID)
	}
	for _, id := range cfg.WorkerSecurityGroupIDs {
		switch {
		case p.groups[id] == nil:
			p.add(RuleMissingResource, -1, "", "required security group %s is not in data center %s", id, inv.Datacenter.ID)
		case strings.EqualFold(id, inv.Datacenter.DefaultSecurityGroupID) || p.groups[id].Default:
			p.add(RuleSecurityGroupMissing, -1, "", "security group %s is the data center's default group and cannot be a worker group: %s",
				id, "the data center's default security group does not establish worker access")
		}
	}
}

// smallestTemplate returns the smallest CUBE template (by cores, then RAM, then storage, then
// id) meeting both minimums, or nil.
func (p *planner) smallestTemplate() *ionos.Template {
	var best *ionos.Template
	for i := range p.inv.CubeTemplates {
		t := &p.inv.CubeTemplates[i]
		if t.Cores < p.cfg.MinimumCores || t.RAMMiB < p.cfg.MinimumRAMMiB {
			continue
		}
		if best == nil || cmp.Or(cmp.Compare(t.Cores, best.Cores), cmp.Compare(t.RAMMiB, best.RAMMiB),
			cmp.Compare(t.StorageGB, best.StorageGB), cmp.Compare(t.ID, best.ID)) < 0 {
			best = t
		}
	}
	if best == nil {
		return nil
	}
	c := *best
	return &c
}

// decide assigns each slot its action (see PlanSlots) and describes it.
func (p *planner) decide(tpl *ionos.Template) []SlotPlan {
	target := min(max(p.target, 0), len(p.cfg.Slots))
	occupied := 0
	for _, s := range p.cfg.Slots {
		if s.ServerID != "" {
			occupied++
		}
	}
	toCreate := max(target-occupied, 0)
	retained := 0
	out := make([]SlotPlan, len(p.cfg.Slots))
	for i, s := range p.cfg.Slots {
		sp := SlotPlan{Index: i, Name: s.Name, PrivateIP: s.PrivateIP, ServerID: s.ServerID}
		srv := p.servers[s.ServerID]
		switch {
		case srv != nil && srv.VMState == "RUNNING":
			sp.Status = "running"
		case srv != nil:
			sp.Status = "vmState " + srv.VMState
		case s.ServerID != "":
			sp.Status = "not in the data center"
		}
		switch {
		case s.ServerID != "" && retained < target:
			retained++
			sp.Action = Retain
			sp.Reason = fmt.Sprintf("retained %d of %d for target %d (lower-index slots first); adopted by its server id, not its name",
				retained, min(occupied, target), p.target)
			if sp.Status == "running" {
				sp.Status = StatusRunning
			}
			if srv != nil {
				sp.Cores, sp.RAMMiB, sp.WorkerSlots = srv.Cores, srv.RAMMiB, WorkersPerCube
			}
		case s.ServerID != "":
			sp.Action = Remove
			sp.Reason = fmt.Sprintf("beyond target %d: the highest occupied slots are removed first", p.target)
		case toCreate > 0:
			toCreate--
			sp.Action = Create
			if tpl != nil {
				sp.Cores, sp.RAMMiB, sp.WorkerSlots = tpl.Cores, tpl.RAMMiB, WorkersPerCube
				sp.Reason = fmt.Sprintf("target %d needs another Cube; create it from template %q (%d cores, %d MiB), the smallest meeting the minimums",
					p.target, tpl.Name, tpl.Cores, tpl.RAMMiB)
			} else {
				sp.Reason = fmt.Sprintf("target %d needs another Cube, but no CUBE template meets the minimums", p.target)
			}
		default:
			sp.Action = Empty
			sp.Reason = fmt.Sprintf("no Cube and none needed for target %d", p.target)
		}
		out[i] = sp
	}
	return out
}

// checkSlots applies the per-slot rules: membership, identity, addresses, state, groups and
// minimums.
func (p *planner) checkSlots(plans []SlotPlan) {
	cfg := p.cfg
	for i, s := range cfg.Slots {
		act := plans[i].Action
		if s.ServerID == "" {
			for _, other := range p.byName[s.Name] {
				p.add(RuleIdentityMismatch, i, other.ID,
					"server %s is named %q but the slot has no server_id; names do not establish ownership: verify it and set server_id, or rename it",
					other.ID, s.Name)
			}
		} else if p.protected[s.ServerID] {
			p.add(RuleProtectedMember, i, s.ServerID, "server %s is protected shared infrastructure and must never be a fleet member", s.ServerID)
		}
		for _, h := range p.holders[s.PrivateIP] {
			if s.ServerID != "" && h.serverID == s.ServerID {
				continue
			}
			p.add(RuleOccupiedAddress, i, s.ServerID, "address %s is held on private LAN %d by %s, not by this slot's Cube", s.PrivateIP, cfg.PrivateLANID, h.what)
		}
		if s.ServerID == "" {
			continue
		}
		srv := p.servers[s.ServerID]
		if srv == nil {
			p.add(RuleMissingResource, i, s.ServerID, "server %s is not in data center %s", s.ServerID, p.inv.Datacenter.ID)
			continue
		}
		if srv.Type != "CUBE" {
			p.add(RuleNotCube, i, s.ServerID, "server %s (%s) is of type %s, not CUBE", srv.ID, srv.Name, srv.Type)
			continue
		}
		if !p.slotNamed(srv, i) {
			grown := ""
			if p.prefix != "" {
				grown = fmt.Sprintf(" or %q (its slot's index, 0-based, after a run id) holding %s", journal.CubeName(p.prefix, "<run>", i), s.PrivateIP)
			}
			p.add(RuleIdentityMismatch, i, s.ServerID, "server %s is named %q, not %q%s", srv.ID, srv.Name, s.Name, grown)
		}
		if !p.holdsPrivate(srv, s.PrivateIP) {
			p.add(RuleIdentityMismatch, i, s.ServerID, "server %s (%s) does not hold %s on private LAN %d (it holds %s)",
				srv.ID, srv.Name, s.PrivateIP, cfg.PrivateLANID, p.privateIPs(srv))
		}
		for _, g := range cfg.WorkerSecurityGroupIDs {
			if p.groups[g] != nil && !slices.ContainsFunc(srv.SecurityGroupIDs, func(id string) bool { return strings.EqualFold(id, g) }) {
				p.add(RuleSecurityGroupMissing, i, s.ServerID, "required security group %s is not attached to server %s (%s)", g, srv.ID, srv.Name)
			}
		}
		if act == Retain {
			if srv.VMState != "RUNNING" {
				p.add(RuleNotRunning, i, s.ServerID, "retained Cube %s (%s) is %s, not RUNNING", srv.ID, srv.Name, srv.VMState)
			}
			if srv.Cores < cfg.MinimumCores || srv.RAMMiB < cfg.MinimumRAMMiB {
				p.add(RuleUnderMinimum, i, s.ServerID, "Cube %s (%s) has %d cores and %d MiB, under the minimum %d cores and %d MiB",
					srv.ID, srv.Name, srv.Cores, srv.RAMMiB, cfg.MinimumCores, cfg.MinimumRAMMiB)
			}
		}
	}
	if slices.ContainsFunc(plans, func(sp SlotPlan) bool { return sp.Action == Create }) && p.smallestTemplate() == nil {
		p.add(RuleUnderMinimum, -1, "", "a Cube must be created but no CUBE template offers %d cores and %d MiB", cfg.MinimumCores, cfg.MinimumRAMMiB)
	}
}

// slotNamed reports whether srv carries the name of slot i: the slot's configured name, or
// the name a growth run gave the Cube it created for that slot (<prefix><run>-<i>) when srv
// holds the slot's private IP.
func (p *planner) slotNamed(srv *ionos.Server, i int) bool {
	s := p.cfg.Slots[i]
	return srv.Name == s.Name || (p.prefix != "" && journal.IsCubeName(srv.Name, p.prefix, i) && p.holdsPrivate(srv, s.PrivateIP))
}

func (p *planner) holdsPrivate(srv *ionos.Server, ip string) bool {
	for _, n := range srv.NICs {
		if n.LANID == p.cfg.PrivateLANID && slices.Contains(n.IPs, ip) {
			return true
		}
	}
	return false
}

func (p *planner) privateIPs(srv *ionos.Server) string {
	var ips []string
	for _, n := range srv.NICs {
		if n.LANID == p.cfg.PrivateLANID {
			ips = append(ips, n.IPs...)
		}
	}
	if len(ips) == 0 {
		return "no address there"
	}
	return strings.Join(ips, ", ")
}

// checkPending rejects pending provider operations: the data center or any resource in it
// BUSY (and target groups its load balancers forward to), and every QUEUED or RUNNING request.
func (p *planner) checkPending() {
	inv := p.inv
	busy := func(state string) bool { return state == "BUSY" }
	slot := func(serverID string) int {
		if i, ok := p.slotOf[strings.ToLower(serverID)]; ok {
			return i
		}
		return -1
	}
	if busy(inv.Datacenter.State) {
		p.add(RulePendingOperation, -1, "", "data center %s is BUSY", inv.Datacenter.ID)
	}
	for _, s := range inv.Servers {
		if busy(s.State) {
			p.add(RulePendingOperation, slot(s.ID), s.ID, "server %s (%s) is BUSY", s.ID, s.Name)
		}
		for _, n := range s.NICs {
			if busy(n.State) {
				p.add(RulePendingOperation, slot(s.ID), s.ID, "NIC %s of server %s (%s) is BUSY", n.ID, s.ID, s.Name)
			}
		}
	}
	for _, l := range inv.LANs {
		if busy(l.State) {
			p.add(RulePendingOperation, -1, "", "LAN %d is BUSY", l.ID)
		}
	}
	for _, g := range inv.SecurityGroups {
		if busy(g.State) {
			p.add(RulePendingOperation, -1, "", "security group %s (%s) is BUSY", g.ID, g.Name)
		}
	}
	for _, ng := range inv.NATGateways {
		if busy(ng.State) {
			p.add(RulePendingOperation, -1, "", "NAT gateway %s (%s) is BUSY", ng.ID, ng.Name)
		}
	}
	used := map[string]bool{}
	for _, a := range inv.ApplicationLoadBalancers {
		if busy(a.State) {
			p.add(RulePendingOperation, -1, "", "application load balancer %s (%s) is BUSY", a.ID, a.Name)
		}
		for _, r := range a.ForwardingRules {
			if busy(r.State) {
				p.add(RulePendingOperation, -1, "", "forwarding rule %s of load balancer %s is BUSY", r.ID, a.ID)
			}
			for _, h := range r.HTTPRules {
				used[h.TargetGroupID] = true
			}
		}
	}
	for _, tg := range inv.TargetGroups {
		if used[tg.ID] && busy(tg.State) {
			p.add(RulePendingOperation, -1, "", "target group %s (%s) is BUSY", tg.ID, tg.Name)
		}
	}
	for _, rq := range inv.PendingRequests {
		slotIdx, serverID := -1, ""
		for _, t := range rq.Targets {
			if t.Type == "server" {
				serverID = t.ID
				slotIdx = slot(t.ID)
				break
			}
		}
		p.add(RulePendingOperation, slotIdx, serverID, "request %s (%s %s) is %s", rq.ID, rq.Method, rq.URL, rq.Status)
	}
}

// capacity totals what the planned fleet yields, or says why it is not reported.
func (p *planner) capacity(plans []SlotPlan, tpl *ionos.Template) (*Capacity, string) {
	c := &Capacity{}
	for _, sp := range plans {
		switch sp.Action {
		case Retain:
			srv := p.servers[sp.ServerID]
			if srv == nil || srv.Cores < p.cfg.MinimumCores || srv.RAMMiB < p.cfg.MinimumRAMMiB {
				return nil, fmt.Sprintf("not reported: slot %d (%s) is not a Cube meeting %d cores and %d MiB", sp.Index, sp.Name,
					p.cfg.MinimumCores, p.cfg.MinimumRAMMiB)
			}
		case Create:
			if tpl == nil {
				return nil, fmt.Sprintf("not reported: no CUBE template meets %d cores and %d MiB for slot %d (%s)",
					p.cfg.MinimumCores, p.cfg.MinimumRAMMiB, sp.Index, sp.Name)
			}
		default:
			continue
		}
		c.Cubes++
		c.Cores += sp.Cores
		c.RAMMiB += sp.RAMMiB
		c.WorkerSlots += sp.WorkerSlots
	}
	return c, ""
}
