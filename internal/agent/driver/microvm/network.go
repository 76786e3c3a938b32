package microvm

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/cubefleet/cubefleet/internal/agent/sandboxnet"
)

// staleLink reports whether the host end named name (sandboxnet.RemoveLeftovers) is a leftover
// of a public guest of the driver's directory that ended (recover found its end, or recorded
// it), and of none that runs: none of the directory's (a guest found running again keeps its
// link), and none of another directory that holds the ended guest's uid now (a sandbox of
// another agent or runtime of the host, whose link has the same name). A guest's tap device
// and bridge are in its VMM's network namespace and go with it; the host's policy
// (sandboxnet.EnsureHost) matches every link by its prefix, so nothing of it is a guest's.
// Called by New, before any guest starts.
func (d *Driver) staleLink(name string) bool {
	stale := false
	for _, v := range d.vms {
		if v.rec.Link == nil || v.rec.Link.HostIf != name {
			continue
		}
		if v.final == nil || d.leases.LinkLentElsewhere(v.rec.UID, sandboxnet.Links(d.cfg.NetworkCIDR), v.dir) {
			return false
		}
		stale = true
	}
	return stale
}

// startPublic starts cmd (a VMM of user uid) in a network namespace made for it, where a tap
// device (sandboxnet.MakeTap) is bridged to the sandbox's end of link's veth pair
// (Link.SetupTap), under the host's policy for the sandbox network (sandboxnet.EnsureHost).
// The namespace is made on a thread of its own, locked and never given back (it ends with its
// goroutine), from which cmd is started: the VMM is in the namespace from its first
// instruction and opens its tap there.
func (d *Driver) startPublic(cmd *exec.Cmd, link sandboxnet.Link, uid int) error {
	if err := sandboxnet.EnsureHost(d.cfg.NetworkCIDR, filepath.Dir(d.cfg.UIDLeaseDir), d.cfg.MaxConnections); err != nil {
		return fmt.Errorf("the host's network policy for public sandboxes: %w", err)
	}
	tid, linked, started := make(chan int, 1), make(chan error, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread is in the VMM's namespace
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			tid <- -1
			started <- fmt.Errorf("a network namespace for the VMM: %w", err)
			return
		}
		if err := sandboxnet.MakeTap(uid); err != nil {
			tid <- -1
			started <- err
			return
		}
		tid <- unix.Gettid()
		if err := <-linked; err != nil {
			started <- err
			return
		}
		started <- cmd.Start()
	}()
	t := <-tid
	if t < 0 {
		return <-started
	}
	err := link.SetupTap(t)
	linked <- err
	if serr := <-started; serr != nil {
		link.Teardown()
		if err != nil {
			return err
		}
		return fmt.Errorf("start the VMM: %w", serr)
	}
	return nil
}
