package sandboxnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// A public sandbox (template network: public) reaches the internet through a veth pair: its end
// (eth0) in its network namespace, the host's end (IfPrefix and its index) beside the host's
// interfaces, a /30 of the sandbox network for the two, and NAT for egress. The host's nftables
// table (TableName, Host.Ensure) lets a sandbox's packets out to the internet only: never to
// the host itself (its addresses, the control plane's, the agent's port: nothing of the input
// hook from a sandbox but replies), never to other sandboxes, link-local or metadata addresses
// (169.254.0.0/16, 100.100.100.200; Never), to private ranges (Private) only inside the
// prefixes its template allows (Link.Allow) and there never to the addresses the caller names
// (Link.Deny: the control plane's), never IPv6 (a sandbox has no
// IPv6 address but its link's; fd00:ec2::254 and the rest are unreachable), nothing from a
// source address other than its link's SandboxAddr, and nothing in from outside but replies. A microVM's VMM gets the same veth pair, its sandbox end bridged with a
// tap device for the guest's NIC in the VMM's namespace (MakeTap, Link.SetupTap): the host end,
// the addresses and the rules are the same.

// DefaultMaxConnections is how many connections a public sandbox may have open at once in the
// host's connection tracking (1,024, counted per sandbox address, every protocol): a new one past
// it is refused with an ICMP admin-prohibited reject, so one sandbox cannot fill the host-wide
// table (nf_conntrack_max) that every sandbox and the host share.
const DefaultMaxConnections = 1024

// IfPrefix starts the name of every host end of a sandbox's link, e.g. cfv12 (the rules match
// the prefix).
const IfPrefix = "cfv"

// TableName is the host's nftables table of the sandboxes' network policy (family inet, and a
// nat table of family ip of the same name).
const TableName = "cubefleet_sandboxes"

// Never are the IPv4 destinations no public sandbox reaches, whatever its template allows: this
// host's networks and loopback, link-local and metadata addresses (169.254.169.254 and
// 100.100.100.200), the reserved ranges and multicast. The sandbox network itself (other
// sandboxes) is never reachable either.
var Never = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.100.100.200/32"), // a cloud's metadata, inside the shared address space
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"), // link-local (169.254.169.254: a cloud's metadata)
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("224.0.0.0/3"), // multicast and reserved
}

// Private are the private and shared IPv4 ranges a public sandbox reaches only inside its
// template's egressAllow (Link.Allow).
var Private = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // shared address space
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
}

// Link is one public sandbox's veth pair and addresses, and what of the private ranges it may
// reach.
type Link struct {
	HostIf      string       // the host's end, IfPrefix + index
	HostAddr    netip.Prefix // the host end's address (the sandbox's gateway), in its /30
	SandboxAddr netip.Prefix // eth0's address in the sandbox, in the same /30
	// Allow are the private IPv4 prefixes the sandbox may reach besides the internet (its
	// template's egressAllow); Never, the sandbox network and the host's own addresses stay
	// unreachable inside them. IPv6 prefixes are ignored: a sandbox has no IPv6 route.
	Allow []netip.Prefix `json:",omitempty"`
	// Deny are addresses the sandbox never reaches even inside Allow: the control plane's.
	Deny []netip.Addr `json:",omitempty"`
}

// LinkFor returns the link of the index-th /30 of the sandbox network cidr (index modulo the
// /30s it has), e.g. index 0 of 192.168.0.0/18: cfv0, 192.168.0.1/30 and 192.168.0.2/30.
// Two indexes that are equal modulo Links(cidr) have the same link: the caller keeps such
// indexes from running at once.
func LinkFor(cidr netip.Prefix, index int) (Link, error) {
	n := Links(cidr)
	if n == 0 {
		return Link{}, fmt.Errorf("sandbox network %s: want an IPv4 network of at least /28", cidr)
	}
	i := index % n
	if i < 0 {
		i += n
	}
	base := cidr.Masked().Addr().As4()
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	v += uint32(i) * 4
	at := func(off uint32) netip.Addr {
		x := v + off
		return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
	}
	return Link{HostIf: IfPrefix + strconv.Itoa(i), HostAddr: netip.PrefixFrom(at(1), 30), SandboxAddr: netip.PrefixFrom(at(2), 30)}, nil
}

