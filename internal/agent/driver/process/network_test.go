package process

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/agent/sandboxnet"
)

// innerNetEnv marks the run of a test inside a network namespace of its own (inNetworkNamespace).
const innerNetEnv = "CUBEFLEET_TEST_NETNS"

// The internet of the test: a network namespace it makes, with a server on 198.51.100.1:8080
// and on 169.254.169.254:8080 (a metadata address, put there so that no packet can leave the
// machine even if a rule were wrong).
var (
	internetAddr = netip.MustParsePrefix("198.51.100.1/24")
	hostInetAddr = netip.MustParsePrefix("198.51.100.2/24")
	metadataAddr = netip.MustParsePrefix("169.254.169.254/32")
)

// A public sandbox reaches the test's internet, and nothing else: not the metadata address in
// that same internet, not the host's addresses (the control plane's, the agent's port), not
// another sandbox; a private sandbox reaches none of them. The test runs in a network
// namespace of its own (re-executed into one), which plays the host: the policy's tables,
// forwarding and routes exist there only.
func TestPublicAndPrivateNetwork(t *testing.T) {
	if !inNetworkNamespace(t) {
		return
	}
	d := newDriver(t, testConfig(t))
	requireNamespaces(t, d)
	if err := sandboxnet.LoopbackUp(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sandboxnet.RemoveHost() })

	// The host's own server (a control plane, an agent port), on every address of the host.
	host, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go answerEach(host, "host\n")
	hostPort := host.Addr().(*net.TCPAddr).Port
	makeInternet(t)

	ctx := testCtx(t)
	argv, env := probe(t, "serve", "0.0.0.0:8080", "neighbour")
	start(t, d, driver.Spec{ID: "neighbour", Network: driver.NetworkPublic, Argv: argv, Env: env})
	var nbRec sandboxRecord
	readJSON(d.dir("neighbour")+"/"+fileSandbox, &nbRec)
	if nbRec.Link == nil {
		t.Fatalf("a public sandbox without a link: %+v", nbRec)
	}
	connect, cenv := probe(t, "connect")
	targets := []string{
		"198.51.100.1:8080", "169.254.169.254:8080", fmt.Sprintf("198.51.100.2:%d", hostPort),
		fmt.Sprintf("127.0.0.1:%d", hostPort), fmt.Sprintf("%s:%d", nbRec.Link.HostAddr.Addr(), hostPort),
		nbRec.Link.SandboxAddr.Addr().String() + ":8080",
	}
	var script []string
	for _, tg := range targets {
		script = append(script, `echo "`+tg+`: $(`+strings.Join(connect, " ")+` `+tg+`)"`)
	}
	for _, n := range []driver.Network{driver.NetworkPublic, driver.NetworkPrivate} {
		id := "probe-" + string(n)
		st, out := run(t, d, driver.Spec{ID: id, Network: n, Argv: sh(strings.Join(script, "; ")), Env: cenv})
		t.Logf("%s sandbox:\n%s%s", n, out.Stdout, out.Stderr)
		if st.ExitCode != 0 {
			t.Fatalf("%s: %+v", n, st)
		}
		got := map[string]string{}
		sc := bufio.NewScanner(strings.NewReader(string(out.Stdout)))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ": "); ok {
				got[k] = v
			}
		}
		for _, tg := range targets {
			want := "refused:"
			if n == driver.NetworkPublic && tg == "198.51.100.1:8080" {
				want = `connected: "internet`
			}
			if !strings.HasPrefix(got[tg], want) {
				t.Errorf("%s sandbox, connect %s: %q, want %s", n, tg, got[tg], want)
			}
		}
	}
	// The host end of the public sandbox's link went with it; the neighbour's is still there.
	if _, err := netlink.LinkByName(nbRec.Link.HostIf); err != nil {
		t.Errorf("the running neighbour's link %s: %v", nbRec.Link.HostIf, err)
	}
	if _, err := d.Stop(ctx, "neighbour"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := netlink.LinkByName(nbRec.Link.HostIf); err == nil {
		t.Errorf("the stopped neighbour's link %s is still there", nbRec.Link.HostIf)
	}
}

// TestPublicConnectionLimit: a public sandbox holds at most MaxConnections (8 here) connections
// in the host's connection tracking: trying 20 to the test's internet, it opens 8, and the next
// is rejected (admin-prohibited); so one sandbox cannot fill the host-wide table.
func TestPublicConnectionLimit(t *testing.T) {
	if !inNetworkNamespace(t) {
		return
	}
	cfg := testConfig(t)
	cfg.MaxConnections = 8
	d := publicHost(t, cfg)
	open, env := probe(t, "open", "20", "198.51.100.1:8080")
	st, out := run(t, d, driver.Spec{ID: "many-conns", Network: driver.NetworkPublic, Argv: open, Env: env})
	t.Logf("sandbox: %s%s", out.Stdout, out.Stderr)
	if st.ExitCode != 0 || !strings.HasPrefix(string(out.Stdout), "opened 8, then refused:") {
		t.Errorf("connections: %q (exit %d), want 8 opened, then refused", out.Stdout, st.ExitCode)
	}
}

// publicHost returns a driver on cfg for public sandboxes in the test's network namespace (the
// host): loopback up, the policy removed at the end, and the test's internet (makeInternet).
func publicHost(t *testing.T, cfg Config) *Driver {
	t.Helper()
	d := newDriver(t, cfg)
	requireNamespaces(t, d)
	if err := sandboxnet.LoopbackUp(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sandboxnet.RemoveHost() })
	makeInternet(t)
	return d
}

