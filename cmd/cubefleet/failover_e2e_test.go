package main_test

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// Failover end to end: three `cubefleet server` processes on one PostgreSQL and agents that list
// all three, the lease holders killed with SIGKILL while creates wait and arrive.

// e2eReplicaArgs are the flags of the replicas of the failover tests: newSandboxFleet's, but a
// heartbeat timeout of 5 s: a replica learns of the reports another one received within about
// two flush intervals (2 s), longer than newSandboxFleet's 1 s window.
var e2eReplicaArgs = []string{"--result-max-bytes", strconv.Itoa(e2eResultMax), "--node-heartbeat-timeout", "5s", "--node-lost-after", "30s"}

// newReplicatedFleet starts n replicas of one control plane with the flags args on a fresh
// PostgreSQL database (the first with --dev bootstraps it; the others get its secrets key and
// admin key, as an operator copies them), then agents as newSandboxFleet does, each listing
// every replica.
func newReplicatedFleet(t testing.TB, n, agents int, args []string) *sandboxFleet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the process runtime runs each sandbox as a user of its own, which needs root")
	}
	dsn := storetest.PostgresURL(t)
	first := startServerB(t, dsn, args...)
	replicas := []*cluster{first}
	for range n - 1 {
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
		replicas = append(replicas, startServerIn(t, dir, dsn, "", args...))
	}
	token, err := os.ReadFile(filepath.Join(first.dataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	f := &sandboxFleet{t: t, c: first, api: client.New(first.url, strings.TrimSpace(string(token)), nil), net: 100 + os.Getpid()%100,
		replicas: replicas, database: dsn, serverArgs: args}
	f.applyAndJoin(agents)
	return f
}

// replicaAPI is a client of replica c with the admin key.
func (f *sandboxFleet) replicaAPI(c *cluster) *client.Client {
	token, err := os.ReadFile(filepath.Join(f.c.dataDir, "admin.token"))
	if err != nil {
		f.t.Fatal(err)
	}
	return client.New(c.url, strings.TrimSpace(string(token)), nil)
}

// leaseHolder returns the live replica that holds the scheduler lease (nil: none now).
func (f *sandboxFleet) leaseHolder(live []*cluster) *cluster {
	for _, c := range live {
		var st struct {
			LeaseHolder bool `json:"leaseHolder"`
		}
		if f.replicaAPI(c).Call(context.Background(), "scheduler.status", map[string]any{}, &st) == nil && st.LeaseHolder {
			return c
		}
	}
	return nil
}

// createOn creates a sandbox running argv through replica c (async) and returns the answer.
func (f *sandboxFleet) createOn(c *cluster, argv ...string) (sandboxes.Sandbox, error) {
	var s sandboxes.Sandbox
	err := f.replicaAPI(c).Call(context.Background(), "sandboxes.create",
		map[string]any{"tenantId": "root", "template": "sh", "command": argv, "async": true}, &s)
	return s, err
}

// killHolder SIGKILLs the replica of live that holds the scheduler lease and returns the
// others, once one of them holds it; the fleet's API client moves to one of them.
func (f *sandboxFleet) killHolder(live []*cluster) []*cluster {
	f.t.Helper()
	holder := f.leaseHolder(live)
	if holder == nil {
		f.t.Fatal("no replica holds the scheduler lease")
	}
	var others []*cluster
	for _, c := range live {
		if c != holder {
			others = append(others, c)
		}
	}
	holder.crash()
	f.api = f.replicaAPI(others[0])
	testkit.WaitFor(f.t, 30*time.Second, "a new scheduler lease holder", func() bool { return f.leaseHolder(others) != nil })
	return others
}

// restart starts the killed replica c again on its address and data directory.
func (f *sandboxFleet) restart(c *cluster) *cluster {
	f.t.Helper()
	n := startServerAt(f.t, strings.TrimPrefix(c.url, "http://"), c.dataDir, f.database, "", f.serverArgs...)
	for i, r := range f.replicas {
		if r == c {
			f.replicas[i] = n
		}
	}
	return n
}

// TestLeaseTakeoverPlaces: the scheduler lease holder is killed (SIGKILL) while creates arrive
// through the other replicas, then the next holder while creates wait for room; the replica
// that takes the lease over places them all (every one ends exited), and a create that arrives
// once a new holder is seen, with room free, is answered starting, not left waiting. (A
// replica started before the pool was created did not know it until its periodic pool read,
// and as the holder placed nothing there: "pool ... has no nodes".)
func TestLeaseTakeoverPlaces(t *testing.T) {
	f := newReplicatedFleet(t, 3, 2, e2eReplicaArgs)
	live := append([]*cluster(nil), f.replicas...)
	ctx := context.Background()

	// Creates that arrive, 8 a second round-robin over the live replicas, before, during and
	// after the kill.
	var (
		mu      sync.Mutex
		created []sandboxes.Sandbox
		after   []sandboxes.Sandbox // created once a new holder was seen
	)
	stop, taken := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	targets := live
	wg.Go(func() {
		tick := time.NewTicker(125 * time.Millisecond)
		defer tick.Stop()
		seen, newHolder := false, taken
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-newHolder:
				seen, newHolder = true, nil
				continue
			case <-tick.C:
			}
			mu.Lock()
			to := targets[i%len(targets)]
			mu.Unlock()
			s, err := f.createOn(to, "/bin/sh", "-c", "sleep 0.2")
			if err != nil {
				continue // the replica just killed
			}
			mu.Lock()
			created = append(created, s)
			if seen {
				after = append(after, s)
			}
			mu.Unlock()
		}
	})
	time.Sleep(time.Second)
	holder := f.leaseHolder(live)
	mu.Lock()
	targets = nil
	for _, c := range live {
		if c != holder {
			targets = append(targets, c)
		}
	}
	mu.Unlock()
	live = f.killHolder(live)
	close(taken)
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	for _, s := range after {
		if s.State != sandboxes.StateStarting {
			t.Errorf("create %s answered %s (%s: %s) after the new holder took the lease", s.ID, s.State, s.Reason, s.Message)
		}
	}
	for _, s := range created {
		if got := f.wait(s.ID, 60*time.Second); got.State != sandboxes.StateExited {
			t.Errorf("sandbox %s ended %s (%s: %s)", s.ID, got.State, got.Reason, got.Message)
		}
	}
	if len(after) == 0 {
		t.Error("no create arrived after the takeover")
	}

	// Creates that wait: both nodes cordoned, so nothing fits; the holder dies; the nodes are
	// uncordoned through a live replica and the new holder places every waiting create.
	cordon := func(method string) {
		for _, a := range f.agents {
			if err := f.api.Call(ctx, method, map[string]any{"nodeId": a.ip}, nil); err != nil {
				t.Fatalf("%s %s: %v", method, a.ip, err)
			}
		}
	}
	cordon("nodes.cordon")
	testkit.WaitFor(t, 10*time.Second, "every replica to see the cordons", func() bool {
		for _, c := range live {
			for _, a := range f.agents {
				var v struct{ Cordoned bool }
				if f.replicaAPI(c).Call(ctx, "nodes.get", map[string]any{"nodeId": a.ip}, &v) != nil || !v.Cordoned {
					return false
				}
			}
		}
		return true
	})
	var waiting []sandboxes.Sandbox
	for i := range 6 {
		s, err := f.createOn(live[i%len(live)], "/bin/sh", "-c", "sleep 0.2")
		if err != nil || s.State != sandboxes.StatePending {
			t.Fatalf("a create with every node cordoned: %+v %v", s, err)
		}
		waiting = append(waiting, s)
	}
	f.killHolder(live)
	cordon("nodes.uncordon")
	for _, s := range waiting {
		if got := f.wait(s.ID, 60*time.Second); got.State != sandboxes.StateExited {
			t.Errorf("waiting sandbox %s ended %s (%s: %s)", s.ID, got.State, got.Reason, got.Message)
		}
	}
}

