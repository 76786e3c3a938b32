package agent

import (
	"strings"
	"testing"
)

func TestParseNetworkCIDR(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"192.168.0.0/18", "192.168.0.0/18", ""},
		{"10.100.0.0/16", "10.100.0.0/16", ""},
		{"10.100.4.0/24", "10.100.4.0/24", ""},
		{" 172.20.0.0/20 ", "172.20.0.0/20", ""},
		{"192.168.1.0/18", "", `"192.168.1.0/18" is not aligned to its network; use 192.168.0.0/18`},
		{"10.1.2.3/16", "", "use 10.1.0.0/16"},
		{"10.0.0.0/15", "", "mask /15 is out of range; use a mask from /16 to /24"},
		{"10.0.0.0/25", "", "mask /25 is out of range"},
		{"10.0.0.0/8", "", "mask /8 is out of range"},
		{"256.0.0.0/16", "", "octet 1 is 256, more than 255"},
		{"10.0.0/16", "", "is not an IPv4 network like 192.168.0.0/18"},
		{"1000.0.0.0/16", "", "is not an IPv4 network"},
		{"10.0.0.0", "", "is not an IPv4 network"},
		{"fd00::/64", "", "is not an IPv4 network"},
		{"", "", "is not an IPv4 network"},
		{"127.0.0.0/16", "", `"127.0.0.0/16" is inside 127.0.0.0/8 (loopback), which cannot carry sandbox traffic; use a private network such as 192.168.0.0/18`},
		{"127.255.0.0/24", "", "inside 127.0.0.0/8 (loopback)"},
		{"169.254.0.0/16", "", "inside 169.254.0.0/16 (link-local)"},
		{"169.254.10.0/24", "", "link-local"},
		{"224.1.0.0/16", "", "inside 224.0.0.0/4 (multicast)"},
		{"239.255.255.0/24", "", "multicast"},
		{"0.0.0.0/16", "", `inside 0.0.0.0/8 ("this network")`},
		{"240.0.0.0/16", "", "reserved"},
		{"255.255.255.0/24", "", "reserved, with the broadcast address"},
		{"126.255.0.0/16", "126.255.0.0/16", ""},
		{"169.253.0.0/16", "169.253.0.0/16", ""},
	} {
		got, err := ParseNetworkCIDR(tc.in)
		switch {
		case tc.err == "" && (err != nil || got.String() != tc.want):
			t.Errorf("ParseNetworkCIDR(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseNetworkCIDR(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.err)
		}
	}
}
