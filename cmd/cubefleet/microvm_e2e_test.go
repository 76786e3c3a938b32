package main_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/agent/driver/microvm/microvmtest"
	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// The microvm runtime end to end: a `cubefleet server`, a `cubefleet agent run` of the microvm
// runtime whose guests boot Debian's cloud kernel under QEMU (TCG where KVM does not boot one),
// with the cubefleet binary itself as their init, and a busybox image imported with
// `cubefleet agent image import`.

// e2eVMFleetDoc has a microvm template "vm" and its warm twin "vmwarm" (one warm guest).
const e2eVMFleetDoc = `{"version": 1,
 "sites": [{"name": "lab", "kind": "shared", "region": "local"}],
 "pools": [{"name": "lab", "site": "lab", "class": "vps-host"}],
 "flavors": [{"pool": "lab", "name": "vm", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1}],
 "sandboxTemplates": [
  {"name": "vm", "pool": "lab", "flavor": "vm", "imageId": "busybox", "network": "private"},
  {"name": "vmwarm", "pool": "lab", "flavor": "vm", "imageId": "busybox", "network": "private", "warm": {"min": 1, "max": 1}}]}`

// TestMicroVMSandboxes: `agent check` probes the accelerators (KVM only when its guest boots);
// a real agent of the microvm runtime prepares the templates once their image is imported;
// `sandboxes create --wait -- uname -r` prints the guest kernel's release, not the host's, with
// both streams and the exit code; a sleep past its timeout ends killed (timeout); a warm guest
// is claimed without a boot; a delete ends a running guest's VMM; from a private guest the control plane's port is not reachable
// (its loopback is its own and it has no other device); `agent down` leaves no VMM running.
func TestMicroVMSandboxes(t *testing.T) {
	kernel := microvmtest.Kernel(t)
	bin := binary(t)
	c := startServerB(t, "", "--node-heartbeat-timeout", "2s")
	token, err := os.ReadFile(filepath.Join(c.dataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	api := client.New(c.url, strings.TrimSpace(string(token)), nil)
	doc := filepath.Join(t.TempDir(), "fleet.json")
	writeFile(t, doc, e2eVMFleetDoc, 0o600)
	c.ok("fleet", "apply", doc, "--tenant", "root", "--yes")

	dir := filepath.Dir(agenttest.SandboxDir(t))
	images, tree := filepath.Join(dir, "images"), filepath.Join(t.TempDir(), "tree")
	microvmtest.BusyboxTree(t, tree, "sh", "uname", "echo", "cat", "sleep", "nc", "true")
	ip := fmt.Sprintf("127.78.%d.10", os.Getpid()%200)
	a := &sandboxAgent{ip: ip, dir: t.TempDir(), sandboxDir: filepath.Join(dir, "sandboxes")}
	writeAgentEnv(t, c, a, "CUBEFLEET_RUNTIME=microvm", "CUBEFLEET_GUEST_KERNEL="+kernel, "CUBEFLEET_IMAGE_DIR="+images)
	server := strings.TrimPrefix(c.url, "http://")

	// The probe, before the agent runs (its own checks fail; the isolation line is the probe's).
	out, _ := exec.Command(bin, "agent", "check", "--env-file", a.envFile, "--timeout", "0").CombinedOutput()
	var probe string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "isolation:") {
			probe = line
		}
	}
	if !strings.HasPrefix(probe, "ok    isolation: microvm runtime: ") || !(strings.Contains(probe, "KVM present, guest booted") || strings.Contains(probe, "TCG present, guest booted")) || !strings.Contains(probe, "VMM") {
		t.Fatalf("agent check's probe: %q\n%s", probe, out)
	}
	t.Logf("agent check: %s", probe)

	a.start(t, bin)
	t.Cleanup(func() {
		a.proc.stop()
		if out, err := exec.Command(bin, "agent", "down", "--env-file", a.envFile).CombinedOutput(); err != nil {
			t.Errorf("agent down: %v: %s", err, out)
		}
		if left := vmmsUnder(a.sandboxDir); len(left) > 0 {
			t.Errorf("VMMs outlived agent down: %v", left)
		}
	})
	// No image yet: the node lists no template; once imported, both.
	time.Sleep(time.Second)
	if v := nodeView(t, api, ip); len(v) != 0 {
		t.Errorf("templates prepared without their image: %v", v)
	}
	if out := c.ok("agent", "image", "import", "busybox", tree, "--image-dir", images); strings.TrimSpace(out) != filepath.Join(images, "busybox.ext4") {
		t.Errorf("image import printed %q", out)
	}
	testkit.WaitFor(t, 3*time.Minute, "both templates prepared on the microvm node", func() bool { return len(nodeView(t, api, ip)) == 2 })

	stdout, stderr, code := c.run("", "", "sandboxes", "create", "--tenant", "root", "--template", "vm", "--wait", "--", "/bin/sh", "-c", "uname -r; echo oops >&2; exit 4")
	host, _ := exec.Command("uname", "-r").Output()
	if code != 4 || stderr != "oops\n" || !strings.HasPrefix(filepath.Base(kernel), "vmlinuz-"+strings.TrimSpace(stdout)) || strings.TrimSpace(stdout) == strings.TrimSpace(string(host)) {
		t.Fatalf("create --wait -- uname -r: %q, %q, exit %d; want the guest kernel's release (%s), not the host's (%s)\n%s", stdout, stderr, code, filepath.Base(kernel), host, a.logs())
	}

	// The control plane listens on 127.0.0.1 of the host; the guest's loopback is its own.
	_, port, _ := net.SplitHostPort(server)
	s := createVM(t, api, "vm", 0, "/bin/sh", "-c", "cat /proc/net/dev | grep -c :; nc -w 2 127.0.0.1 "+port+" </dev/null && echo reached || echo unreachable")
	s = waitVM(t, api, s.ID, 3*time.Minute)
	if l := logsOf(t, api, s.ID); l.Stdout != "1\nunreachable\n" {
		t.Errorf("private guest: %q (want one network device, lo, and the control plane unreachable)", l.Stdout)
	}

	s = createVM(t, api, "vm", 2, "/bin/sleep", "600")
	s = waitVM(t, api, s.ID, 3*time.Minute)
	if s.State != sandboxes.StateKilled || !strings.Contains(s.Message, "timeout") {
		t.Errorf("sleep past its timeout: %s (%s), want killed (timeout)", s.State, s.Message)
	}

	// A delete stops the guest: its VMM ends.
	s = createVM(t, api, "vm", 0, "/bin/sleep", "600")
	var running sandboxes.Sandbox
	if err := api.Call(context.Background(), "sandboxes.wait", map[string]any{"tenantId": "root", "id": s.ID, "until": "running", "timeoutSeconds": 180}, &running); err != nil || running.State != sandboxes.StateRunning {
		t.Fatalf("waiting for %s to run: %+v, %v", s.ID, running, err)
	}
	if err := api.Call(context.Background(), "sandboxes.delete", map[string]any{"tenantId": "root", "id": s.ID}, nil); err != nil {
		t.Fatalf("sandboxes.delete: %v", err)
	}
	testkit.WaitFor(t, time.Minute, "the deleted sandbox's VMM ended", func() bool { return len(vmmsUnder(filepath.Join(a.sandboxDir, s.ID))) == 0 })

	// The warm guest is booted ahead: its claim costs no boot.
	testkit.WaitFor(t, 3*time.Minute, "the warm guest ready", func() bool {
		var l struct{ Items []sandboxes.Sandbox }
		api.Call(context.Background(), "sandboxes.list", map[string]any{"tenantId": "root", "warm": true, "state": "running"}, &l)
		return len(l.Items) == 1 && l.Items[0].Reason == sandboxes.ReasonWarmReady
	})
	start := time.Now()
	s = createVM(t, api, "vmwarm", 0, "/bin/echo", "warm")
	took := time.Since(start)
	s = waitVM(t, api, s.ID, time.Minute)
	if s.ClaimedAt == 0 || logsOf(t, api, s.ID).Stdout != "warm\n" {
		t.Errorf("warm claim: %+v", s)
	}
	t.Logf("warm create (claim of a booted guest, synchronous create) took %s", took)
}

