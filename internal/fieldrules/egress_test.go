package fieldrules

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// An egressAllow entry is a canonical prefix inside the private ranges that holds no metadata
// address; loopback, link-local, multicast and the rest of the address space are refused, each
// with a message that quotes the entry and says the fix.
func TestCheckEgressPrefix(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // a part of the message; "" for a valid prefix
	}{
		{"10.20.0.0/16", ""},
		{"10.0.0.0/8", ""},
		{"10.20.0.1/32", ""},
		{"172.16.0.0/12", ""},
		{"172.31.255.0/24", ""},
		{"192.168.7.0/24", ""},
		{"100.64.0.0/16", ""},
		{"100.100.100.0/25", ""}, // 100.100.100.0-127: not the metadata address
		{"fd12:3456::/32", ""},
		{"fd00:ec3::/32", ""},
		{"10.20.0.1/16", "host bits set; write the network, 10.20.0.0/16"},
		{"10.20.0.1", "not a network prefix"},
		{"FD12:3456::/32", "canonical form; write fd12:3456::/32"},
		{"fd12:3456:0::/32", "canonical form; write fd12:3456::/32"},
		{"", "not a network prefix"},
		{"ten/8", "not a network prefix"},
		{"127.0.0.0/8", "loopback"},
		{"::1/128", "loopback"},
		{"169.254.0.0/16", "link-local"},
		{"169.254.169.254/32", "link-local"},
		{"fe80::/10", "link-local"},
		{"224.0.0.0/4", "multicast"},
		{"ff02::/16", "multicast"},
		{"100.64.0.0/10", "metadata address 100.100.100.200"},
		{"100.100.100.200/32", "metadata address 100.100.100.200"},
		{"fd00:ec2::/32", "metadata address fd00:ec2::254"},
		{"fc00::/7", "metadata address fd00:ec2::254"},
		{"10.0.0.0/7", "not inside the private ranges"},
		{"0.0.0.0/0", "not inside the private ranges"},
		{"::/0", "not inside the private ranges"},
		{"198.51.100.0/24", "not inside the private ranges"},
		{"172.32.0.0/16", "not inside the private ranges"},
		{"::ffff:10.0.0.0/104", "IPv4-mapped"},
	} {
		_, got := CheckEgressPrefix(tc.in)
		if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
			t.Errorf("CheckEgressPrefix(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got != "" && tc.in != "" && !strings.Contains(got, tc.in) {
			t.Errorf("CheckEgressPrefix(%q) = %q: the message does not name the entry", tc.in, got)
		}
	}
}

// The list: at most MaxEgressAllow entries, none twice (by prefix), each entry's problem at its
// index.
func TestCheckEgressAllow(t *testing.T) {
	if p := CheckEgressAllow("public", []string{"10.20.0.0/16", "192.168.7.0/24"}); p != nil {
		t.Errorf("valid list: %+v", p)
	}
	p := CheckEgressAllow("public", []string{"10.20.0.0/16", "127.0.0.0/8", "10.20.0.0/16"})
	if len(p) != 2 || p[0].Index != 1 || p[1].Index != 2 || !strings.Contains(p[1].Message, "appears twice (also egressAllow[0])") {
		t.Errorf("problems: %+v", p)
	}
	p = CheckEgressAllow("private", []string{"10.20.0.0/16"})
	if len(p) != 1 || p[0].Index != -1 || !strings.Contains(p[0].Message, "set network to public, or leave egressAllow out") {
		t.Errorf("a private template's egressAllow: %+v", p)
	}
	if p := CheckEgressAllow("private", nil); p != nil {
		t.Errorf("a private template without egressAllow: %+v", p)
	}
	long := make([]string, MaxEgressAllow+1)
	for i := range long {
		long[i] = fmt.Sprintf("10.%d.0.0/16", i)
	}
	p = CheckEgressAllow("public", long)
	if len(p) != 1 || p[0].Index != -1 || !strings.Contains(p[0].Message, "egressAllow has 33 items; at most 32") {
		t.Errorf("too many: %+v", p)
	}
}

func TestRuntimes(t *testing.T) {
	if !Runtimes.Has("process") || !Runtimes.Has("microvm") || Runtimes.Has("") || Runtimes.Has("kvm") {
		t.Errorf("Runtimes = %v", Runtimes.Values())
	}
	if got := Runtimes.Rule(); got != "process or microvm" {
		t.Errorf("Runtimes.Rule() = %q", got)
	}
}