// Links is how many links (/30s) the sandbox network cidr has; 0 when it is not an IPv4
// network of at least /28.
func Links(cidr netip.Prefix) int {
	if !cidr.IsValid() || !cidr.Addr().Is4() || cidr.Bits() > 28 {
		return 0
	}
	return 1 << (30 - cidr.Bits())
}

// Setup creates l's veth pair, moves the sandbox's end into the network namespace of process
// pid as eth0, addresses and brings up both ends, and routes the namespace's default through
// the host's end. An existing host end of the name (a leftover) is replaced.
func (l Link) Setup(pid int) error {
	h, in, fail, err := l.pair(pid)
	if err != nil {
		return err
	}
	defer h.Close()
	err = h.LinkSetName(in, "eth0")
	if err == nil {
		err = h.AddrAdd(in, &netlink.Addr{IPNet: ipNet(l.SandboxAddr)})
	}
	if err == nil {
		err = h.LinkSetUp(in)
	}
	if err == nil {
		err = h.RouteAdd(&netlink.Route{LinkIndex: in.Attrs().Index, Gw: net.IP(l.HostAddr.Addr().AsSlice())})
	}
	if err != nil {
		return fail("set up eth0 in the sandbox", err)
	}
	if err := l.allowRules(); err != nil {
		return fail("the sandbox's egressAllow", err)
	}
	return nil
}

// pair creates l's veth pair (replacing a leftover host end of its name), addresses and brings
// up the host end, and moves the sandbox's end into the network namespace of process pid. It
// returns a netlink handle in that namespace (the caller closes it), the sandbox's end, and
// fail, which deletes the pair and wraps an error of the caller's further setup.
func (l Link) pair(pid int) (*netlink.Handle, netlink.Link, func(string, error) error, error) {
	if old, err := netlink.LinkByName(l.HostIf); err == nil {
		netlink.LinkDel(old)
	}
	peer := l.HostIf + "p"
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: l.HostIf}, PeerName: peer}
	if err := netlink.LinkAdd(veth); err != nil {
		return nil, nil, nil, fmt.Errorf("create the veth pair %s: %w", l.HostIf, err)
	}
	fail := func(what string, err error) error {
		netlink.LinkDel(veth)
		return fmt.Errorf("%s of %s: %w", what, l.HostIf, err)
	}
	host, err := netlink.LinkByName(l.HostIf)
	if err != nil {
		return nil, nil, nil, fail("find the host end", err)
	}
	if err := netlink.AddrAdd(host, &netlink.Addr{IPNet: ipNet(l.HostAddr)}); err != nil {
		return nil, nil, nil, fail("address the host end", err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return nil, nil, nil, fail("bring up the host end", err)
	}
	inner, err := netlink.LinkByName(peer)
	if err != nil {
		return nil, nil, nil, fail("find the sandbox end", err)
	}
	if err := netlink.LinkSetNsPid(inner, pid); err != nil {
		return nil, nil, nil, fail("move the sandbox end into the sandbox's namespace", err)
	}
	ns, err := netns.GetFromPid(pid)
	if err != nil {
		return nil, nil, nil, fail("open the sandbox's network namespace", err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, nil, nil, fail("netlink in the sandbox's namespace", err)
	}
	in, err := h.LinkByName(peer)
	if err != nil {
		h.Close()
		return nil, nil, nil, fail("find the sandbox end in its namespace", err)
	}
	return h, in, fail, nil
}

// TapName is the tap device MakeTap makes in a microVM's network namespace, for its VMM;
// BridgeName the bridge that joins it to the sandbox's end of its veth pair (SetupTap).
const (
	TapName    = "tap0"
	BridgeName = "br0"
)

// MakeTap makes, in the calling thread's network namespace (a new one, the microVM's: the
// caller has locked its thread and unshared it), the loopback up, a bridge BridgeName and a tap
// device TapName on it owned by uid (the VMM's user, which opens it), all up.
func MakeTap(uid int) error {
	if err := LoopbackUp(); err != nil {
		return err
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: BridgeName}}
	tap := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: TapName}, Mode: netlink.TUNTAP_MODE_TAP,
		Flags: netlink.TUNTAP_NO_PI | netlink.TUNTAP_VNET_HDR | netlink.TUNTAP_ONE_QUEUE, Owner: uint32(uid), Group: uint32(uid)}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("create the bridge %s: %w", BridgeName, err)
	}
	if err := netlink.LinkAdd(tap); err != nil {
		return fmt.Errorf("create the tap device %s: %w", TapName, err)
	}
	if err := netlink.LinkSetMaster(tap, br); err != nil {
		return fmt.Errorf("bridge the tap device %s: %w", TapName, err)
	}
	for _, l := range []netlink.Link{tap, br} {
		if err := netlink.LinkSetUp(l); err != nil {
			return fmt.Errorf("bring up %s: %w", l.Attrs().Name, err)
		}
	}
	return nil
}

