package agent

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/server"
	"github.com/cubefleet/cubefleet/internal/server/servertest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

func TestLocalAddrFor(t *testing.T) {
	for _, tc := range []struct{ node, addr, want string }{
		{"127.0.0.11", "127.0.0.1:3010", "127.0.0.11:0"},
		{"127.0.0.11", "127.0.0.11:3010", "127.0.0.11:0"},
		{"127.0.0.11", "localhost:3010", "127.0.0.11:0"},
		{"127.0.0.11", "10.0.0.1:3010", ""},   // the kernel picks a routable source
		{"127.0.0.11", "cp.example:3010", ""}, // a name other than localhost: the kernel's choice
		{"127.0.0.11", "[::1]:3010", ""},      // another address family
		{"10.0.0.5", "127.0.0.1:3010", ""},    // a routable node IP: the kernel's choice
		{"10.0.0.5", "10.0.0.1:3010", ""},
	} {
		got := ""
		if a := localAddrFor(netip.MustParseAddr(tc.node), tc.addr); a != nil {
			got = a.String()
		}
		if got != tc.want {
			t.Errorf("localAddrFor(%s, %s) = %q, want %q", tc.node, tc.addr, got, tc.want)
		}
	}
}

// TestLoopbackNodeJoins is the single-host demo: node 127.0.0.11 (--allow-loopback) joins a
// control plane on 127.0.0.1 with a join token bound to 127.0.0.11, which the control plane
// accepts only from that address; and a token bound to another address is refused with the
// address the agent registered from. (agent check of such a node: hostsetup's
// TestCheckLoopbackNode.)
func TestLoopbackNodeJoins(t *testing.T) {
	cp := servertest.StartControlPlane(t, server.Config{}, "")
	cfg := testConfig(t.TempDir(), cp.JoinToken(t, "127.0.0.11"), cp.Server.InternalURL())
	cfg.NodeIP, cfg.Listen, cfg.S3.Endpoint = netip.MustParseAddr("127.0.0.11"), "127.0.0.11:0", ""
	r := startAgent(t, cfg)
	testkit.WaitFor(t, 10*time.Second, "a status report", func() bool { return r.a.Health().LastReportAt != "" })
	if h := r.a.Health(); h.State != StateReporting || h.NodeID != "127.0.0.11" {
		t.Errorf("health %+v", h)
	}
	r.stop()

	// Bound to another address: the agent says which address it came from.
	cfg = testConfig(t.TempDir(), cp.JoinToken(t, "127.0.0.12"), cp.Server.InternalURL())
	cfg.NodeIP, cfg.Listen, cfg.S3.Endpoint = netip.MustParseAddr("127.0.0.13"), "127.0.0.13:0", ""
	r = startAgent(t, cfg)
	testkit.WaitFor(t, 10*time.Second, "a refused registration", func() bool { return len(r.sleeps()) > 0 })
	want := "bound to another address than the one this registration came from: this agent registered from 127.0.0.13 (the address the control plane sees"
	if h := r.a.Health(); !strings.Contains(h.Error, want) || !strings.Contains(r.logs.String(), want) {
		t.Errorf("health %+v\nwant it (and the log) to contain %q\n%s", h, want, r.logs.String())
	}
}
