package agent

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// The sandbox network's mask range (Cube Sandbox's check_cidr_preflight).
const (
	MinNetworkBits = 16
	MaxNetworkBits = 24
)

var cidrPattern = regexp.MustCompile(`^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})/([0-9]{1,2})$`)

// ParseNetworkCIDR parses the sandbox network (CUBE_SANDBOX_NETWORK_CIDR): `a.b.c.d/m` with
// octets of at most three digits and at most 255, a mask from /16 to /24, the address aligned
// to its network, and not inside 0.0.0.0/8, loopback, link-local, multicast or 240.0.0.0/4. An
// unaligned value's error suggests the aligned one.
func ParseNetworkCIDR(s string) (netip.Prefix, error) {
	m := cidrPattern.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 network like 192.168.0.0/18", s)
	}
	var b [4]byte
	for i := range 4 {
		n, _ := strconv.Atoi(m[i+1])
		if n > 255 {
			return netip.Prefix{}, fmt.Errorf("%q: octet %d is %d, more than 255", s, i+1, n)
		}
		b[i] = byte(n)
	}
	bits, _ := strconv.Atoi(m[5])
	if bits < MinNetworkBits || bits > MaxNetworkBits {
		return netip.Prefix{}, fmt.Errorf("%q: mask /%d is out of range; use a mask from /%d to /%d (e.g. 192.168.0.0/18)", s, bits, MinNetworkBits, MaxNetworkBits)
	}
	p := netip.PrefixFrom(netip.AddrFrom4(b), bits)
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q is not aligned to its network; use %s", s, p.Masked())
	}
	for _, r := range unusableNetworks {
		if r.prefix.Overlaps(p) {
			return netip.Prefix{}, fmt.Errorf("%q is inside %s (%s), which cannot carry sandbox traffic; use a private network such as %s", s, r.prefix, r.what, DefaultNetworkCIDR)
		}
	}
	return p, nil
}

// unusableNetworks are the IPv4 ranges a sandbox network must not overlap: they are not
// routed as unicast between hosts.
var unusableNetworks = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network"`},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved, with the broadcast address"},
}

// Conflict is one thing on the host the sandbox network overlaps.
type Conflict struct {
	Kind   string       // "address", "route", "nameserver" or "cube-dev"
	Iface  string       // the interface, when known
	Prefix netip.Prefix // the address (a /32) or the network
}

// String describes c for an error message.
func (c Conflict) String() string {
	switch c.Kind {
	case "address":
		if c.Iface != "" {
			return fmt.Sprintf("address %s on %s", c.Prefix.Addr(), c.Iface)
		}
		return "address " + c.Prefix.Addr().String()
	case "route":
		return fmt.Sprintf("route %s dev %s", c.Prefix, c.Iface)
	case "nameserver":
		return "nameserver " + c.Prefix.Addr().String() + " (/etc/resolv.conf)"
	}
	return fmt.Sprintf("a leftover %s holding %s", c.Iface, c.Prefix)
}

// NetworkConflicts returns what on the host overlaps network: global interface addresses,
// routes (neither on the sandbox runtime's own devices, nor default, link-local, multicast or
// loopback routes) and /etc/resolv.conf nameservers. A leftover cube-dev on exactly network is
// reused, not a conflict; one on an overlapping different network is.
func (h Host) NetworkConflicts(network netip.Prefix) ([]Conflict, error) {
	var out []Conflict
	addrs, err := h.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("read the host's addresses: %w", err)
	}
	for _, ia := range addrs {
		if ia.Addr.IsLoopback() || isCubeDevice(ia.Iface) || !network.Contains(ia.Addr) {
			continue
		}
		out = append(out, Conflict{Kind: "address", Iface: ia.Iface, Prefix: netip.PrefixFrom(ia.Addr, 32)})
	}
	routes, err := h.Routes()
	if err != nil {
		return nil, fmt.Errorf("read the host's routes: %w", err)
	}
	for _, r := range routes {
		if r.Default() || !r.Dst.Overlaps(network) || ignoredRoute(r.Dst) {
			continue
		}
		if r.Iface == "cube-dev" {
			if r.Dst != network {
				out = append(out, Conflict{Kind: "cube-dev", Iface: r.Iface, Prefix: r.Dst})
			}
			continue
		}
		if isCubeDevice(r.Iface) {
			continue
		}
		out = append(out, Conflict{Kind: "route", Iface: r.Iface, Prefix: r.Dst})
	}
	ns, err := h.Nameservers()
	if err != nil {
		return nil, fmt.Errorf("read /etc/resolv.conf: %w", err)
	}
	for _, a := range ns {
		if network.Contains(a) {
			out = append(out, Conflict{Kind: "nameserver", Prefix: netip.PrefixFrom(a, 32)})
		}
	}
	return out, nil
}

// ignoredRoute reports whether routes to dst never conflict: link-local, multicast, loopback.
func ignoredRoute(dst netip.Prefix) bool {
	for _, p := range []netip.Prefix{
		netip.MustParsePrefix("169.254.0.0/16"),
		netip.MustParsePrefix("224.0.0.0/4"),
		netip.MustParsePrefix("127.0.0.0/8"),
	} {
		if p.Bits() <= dst.Bits() && p.Contains(dst.Addr()) {
			return true
		}
	}
	return false
}

// SuggestNetwork returns the first network of the same size as network from a few private
// ranges that has no conflict on the host, or an invalid prefix when none is free.
func (h Host) SuggestNetwork(network netip.Prefix) netip.Prefix {
	for _, base := range []string{"192.168.0.0", "10.100.0.0", "10.200.0.0", "172.20.0.0", "172.30.0.0", "10.240.0.0"} {
		p := netip.PrefixFrom(netip.MustParseAddr(base), network.Bits()).Masked()
		if p == network {
			continue
		}
		if c, err := h.NetworkConflicts(p); err == nil && len(c) == 0 {
			return p
		}
	}
	return netip.Prefix{}
}