// SetupTap is Setup for a virtual machine: the sandbox's end of l's veth pair goes into the
// network namespace of process (or thread) pid, which MakeTap prepared, without an address, on
// its bridge; the guest's NIC takes l.SandboxAddr with l.HostAddr as its gateway (GuestNet), so
// the host end and the policy (EnsureHost) are a process sandbox's.
func (l Link) SetupTap(pid int) error {
	h, in, fail, err := l.pair(pid)
	if err != nil {
		return err
	}
	defer h.Close()
	br, err := h.LinkByName(BridgeName)
	if err == nil {
		err = h.LinkSetMaster(in, br)
	}
	if err == nil {
		err = h.LinkSetUp(in)
	}
	if err != nil {
		return fail("bridge the sandbox end with the tap device", err)
	}
	if err := l.allowRules(); err != nil {
		return fail("the sandbox's egressAllow", err)
	}
	return nil
}

// GuestNet is the guest's network setting of l, as a guest init reads it from the kernel's
// command line: "<address>/<bits>,<gateway>", e.g. 192.168.0.2/30,192.168.0.1.
func (l Link) GuestNet() string { return l.SandboxAddr.String() + "," + l.HostAddr.Addr().String() }

// Teardown deletes l's veth pair (it also goes with the sandbox's namespace) and its rules of
// the host's policy (Allow); a pair that is gone already is no error.
func (l Link) Teardown() error {
	rulesErr := l.removeRules()
	link, err := netlink.LinkByName(l.HostIf)
	if err != nil {
		return rulesErr
	}
	if err := netlink.LinkDel(link); err != nil {
		return fmt.Errorf("delete %s: %w", l.HostIf, err)
	}
	return nil
}

// RemoveLeftovers deletes the host ends (veths named IfPrefix...) that stale says are
// leftovers: those of sandboxes that ended while no one tore their link down (a link also goes
// with its sandbox's namespace, so there are few). It returns what it deleted.
func RemoveLeftovers(stale func(name string) bool) []string {
	links, _ := netlink.LinkList()
	var gone []string
	for _, l := range links {
		name := l.Attrs().Name
		if _, isVeth := l.(*netlink.Veth); !isVeth || !strings.HasPrefix(name, IfPrefix) || !stale(name) {
			continue
		}
		if netlink.LinkDel(l) == nil {
			gone = append(gone, name)
		}
	}
	return gone
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), 32)}
}

// EnsureHost makes this host (its current network namespace) carry public sandboxes' traffic:
// IPv4 forwarding on, and the nftables tables of the policy above (TableName) for the sandbox
// network cidr, with maxConns connections per sandbox at most (DefaultMaxConnections when not
// positive), unless they are there already (the first caller's maxConns stays until RemoveHost).
// lockDir holds the lock that makes concurrent callers (the supervisors of a host) install them
// once.
func EnsureHost(cidr netip.Prefix, lockDir string, maxConns int) error {
	if maxConns <= 0 {
		maxConns = DefaultMaxConnections
	}
	if err := os.MkdirAll(lockDir, 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(lockDir, "netpolicy.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("enable IPv4 forwarding: %w", err)
	}
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	tables, err := c.ListTables()
	if err != nil {
		return fmt.Errorf("nftables: list the tables: %w", err)
	}
	for _, t := range tables {
		if t.Name == TableName && t.Family == nftables.TableFamilyINet {
			current, err := hasChain(c, allowChain)
			if err != nil || current {
				return err
			}
			// A policy of an agent that allowed no private prefix: replaced by this one.
			c.DelTable(&nftables.Table{Name: TableName, Family: nftables.TableFamilyINet})
			c.DelTable(&nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4})
		}
	}
	if err := addPolicy(c, cidr, uint32(maxConns)); err != nil {
		return fmt.Errorf("nftables: the sandboxes' connection set: %w", err)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: install the sandboxes' network policy: %w", err)
	}
	return nil
}

