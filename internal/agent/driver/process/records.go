package process

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/cgroups"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/agent/sandboxnet"
)

// The files of a sandbox's directory, <Config.Dir>/<id>/ (mode 0711, root). Only the work
// directory belongs to the sandbox's user; the records and the captured output are the agent's
// (mode 0600), so a sandbox can neither read nor forge them.
const (
	fileSandbox    = "sandbox.json"    // sandboxRecord, by the driver before anything runs
	fileSupervisor = "supervisor.json" // Ident of the supervisor, by the driver before it hands the spec over
	fileState      = "state.json"      // stateRecord, by the supervisor once the process runs
	fileResult     = "result.json"     // resultRecord, by the supervisor (or the driver, for a lost one) once it ended
	fileWarm       = "warm.json"       // warmRecord, by the supervisor of a warm sandbox once it waits for its claim
	fileClaim      = "claim.sock"      // the socket a warm sandbox's supervisor takes its claim on (0600, the agent's user only)
	fileStdout     = "stdout"          // captured stdout, OutputLimitBytes then the marker
	fileStderr     = "stderr"          // captured stderr, likewise
	fileLog        = "supervisor.log"  // the supervisor's own errors
	dirWork        = "work"            // the sandbox's directory (its user's, mode 0700); Spec.WorkDir is under it
	fileDisk       = "disk.img"        // with a disk limit: the work directory's file system (workdisk), mounted on it
)

// dirDiskImages, in Config.Dir, holds the empty file systems sandboxes' disks are copied from
// (workdisk.Images); its name is no sandbox id.
const dirDiskImages = ".disk-images"

// sandboxRecord is what the driver keeps of a Spec: everything but the environment's values,
// which may be secrets and are never written to disk.
type sandboxRecord struct {
	ID               string        `json:"id"`
	Argv             []string      `json:"argv"`
	EnvNames         []string      `json:"envNames,omitempty"`
	WorkDir          string        `json:"workDir,omitempty"`
	CPUMillicores    int64         `json:"cpuMillicores,omitempty"`
	MemoryMiB        int64         `json:"memoryMiB,omitempty"`
	DiskMiB          int64         `json:"diskMiB,omitempty"`
	Timeout          time.Duration `json:"timeout,omitempty"`
	Grace            time.Duration `json:"grace"`
	OutputLimitBytes int64         `json:"outputLimitBytes"`
	// UID and GID are the sandbox's own user and group; -1 when it runs as the agent's user.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// Cgroup is the sandbox's cgroup (its directories in each hierarchy), zero when it has
	// none.
	Cgroup cgroups.Group `json:"cgroups,omitzero"`
	// Disk is set when the work directory is a file system of its own of DiskMiB (fileDisk).
	Disk bool `json:"disk,omitempty"`
	// Network is the template's; Link, for a public sandbox, its veth pair and addresses.
	Network   driver.Network   `json:"network,omitempty"`
	Link      *sandboxnet.Link `json:"link,omitempty"`
	CreatedAt time.Time        `json:"createdAt"`
	// Warm is set for a sandbox made by Warm; ClaimedAt is when the driver handed it its claim
	// (then Argv, EnvNames, WorkDir, Timeout, Grace and OutputLimitBytes are the claim's).
	Warm      bool      `json:"warm,omitempty"`
	ClaimedAt time.Time `json:"claimedAt,omitzero"`
}

// warmRecord is written by the supervisor of a warm sandbox once its stage has taken the
// sandbox's user and waits for the claim.
type warmRecord struct {
	Process Ident     `json:"process"` // the exec stage: the process the claim's program replaces
	Since   time.Time `json:"since"`
}

// stateRecord is written by the supervisor once the sandbox's process runs.
type stateRecord struct {
	Process   Ident     `json:"process"` // the sandbox's main process: its own session and process group
	StartedAt time.Time `json:"startedAt"`
}

// resultRecord is a sandbox's end.
type resultRecord struct {
	Reason      driver.Reason `json:"reason"`
	Message     string        `json:"message"`
	EndedAt     time.Time     `json:"endedAt"`
	ExitCode    int           `json:"exitCode"`
	Signal      string        `json:"signal,omitempty"`
	Stats       driver.Stats  `json:"stats"`
	StdoutBytes int64         `json:"stdoutBytes"`
	StderrBytes int64         `json:"stderrBytes"`
}

// writeJSON replaces path with v, atomically (a new file renamed over it), mode 0600. It does not
// fsync: the records must survive the agent, not the host; after a reboot every sandbox is lost
// anyway.
func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readJSON reads path into v; ok is false when the file does not exist.
func readJSON(path string, v any) (ok bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, &fs.PathError{Op: "decode", Path: path, Err: err}
	}
	return true, nil
}

// removeAll removes dir and everything in it, also what a sandbox made unreadable to its owner
// (a directory of mode 0000 stops os.RemoveAll when the agent is not root).
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
