package hostinfo

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func testHost(name string) Host { return Host{Root: "testdata/host/" + name} }

func TestRoutes(t *testing.T) {
	routes, err := testHost("compute").Routes()
	if err != nil {
		t.Fatal(err)
	}
	want := []Route{
		{"eth0", netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("10.0.0.1"), 100},
		{"eth0", netip.MustParsePrefix("10.0.0.0/24"), netip.MustParseAddr("0.0.0.0"), 100},
		{"docker0", netip.MustParsePrefix("172.17.0.0/16"), netip.MustParseAddr("0.0.0.0"), 0},
		{"cube-dev", netip.MustParsePrefix("192.168.0.0/18"), netip.MustParseAddr("0.0.0.0"), 0},
		{"z192.168.0.9", netip.MustParsePrefix("192.168.0.9/32"), netip.MustParseAddr("0.0.0.0"), 0},
		{"eth0", netip.MustParsePrefix("169.254.0.0/16"), netip.MustParseAddr("0.0.0.0"), 1000},
	}
	if !reflect.DeepEqual(routes, want) {
		t.Errorf("Routes:\n got %v\nwant %v", routes, want)
	}
}

func TestInterfaceAddrs(t *testing.T) {
	got, err := testHost("compute").InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	want := []InterfaceAddr{
		{"eth0", netip.MustParseAddr("10.0.0.5")},
		{"lo", netip.MustParseAddr("127.0.0.1")},
		{"docker0", netip.MustParseAddr("172.17.0.1")},
		{"cube-dev", netip.MustParseAddr("192.168.0.1")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("InterfaceAddrs:\n got %v\nwant %v", got, want)
	}
	ns, err := testHost("compute").Nameservers()
	if err != nil || len(ns) != 1 || ns[0] != netip.MustParseAddr("10.0.0.2") {
		t.Errorf("Nameservers = %v, %v; want [10.0.0.2] (IPv6 ones left out)", ns, err)
	}
}

func TestDetectNodeIP(t *testing.T) {
	for host, want := range map[string]string{"compute": "10.0.0.5", "conflicts": "192.168.10.5", "vm": "10.1.0.7"} {
		got, err := testHost(host).DetectNodeIP()
		if err != nil || got.String() != want {
			t.Errorf("%s: DetectNodeIP = %v, %v; want %s", host, got, err, want)
		}
	}
	if got, err := testHost("isolated").DetectNodeIP(); err == nil {
		t.Errorf("isolated: DetectNodeIP = %v, want an error", got)
	}
}

func TestNetworkConflicts(t *testing.T) {
	for _, tc := range []struct {
		host, network string
		want          []string
	}{
		// A leftover cube-dev on exactly the network is reused; TAPs and link-local are ignored.
		{"compute", "192.168.0.0/18", nil},
		{"compute", "172.17.0.0/16", []string{"address 172.17.0.1 on docker0", "route 172.17.0.0/16 dev docker0"}},
		{"compute", "10.0.0.0/16", []string{"address 10.0.0.5 on eth0", "route 10.0.0.0/24 dev eth0", "nameserver 10.0.0.2 (/etc/resolv.conf)"}},
		{"compute", "169.254.0.0/16", nil},
		{"compute", "192.168.0.0/16", []string{"a leftover cube-dev holding 192.168.0.0/18"}},
		{"conflicts", "192.168.0.0/18", []string{"address 192.168.10.5 on eth0", "route 192.168.10.0/24 dev eth0", "nameserver 192.168.1.1 (/etc/resolv.conf)"}},
		{"conflicts", "10.100.0.0/18", []string{"route 10.100.0.0/16 dev eth0"}},
		{"conflicts", "10.200.0.0/18", []string{"a leftover cube-dev holding 10.200.0.0/20"}},
		{"conflicts", "224.0.0.0/16", nil}, // multicast routes never conflict
		{"conflicts", "172.20.0.0/18", nil},
	} {
		got, err := testHost(tc.host).NetworkConflicts(netip.MustParsePrefix(tc.network))
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, c := range got {
			s = append(s, c.String())
		}
		if !reflect.DeepEqual(s, tc.want) {
			t.Errorf("%s: NetworkConflicts(%s)\n got %q\nwant %q", tc.host, tc.network, s, tc.want)
		}
	}
	if got := testHost("conflicts").SuggestNetwork(netip.MustParsePrefix("192.168.0.0/18")); got.String() != "172.20.0.0/18" {
		t.Errorf("SuggestNetwork = %v, want 172.20.0.0/18 (10.100/18 and 10.200/18 conflict)", got)
	}
}

func TestFacts(t *testing.T) {
	f, err := testHost("compute").Facts()
	if err != nil {
		t.Fatal(err)
	}
	if f.Arch != "x86_64" || f.CPUCount != 8 || f.MemTotalKB != 16384000 || f.MemTotalMiB() != 16000 ||
		f.CPUVendor != "GenuineIntel" || !f.KVM || f.Hypervisor || !f.Cgroup2 || f.CgroupCPU != "cgroup v2" || f.KernelRelease != "6.8.0-45-generic" {
		t.Errorf("compute facts: %+v", f)
	}
	vm, err := testHost("vm").Facts()
	if err != nil {
		t.Fatal(err)
	}
	if vm.KVM || !vm.Hypervisor || vm.Cgroup2 || vm.CgroupCPU != "" || vm.CPUCount != 2 {
		t.Errorf("vm facts: %+v", vm)
	}
	if _, err := (Host{Root: t.TempDir()}).Facts(); err == nil || !strings.Contains(err.Error(), "memory size") {
		t.Errorf("Facts without /proc/meminfo: %v", err)
	}
}

// TestRealHost reads the machine the tests run on: it must parse, whatever it holds.
func TestRealHost(t *testing.T) {
	var h Host
	if _, err := h.Routes(); err != nil {
		t.Errorf("Routes: %v", err)
	}
	if _, err := h.InterfaceAddrs(); err != nil {
		t.Errorf("InterfaceAddrs: %v", err)
	}
	f, err := h.Facts()
	if err != nil || f.CPUCount < 1 || f.Arch == "" {
		t.Errorf("Facts = %+v, %v", f, err)
	}
}
