package main_test

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStopWithLongPolls: SIGTERM to a replica that serves an agent (its work long poll) and a
// client in `sandboxes wait` (through a load balancer in front of both replicas). The replica
// answers the long polls as their timeout would, stops well within its 15 s grace and exits 0;
// the client calls again, reaches the other replica, and its wait ends with the sandbox's end.
func TestStopWithLongPolls(t *testing.T) {
	f := newReplicatedFleet(t, 2, 1, e2eReplicaArgs)
	lb := *f.replicas[1]
	lb.t = t
	lb.url = "http://" + loadBalancer(t, strings.TrimPrefix(f.replicas[0].url, "http://"), strings.TrimPrefix(f.replicas[1].url, "http://"))
	s := f.create("sh", nil, "/bin/sh", "-c", "sleep 6; echo done")
	wait := lb.start("sandboxes", "wait", s.ID, "--tenant", "root")
	time.Sleep(2 * time.Second) // the wait is in its long poll on the first replica

	stopping := f.replicas[0]
	if err := syscall.Kill(stopping.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	stopping.stop()
	took := time.Since(began)
	log := stopping.logs.String()
	if stopping.exit != 0 || took >= 15*time.Second {
		t.Errorf("the replica with long polls stopped in %s with exit %d, want exit 0 within its grace (15 s)", took, stopping.exit)
	}
	if !strings.Contains(log, `"msg":"stopped"`) || strings.Contains(log, "deadline exceeded") {
		t.Errorf("the stopped replica's log:\n%s", log)
	}
	t.Logf("stopped in %s", took)

	code, out, errOut := wait.wait(t, 60*time.Second)
	if code != 0 || !strings.Contains(out, s.ID) {
		t.Errorf("sandboxes wait across the stop: exit %d\n%s%s", code, out, errOut)
	}
	f.api = f.replicaAPI(f.replicas[1])
	if got := f.get(s.ID); got.Result == nil || got.Result.ExitCode == nil || *got.Result.ExitCode != 0 {
		t.Errorf("the sandbox: %+v, want exited 0", got)
	}
}
