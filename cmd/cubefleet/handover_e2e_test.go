package main_test

import (
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/ionos/ionossim"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// Static membership end to end: `cubefleet server --origins FILE --cube-count N` behind a
// simulated load balancer whose target group (the IONOS simulator's) routes every request.

// e2eStaticFleetDoc is the fleet of the static-membership tests: pool "lab" (one node out at a
// time) with two plain templates and no warm pool, so every sandbox on a Cube is the tests'.
const e2eStaticFleetDoc = `{"version": 1,
 "sites": [{"name": "lab", "kind": "shared", "region": "local"}],
 "pools": [{"name": "lab", "site": "lab", "class": "vps-host", "policy": {"disruptionBudget": 0.2}}],
 "flavors": [{"pool": "lab", "name": "tiny", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1}],
 "sandboxTemplates": [
  {"name": "sh", "pool": "lab", "flavor": "tiny", "imageId": "ubuntu-24.04", "network": "private"},
  {"name": "sh2", "pool": "lab", "flavor": "tiny", "imageId": "ubuntu-24.04", "network": "private"}]}`

// cubeIP is the loopback address of agent i of a fleet whose third octet is net (addAgent's).
func cubeIP(net, i int) string { return fmt.Sprintf("127.77.%d.%d", net, 10+i) }

// writeOrigins writes an origins file of the first n agents' origins (port 8080) and returns
// its path.
func writeOrigins(t *testing.T, net, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# the Cubes of this coordinator\n")
	for i := range n {
		fmt.Fprintf(&b, "http://%s:8080\n", cubeIP(net, i))
	}
	path := filepath.Join(t.TempDir(), "origins.txt")
	writeFile(t, path, b.String(), 0o600)
	return path
}

// routedBalancer is the load balancer in front of the control plane: an HTTP proxy on
// 127.0.0.1 that sends each request to the first target of the simulator's target group
// groupID with a weight above 0, as the group holds it at that moment.
func routedBalancer(t *testing.T, sim *ionossim.Sim, groupID string) string {
	t.Helper()
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		for _, g := range sim.Snapshot().TargetGroups {
			if g.ID != groupID {
				continue
			}
			for _, tg := range g.Targets {
				if tg.Weight > 0 {
					r.Out.URL.Scheme, r.Out.URL.Host = "http", tg.IP+":"+strconv.Itoa(int(tg.Port))
					return
				}
			}
		}
		r.Out.URL.Host = "127.0.0.1:1" // no target: refused
	}}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL
}

// setTargets makes addrs ("ip:port") the targets of the simulator's group groupID.
func setTargets(t *testing.T, sim *ionossim.Sim, groupID string, addrs ...string) {
	t.Helper()
	st := sim.Snapshot()
	for _, g := range st.TargetGroups {
		if g.ID == groupID {
			g.Targets = nil
			for _, a := range addrs {
				host, port, _ := strings.Cut(a, ":")
				p, _ := strconv.Atoi(port)
				g.Targets = append(g.Targets, ionossim.GroupTarget{IP: host, Port: int32(p), Weight: 1, HealthCheckEnabled: true})
			}
		}
	}
	if err := sim.Load(st); err != nil {
		t.Fatal(err)
	}
}

// replicaDir makes a data directory for another server of first's database, with first's
// secrets key and admin key (as an operator copies them).
func replicaDir(t *testing.T, first *cluster) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"secrets.key", "admin.token"} {
		data, err := os.ReadFile(filepath.Join(first.dataDir, name))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name), string(data), 0o600)
	}
	return dir
}

// TestStaticMembershipHandover moves a static-membership control plane from 4 Cubes to 2 the
// safe way: the routed server (--origins of 4) accepts a sandbox through the load balancer; a
// replacement with --origins of 2 starts ready on the shared PostgreSQL; the target group is
// handed over to it; new work reaches only its 2 Cubes; the previous server finishes the work
// it accepted and then stops (exit 0); the accepted sandbox's result is read through the
// replacement.
func TestStaticMembershipHandover(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the process runtime runs each sandbox as a user of its own, which needs root")
	}
	dsn := storetest.PostgresURL(t)
	net := 100 + os.Getpid()%100
	args := []string{"--node-heartbeat-timeout", "5s", "--node-lost-after", "30s"} // replicas: e2eReplicaArgs' window
	previous := startServerB(t, dsn, append(args, "--origins", writeOrigins(t, net, 4), "--cube-count", "4")...)
	// The replacement's address is chosen now, so the agents list both servers.
	nextAddr := freeAddr(t)
	sim := ionossim.New(ionossim.Options{})
	world := ionossim.SampleFleet(0)
	world.TargetGroups[0].Name = "control-plane"
	if err := sim.Load(world); err != nil {
		t.Fatal(err)
	}
	group := world.TargetGroups[0].ID
	setTargets(t, sim, group, strings.TrimPrefix(previous.url, "http://"))
	lb := routedBalancer(t, sim, group)
	token, err := os.ReadFile(filepath.Join(previous.dataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	f := &sandboxFleet{t: t, c: previous, api: client.New(previous.url, strings.TrimSpace(string(token)), nil), net: net,
		replicas: []*cluster{previous, {url: "http://" + nextAddr}}, database: dsn}
	f.applyDocAndJoin(e2eStaticFleetDoc, 4)
	routed := &sandboxFleet{t: t, api: client.New(lb, strings.TrimSpace(string(token)), nil)}

	accepted := routed.create("sh", nil, "sh", "-c", "sleep 3; echo accepted-before-the-handover")
	next := startServerAt(t, nextAddr, replicaDir(t, previous), dsn, "", append(args, "--origins", writeOrigins(t, net, 2), "--cube-count", "2")...)
	setTargets(t, sim, group, nextAddr)

	// New work goes through the replacement, to its 2 Cubes only.
	for i := range 4 {
		s := routed.create("sh2", nil, "echo", "after-"+strconv.Itoa(i))
		got := routed.wait(s.ID, 30*time.Second)
		if got.State != sandboxes.StateExited || (got.NodeID != cubeIP(net, 0) && got.NodeID != cubeIP(net, 1)) {
			t.Fatalf("a sandbox created after the handover: %s on %s, want exited on one of the 2 Cubes of the new origins", got.State, got.NodeID)
		}
	}
	// The previous server finishes the work it accepted, then stops.
	prev := &sandboxFleet{t: t, api: f.api}
	if got := prev.wait(accepted.ID, 30*time.Second); got.State != sandboxes.StateExited {
		t.Fatalf("the sandbox accepted before the handover ended %s", got.State)
	}
	previous.stop() // returns once the process has ended
	// Its result is read through the replacement, the one routed now.
	if logs := routed.logs(accepted.ID); logs.State != sandboxes.StateExited || logs.Stdout != "accepted-before-the-handover\n" {
		t.Errorf("the accepted sandbox through the replacement: %s %q", logs.State, logs.Stdout)
	}
	if got := routed.wait(accepted.ID, time.Second); got.NodeID == "" {
		t.Errorf("the accepted sandbox has no node through %s", next.url)
	}
}
