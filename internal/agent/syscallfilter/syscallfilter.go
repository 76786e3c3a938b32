// Package syscallfilter is the default seccomp profile of a sandbox, in the spirit of Docker's
// default: everything is allowed but the calls a tenant's code has no business making on a
// shared host (mounts, kernel modules and kexec, BPF and perf, the kernel keyring, ptrace and
// other processes' memory, swap, clocks, reboot, namespace changes: unshare, setns, and clone
// with a namespace flag), which fail with EPERM; clone3 fails with ENOSYS (its flags cannot be
// inspected), so that C libraries fall back to clone, whose flags can. It is built with
// github.com/elastic/go-seccomp-bpf (pure Go) and applied by the process that then executes
// the sandbox's program (Apply), after its namespaces are set up; a microVM driver may apply it
// to its QEMU process.
package syscallfilter

import (
	"fmt"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// Refused are the system calls the default profile refuses with EPERM (on amd64 and arm64,
// where they exist: Policy drops the names the architecture has not).
var Refused = []string{
	// file systems and mounts
	"mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
	"open_tree", "mount_setattr", "quotactl", "quotactl_fd", "name_to_handle_at", "open_by_handle_at",
	"swapon", "swapoff", "acct", "nfsservctl", "sysfs", "ustat", "uselib", "lookup_dcookie",
	// the kernel: modules, kexec, BPF, perf, keyring, reboot
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "bpf",
	"perf_event_open", "add_key", "request_key", "keyctl", "reboot", "iopl", "ioperm",
	"userfaultfd",
	// other processes
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
	// clocks
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	// namespaces
	"unshare", "setns",
}

// namespaceFlags are the clone flags that make a namespace: a clone with any is refused.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// actionENOSYS is SECCOMP_RET_ERRNO with ENOSYS: "this kernel has no such call".
const actionENOSYS = seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)

// Policy returns the default profile: allow by default, Refused (those the running
// architecture has) and clone with a namespace flag refused with EPERM, clone3 with ENOSYS.
func Policy() (seccomp.Policy, error) {
	names := Refused
	all := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: []seccomp.SyscallGroup{{Action: seccomp.ActionErrno, Names: names}}}
	if _, err := all.Assemble(); err != nil {
		names = nil // an architecture without some of them: those it has
		for _, n := range Refused {
			p := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: []seccomp.SyscallGroup{{Action: seccomp.ActionErrno, Names: []string{n}}}}
			if _, err := p.Assemble(); err == nil {
				names = append(names, n)
			}
		}
	}
	p := seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: names},
			{Action: seccomp.ActionErrno, NamesWithCondtions: []seccomp.NameWithConditions{{
				Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: namespaceFlags}},
			}}},
			{Action: actionENOSYS, Names: []string{"clone3"}},
		},
	}
	if _, err := p.Assemble(); err != nil {
		return seccomp.Policy{}, fmt.Errorf("the default seccomp profile: %w", err)
	}
	return p, nil
}

// Apply sets no_new_privs and loads the default profile onto the calling thread (lock it to
// its goroutine first: the filter is the thread's, and an exec from it keeps it). It fails
// when the kernel has no seccomp filters.
func Apply() error {
	p, err := Policy()
	if err != nil {
		return err
	}
	if err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Policy: p}); err != nil {
		return fmt.Errorf("load the seccomp profile: %w", err)
	}
	return nil
}