// RemoveHost deletes the policy's tables (after the last public sandbox of the host; an
// agent's tests). Tables that are gone are no error.
func RemoveHost() error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	c.DelTable(&nftables.Table{Name: TableName, Family: nftables.TableFamilyINet})
	c.DelTable(&nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4})
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// The policy's regular chains: allowChain holds each link's rules for its Allow and Deny (their
// user data is the link's HostIf), egressChain what a packet to the internet (or an allowed
// prefix) passes: the connection limit, then accept.
const (
	allowChain  = "egress_allow"
	egressChain = "egress"
)

// hasChain reports whether the policy's table holds the chain name.
func hasChain(c *nftables.Conn, name string) (bool, error) {
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, fmt.Errorf("nftables: list the chains: %w", err)
	}
	for _, ch := range chains {
		if ch.Table.Name == TableName && ch.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// allowRules replaces l's rules in the policy's allowChain (those of an earlier sandbox of the
// same link included) with a drop of what does not come from l's SandboxAddr, a drop of each
// of Deny and a jump to the egress chain for each IPv4 prefix of Allow, for packets that come
// in through l's host end. The policy must be installed (EnsureHost).
func (l Link) allowRules() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	filter := &nftables.Table{Name: TableName, Family: nftables.TableFamilyINet}
	chain := &nftables.Chain{Name: allowChain, Table: filter}
	if err := l.queueRemoval(c, filter, chain); err != nil {
		return err
	}
	iif := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: append([]byte(l.HostIf), 0)},
	}
	add := func(parts ...[]expr.Any) {
		var exprs []expr.Any
		for _, p := range parts {
			exprs = append(exprs, p...)
		}
		c.AddRule(&nftables.Rule{Table: filter, Chain: chain, Exprs: exprs, UserData: []byte(l.HostIf)})
	}
	// Nothing but its own address as the source: a guest kernel owns its NIC, and a packet
	// from another address would count under that address's connection limit, not its own.
	if l.SandboxAddr.Addr().Is4() {
		add(iif, []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: l.SandboxAddr.Addr().AsSlice()},
		}, verdict(expr.VerdictDrop))
	}
	allowed := 0
	for _, p := range l.Allow {
		if p.Addr().Is4() {
			allowed++
		}
	}
	if allowed > 0 {
		for _, a := range l.Deny {
			if a.Is4() {
				add(iif, daddrIn(netip.PrefixFrom(a, 32)), verdict(expr.VerdictDrop))
			}
		}
		for _, p := range l.Allow {
			if p.Addr().Is4() {
				add(iif, daddrIn(p), []expr.Any{&expr.Verdict{Kind: expr.VerdictGoto, Chain: egressChain}})
			}
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: the rules of %s: %w", l.HostIf, err)
	}
	return nil
}

// removeRules deletes l's rules from the policy's allowChain; a policy that is gone is no
// error.
func (l Link) removeRules() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	filter := &nftables.Table{Name: TableName, Family: nftables.TableFamilyINet}
	if err := l.queueRemoval(c, filter, &nftables.Chain{Name: allowChain, Table: filter}); err != nil {
		return nil // no policy, or none of this version: nothing of l's
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: remove the rules of %s: %w", l.HostIf, err)
	}
	return nil
}

// queueRemoval queues on c the deletion of l's rules in chain.
func (l Link) queueRemoval(c *nftables.Conn, filter *nftables.Table, chain *nftables.Chain) error {
	rules, err := c.GetRules(filter, chain)
	if err != nil {
		return fmt.Errorf("nftables: list the rules of %s (is the policy installed?): %w", allowChain, err)
	}
	for _, r := range rules {
		if string(r.UserData) == l.HostIf {
			if err := c.DelRule(r); err != nil {
				return fmt.Errorf("nftables: %w", err)
			}
		}
	}
	return nil
}

// connSet is the policy's dynamic set of sandbox source addresses, each with its count of
// tracked connections.
const connSet = "sandbox_conns"

