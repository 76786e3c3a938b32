package process

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cubefleet/cubefleet/internal/agent/cgroups"
	"github.com/cubefleet/cubefleet/internal/agent/workdisk"
)

// Isolation is what the process driver enforces on a host, and how: which limits the host's
// cgroups enforce (cgroup v2, v1, or both on a hybrid host), which fall back to rlimits, and
// the namespaces, network and syscall filter sandboxes get. Detect reads it from the host;
// Driver.Isolation reports what a driver actually set up.
type Isolation struct {
	// Cgroups is where the host's cgroup controllers are: each sandbox gets a cgroup of its own
	// in every hierarchy there (for tracking its processes, killing them at once and reading
	// its CPU time and memory), limited by each controller there is. A limit without its
	// controller falls back to an rlimit (memory: RLIMIT_AS; processes: RLIMIT_NPROC) or, for
	// CPU, is not enforced.
	Cgroups cgroups.Host `json:"cgroups"`
	// OwnUser is set when sandboxes run as the agent's own user (development only: the agent
	// is not root and Config.AllowOwnUser is set); then UID is that user.
	OwnUser bool `json:"ownUser,omitempty"`
	UID     int  `json:"uid,omitempty"`
	// Note says why cgroups are not used at all, when they are not.
	Note string `json:"note,omitempty"`
	// Namespaces are the namespaces each sandbox gets of its own (pid, mount, ipc, uts, net:
	// its own processes, file system view, IPC, host name and a network with loopback only;
	// and user where the host allows it: its leased uid and gid mapped to themselves, nothing
	// else); empty when the host does not let the driver make them, and NamespaceNote says why.
	// UserNamespaceNote says why there is no user namespace, when the others are there.
	Namespaces        []string `json:"namespaces,omitempty"`
	NamespaceNote     string   `json:"namespaceNote,omitempty"`
	UserNamespaceNote string   `json:"userNamespaceNote,omitempty"`
	// Seccomp is set when the sandboxes' programs run under the default seccomp profile
	// (package syscallfilter: refused calls fail with EPERM); the kernel has seccomp filters.
	Seccomp bool `json:"seccomp,omitempty"`
	// Disk is set when a sandbox's work directory is a file system of its own of the
	// sandbox's DiskMiB (package workdisk: a write past it fails with ENOSPC); DiskNote says
	// why not, when not.
	Disk     bool   `json:"disk,omitempty"`
	DiskNote string `json:"diskNote,omitempty"`
}

// Missing returns what of the isolation an agent may require (--require-isolation) is not in
// force, one phrase each: "memory limit", "process limit", "network isolation"; empty when
// all is.
func (i Isolation) Missing() []string {
	var out []string
	if !i.has(cgroups.Memory) {
		out = append(out, "memory limit (no memory cgroup controller)")
	}
	if !i.has(cgroups.Pids) {
		out = append(out, "process limit (no pids cgroup controller)")
	}
	if !slices.Contains(i.Namespaces, "net") {
		out = append(out, "network isolation (no network namespace)")
	}
	return out
}

// UserNamespace reports whether sandboxes get a user namespace of their own.
func (i Isolation) UserNamespace() bool { return slices.Contains(i.Namespaces, userNamespaceName) }

// withoutUserNamespace returns i without the user namespace, note saying why.
func (i Isolation) withoutUserNamespace(note string) Isolation {
	i.Namespaces = slices.DeleteFunc(slices.Clone(i.Namespaces), func(n string) bool { return n == userNamespaceName })
	i.UserNamespaceNote = "no user namespace: " + note
	return i
}

