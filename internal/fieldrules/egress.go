package fieldrules

import (
	"fmt"
	"net/netip"
	"strings"
)

// MaxEgressAllow is the most prefixes one template's egressAllow lists.
const MaxEgressAllow = 32

// EgressAllowRule says what an entry of a template's egressAllow is, for messages and the
// JSON Schema.
const EgressAllowRule = "a network prefix in canonical CIDR form with no host bits set (e.g. 10.20.0.0/16), inside the private ranges 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 (RFC 1918), 100.64.0.0/10 (RFC 6598) or fc00::/7 (unique local IPv6), holding no metadata address (100.100.100.200, fd00:ec2::254)"

// PrivateRanges are the ranges an egressAllow prefix lies inside: RFC 1918, RFC 6598 (shared
// address space) and unique local IPv6 addresses (RFC 4193).
var PrivateRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("fc00::/7"),
}

// MetadataAddrs are the cloud metadata addresses inside PrivateRanges (Alibaba Cloud's
// 100.100.100.200, AWS's IPv6 fd00:ec2::254): no egressAllow prefix may hold one. The
// link-local ones (169.254.169.254) are outside PrivateRanges already.
var MetadataAddrs = []netip.Addr{
	netip.MustParseAddr("100.100.100.200"),
	netip.MustParseAddr("fd00:ec2::254"),
}

// EgressProblem is what is wrong with a template's egressAllow: the entry at Index, or the
// whole list when Index is -1.
type EgressProblem struct {
	Index   int
	Message string
}

// CheckEgressAllow returns what is wrong with list, the egressAllow of a template whose network
// is network (the private prefixes a public sandbox of it may reach besides the internet), or
// nil: an empty list, or one of a public template, of at most MaxEgressAllow entries, each
// EgressAllowRule, none twice. Each message names the entry and
// says the fix. Where a sandbox runs, its node's own addresses, the control plane, the sandbox
// network and every metadata address stay unreachable even inside an allowed prefix: those are
// known on the node only, so the node enforces them (docs/sandbox-runtime.md).
func CheckEgressAllow(network string, list []string) []EgressProblem {
	var out []EgressProblem
	if len(list) > 0 && network != NetworkPublic {
		out = append(out, EgressProblem{-1, "egressAllow opens private prefixes to a public sandbox; a private sandbox reaches nothing outside itself: set network to public, or leave egressAllow out"})
	}
	return append(out, checkEgressList("egressAllow", list)...)
}

// CheckEgressPolicy returns what is wrong with list, a pool's policy.egressAllow (the private
// prefixes the pool's owner lets templates of the pool allow), or nil: the entries follow the
// rule of a template's egressAllow (at most MaxEgressAllow, each EgressAllowRule, none twice).
// Each message names the entry and says the fix.
func CheckEgressPolicy(list []string) []EgressProblem {
	return checkEgressList("policy.egressAllow", list)
}

// checkEgressList checks the entries of list, the field named field: at most MaxEgressAllow,
// each EgressAllowRule, none twice.
func checkEgressList(field string, list []string) []EgressProblem {
	var out []EgressProblem
	if len(list) > MaxEgressAllow {
		out = append(out, EgressProblem{-1, TooMany(field, len(list), MaxEgressAllow, "items")})
	}
	seen := make(map[netip.Prefix]int, len(list))
	for i, s := range list {
		p, msg := CheckEgressPrefix(s)
		if msg == "" {
			if j, dup := seen[p]; dup {
				msg = fmt.Sprintf("%s appears twice (also %s[%d]); keep one", s, field, j)
			}
			seen[p] = i
		}
		if msg != "" {
			out = append(out, EgressProblem{i, msg})
		}
	}
	return out
}

// EgressWithin reports whether entry, one prefix of a template's egressAllow, lies inside a
// prefix of policy, its pool's policy.egressAllow. An entry or a policy prefix that does not
// parse holds nothing: such an entry is never within.
func EgressWithin(entry string, policy []string) bool {
	p, err := netip.ParsePrefix(entry)
	if err != nil {
		return false
	}
	for _, s := range policy {
		r, err := netip.ParsePrefix(s)
		if err == nil && r.Bits() <= p.Bits() && r.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// EgressOutside returns the indexes of the entries of list (a template's egressAllow) that lie
// inside no prefix of policy (its pool's policy.egressAllow), in order; nil when all do.
func EgressOutside(list, policy []string) []int {
	var out []int
	for i, e := range list {
		if !EgressWithin(e, policy) {
			out = append(out, i)
		}
	}
	return out
}

// EgressOutsidePolicy is the message for entry, a template's egressAllow entry that lies
// outside policy, the policy.egressAllow of the pool named pool: it names both and the fix.
func EgressOutsidePolicy(entry, pool string, policy []string) string {
	allowed := "allows no private prefixes (its policy.egressAllow is empty)"
	if len(policy) > 0 {
		allowed = "allows only " + strings.Join(policy, ", ")
	}
	return fmt.Sprintf("%s is outside what pool %s lets its sandboxes reach: the pool %s; allow a prefix inside those, or add it to pool %s's policy.egressAllow, which only the pool's owner can change", entry, pool, allowed, pool)
}

// CheckEgressPrefix parses s, one entry of a template's egressAllow, and returns it, or what is
// wrong with it (the message quotes s and says the fix; "" when nothing is).
func CheckEgressPrefix(s string) (netip.Prefix, string) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Sprintf("%s is not a network prefix; write one in CIDR form, e.g. 10.20.0.0/16", Quoted(s))
	}
	a := p.Addr()
	switch {
	case a.Is4In6():
		return p, fmt.Sprintf("%s is an IPv4-mapped IPv6 prefix; write the IPv4 prefix itself, e.g. 10.20.0.0/16", s)
	case a.Zone() != "":
		return p, fmt.Sprintf("%s has an IPv6 zone; leave it out", s)
	case p != p.Masked():
		return p, fmt.Sprintf("%s has host bits set; write the network, %s", s, p.Masked())
	case p.String() != s:
		return p, fmt.Sprintf("%s is not written in its canonical form; write %s", s, p)
	case a.IsLoopback():
		return p, fmt.Sprintf("%s is a loopback prefix: a sandbox never reaches its host's loopback; allow a private range (RFC 1918, RFC 6598 or fc00::/7) instead", s)
	case a.IsMulticast():
		return p, fmt.Sprintf("%s is a multicast prefix: a sandbox never sends multicast; allow a private range (RFC 1918, RFC 6598 or fc00::/7) instead", s)
	case a.IsLinkLocalUnicast():
		return p, fmt.Sprintf("%s is link-local, where the metadata addresses (169.254.169.254) live: a sandbox never reaches it; allow a private range (RFC 1918, RFC 6598 or fc00::/7) instead", s)
	}
	for _, r := range PrivateRanges {
		if r.Bits() <= p.Bits() && r.Contains(a) {
			for _, m := range MetadataAddrs {
				if p.Contains(m) {
					return p, fmt.Sprintf("%s holds the metadata address %s, which a sandbox never reaches; allow longer prefixes that leave it out", s, m)
				}
			}
			return p, ""
		}
	}
	return p, fmt.Sprintf("%s is not inside the private ranges; egressAllow opens private addresses only (the internet is open to a public sandbox already): give a prefix inside 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10 or fc00::/7", s)
}
