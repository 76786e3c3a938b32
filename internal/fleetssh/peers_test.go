package fleetssh_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/fleetssh"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestPeers adds a Cube's peer on the GPU host over real SSH, live (the `wg` stand-in) and in
// the interface's config file, twice (idempotent), refuses an address another peer holds,
// and removes exactly that peer again: the config file ends byte for byte as it began.
func TestPeers(t *testing.T) {
	s := testkit.StartSSHD(t)
	peers := s.WireGuardStandIn(t, "wg0")
	conf := filepath.Join(t.TempDir(), "wg0.conf")
	const start = "[Interface]\n# the GPU host\nPrivateKey = kept\nListenPort = 51820\n\n[Peer]\nPublicKey = BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA=\nAllowedIPs = 10.7.0.11/32\n"
	if err := os.WriteFile(conf, []byte(start), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(peers, []byte("BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA=\t10.7.0.11/32\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := fleetssh.NewDialer(s.KeyFile, s.KnownHosts, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h := fleetssh.WireGuardHost{Host: "127.0.0.1", Port: s.Port, User: s.User, Interface: "wg0", ConfigFile: conf}
	_, key, err := fleetssh.NewWireGuardKey()
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr("10.7.0.13")
	for range 2 {
		if err := d.AddPeer(ctx, h, key, ip, "cube-r1-2"); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := os.ReadFile(conf)
	if strings.Count(string(got), "PublicKey = "+key) != 1 || !strings.HasPrefix(string(got), start) || !strings.Contains(string(got), "# cubefleet cube-r1-2\n") {
		t.Errorf("config after two adds:\n%s", got)
	}
	listed, err := d.Peers(ctx, h)
	if err != nil || listed[netip.MustParsePrefix("10.7.0.13/32")] != key || len(listed) != 2 {
		t.Errorf("peers after add: %v %v", listed, err)
	}
	if err := d.AddPeer(ctx, h, key, netip.MustParseAddr("10.7.0.11"), "x"); err == nil || !strings.Contains(err.Error(), "already allowed to peer BBBB") {
		t.Errorf("add on another peer's address: %v", err)
	}
	if err := d.RemovePeer(ctx, h, "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA=", ip); err == nil {
		t.Error("removing a peer that allows another address succeeded")
	}
	for range 2 {
		if err := d.RemovePeer(ctx, h, key, ip); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := os.ReadFile(conf); string(got) != start {
		t.Errorf("config after remove:\n%q\nwant\n%q", got, start)
	}
	if got, _ := os.ReadFile(peers); string(got) != "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA=\t10.7.0.11/32\n" {
		t.Errorf("live peers after remove: %q", got)
	}
	for _, bad := range []fleetssh.WireGuardHost{{Interface: "wg0; rm -rf /"}, {Interface: "wg0", ConfigFile: "/etc/x'y"}} {
		if err := d.AddPeer(ctx, bad, key, ip, "c"); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if err := d.AddPeer(ctx, h, "not-a-key", ip, "c"); err == nil {
		t.Error("a malformed key was accepted")
	}
}