// Probed returns i with the namespaces a driver can make on this host, as it finds them at its
// start: it starts executable (a binary that calls MaybeRunSupervisor first) in new namespaces
// as a probe that does what a sandbox's init needs of them, and in a user namespace mapped to
// uid as a sandbox's is; what fails is dropped, with a note saying why.
func (i Isolation) Probed(executable string, uid int) Isolation {
	if len(i.Namespaces) == 0 {
		return i
	}
	note, userNote := probeNamespaces(executable, i.UserNamespace(), uid)
	switch {
	case note != "":
		i.Namespaces, i.NamespaceNote = nil, note
	case userNote != "":
		i = i.withoutUserNamespace("the probe failed: " + userNote + userNamespaceSettings(""))
	}
	return i
}

// has reports whether a cgroup controller enforces controller c.
func (i Isolation) has(c string) bool { return i.Cgroups.Has(c) }

// String describes i on one line, for `agent check` and the agent's log, e.g.
// "cgroup v1: cpu, memory, pids; cgroup v2 at /sys/fs/cgroup/unified: tracking only; rlimits:
// open files via RLIMIT_NOFILE", or "rlimits: memory via RLIMIT_AS, processes via RLIMIT_NPROC,
// open files via RLIMIT_NOFILE; CPU not limited (no writable cgroup hierarchy offers the cpu
// controller)".
func (i Isolation) String() string {
	var parts []string
	if cg := i.Cgroups.String(); cg != "" {
		parts = append(parts, cg)
	}
	rl := []string{}
	if !i.has(cgroups.Memory) {
		rl = append(rl, "memory via RLIMIT_AS")
	}
	if !i.has(cgroups.Pids) && !i.OwnUser {
		rl = append(rl, "processes via RLIMIT_NPROC")
	}
	rl = append(rl, "open files via RLIMIT_NOFILE")
	parts = append(parts, "rlimits: "+strings.Join(rl, ", "))
	if len(i.Namespaces) > 0 {
		user := ""
		if i.UserNamespace() {
			user = "user: the leased uid and gid mapped to themselves, nothing else; "
		}
		parts = append(parts, "namespaces: "+strings.Join(i.Namespaces, ", ")+" ("+user+"network: loopback only, or for a public template a veth with NAT to the internet only)")
	} else {
		parts = append(parts, "no namespaces")
	}
	if i.Seccomp {
		parts = append(parts, "seccomp: the default profile")
	} else {
		parts = append(parts, "no seccomp filter")
	}
	if i.Disk {
		parts = append(parts, "disk: an ext4 file system of its size per work directory")
	} else {
		parts = append(parts, "disk not limited")
	}
	if !i.has(cgroups.CPU) {
		parts = append(parts, "CPU not limited")
	}
	if !i.has(cgroups.Pids) && i.OwnUser {
		parts = append(parts, "processes not limited")
	}
	s := strings.Join(parts, "; ")
	notes := slices.Clone(i.Cgroups.Notes)
	if i.Note != "" {
		notes = []string{i.Note}
	}
	if i.NamespaceNote != "" {
		notes = append(notes, i.NamespaceNote)
	}
	if i.UserNamespaceNote != "" && len(i.Namespaces) > 0 {
		notes = append(notes, i.UserNamespaceNote)
	}
	if i.DiskNote != "" && i.Note == "" {
		notes = append(notes, i.DiskNote)
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, "; ") + ")"
	}
	if i.OwnUser {
		s += fmt.Sprintf("; sandboxes run as the agent's own user (uid %d): they can read everything the agent can, for development only", i.UID)
	}
	return s
}

// Detect reads what this host offers to isolate sandboxes with, for the process driver running
// as the current user: where each cgroup controller is (cgroups.Detect). It only reads: a
// driver may still fall back when preparing a hierarchy fails (Driver.Isolation says what it
// uses). It never fails: a host without usable cgroups gets rlimits.
func Detect() Isolation { return detect("", os.Geteuid()) }

