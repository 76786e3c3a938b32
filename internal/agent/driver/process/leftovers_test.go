package process

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cubefleet/cubefleet/internal/agent/sandboxnet"
)

// A public sandbox's link left on the host is stale (removed at the driver's start) only when a
// sandbox of the driver's directory that ended names it, none of the directory's that runs does,
// and its uid is not lent now to a sandbox of another directory (another agent's or runtime's of
// the host, whose link has the same name).
func TestStaleLink(t *testing.T) {
	base := t.TempDir()
	dir, other := filepath.Join(base, "sandboxes"), filepath.Join(base, "other")
	leases := &uidLeases{dir: filepath.Join(base, "leases"), first: 1000, count: 100}
	for _, d := range []string{dir, other, leases.dir} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	// sandbox writes a sandbox of dir with the link of uid, ended or running.
	sandbox := func(id string, uid int, ended bool) string {
		link, err := sandboxnet.LinkFor(DefaultNetworkCIDR, uid-leases.first)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, id)
		os.MkdirAll(p, 0o711)
		if err := writeJSON(filepath.Join(p, fileSandbox), sandboxRecord{ID: id, UID: uid, Link: &link}); err != nil {
			t.Fatal(err)
		}
		if ended {
			writeJSON(filepath.Join(p, fileResult), resultRecord{})
		}
		return link.HostIf
	}
	lend := func(uid int, to string, ended bool) {
		os.MkdirAll(to, 0o711)
		if ended {
			writeJSON(filepath.Join(to, fileResult), resultRecord{})
		}
		if err := os.WriteFile(filepath.Join(leases.dir, strconv.Itoa(uid)), []byte(to+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ended := sandbox("ended", 1001, true)
	running := sandbox("running", 1002, false)
	lentAgain := sandbox("lent-again", 1003, true)
	lend(1003, filepath.Join(other, "microvm"), false) // another runtime's guest runs as 1003 now
	lentEnded := sandbox("lent-ended", 1004, true)
	lend(1004, filepath.Join(other, "done"), true) // ... and one that ended too
	reused := sandbox("reused-old", 1005, true)
	sandbox("reused-new", 1005, false) // the uid's next sandbox, of this directory, runs
	for _, tc := range []struct {
		name string
		want bool
	}{
		{ended, true}, {running, false}, {lentAgain, false}, {lentEnded, true}, {reused, false},
		{"cfv99", false}, // no sandbox of the directory names it
	} {
		if got := staleLink(dir, tc.name, leases, sandboxnet.Links(DefaultNetworkCIDR)); got != tc.want {
			t.Errorf("staleLink(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
	// With 64 links for the 100 uids, 1006 and 1070 have the same link: the ended 1006's link is
	// not stale while another directory's sandbox of 1070 runs.
	mate := sandbox("link-mate", 1006, true)
	if !staleLink(dir, mate, leases, 64) {
		t.Errorf("staleLink(%s) = false before its uid's link mate is lent, want true", mate)
	}
	lend(1070, filepath.Join(other, "mate"), false)
	if staleLink(dir, mate, leases, 64) {
		t.Errorf("staleLink(%s) = true while uid 1070 (the same link) runs elsewhere, want false", mate)
	}
}
