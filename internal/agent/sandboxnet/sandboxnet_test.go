package sandboxnet

import (
	"net/netip"
	"testing"
)

// A public sandbox's link is the index-th /30 of the sandbox network, its host end .1 and the
// sandbox .2, named by the index; indices wrap around the /30s the network has.
func TestLinkFor(t *testing.T) {
	cidr := netip.MustParsePrefix("192.168.0.0/18")
	for _, tc := range []struct {
		index             int
		name, host, inner string
	}{
		{0, "cfv0", "192.168.0.1/30", "192.168.0.2/30"},
		{1, "cfv1", "192.168.0.5/30", "192.168.0.6/30"},
		{64, "cfv64", "192.168.1.1/30", "192.168.1.2/30"},
		{4096, "cfv0", "192.168.0.1/30", "192.168.0.2/30"}, // a /18 has 4,096 /30s
		{4095, "cfv4095", "192.168.63.253/30", "192.168.63.254/30"},
	} {
		l, err := LinkFor(cidr, tc.index)
		if err != nil || l.HostIf != tc.name || l.HostAddr.String() != tc.host || l.SandboxAddr.String() != tc.inner {
			t.Errorf("LinkFor(%s, %d) = %+v, %v; want %s %s %s", cidr, tc.index, l, err, tc.name, tc.host, tc.inner)
		}
	}
	for _, bad := range []string{"192.168.0.0/29", "fd00::/64"} {
		if _, err := LinkFor(netip.MustParsePrefix(bad), 0); err == nil {
			t.Errorf("LinkFor(%s) accepted", bad)
		}
	}
}