// loadBalancer is a TCP load balancer on 127.0.0.1: each connection goes to the first backend
// that accepts it, in order (a dead one is passed over).
func loadBalancer(t *testing.T, backends ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for _, b := range backends {
					up, err := net.Dial("tcp", b)
					if err != nil {
						continue
					}
					defer up.Close()
					go io.Copy(up, c)
					io.Copy(c, up)
					return
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestWaitSurvivesReplicaDeath: `sandboxes create --wait` through a load balancer in front of
// two replicas; the replica serving its long poll is killed (SIGKILL) while the sandbox runs;
// the CLI calls again, the load balancer sends it to the other replica, and the command ends
// with the sandbox's output and exit status as if nothing happened.
func TestWaitSurvivesReplicaDeath(t *testing.T) {
	f := newReplicatedFleet(t, 2, 1, e2eReplicaArgs)
	lb := *f.replicas[1]
	lb.t = t
	lb.url = "http://" + loadBalancer(t, strings.TrimPrefix(f.replicas[0].url, "http://"), strings.TrimPrefix(f.replicas[1].url, "http://"))
	type result struct {
		out, errOut string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, code := lb.run("", "", "sandboxes", "create", "--tenant", "root", "--template", "sh", "--wait", "--", "/bin/sh", "-c", "sleep 4; echo done; exit 3")
		done <- result{out, errOut, code}
	}()
	time.Sleep(2 * time.Second)
	f.replicas[0].crash()
	select {
	case r := <-done:
		if r.out != "done\n" || r.code != 3 {
			t.Errorf("create --wait across the kill: %q, %q, exit %d; want \"done\\n\", exit 3", r.out, r.errOut, r.code)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("create --wait did not end")
	}
}

// TestStartOnDyingNodeRunsElsewhere: a sandbox placed on a node whose agent dies before it took
// the sandbox (frozen with SIGSTOP, then killed) is placed again on the other node, keeping its
// id, and runs there to a normal end.
func TestStartOnDyingNodeRunsElsewhere(t *testing.T) {
	f := newSandboxFleet(t, "", 2)
	ctx := context.Background()
	dying, other := f.agents[0], f.agents[1]
	if err := f.api.Call(ctx, "nodes.cordon", map[string]any{"nodeId": other.ip}, nil); err != nil {
		t.Fatal(err)
	}
	if err := dying.proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	s := f.create("sh", nil, "/bin/sh", "-c", "echo ran")
	if s.State != sandboxes.StateStarting || s.NodeID != dying.ip {
		t.Fatalf("the create: %+v, want starting on %s", s, dying.ip)
	}
	if err := f.api.Call(ctx, "nodes.uncordon", map[string]any{"nodeId": other.ip}, nil); err != nil {
		t.Fatal(err)
	}
	dying.proc.cmd.Process.Signal(syscall.SIGKILL)
	<-dying.proc.done
	got := f.wait(s.ID, 60*time.Second)
	if got.ID != s.ID || got.State != sandboxes.StateExited || got.NodeID != other.ip {
		t.Fatalf("after its node died: %+v, want exited on %s", got, other.ip)
	}
	if l := f.logs(s.ID); l.Stdout != "ran\n" {
		t.Errorf("its output: %q", l.Stdout)
	}
}