// inNetworkNamespace runs test t again in a network namespace of its own, as root, and reports
// false here (the outer run, which passes, fails or skips as the inner one did); in the inner
// run it reports true.
func inNetworkNamespace(t *testing.T) bool {
	t.Helper()
	requireRoot(t)
	if os.Getenv(innerNetEnv) == "1" {
		return true
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), innerNetEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	t.Logf("in a network namespace of its own:\n%s", out)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Skip("skipped inside")
	}
	return false
}

// makeInternet makes the test's internet: a process in a network namespace of its own serving
// "internet" on :8080, reached through a veth pair (inet0 here) at 198.51.100.1 and
// 169.254.169.254 (routed to it from here, the test's host namespace).
func makeInternet(t *testing.T) {
	t.Helper()
	cmd := exec.Command(probeBinary, "0.0.0.0:8080", "internet")
	cmd.Env = []string{probeEnv + "=serve"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "listening\n" {
		t.Fatalf("the internet's server: %q, %v", line, err)
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "inet0"}, PeerName: "inet0p"}
	must("veth", netlink.LinkAdd(veth))
	t.Cleanup(func() { netlink.LinkDel(veth) })
	here, err := netlink.LinkByName("inet0")
	must("inet0", err)
	must("address inet0", netlink.AddrAdd(here, &netlink.Addr{IPNet: prefixNet(hostInetAddr)}))
	must("up inet0", netlink.LinkSetUp(here))
	peer, err := netlink.LinkByName("inet0p")
	must("inet0p", err)
	must("move inet0p", netlink.LinkSetNsPid(peer, cmd.Process.Pid))
	ns, err := netns.GetFromPid(cmd.Process.Pid)
	must("the internet's namespace", err)
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	must("netlink there", err)
	defer h.Close()
	in, err := h.LinkByName("inet0p")
	must("inet0p there", err)
	for _, a := range []netip.Prefix{internetAddr, metadataAddr} {
		must("address "+a.String(), h.AddrAdd(in, &netlink.Addr{IPNet: prefixNet(a)}))
	}
	must("up inet0p", h.LinkSetUp(in))
	lo, err := h.LinkByName("lo")
	must("lo there", err)
	must("up lo there", h.LinkSetUp(lo))
	must("route to the metadata address", netlink.RouteAdd(&netlink.Route{
		LinkIndex: here.Attrs().Index, Dst: prefixNet(metadataAddr), Gw: net.IP(internetAddr.Addr().AsSlice()),
	}))
	// The server answers from here (soon: a loaded machine may take a while).
	var c net.Conn
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err = net.DialTimeout("tcp", "198.51.100.1:8080", time.Second); err == nil || time.Now().After(deadline) {
			break
		}
	}
	must("the internet from the host", err)
	c.Close()
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// TestPublicLinkOfAnotherSandbox: the sandbox network has fewer /30s (4 here) than the range has
// uids (8), and the leases go round robin; so the fifth sandbox's uid numbers the same link as
// the first's. A public sandbox that gets such a uid while the first still runs must not take
// that link (delete the first's veth and take its addresses): it gets a link of its own, and
// the first keeps its link (and reaches the internet through it).
func TestPublicLinkOfAnotherSandbox(t *testing.T) {
	if !inNetworkNamespace(t) {
		return
	}
	cfg := testConfig(t)
	cfg.NetworkCIDR = netip.MustParsePrefix("192.168.0.0/28")
	cfg.FirstUID, cfg.UIDCount = 2100000, 8
	cfg.UIDLeaseDir = filepath.Join(t.TempDir(), "sandbox-uids")
	d := publicHost(t, cfg)
	start(t, d, driver.Spec{ID: "first", Network: driver.NetworkPublic, Argv: []string{"/bin/sleep", "60"}})
	var first sandboxRecord
	readJSON(d.dir("first")+"/"+fileSandbox, &first)
	if first.Link == nil {
		t.Fatalf("a public sandbox without a link: %+v", first)
	}
	before, err := netlink.LinkByName(first.Link.HostIf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // the next uids, each leased and given back
		run(t, d, driver.Spec{ID: fmt.Sprintf("private-%d", i), Argv: []string{"/bin/true"}})
	}
	start(t, d, driver.Spec{ID: "second", Network: driver.NetworkPublic, Argv: []string{"/bin/sleep", "60"}})
	var second sandboxRecord
	readJSON(d.dir("second")+"/"+fileSandbox, &second)
	if second.Link == nil {
		t.Fatalf("a public sandbox without a link: %+v", second)
	}
	t.Logf("first: uid %d, %s %s; second: uid %d, %s %s", first.UID, first.Link.HostIf, first.Link.SandboxAddr,
		second.UID, second.Link.HostIf, second.Link.SandboxAddr)
	if second.Link.HostIf == first.Link.HostIf || second.Link.SandboxAddr == first.Link.SandboxAddr {
		t.Errorf("the second public sandbox got the running first's link %s (%s)", second.Link.HostIf, second.Link.SandboxAddr)
	}
	if after, err := netlink.LinkByName(first.Link.HostIf); err != nil || after.Attrs().Index != before.Attrs().Index {
		t.Errorf("the first's link %s after the second started: %v (index %d before)", first.Link.HostIf, err, before.Attrs().Index)
	}
	connect, env := probe(t, "connect")
	st, out := run(t, d, driver.Spec{ID: "third", Network: driver.NetworkPublic, Env: env,
		Argv: append(connect, "198.51.100.1:8080")})
	if st.ExitCode != 0 || !strings.HasPrefix(string(out.Stdout), `connected: "internet`) {
		t.Errorf("a third public sandbox beside them, connect to the internet: %q %q (%+v)", out.Stdout, out.Stderr, st)
	}
}
