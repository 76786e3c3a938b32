package microvm

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/agent/cgroups"
)

func TestMemoryLimitMiB(t *testing.T) {
	for _, tc := range []struct {
		m    Machine
		want int64
	}{
		{Machine{MemoryMiB: 256, Accel: AccelTCG}, 256 + VMMOverheadMiB + TCGCacheMiB},
		{Machine{MemoryMiB: 1024, Accel: AccelKVM}, 1024 + VMMOverheadMiB},
	} {
		if got := MemoryLimitMiB(tc.m); got != tc.want {
			t.Errorf("MemoryLimitMiB(%+v) = %d, want %d", tc.m, got, tc.want)
		}
	}
}

func TestDescribeCgroups(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    cgroups.Host
		want []string
	}{
		{"none", cgroups.Host{Notes: []string{"no cgroup hierarchy is mounted"}},
			[]string{"VMMs in no cgroup", "(no cgroup hierarchy is mounted)"}},
		{"v1 all", cgroups.Host{V1: map[string]string{"cpu": "/c", "cpuacct": "/c", "memory": "/m", "pids": "/p"}},
			[]string{"each VMM in a cgroup of its own (cgroup v1: cpu, memory, pids)", "memory the guest's + 128 MiB", "CPU the flavor's", "512 threads", "its VMM's cgroup's"}},
		{"v2 tracking only", cgroups.Host{V2: "/sys/fs/cgroup"},
			[]string{"memory not limited (no memory controller)", "CPU not limited but by the guest's vCPUs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DescribeCgroups(tc.h)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("DescribeCgroups = %q, want it to contain %q", got, w)
				}
			}
		})
	}
}

// checkVMMCgroup checks that the VMM of sandbox id runs in a cgroup of its own limited to the
// guest's memory and the VMM's overhead, whose figures are the sandbox's stats; it returns the
// cgroup (zero on a host without cgroups).
func checkVMMCgroup(t *testing.T, d *Driver, id string) cgroups.Group {
	t.Helper()
	v, err := d.get(id)
	if err != nil {
		t.Fatal(err)
	}
	g := v.rec.Cgroup
	if !d.cgroups.Tracks() {
		t.Logf("this host has no cgroups for the VMMs: %s", d.Cgroups())
		return g
	}
	if g.IsZero() || !slices.Contains(g.Procs(), v.rec.VMM.PID) {
		t.Fatalf("the VMM (pid %d) is not in its cgroup %v (processes %v)", v.rec.VMM.PID, g.Dirs(), g.Procs())
	}
	if d.cgroups.Has(cgroups.Memory) {
		want := strconv.FormatInt(MemoryLimitMiB(v.rec.Machine)<<20, 10)
		var got []string
		for _, dir := range g.Dirs() {
			for _, f := range []string{"memory.max", "memory.limit_in_bytes"} {
				if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
					got = append(got, strings.TrimSpace(string(b)))
				}
			}
		}
		if !slices.Contains(got, want) {
			t.Errorf("the VMM's cgroup's memory limit: %v, want %s (the guest's %d MiB and the VMM's)", got, want, v.rec.Machine.MemoryMiB)
		}
	}
	st := v.status().Stats
	if d.cgroups.Has(cgroups.Memory) && (st.PeakMemoryBytes < 64<<20 || st.MemoryBytes <= 0 || st.CPU <= 0) {
		t.Errorf("stats of a booted guest %+v: want its VMM's cgroup's (CPU, memory, peak of tens of MiB)", st)
	}
	return g
}
