package microvm

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/agent/driver/microvm/guest"
	"github.com/cubefleet/cubefleet/internal/agent/driver/process"
	"github.com/cubefleet/cubefleet/internal/agent/sandboxnet"
)

// innerNetEnv marks the run of TestPublicNetwork inside the network namespace that plays the
// host.
const innerNetEnv = "CUBEFLEET_MICROVM_TEST_INNER_NET"

func TestParseNet(t *testing.T) {
	for _, tc := range []struct {
		v   string
		err string
	}{
		{"192.168.0.2/30,192.168.0.1", ""},
		{"192.168.0.2/30", "want <IPv4 address>/<bits>,<gateway>"},
		{"fd00::2/64,fd00::1", "want <IPv4 address>"},
		{"192.168.0.2/30,192.168.0.9", "the gateway must be another address of 192.168.0.0/30"},
		{"192.168.0.2/30,192.168.0.2", "the gateway must be another address"},
	} {
		_, _, err := guest.ParseNet(tc.v)
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseNet(%q) = %v, want %q", tc.v, err, tc.err)
		}
	}
}

// A public guest reaches the internet (a server in a network namespace the test made) through
// its tap device, bridged to a veth under the host's policy; the host's own addresses are not
// reachable from it. The test runs in a network namespace of its own, which plays the host.
func TestPublicNetwork(t *testing.T) {
	if os.Getenv(innerNetEnv) != "1" {
		newTestDriver(t, "") // skips without root or a guest kernel
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(self, "-test.run=^TestPublicNetwork$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), innerNetEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
		out, err := cmd.CombinedOutput()
		t.Logf("in a network namespace of its own:\n%s", out)
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := sandboxnet.LoopbackUp(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sandboxnet.RemoveHost() })
	serve := func(l net.Listener, answer string) {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				io.WriteString(c, answer+"\n")
				c.Close()
			}
		}()
	}
	host, err := net.Listen("tcp", "0.0.0.0:0") // the host's own server, on every address of it
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	serve(host, "host")
	hostPort := host.Addr().(*net.TCPAddr).Port
	makeInternet(t, serve)

	dir := testDir(t)
	testImage(t, filepath.Join(dir, "images"))
	d := newTestDriver(t, dir)
	script := fmt.Sprintf("sleep 10; echo internet: $(nc -w 5 198.51.100.1 8080); echo host: $(nc -w 3 198.51.100.2 %d)$?", hostPort)
	st, err := d.Start(context.Background(), driver.Spec{
		ID: "pub", Image: "busybox", MemoryMiB: 256, Network: driver.NetworkPublic,
		Argv: []string{"sh", "-c", script}, Env: []string{"PATH=/bin"},
	})
	if err != nil || st.State != driver.StateRunning {
		t.Fatalf("start: %+v, %v", st, err)
	}
	v, _ := d.get("pub")
	if v.rec.Link == nil {
		t.Fatal("a public guest without a link")
	}
	if _, err := netlink.LinkByName(v.rec.Link.HostIf); err != nil {
		t.Errorf("the public guest's host end %s: %v", v.rec.Link.HostIf, err)
	}
	// The agent goes away while the guest runs, leaving links behind (made here as the driver
	// makes them): an ended guest's veth pair, both ends still on the host (its agent died
	// between making the pair and moving its end into the VMM's namespace), and one of a guest
	// whose agent died while it booted. The next driver removes exactly those: not the link of
	// the guest it finds running again, nor one that none of its guests names.
	d.Close()
	gone, half, foreign := leftover(t, d, "gone", 1, true), leftover(t, d, "half", 2, false), leftover(t, d, "", 3, false)
	d = newTestDriver(t, dir)
	for _, name := range []string{gone, gone + "p", half, half + "p"} {
		if _, err := netlink.LinkByName(name); err == nil {
			t.Errorf("the leftover %s is still there after a restart", name)
		}
	}
	for _, name := range []string{foreign, v.rec.Link.HostIf} {
		if _, err := netlink.LinkByName(name); err != nil {
			t.Errorf("%s was removed at the restart: %v", name, err)
		}
	}
	st = waitEnd(t, d, "pub", 2*time.Minute)
	out, _ := d.Output(context.Background(), "pub")
	t.Logf("guest: %s %s", out.Stdout, out.Stderr)
	if !strings.Contains(string(out.Stdout), "internet: internet\n") {
		t.Errorf("the guest did not reach the internet: %q (%+v)", out.Stdout, st)
	}
	if strings.Contains(string(out.Stdout), "host: host") {
		t.Errorf("the guest reached the host's server: %q", out.Stdout)
	}
	if _, err := netlink.LinkByName(v.rec.Link.HostIf); err == nil {
		t.Errorf("the ended guest's veth is still there")
	}
}

