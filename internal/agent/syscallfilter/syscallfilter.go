// Package syscallfilter is the default seccomp profile of a sandbox, in the spirit of Docker's
// default: everything is allowed but the calls a tenant's code has no business making on a
// shared host (mounts, kernel modules and kexec, BPF and perf, the kernel keyring, ptrace and
// other processes' memory, swap, clocks, reboot, namespace changes: unshare, setns, and clone
// with a namespace flag, io_uring), which fail with EPERM; clone3 fails with ENOSYS (its flags
// cannot be inspected), so that C libraries fall back to clone, whose flags can. A system call
// of another ABI than the native one (a 32-bit int 0x80 on amd64, whose numbers the profile's
// rules do not know) kills the process: the rules are the native ABI's only. It is built with
// github.com/elastic/go-seccomp-bpf (pure Go) and applied by the process that then executes
// the sandbox's program (Apply), after its namespaces are set up; a microVM driver may apply it
// to its QEMU process.
package syscallfilter

import (
	"fmt"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
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
	"userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
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

// auditArchOffset is the offset of seccomp_data.arch, the ABI of the call.
const auditArchOffset = 4

// Program returns the default profile as the BPF program Apply loads: Policy's, behind a check
// that kills the process (SECCOMP_RET_KILL_PROCESS) on a call of another ABI than the native
// one. Policy's own program allows such calls (its rules are the native ABI's numbers), and an
// amd64 process can make i386 calls (int 0x80) and so get past every rule: unshare included.
func Program() ([]bpf.Instruction, error) {
	p, err := Policy()
	if err != nil {
		return nil, err
	}
	native, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("the default seccomp profile: %w", err)
	}
	rules, err := p.Assemble()
	if err != nil {
		return nil, fmt.Errorf("the default seccomp profile: %w", err)
	}
	return append([]bpf.Instruction{
		bpf.LoadAbsolute{Off: auditArchOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(native.ID), SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS},
	}, rules...), nil
}

// Apply sets no_new_privs and loads the default profile (Program) onto the calling thread
// (lock it to its goroutine first: the filter is the thread's, and an exec from it keeps it).
// It fails when the kernel has no seccomp filters.
func Apply() error {
	prog, err := Program()
	if err != nil {
		return err
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return fmt.Errorf("the default seccomp profile: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("load the seccomp profile: %w", e)
	}
	return nil
}
