package hostinfo

import (
	"fmt"
	"net/netip"
)

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