// FuzzCheckEgressPrefix: whatever the input, an accepted prefix is canonical, inside one of
// PrivateRanges and holds no metadata address; a refused one has a message that never runs
// past the quoted input.
func FuzzCheckEgressPrefix(f *testing.F) {
	for _, s := range []string{"10.20.0.0/16", "100.64.0.0/10", "fd00:ec2::/32", "::ffff:10.0.0.0/104", "10.0.0.0/7", "fe80::1%eth0/64", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, msg := CheckEgressPrefix(s)
		if msg != "" {
			return
		}
		if p != p.Masked() || p.String() != s {
			t.Fatalf("%q accepted as %s", s, p)
		}
		inside := false
		for _, r := range PrivateRanges {
			inside = inside || (r.Bits() <= p.Bits() && r.Contains(p.Addr()))
		}
		if !inside {
			t.Fatalf("%q accepted outside the private ranges", s)
		}
		for _, m := range MetadataAddrs {
			if p.Contains(m) {
				t.Fatalf("%q accepted holding %s", s, m)
			}
		}
	})
}

// A template's egressAllow entry lies inside its pool's policy.egressAllow when a policy prefix
// holds all of it: equal or shorter, of the same family; an empty policy holds nothing.
func TestEgressWithin(t *testing.T) {
	policy := []string{"10.20.0.0/16", "192.168.7.0/24", "fd12:3456::/32"}
	for _, tc := range []struct {
		entry  string
		policy []string
		want   bool
	}{
		{"10.20.0.0/16", policy, true},
		{"10.20.5.0/24", policy, true},
		{"10.20.5.7/32", policy, true},
		{"192.168.7.128/25", policy, true},
		{"fd12:3456:1::/48", policy, true},
		{"10.0.0.0/8", policy, false},   // wider than the policy's prefix
		{"10.21.0.0/16", policy, false}, // beside it
		{"10.20.0.0/15", policy, false},
		{"192.168.0.0/16", policy, false},
		{"fd12::/16", policy, false},
		{"172.16.0.0/12", policy, false},
		{"10.20.0.0/16", nil, false},
		{"10.20.0.0/16", []string{}, false},
		{"not a prefix", policy, false},
		{"10.20.0.0/16", []string{"not a prefix"}, false},
		{"10.20.0.0/16", []string{"10.0.0.0/8"}, true},
	} {
		if got := EgressWithin(tc.entry, tc.policy); got != tc.want {
			t.Errorf("EgressWithin(%q, %q) = %v, want %v", tc.entry, tc.policy, got, tc.want)
		}
	}
	if got := EgressOutside([]string{"10.20.1.0/24", "10.0.0.0/8", "192.168.7.0/24", "172.16.0.0/12"}, policy); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("EgressOutside = %v, want [1 3]", got)
	}
	if got := EgressOutside([]string{"10.20.1.0/24"}, policy); got != nil {
		t.Errorf("EgressOutside of an allowed list = %v, want nil", got)
	}
}

// The message for an entry outside the policy names the entry, the pool, what it allows and the
// fix.
func TestEgressOutsidePolicy(t *testing.T) {
	for _, tc := range []struct {
		policy []string
		want   string
	}{
		{nil, "allows no private prefixes (its policy.egressAllow is empty)"},
		{[]string{"10.20.0.0/16", "fd12::/32"}, "allows only 10.20.0.0/16, fd12::/32"},
	} {
		got := EgressOutsidePolicy("10.0.0.0/8", "gpu-fra", tc.policy)
		for _, part := range []string{"10.0.0.0/8", "pool gpu-fra", tc.want, "add it to pool gpu-fra's policy.egressAllow, which only the pool's owner can change"} {
			if !strings.Contains(got, part) {
				t.Errorf("EgressOutsidePolicy(%q) = %q, want it to hold %q", tc.policy, got, part)
			}
		}
	}
}

// A pool's policy.egressAllow follows the entry rule of a template's egressAllow, under its own
// name, and needs no network.
func TestCheckEgressPolicy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		list  []string
		index int    // the first problem's index; -2 for none
		want  string // a part of its message
	}{
		{"absent", nil, -2, ""},
		{"valid", []string{"10.20.0.0/16", "fd12:3456::/32"}, -2, ""},
		{"public range", []string{"198.51.100.0/24"}, 0, "not inside the private ranges"},
		{"metadata", []string{"10.0.0.0/8", "100.64.0.0/10"}, 1, "metadata address 100.100.100.200"},
		{"host bits", []string{"10.20.0.1/16"}, 0, "write the network, 10.20.0.0/16"},
		{"twice", []string{"10.20.0.0/16", "10.20.0.0/16"}, 1, "appears twice (also policy.egressAllow[0])"},
		{"too many", func() []string {
			l := make([]string, MaxEgressAllow+1)
			for i := range l {
				l[i] = fmt.Sprintf("10.%d.0.0/16", i)
			}
			return l
		}(), -1, "policy.egressAllow has 33 items; at most 32"},
	} {
		p := CheckEgressPolicy(tc.list)
		if tc.index == -2 {
			if p != nil {
				t.Errorf("%s: %+v, want none", tc.name, p)
			}
			continue
		}
		if len(p) == 0 || p[0].Index != tc.index || !strings.Contains(p[0].Message, tc.want) {
			t.Errorf("%s: %+v, want index %d holding %q", tc.name, p, tc.index, tc.want)
		}
	}
}
