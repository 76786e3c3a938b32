package hostinfo

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestCgroup reads the cgroup hierarchies of hosts from their mount tables: a unified one, a
// hybrid one (this machine's kind: v1 controllers, a v2 hierarchy beside them), v1 only, a
// read-only one, an escaped mount point, and none.
func TestCgroup(t *testing.T) {
	hybrid := `32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	for _, tc := range []struct {
		name, mounts, mountPoint, controllers string
		want                                  Cgroup
		unified                               bool
	}{
		{"unified", "26 22 0:23 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup", "cpu memory pids\n",
			Cgroup{Mount: "/sys/fs/cgroup", Controllers: []string{"cpu", "memory", "pids"}}, true},
		{"hybrid", hybrid, "/sys/fs/cgroup/unified", "",
			Cgroup{Mount: "/sys/fs/cgroup/unified", Controllers: []string{}, V1: []string{"cpu", "memory"},
				V1Mounts: map[string]string{"cpu": "/sys/fs/cgroup/cpu", "memory": "/sys/fs/cgroup/memory"}}, false},
		{"v1 only, co-mounted and read-only", "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n39 31 0:36 / /sys/fs/cgroup/pids ro - cgroup cgroup rw,pids\n", "", "",
			Cgroup{V1: []string{"cpu", "cpuacct", "pids"}, V1Mounts: map[string]string{"cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct", "pids": "/sys/fs/cgroup/pids"},
				ReadOnlyV1: []string{"pids"}, Problem: "no cgroup v2 hierarchy is mounted"}, false},
		{"read-only", "26 22 0:23 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup", "cpu",
			Cgroup{Mount: "/sys/fs/cgroup", ReadOnly: true, Controllers: []string{"cpu"}}, true},
		{"escaped", `26 22 0:23 / /run/my\040cgroups rw - cgroup2 none rw` + "\n", "/run/my cgroups", "pids",
			Cgroup{Mount: "/run/my cgroups", Controllers: []string{"pids"}}, false},
		{"none", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n", "", "",
			Cgroup{Problem: "no cgroup v2 hierarchy is mounted"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			write := func(p, data string) {
				p = filepath.Join(root, p)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write("proc/self/mountinfo", tc.mounts)
			if tc.mountPoint != "" {
				write(filepath.Join(tc.mountPoint, "cgroup.controllers"), tc.controllers)
			}
			got := Host{Root: root}.Cgroup()
			if !reflect.DeepEqual(got, tc.want) || got.Unified() != tc.unified {
				t.Errorf("Cgroup() = %#v (unified %v)\nwant %#v (unified %v)", got, got.Unified(), tc.want, tc.unified)
			}
		})
	}
	if got := (Host{Root: t.TempDir()}).Cgroup(); got.Mount != "" || got.Problem == "" {
		t.Errorf("Cgroup() without a mount table = %+v, want a problem", got)
	}
}