// Expected returns what a process driver started now, by this process's user, would enforce
// (New may still fall back, when preparing a cgroup hierarchy fails; Driver.Isolation says what
// it uses): as root, Detect's; otherwise, with allowOwnUser, sandboxes run as this user without
// cgroups; without it, an error saying that the driver needs root. It only reads.
func Expected(allowOwnUser bool) (Isolation, error) {
	euid := os.Geteuid()
	if euid == 0 {
		return detect("", 0), nil
	}
	if !allowOwnUser {
		return Isolation{}, fmt.Errorf("the process driver runs each sandbox as a user of its own, which needs root, and this agent runs as uid %d: run the agent as root, or allow sandboxes to run as the agent's own user for development (CUBEFLEET_SANDBOX_ALLOW_OWN_USER=1; they can then read the agent's files)", euid)
	}
	return Isolation{OwnUser: true, UID: euid, Note: "cgroups are used only as root", NamespaceNote: "namespaces are made only as root", Seccomp: detect("", euid).Seccomp}, nil
}

// detect is Detect for a host whose files are under root ("" for this host): the cgroups, and
// as root the namespaces the kernel has (/proc/self/ns) and lets root make (a user namespace
// only when user.max_user_namespaces is not 0); a driver then checks that it can make them
// (probeNamespaces).
func detect(root string, euid int) Isolation {
	iso := Isolation{Cgroups: cgroups.Detect(root, euid)}
	// The kernel has seccomp filters when a process's status has the field.
	if st, err := os.ReadFile(filepath.Join("/", root, "proc/self/status")); err == nil && strings.Contains(string(st), "\nSeccomp:") {
		iso.Seccomp = true
	}
	if euid != 0 {
		iso.NamespaceNote = "namespaces are made only as root"
		return iso
	}
	if root == "" { // (a fake host's loop devices and tools would be this one's: not looked at)
		iso.DiskNote = workdisk.Available()
		iso.Disk = iso.DiskNote == ""
	}
	var missing []string
	for i, f := range []string{"pid", "mnt", "ipc", "uts", "net"} {
		if _, err := os.Stat(filepath.Join("/", root, "proc/self/ns", f)); err != nil {
			missing = append(missing, namespaceNames[i])
		}
	}
	if len(missing) > 0 {
		iso.NamespaceNote = "the kernel has no " + strings.Join(missing, ", ") + " namespaces"
		return iso
	}
	iso.Namespaces = slices.Clone(namespaceNames)
	if _, err := os.Stat(filepath.Join("/", root, "proc/self/ns/user")); err != nil {
		iso.UserNamespaceNote = "no user namespace: the kernel has no user namespaces"
	} else if sysctl(root, "user/max_user_namespaces") == "0" {
		iso.UserNamespaceNote = "no user namespace: user.max_user_namespaces is 0 (sysctl -w user.max_user_namespaces=15000 allows them)"
	} else {
		iso.Namespaces = append(iso.Namespaces, userNamespaceName)
	}
	return iso
}

// sysctl returns the value of the sysctl at /proc/sys/<name> of the host under root, "" when it
// has none.
func sysctl(root, name string) string {
	b, err := os.ReadFile(filepath.Join("/", root, "proc/sys", name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// userNamespaceSettings names the host's settings that restrict user namespaces, for a note
// on why the driver could not make one ("" when none is set). They bind processes without
// CAP_SYS_ADMIN, which the driver's init is not: on a host where the probe fails with them
// set, a security module's policy or a patched kernel may extend them to root.
func userNamespaceSettings(root string) string {
	var set []string
	if v := sysctl(root, "kernel/unprivileged_userns_clone"); v == "0" {
		set = append(set, "kernel.unprivileged_userns_clone is 0")
	}
	if v := sysctl(root, "kernel/apparmor_restrict_unprivileged_userns"); v == "1" {
		set = append(set, "kernel.apparmor_restrict_unprivileged_userns is 1")
	}
	if len(set) == 0 {
		return ""
	}
	return " (the host restricts them: " + strings.Join(set, ", ") + ")"
}

// sandboxCgroupPrefix starts the name of every sandbox's cgroup under the driver's parent.
const sandboxCgroupPrefix = "sandbox-"