// addPolicy queues the policy's tables, chains, sets and rules on c.
func addPolicy(c *nftables.Conn, cidr netip.Prefix, maxConns uint32) error {
	filter := c.AddTable(&nftables.Table{Name: TableName, Family: nftables.TableFamilyINet})
	accept := nftables.ChainPolicyAccept
	chain := func(t *nftables.Table, name string, typ nftables.ChainType, hook *nftables.ChainHook, prio *nftables.ChainPriority) *nftables.Chain {
		return c.AddChain(&nftables.Chain{Name: name, Table: t, Type: typ, Hooknum: hook, Priority: prio, Policy: &accept})
	}
	input := chain(filter, "input", nftables.ChainTypeFilter, nftables.ChainHookInput, nftables.ChainPriorityFilter)
	forward := chain(filter, "forward", nftables.ChainTypeFilter, nftables.ChainHookForward, nftables.ChainPriorityFilter)
	rule := func(ch *nftables.Chain, parts ...[]expr.Any) {
		var exprs []expr.Any
		for _, p := range parts {
			exprs = append(exprs, p...)
		}
		c.AddRule(&nftables.Rule{Table: filter, Chain: ch, Exprs: exprs})
	}
	c.AddChain(&nftables.Chain{Name: allowChain, Table: filter})
	egress := c.AddChain(&nftables.Chain{Name: egressChain, Table: filter})
	in, out := ifPrefix(expr.MetaKeyIIFNAME), ifPrefix(expr.MetaKeyOIFNAME)
	// Into the host from a sandbox: replies only. (So the host's own addresses are never
	// reached, whatever the sandbox may reach beyond it.)
	rule(input, in, established(expr.VerdictAccept))
	rule(input, in, verdict(expr.VerdictDrop))
	// Out of a sandbox: no IPv6, none of Never nor the sandbox network; then the prefixes its
	// template allows (allowChain, a rule per link, Link.Allow); then none of Private; the rest
	// is the internet (egressChain).
	rule(forward, in, nfproto(unix.NFPROTO_IPV6), verdict(expr.VerdictDrop))
	for _, p := range append(slices.Clone(Never), cidr.Masked()) {
		rule(forward, in, nfproto(unix.NFPROTO_IPV4), daddrIn(p), verdict(expr.VerdictDrop))
	}
	rule(forward, in, nfproto(unix.NFPROTO_IPV4), []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: allowChain}})
	for _, p := range Private {
		rule(forward, in, nfproto(unix.NFPROTO_IPV4), daddrIn(p), verdict(expr.VerdictDrop))
	}
	rule(forward, in, []expr.Any{&expr.Verdict{Kind: expr.VerdictGoto, Chain: egressChain}})
	// A new connection past maxConns of its sandbox's address: refused; the rest accepted.
	conns := &nftables.Set{Table: filter, Name: connSet, KeyType: nftables.TypeIPAddr, Dynamic: true}
	if err := c.AddSet(conns, nil); err != nil {
		return err
	}
	rule(egress, nfproto(unix.NFPROTO_IPV4), ctNew(), []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Dynset{SrcRegKey: 1, SetName: connSet, SetID: conns.ID, Operation: unix.NFT_DYNSET_OP_ADD,
			Exprs: []expr.Any{&expr.Connlimit{Count: maxConns, Flags: expr.NFT_CONNLIMIT_F_INV}}},
		&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED},
	})
	rule(egress, verdict(expr.VerdictAccept))
	// Into a sandbox from outside: replies only.
	rule(forward, out, established(expr.VerdictAccept))
	rule(forward, out, verdict(expr.VerdictDrop))

	nat := c.AddTable(&nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4})
	post := chain(nat, "postrouting", nftables.ChainTypeNAT, nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource)
	c.AddRule(&nftables.Rule{Table: nat, Chain: post, Exprs: append(ifPrefix(expr.MetaKeyIIFNAME), &expr.Masq{})})
	return nil
}

// ifPrefix matches an interface name (key: iifname or oifname) that starts with IfPrefix.
func ifPrefix(key expr.MetaKey) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(IfPrefix)},
	}
}

// nfproto matches the packet's protocol family.
func nfproto(proto byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
}

// daddrIn matches an IPv4 destination in p.
func daddrIn(p netip.Prefix) []expr.Any {
	mask := net.CIDRMask(p.Bits(), 32)
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Masked().Addr().AsSlice()},
	}
}

// established matches a packet of an established or related connection and gives v.
func established(v expr.VerdictKind) []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryLE(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
		&expr.Verdict{Kind: v},
	}
}

// ctNew matches a packet that opens a connection (ct state new).
func ctNew() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binaryLE(expr.CtStateBitNEW), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}

func verdict(v expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: v}} }

// binaryLE is v in the host's byte order (little-endian on the architectures the agent runs on),
// as conntrack's state register holds it.
func binaryLE(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
