package hostinfo

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Cgroup is what the machine offers of cgroups (its cgroup v2 hierarchy, and the cgroup v1
// hierarchies of a v1 or hybrid host), as /proc/self/mountinfo and the v2 hierarchy's
// cgroup.controllers say: the one place the agent finds it (its prerequisites, through Facts,
// and the process driver's isolation both read it here).
type Cgroup struct {
	// Mount is where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup on a unified host,
	// /sys/fs/cgroup/unified beside cgroup v1 controllers (a hybrid host); "" when none is.
	// With several, /sys/fs/cgroup wins, else the first.
	Mount string
	// ReadOnly is set when it is mounted read-only.
	ReadOnly bool
	// Controllers are those its cgroup.controllers lists (the controllers it can enforce).
	Controllers []string
	// V1 are the controllers bound to cgroup v1 hierarchies (which v2 then cannot use).
	V1 []string
	// V1Mounts maps each of V1 to the mount point of its hierarchy (e.g. "memory" to
	// /sys/fs/cgroup/memory; co-mounted controllers share one, e.g. /sys/fs/cgroup/cpu,cpuacct),
	// and ReadOnlyV1 names the controllers whose hierarchy is mounted read-only.
	V1Mounts   map[string]string
	ReadOnlyV1 []string
	// Problem says why Mount or Controllers could not be read ("" when they were).
	Problem string
}

// Unified reports whether /sys/fs/cgroup itself is the cgroup v2 hierarchy (no cgroup v1 or
// hybrid layout): what the agent's prerequisites ask for.
func (c Cgroup) Unified() bool { return c.Mount == "/sys/fs/cgroup" }

// Has reports whether the hierarchy offers controller name.
func (c Cgroup) Has(name string) bool { return c.Mount != "" && slices.Contains(c.Controllers, name) }

// Cgroup reads the machine's cgroup v2 hierarchy from /proc/self/mountinfo (the mount point, its
// mount options, and the controllers bound to cgroup v1 mounts) and the hierarchy's
// cgroup.controllers. It never fails: what it could not read is in Problem.
func (h Host) Cgroup() Cgroup {
	mounts, err := h.read("/proc/self/mountinfo")
	if err != nil {
		return Cgroup{Problem: "cannot read /proc/self/mountinfo: " + err.Error()}
	}
	var c Cgroup
	v1 := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(mounts))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 6 || len(g) < 3 {
			continue
		}
		switch g[0] {
		case "cgroup2":
			point := unescapeMount(f[4])
			if c.Mount == "" || point == "/sys/fs/cgroup" {
				c.Mount = point
				c.ReadOnly = slices.Contains(strings.Split(f[5], ","), "ro")
			}
		case "cgroup":
			point := unescapeMount(f[4])
			ro := slices.Contains(strings.Split(f[5], ","), "ro")
			for _, o := range strings.Split(g[2], ",") {
				if o != "rw" && o != "ro" && !strings.Contains(o, "=") { // options, not controllers
					v1[o] = true
					if c.V1Mounts == nil {
						c.V1Mounts = map[string]string{}
					}
					if _, ok := c.V1Mounts[o]; !ok {
						c.V1Mounts[o] = point
						if ro {
							c.ReadOnlyV1 = append(c.ReadOnlyV1, o)
						}
					}
				}
			}
		}
	}
	for o := range v1 {
		c.V1 = append(c.V1, o)
	}
	slices.Sort(c.V1)
	slices.Sort(c.ReadOnlyV1)
	if c.Mount == "" {
		c.Problem = "no cgroup v2 hierarchy is mounted"
		return c
	}
	ctl, err := h.read(c.Mount + "/cgroup.controllers")
	if err != nil {
		return Cgroup{Problem: fmt.Sprintf("cgroup v2 at %s: %v", c.Mount, err), V1: c.V1, V1Mounts: c.V1Mounts, ReadOnlyV1: c.ReadOnlyV1}
	}
	c.Controllers = strings.Fields(string(ctl))
	return c
}

// unescapeMount undoes the octal escapes of /proc/self/mountinfo (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