// leftover makes the veth pair of the link of the n-th uid from the top of d's range, as the
// driver names it, on the host, and returns its host end's name. With id, it is the link of a
// guest of that id in d's directory (its record, and with ended its end); without, of none.
func leftover(t *testing.T, d *Driver, id string, n int, ended bool) string {
	t.Helper()
	uid := d.cfg.FirstUID + d.cfg.UIDCount - n // the top of the range: no sandbox of the host holds it
	link, err := sandboxnet.LinkFor(d.cfg.NetworkCIDR, uid-d.cfg.FirstUID)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: link.HostIf}, PeerName: link.HostIf + "p"}); err != nil {
		t.Fatalf("make %s: %v", link.HostIf, err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(link.HostIf); err == nil {
			netlink.LinkDel(l)
		}
	})
	if id == "" {
		return link.HostIf
	}
	vmDir := filepath.Join(d.cfg.Dir, id)
	if err := os.MkdirAll(vmDir, 0o711); err != nil {
		t.Fatal(err)
	}
	rec := vmRecord{Spec: driver.Spec{ID: id, Image: "busybox", Network: driver.NetworkPublic}, UID: uid, Link: &link, CreatedAt: time.Now().UTC()}
	if err := process.WriteRecord(filepath.Join(vmDir, fileVM), rec); err != nil {
		t.Fatal(err)
	}
	if ended {
		st := driver.Status{ID: id, State: driver.StateExited, Reason: driver.ReasonExited, ExitCode: 0}
		if err := process.WriteRecord(filepath.Join(vmDir, process.FileResult), st); err != nil {
			t.Fatal(err)
		}
	}
	return link.HostIf
}

// makeInternet makes the internet: a network namespace holding 198.51.100.1/24 with a server on
// port 8080 answering "internet", joined to this one (198.51.100.2/24) by a veth pair.
func makeInternet(t *testing.T, serve func(net.Listener, string)) {
	t.Helper()
	tid, listening := make(chan int, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread stays in the internet's namespace
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			tid <- -1
			return
		}
		sandboxnet.LoopbackUp()
		tid <- unix.Gettid()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			l, err := net.Listen("tcp", "198.51.100.1:8080")
			if err == nil {
				serve(l, "internet")
				t.Cleanup(func() { l.Close() })
			}
			if err == nil || time.Now().After(deadline) {
				listening <- err
				select {} // keep the thread (and its namespace) until the test binary ends
			}
		}
	}()
	pid := <-tid
	if pid < 0 {
		t.Fatal("a network namespace for the internet")
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "inet0"}, PeerName: "inet0p"}
	must("veth", netlink.LinkAdd(veth))
	here, err := netlink.LinkByName("inet0")
	must("inet0", err)
	a, _ := netlink.ParseAddr("198.51.100.2/24")
	must("address inet0", netlink.AddrAdd(here, a))
	must("up inet0", netlink.LinkSetUp(here))
	peer, err := netlink.LinkByName("inet0p")
	must("inet0p", err)
	must("move inet0p", netlink.LinkSetNsPid(peer, pid))
	ns, err := netns.GetFromPid(pid)
	must("the internet's namespace", err)
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	must("netlink there", err)
	defer h.Close()
	in, err := h.LinkByName("inet0p")
	must("inet0p there", err)
	b, _ := netlink.ParseAddr("198.51.100.1/24")
	must("address inet0p", h.AddrAdd(in, b))
	must("up inet0p", h.LinkSetUp(in))
	must("the internet's server", <-listening)
}
