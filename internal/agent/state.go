package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cubefleet/cubefleet/internal/atomicfile"
	"github.com/cubefleet/cubefleet/internal/privatefile"
)

// StateFile is the name of the agent's state file in its state directory (mode 0600): the
// node credential the control plane issued at registration, and whether it was revoked.
const StateFile = "node.json"

// LockFile is the name of the lock file in the state directory: `agent run` holds an
// exclusive flock(2) on it for its lifetime (the kernel releases it when the process dies), so
// that two agents never share a state directory, where each would overwrite the other's node
// credential. It holds the process ID of the agent holding the lock.
const LockFile = "agent.lock"

// lockWait is how long lockStateDir tries again while the lock is held: a lock released a moment
// ago can still be held by a child process this program forked and has not yet exec'd (the
// child shares the lock's open file until exec closes it), so a restart in the same process
// (tests, or an agent restarted by its supervisor) would otherwise be refused.
const lockWait = 2 * time.Second

// lockStateDir takes the exclusive lock on dir/LockFile, trying again for up to lockWait while
// another holder has it, and writes this process's ID into it. It returns a function that
// releases the lock; when another agent holds it, the error names the directory, that agent's
// process ID (when it wrote one) and the fix.
func lockStateDir(dir string) (func(), error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the lock file %s: %w", path, err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	for deadline := time.Now().Add(lockWait); errors.Is(err, syscall.EWOULDBLOCK) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		defer f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		who := "another agent"
		if data, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 0 {
				who = fmt.Sprintf("another agent (process %d)", pid)
			}
		}
		return nil, fmt.Errorf("%s is in use by %s, which holds %s: two agents sharing a state directory would overwrite each other's node credential; give each agent its own CUBEFLEET_AGENT_STATE_DIR (--state-dir), or stop the other agent", dir, who, path)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() {
		f.Truncate(0)
		f.Close() // releases the lock
	}, nil
}

// State is the content of StateFile.
type State struct {
	// NodeID is the node the credential belongs to; a credential for another node ID (the
	// node's address changed) is not used.
	NodeID string `json:"node_id"`
	// NodeCredential is the per-node credential (cfn_...) sent on every call after the first
	// registration; "" when the control plane issued none or it was revoked.
	NodeCredential string `json:"node_credential,omitempty"`
	// JoinTokenSHA256 is the hex SHA-256 of the join token the node joined with. After a
	// revocation the agent refuses to join again with the same token.
	JoinTokenSHA256 string `json:"join_token_sha256,omitempty"`
	// Revoked is set when the control plane answered 401 to the credential (the node was
	// deleted); the agent then needs a new join token.
	Revoked bool `json:"revoked,omitempty"`
	// RevokedAt is when that happened, RFC 3339.
	RevokedAt string `json:"revoked_at,omitempty"`
}

// ReadState reads dir/StateFile. A missing file is a zero State and no error; a file that is
// not private (see privatefile.Check) is an error.
func ReadState(dir string) (State, error) {
	var st State
	data, err := privatefile.Read(filepath.Join(dir, StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("%s: %w", filepath.Join(dir, StateFile), err)
	}
	return st, nil
}

// WriteState replaces dir/StateFile atomically with st (mode 0600), creating dir with mode
// 0700 when it is missing.
func WriteState(dir string, st State) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, StateFile), append(data, '\n'), 0o600)
}

// PrepareStateDir makes dir ready to hold the node credential: it creates it with mode 0700
// (missing parents 0755, so that a sandbox directory beside it, such as the default
// /var/lib/cubefleet/sandboxes, stays reachable by the sandboxes' users; both whatever the
// umask), and tightens an existing directory that its group or others may
// access to 0700, returning the mode it had (0 when it needed no change). A path that is not a
// directory, or a directory owned by another user, is an error: the agent does not keep its
// credential where someone else decides who reads it.
func PrepareStateDir(dir string) (fs.FileMode, error) {
	if err := atomicfile.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return 0, err
	}
	if err := atomicfile.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, err
	}
	if !fi.IsDir() {
		return 0, fmt.Errorf("%s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return 0, fmt.Errorf("%s is owned by uid %d, not by the agent's user (uid %d); it holds the node credential: chown it, or use another --state-dir", dir, st.Uid, os.Geteuid())
	}
	mode := fi.Mode().Perm()
	if mode&0o077 == 0 {
		return 0, nil
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return 0, fmt.Errorf("%s has mode %04o and holds the node credential; it could not be made 0700: %w", dir, mode, err)
	}
	return mode, nil
}

// tokenHash returns the hex SHA-256 of a token ("" for none).
func tokenHash(t Secret) string {
	if t == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(t.Reveal()))
	return hex.EncodeToString(sum[:])
}
