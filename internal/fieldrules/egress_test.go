package fieldrules

import (
	"fmt"
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
