package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cubefleet/cubefleet/internal/agent/syscallfilter"
)

// stageInstr is what a supervisor tells its exec stage: whom to become and what to run. For a
// warm sandbox it comes in two messages: first one with Become set (whom to become: the stage
// takes the sandbox's user and waits), then, at the claim, the rest.
type stageInstr struct {
	Supervisor int      `json:"supervisor"` // the supervisor's pid: the stage's parent
	UID        int      `json:"uid"`        // -1: stay the agent's user
	GID        int      `json:"gid"`
	Become     bool     `json:"become,omitempty"` // only become the user, then wait for the next message
	Work       string   `json:"work,omitempty"`   // the working directory, created when missing
	Argv       []string `json:"argv,omitempty"`
	Env        []string `json:"env,omitempty"`
	Rlimits    []rlimit `json:"rlimits,omitempty"`
	// Seccomp applies the default seccomp profile (package syscallfilter) before the exec.
	Seccomp bool `json:"seccomp,omitempty"`
	// Sandbox is the sandbox's setup, for its init (namespaces only), in the first message.
	Sandbox *sandboxSetup `json:"sandbox,omitempty"`
}

// Bytes an exec stage writes on its status pipe: stageReady once it waits for its
// instructions; stageBecame once it took the sandbox's user for a warm sandbox and waits for the
// claim (neither starts an error message, which is text).
const (
	stageReady  = 'R'
	stageBecame = 0x01
)

// defaultPath is searched for Argv[0] when the sandbox's environment has no PATH.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// runStage is the exec stage: started early by a supervisor (fd 3: its instructions; fd 4: one
// byte once it is ready for them, then why it could not start, closed on exec), it waits for its
// instructions, then becomes the sandbox: no new privileges, its own user and group with no
// supplementary groups, SIGKILL when the supervisor dies, umask 077 (for a warm sandbox it
// then says so and waits for the claim), its working directory, its rlimits, and exec of the
// program with exactly the given environment. It is in the sandbox's cgroup and session already
// (the supervisor put it there), and no signal is ignored: the supervisor catches SIGHUP and
// SIGINT even when the agent was started with them ignored (nohup), and a caught signal is reset
// to its default by exec, where an ignored one would stay ignored.
func runStage() int {
	if len(os.Args) > 1 && os.Args[1] == initArg {
		return runInit()
	}
	// no_new_privs and the parent-death signal are a thread's, and exec keeps those of the
	// thread that calls it: all of it happens on this one.
	runtime.LockOSThread()
	instr := os.NewFile(3, "instructions")
	status := os.NewFile(4, "status")
	status.Write([]byte{stageReady})
	dec := json.NewDecoder(instr)
	fail := func(format string, args ...any) int {
		fmt.Fprintf(status, format, args...)
		return 127
	}
	var in stageInstr
	if err := dec.Decode(&in); errors.Is(err, io.EOF) { // the supervisor gave up on it
		return 0
	} else if err != nil {
		return fail("read the instructions: %v", err)
	}
	if msg := become(in); msg != "" {
		return fail("%s", msg)
	}
	if os.Getppid() != in.Supervisor {
		return 1
	}
	if in.Become { // a warm sandbox: wait for the claim
		status.Write([]byte{stageBecame})
		var claim stageInstr
		if err := dec.Decode(&claim); errors.Is(err, io.EOF) { // stopped while warm
			return 0
		} else if err != nil {
			return fail("read the claim: %v", err)
		}
		in.Work, in.Argv, in.Env, in.Rlimits, in.Seccomp = claim.Work, claim.Argv, claim.Env, claim.Rlimits, claim.Seccomp
	}
	instr.Close()
	return execProgram(in, fail)
}