func nodeView(t testing.TB, api *client.Client, id string) []string {
	var v struct{ LocalTemplates []string }
	api.Call(context.Background(), "nodes.get", map[string]any{"nodeId": id}, &v)
	return v.LocalTemplates
}

func createVM(t testing.TB, api *client.Client, tpl string, timeout int, argv ...string) sandboxes.Sandbox {
	t.Helper()
	body := map[string]any{"tenantId": "root", "template": tpl, "command": argv, "async": true}
	if timeout > 0 {
		body["timeoutSeconds"] = timeout
	}
	if tpl == "vmwarm" {
		delete(body, "async")
	}
	var s sandboxes.Sandbox
	if err := api.Call(context.Background(), "sandboxes.create", body, &s); err != nil {
		t.Fatalf("sandboxes.create %v: %v", argv, err)
	}
	return s
}

func waitVM(t testing.TB, api *client.Client, id string, within time.Duration) sandboxes.Sandbox {
	t.Helper()
	f := &sandboxFleet{t: t, api: api}
	return f.wait(id, within)
}

func logsOf(t testing.TB, api *client.Client, id string) sandboxLogs {
	t.Helper()
	f := &sandboxFleet{t: t, api: api}
	return f.logs(id)
}

// vmmsUnder returns the pids of the QEMU processes whose command line names dir.
func vmmsUnder(dir string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmd), "qemu-system") && strings.Contains(string(cmd), dir) {
			pids = append(pids, pid)
		}
	}
	return pids
}
