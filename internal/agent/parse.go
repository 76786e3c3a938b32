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