// become makes the stage the sandbox's user: umask 077, no_new_privs, no supplementary groups,
// the sandbox's gid and uid, no capability, and SIGKILL when the supervisor dies. It returns
// why it could not.
func become(in stageInstr) string {
	unix.Umask(0o077)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Sprintf("set no_new_privs: %v", err)
	}
	if in.UID >= 0 {
		if err := syscall.Setgroups([]int{}); err != nil {
			return fmt.Sprintf("drop the supplementary groups: %v", err)
		}
		if err := syscall.Setgid(in.GID); err != nil {
			return fmt.Sprintf("become gid %d: %v", in.GID, err)
		}
		if err := syscall.Setuid(in.UID); err != nil {
			return fmt.Sprintf("become uid %d: %v", in.UID, err)
		}
		if err := dropCapabilities(); err != nil {
			return fmt.Sprintf("drop the capabilities: %v", err)
		}
	}
	// Changing the user cleared the parent-death signal; set it again (the caller then makes
	// sure the supervisor did not die before that).
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Sprintf("set the parent-death signal: %v", err)
	}
	return ""
}

// dropCapabilities clears the calling thread's ambient, permitted, effective and inheritable
// capabilities. Leaving root for another uid clears them, but in a user namespace whose root is
// not mapped (the sandbox's: setuid from an unmapped uid), nothing does; the stage there holds
// CAP_SETUID and CAP_SETGID (userNamespaceAttr) until here.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return err
	}
	var data [2]unix.CapUserData
	return unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0])
}

// execProgram enters the working directory, sets the rlimits and execs the program; it returns
// only when it could not.
func execProgram(in stageInstr, fail func(format string, args ...any) int) int {
	if len(in.Argv) == 0 {
		return fail("no command to run")
	}
	if err := os.MkdirAll(in.Work, 0o700); err != nil {
		return fail("working directory: %v", err)
	}
	if err := os.Chdir(in.Work); err != nil {
		return fail("working directory: %v", err)
	}
	path, err := lookPath(in.Argv[0], in.Env)
	if err != nil {
		return fail("%v", err)
	}
	pathp, err1 := syscall.BytePtrFromString(path)
	argvp, err2 := syscall.SlicePtrFromStrings(in.Argv)
	envp, err3 := syscall.SlicePtrFromStrings(in.Env)
	if err := errors.Join(err1, err2, err3); err != nil {
		return fail("exec %s: %v", in.Argv[0], err)
	}
	// The program gets stdin, stdout and stderr only: nothing the agent inherited without
	// close-on-exec, nor the init's pipe reporting the program's end (on which it could
	// write an exit status of its choosing); fd 4, the status pipe, closes on the exec too.
	if err := closeOnExecFrom(3); err != nil {
		return fail("close the stage's descriptors on exec: %v", err)
	}
	if in.Seccomp { // after the namespaces (set up by the init), before the rlimits (it allocates)
		if err := syscallfilter.Apply(); err != nil {
			return fail("%v", err)
		}
	}
	// The rlimits come last: under a low RLIMIT_AS this Go process could not allocate any
	// more, so nothing is allocated between them and the exec.
	for _, r := range in.Rlimits {
		var cur unix.Rlimit
		unix.Getrlimit(r.Resource, &cur)
		v := min(r.Value, cur.Max) // the hard limit only goes down without privileges
		if err := unix.Setrlimit(r.Resource, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fail("set rlimit %d to %d: %v", r.Resource, v, err)
		}
	}
	_, _, errno := syscall.RawSyscall(syscall.SYS_EXECVE,
		uintptr(unsafe.Pointer(pathp)), uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])))
	return fail("exec %s: %v", path, errno)
}

// closeOnExecFrom marks every descriptor from first on close-on-exec: close_range(2) with
// CLOSE_RANGE_CLOEXEC (Linux 5.11), else each one /proc/self/fd lists.
func closeOnExecFrom(first int) error {
	if err := unix.CloseRange(uint(first), ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return err
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		if fd, err := strconv.Atoi(n); err == nil && fd >= first {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}

// lookPath finds the program file like execvp(3): a name with a '/' is used as it is, another
// is searched for in the PATH of env (the first PATH entry), else in defaultPath. The PATH's
// value is not repeated in the error: the environment may hold secrets.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	path, where := defaultPath, "the default PATH ("+defaultPath+")"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path, where = v, "the PATH of the sandbox's environment"
			break
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 && unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec %s: not found in %s", file, where)
}
