package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/agent/hostinfo"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

func TestPrerequisites(t *testing.T) {
	for _, tc := range []struct {
		name    string
		host    string
		edit    map[string]string // files to replace in a copy of the host ("" deletes)
		runtime Runtime
		kernel  string // GuestKernel
		minKB   int64
		want    []string
	}{
		{name: "bare metal, microvm", host: "compute", runtime: RuntimeMicroVM, kernel: "/boot/vmlinuz"},
		{name: "bare metal, process", host: "compute", runtime: RuntimeProcess},
		// A virtual machine without /dev/kvm runs microVMs under TCG: neither is a problem.
		{name: "virtual machine, microvm", host: "vm", runtime: RuntimeMicroVM, kernel: "/boot/vmlinuz",
			want: []string{"no cgroup hierarchy offers the cpu controller", "4028000 kB of memory (MemTotal) and the floor is 7500000 kB"}},
		{name: "microvm without a guest kernel", host: "compute", runtime: RuntimeMicroVM,
			want: []string{"the microvm runtime boots its guests with a guest kernel and none is set: set CUBEFLEET_GUEST_KERNEL"}},
		{name: "virtual machine, process", host: "vm", runtime: RuntimeProcess,
			want: []string{"no cgroup hierarchy offers the cpu controller", "the floor is 7500000 kB"}},
		{name: "architecture", host: "compute", runtime: RuntimeProcess, edit: map[string]string{"/proc/sys/kernel/arch": "riscv64\n"},
			want: []string{`architecture is "riscv64"; the agent runs on x86_64 or aarch64`}},
		{name: "aarch64", host: "compute", runtime: RuntimeProcess, edit: map[string]string{"/proc/sys/kernel/arch": "aarch64\n"}},
		{name: "no cpu controller", host: "compute", runtime: RuntimeProcess, edit: map[string]string{"/sys/fs/cgroup/cgroup.controllers": "memory pids\n"},
			want: []string{"no cgroup hierarchy offers the cpu controller"}},
		// cgroup v1 (or hybrid) controllers are as good as cgroup v2's.
		{name: "cgroup v1", host: "compute", runtime: RuntimeProcess, edit: map[string]string{
			"/proc/self/mountinfo": "30 22 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,cpu,cpuacct\n" +
				"31 22 0:27 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,memory\n"}},
		{name: "raised memory floor", host: "compute", runtime: RuntimeProcess, minKB: 20_000_000,
			want: []string{"16384000 kB of memory (MemTotal) and the floor is 20000000 kB"}},
		{name: "no kvm", host: "compute", runtime: RuntimeMicroVM, kernel: "/boot/vmlinuz", edit: map[string]string{"/dev/kvm": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := testHost(tc.host)
			if tc.edit != nil {
				h = copyHost(t, h)
				for p, content := range tc.edit {
					path := filepath.Join(h.Root, p)
					if content == "" {
						os.Remove(path)
						continue
					}
					os.WriteFile(path, []byte(content), 0o644)
				}
			}
			f, err := h.Facts()
			if err != nil {
				t.Fatal(err)
			}
			cfg := &Config{Runtime: tc.runtime, GuestKernel: tc.kernel, MinMemoryKB: DefaultMinMemoryKB, Host: h}
			if tc.minKB != 0 {
				cfg.MinMemoryKB = tc.minKB
			}
			got := Prerequisites(cfg, f)
			if len(got) != len(tc.want) {
				t.Fatalf("Prerequisites = %q, want %d problems", got, len(tc.want))
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("problem %d: %q, want it to contain %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// copyHost copies a fake host tree into a temporary directory.
func copyHost(t *testing.T, h hostinfo.Host) hostinfo.Host {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(h.Root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(h.Root, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return hostinfo.Host{Root: dst}
}

// TestStartLogsPrerequisites: a host install did not check (an image built with --root) is
// checked when the agent starts: each unmet prerequisite is logged.
func TestStartLogsPrerequisites(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	cfg := testConfig(t.TempDir(), "cfj_join1", cp.URL)
	cfg.Host, cfg.MinMemoryKB = testHost("vm"), DefaultMinMemoryKB
	r := startAgent(t, cfg)
	testkit.WaitFor(t, 10*time.Second, "a status report", func() bool { return len(cp.CallsTo("/status")) > 0 })
	logs := r.logs.String()
	for _, want := range []string{`"msg":"this host does not meet a prerequisite of the agent","node_id":"127.0.0.1","problem":"no cgroup hierarchy offers the cpu controller`, `"problem":"this host has 4028000 kB of memory`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %s:\n%s", want, logs)
		}
	}
}
