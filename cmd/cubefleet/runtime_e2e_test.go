package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/agent/driver/microvm/microvmtest"
	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// e2eRuntimeFleetDoc has a template of each runtime on one pool.
const e2eRuntimeFleetDoc = `{"version": 1,
 "sites": [{"name": "lab", "kind": "shared", "region": "local"}],
 "pools": [{"name": "lab", "site": "lab", "class": "vps-host"}],
 "flavors": [{"pool": "lab", "name": "tiny", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1}],
 "sandboxTemplates": [
  {"name": "proc", "pool": "lab", "flavor": "tiny", "imageId": "busybox", "network": "private", "runtime": "process"},
  {"name": "vm", "pool": "lab", "flavor": "tiny", "imageId": "busybox", "network": "private", "runtime": "microvm"}]}`

// TestTemplateRuntimePlacement: in a pool of two real agents, one of the process runtime and
// one of the microvm runtime, each prepares only the template of its runtime; a sandbox of the
// `runtime: process` template lands on (and runs on) the process node, one of the
// `runtime: microvm` template on the microvm node, where it boots a guest (the test's one boot);
// a create whose nodeSelector asks for the other runtime is refused naming both.
func TestTemplateRuntimePlacement(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the process runtime runs each sandbox as a user of its own, which needs root")
	}
	kernel := microvmtest.Kernel(t)
	bin := binary(t)
	c := startServerB(t, "", "--node-heartbeat-timeout", "2s")
	token, err := os.ReadFile(filepath.Join(c.dataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	api := client.New(c.url, strings.TrimSpace(string(token)), nil)
	doc := filepath.Join(t.TempDir(), "fleet.json")
	writeFile(t, doc, e2eRuntimeFleetDoc, 0o600)
	c.ok("fleet", "apply", doc, "--tenant", "root", "--yes")

	dir := filepath.Dir(agenttest.SandboxDir(t))
	images, tree := filepath.Join(dir, "images"), filepath.Join(t.TempDir(), "tree")
	microvmtest.BusyboxTree(t, tree, "sh", "true")
	if out := c.ok("agent", "image", "import", "busybox", tree, "--image-dir", images); strings.TrimSpace(out) != filepath.Join(images, "busybox.ext4") {
		t.Fatalf("image import printed %q", out)
	}
	net := 10 + os.Getpid()%200
	start := func(ip, sandboxDir string, runtime ...string) *sandboxAgent {
		a := &sandboxAgent{ip: ip, dir: t.TempDir(), sandboxDir: sandboxDir}
		writeAgentEnv(t, c, a, runtime...)
		a.start(t, bin)
		t.Cleanup(func() {
			a.proc.stop()
			if out, err := exec.Command(bin, "agent", "down", "--env-file", a.envFile).CombinedOutput(); err != nil {
				t.Errorf("agent down %s: %v: %s", ip, err, out)
			}
		})
		return a
	}
	proc := start(fmt.Sprintf("127.79.%d.10", net), agenttest.SandboxDir(t), "CUBEFLEET_RUNTIME=process")
	vm := start(fmt.Sprintf("127.79.%d.11", net), filepath.Join(dir, "sandboxes"), "CUBEFLEET_RUNTIME=microvm",
		"CUBEFLEET_GUEST_KERNEL="+kernel, "CUBEFLEET_IMAGE_DIR="+images, "CUBEFLEET_MICROVM_ACCEL=tcg") // tcg: no probe boot

	ids := map[string]string{}
	var list struct{ Items []struct{ ID, Name string } }
	if err := api.Call(context.Background(), "compute.sandboxTemplates.list", map[string]any{"tenantId": "root"}, &list); err != nil {
		t.Fatal(err)
	}
	for _, tpl := range list.Items {
		ids[tpl.Name] = tpl.ID
	}
	for a, want := range map[*sandboxAgent]string{proc: ids["proc"], vm: ids["vm"]} {
		testkit.WaitFor(t, 3*time.Minute, "node "+a.ip+" with only the template of its runtime", func() bool {
			got := nodeView(t, api, a.ip)
			return len(got) == 1 && got[0] == want
		})
	}
	time.Sleep(time.Second) // a prepare of the other runtime's template would have come by now
	for a, want := range map[*sandboxAgent]string{proc: ids["proc"], vm: ids["vm"]} {
		if got := nodeView(t, api, a.ip); len(got) != 1 || got[0] != want {
			t.Errorf("node %s prepared %v, want only %s", a.ip, got, want)
		}
	}

	for _, tc := range []struct {
		tpl, runtime string
		node         *sandboxAgent
	}{{"proc", "process", proc}, {"vm", "microvm", vm}} {
		s := createVM(t, api, tc.tpl, 0, "/bin/true")
		if s.NodeID != tc.node.ip {
			t.Fatalf("a %s sandbox on %q, want node %s", tc.tpl, s.NodeID, tc.node.ip)
		}
		if sel := s.NodeSelector["cubefleet.io/runtime"]; sel != tc.runtime {
			t.Errorf("its nodeSelector: %v, want cubefleet.io/runtime=%s", s.NodeSelector, tc.runtime)
		}
		s = waitVM(t, api, s.ID, 3*time.Minute)
		if s.State != sandboxes.StateExited || s.NodeID != tc.node.ip {
			t.Errorf("the %s sandbox ended %s (%s) on %s\n%s", tc.tpl, s.State, s.Message, s.NodeID, tc.node.logs())
		}
	}

	err = api.Call(context.Background(), "sandboxes.create", map[string]any{"tenantId": "root", "template": "vm", "command": []string{"/bin/true"},
		"nodeSelector": map[string]string{"cubefleet.io/runtime": "process"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "cubefleet.io/runtime=process") || !strings.Contains(err.Error(), "template vm runs on the microvm runtime") {
		t.Errorf("a create asking for the other runtime: %v", err)
	}
}

// writeAgentEnv joins agent a (its ip, dir and sandboxDir set) to c's pool lab and writes its
// env file: c's server as its control plane, a's files under a.dir, the settings extra (its
// runtime's) last.
func writeAgentEnv(t testing.TB, c *cluster, a *sandboxAgent, extra ...string) {
	t.Helper()
	jt := strings.TrimSpace(c.ok("nodes", "join-token", "create", "--pool", "lab", "--ip", a.ip))
	writeFile(t, filepath.Join(a.dir, "join.token"), jt+"\n", 0o600)
	server := strings.TrimPrefix(c.url, "http://")
	a.envFile = filepath.Join(a.dir, "agent.env")
	writeFile(t, a.envFile, strings.Join(append([]string{
		"ONE_CLICK_DEPLOY_ROLE=compute", "CUBEFLEET_CONTROL_PLANE=" + server, "CUBE_SANDBOX_NODE_IP=" + a.ip,
		"CUBEFLEET_ALLOW_LOOPBACK=1", "CUBE_S3_ENDPOINT=http://" + server,
		"CUBEFLEET_JOIN_TOKEN_FILE=" + filepath.Join(a.dir, "join.token"), "CUBEFLEET_AGENT_STATE_DIR=" + filepath.Join(a.dir, "state"),
		"CUBEFLEET_AGENT_LISTEN=" + freeAddrOn(t, a.ip), "CUBEFLEET_REPORT_PERIOD=200ms", "CUBEFLEET_NETWORK_CIDR_SKIP_CONFLICT_CHECK=1",
		"CUBEFLEET_AGENT_PID_FILE=" + filepath.Join(a.dir, "agent.pid"), "CUBEFLEET_SANDBOX_DIR=" + a.sandboxDir,
		"CUBEFLEET_QUOTA_CPU=64000", "CUBEFLEET_QUOTA_MEM_MB=131072", "CUBEFLEET_MAX_MVM_NUM=64",
	}, extra...), "\n")+"\n", 0o600)
}
