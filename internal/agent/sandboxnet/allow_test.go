package sandboxnet

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// roleEnv makes the test binary play a part of the test instead of running tests (TestMain):
// "serve" answers "internet" to every TCP connection on the address in its first argument;
// "probe" waits for a line on stdin, then tries each address of its arguments and prints
// "ADDR: connected: REPLY" or "ADDR: refused: ERROR".
const roleEnv = "CUBEFLEET_SANDBOXNET_ROLE"

// innerEnv marks the run of a test inside a network namespace of its own.
const innerEnv = "CUBEFLEET_SANDBOXNET_NETNS"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "serve":
		serve(os.Args[1])
	case "probe":
		probe(os.Args[1:])
	case "from":
		from(os.Args[1], os.Args[2:])
	default:
		os.Exit(m.Run())
	}
}

func serve(addr string) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("listening")
	for {
		c, err := l.Accept()
		if err != nil {
			os.Exit(1)
		}
		c.Write([]byte("internet\n"))
		c.Close()
	}
}

func probe(targets []string) {
	bufio.NewReader(os.Stdin).ReadString('\n')
	lines := make([]string, len(targets))
	var wg sync.WaitGroup
	for i, tg := range targets { // at once: each refused one waits out its timeout
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", tg, 3*time.Second)
			if err != nil {
				lines[i] = fmt.Sprintf("%s: refused: %v", tg, err)
				return
			}
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			b, _ := io.ReadAll(c)
			c.Close()
			lines[i] = fmt.Sprintf("%s: connected: %q", tg, b)
		}()
	}
	wg.Wait()
	fmt.Println(strings.Join(lines, "\n"))
	os.Exit(0)
}

// from waits for a line on stdin, gives eth0 the address src besides its own (as a microVM's
// guest kernel may: it owns its NIC), then tries each target from src and prints
// "ADDR: connected: REPLY" or "ADDR: refused: ERROR".
func from(src string, targets []string) {
	bufio.NewReader(os.Stdin).ReadString('\n')
	eth0, err := netlink.LinkByName("eth0")
	if err == nil {
		err = netlink.AddrAdd(eth0, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(netip.MustParseAddr(src), 32))})
	}
	if err != nil {
		fmt.Println("address", src, err)
		os.Exit(1)
	}
	d := net.Dialer{Timeout: 3 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	for _, tg := range targets {
		c, err := d.Dial("tcp", tg)
		if err != nil {
			fmt.Printf("%s: refused: %v\n", tg, err)
			continue
		}
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		fmt.Printf("%s: connected: %q\n", tg, b)
	}
	os.Exit(0)
}

// The test's internet: a network namespace it makes, holding 198.51.100.1 (the internet),
// 10.20.0.1 (a private address the template allows), 10.20.0.9 (the control plane's address,
// inside the allowed prefix), 10.30.0.1 (a private address it does not allow) and
// 169.254.169.254 (a metadata address), all routed there from the test's host namespace, so
// that no packet can leave the machine even if a rule were wrong.
var (
	hostInet     = netip.MustParsePrefix("198.51.100.2/24")
	internetAddr = netip.MustParsePrefix("198.51.100.1/24")
	routedThere  = []string{"10.20.0.1", "10.20.0.9", "10.30.0.1", "169.254.169.254"}
	// hostAllowed is an address of the host itself inside the allowed prefix.
	hostAllowed = netip.MustParsePrefix("10.20.0.50/32")
)

// A public sandbox whose template allows 10.20.0.0/16 reaches the internet and 10.20.0.1, and
// not 10.30.0.1 (a private address it was not given), the metadata address, the control plane
// (10.20.0.9, inside the allowed prefix) or the host's own address inside that prefix; a second
// sandbox given nothing reaches only the internet; after a Teardown the link's rules are gone,
// so the next sandbox of the same link inherits nothing. The test runs in a network namespace
// of its own (re-executed into one), which plays the host. Root only.
func TestEgressAllow(t *testing.T) {
	if !inNetworkNamespace(t) {
		return
	}
	cidr := policyHost(t)
	// The host's own server, on every address of the host (10.20.0.50 included).
	host, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("host\n"))
			c.Close()
		}
	}()
	hostPort := host.Addr().(*net.TCPAddr).Port

	targets := []string{"198.51.100.1:8080", "10.20.0.1:8080", "10.30.0.1:8080", "169.254.169.254:8080", "10.20.0.9:8080",
		fmt.Sprintf("%s:%d", hostAllowed.Addr(), hostPort)}
	allowed := Link{Allow: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fd12::/32")},
		Deny: []netip.Addr{netip.MustParseAddr("10.20.0.9")}}
	for _, tc := range []struct {
		name    string
		link    Link
		reaches []string
	}{
		{"allowed", allowed, []string{"198.51.100.1:8080", "10.20.0.1:8080"}},
		{"none", Link{}, []string{"198.51.100.1:8080"}},
		{"allowed again", allowed, []string{"198.51.100.1:8080", "10.20.0.1:8080"}},
	} {
		l, err := LinkFor(cidr, 0) // one link, reused: its rules must go with each sandbox
		if err != nil {
			t.Fatal(err)
		}
		l.Allow, l.Deny = tc.link.Allow, tc.link.Deny
		got := runProbe(t, l, targets)
		for _, tg := range targets {
			want := "refused:"
			if contains(tc.reaches, tg) {
				want = `connected: "internet\n"`
			}
			if !strings.HasPrefix(got[tg], want) {
				t.Errorf("%s: connect %s: %q, want %s", tc.name, tg, got[tg], want)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// runProbe starts a probe in a network namespace of its own, sets up l into it, lets it try
// targets and returns what it printed per target; l is torn down after.
func runProbe(t *testing.T, l Link, targets []string) map[string]string {
	t.Helper()
	out := runRole(t, l, "probe", targets, nil)
	t.Logf("sandbox %v:\n%s", l.Allow, out)
	got := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			got[k] = v
		}
	}
	return got
}

// runRole starts the test binary as role with args in a network namespace of its own, sets up
// l into it, calls ready (when not nil) and lets it go (a line on its stdin), and returns what
// it printed once it ended; l is torn down after.
func runRole(t *testing.T, l Link, role string, args []string, ready func() error) string {
	t.Helper()
	self, _ := os.Executable()
	cmd := exec.Command(self, args...)
	cmd.Env = []string{roleEnv + "=" + role}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	stdin, _ := cmd.StdinPipe()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err := l.Setup(cmd.Process.Pid)
	if err == nil && ready != nil {
		err = ready()
	}
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		l.Teardown()
		t.Fatal(err)
	}
	stdin.Write([]byte("go\n"))
	err = cmd.Wait()
	if err := l.Teardown(); err != nil {
		t.Errorf("teardown: %v", err)
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", role, err, out.String())
	}
	return out.String()
}

// inNetworkNamespace runs test t again in a network namespace of its own, as root, and reports
// false here (the outer run, which passes, fails or skips as the inner one did); in the inner
// run it reports true.
func inNetworkNamespace(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes network namespaces and nftables rules")
	}
	if os.Getenv(innerEnv) == "1" {
		return true
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), innerEnv+"=1")
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

// policyHost makes the test's network namespace the host of public sandboxes: loopback up, the
// policy for the sandbox network it returns (192.168.0.0/18, removed at the end), and the
// test's internet (makeInternet).
func policyHost(t *testing.T) netip.Prefix {
	t.Helper()
	if err := LoopbackUp(); err != nil {
		t.Fatal(err)
	}
	cidr := netip.MustParsePrefix("192.168.0.0/18")
	if err := EnsureHost(cidr, t.TempDir(), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RemoveHost() })
	makeInternet(t)
	return cidr
}

// makeInternet makes the test's internet: a server in a network namespace of its own on
// 0.0.0.0:8080, reached through a veth pair (inet0 here), with every address of routedThere
// on its end and routed to it from here; and hostAllowed on the host's lo.
func makeInternet(t *testing.T) {
	t.Helper()
	self, _ := os.Executable()
	cmd := exec.Command(self, "0.0.0.0:8080")
	cmd.Env = []string{roleEnv + "=serve"}
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
	here, err := netlink.LinkByName("inet0")
	must("inet0", err)
	must("address inet0", netlink.AddrAdd(here, &netlink.Addr{IPNet: ipNet(hostInet)}))
	must("up inet0", netlink.LinkSetUp(here))
	lo, err := netlink.LinkByName("lo")
	must("lo", err)
	must("address lo", netlink.AddrAdd(lo, &netlink.Addr{IPNet: ipNet(hostAllowed)}))
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
	must("address "+internetAddr.String(), h.AddrAdd(in, &netlink.Addr{IPNet: ipNet(internetAddr)}))
	for _, a := range routedThere {
		p := netip.PrefixFrom(netip.MustParseAddr(a), 32)
		must("address "+a, h.AddrAdd(in, &netlink.Addr{IPNet: ipNet(p)}))
		must("route to "+a, netlink.RouteAdd(&netlink.Route{LinkIndex: here.Attrs().Index, Dst: ipNet(p), Gw: net.IP(internetAddr.Addr().AsSlice())}))
	}
	must("up inet0p", h.LinkSetUp(in))
	ilo, err := h.LinkByName("lo")
	must("lo there", err)
	must("up lo there", h.LinkSetUp(ilo))
	var c net.Conn
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err = net.DialTimeout("tcp", "198.51.100.1:8080", time.Second); err == nil || time.Now().After(deadline) {
			break
		}
	}
	must("the internet from the host", err)
	c.Close()
}

// TestSpoofedSource: a sandbox whose packets carry a source address other than its own (a
// microVM's guest kernel owns its NIC and may give it any) gets nothing out: else it would be
// counted under addresses not its own, past its connection limit (MaxConnections is per source
// address) and into another sandbox's, and could answer for another's connections. The host
// routes 10.77.0.0/24 back over the sandbox's link only so that the probe sees whether its
// packets got out; its own address still reaches the internet.
func TestSpoofedSource(t *testing.T) {
	if !inNetworkNamespace(t) {
		return
	}
	cidr := policyHost(t)
	for _, tc := range []struct {
		src, want string
	}{
		{"10.77.0.5", "refused:"},                  // an address of no sandbox
		{"192.168.0.2", `connected: "internet\n"`}, // its own
	} {
		l, err := LinkFor(cidr, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := runRole(t, l, "from", []string{tc.src, "198.51.100.1:8080"}, func() error {
			if cidr.Contains(netip.MustParseAddr(tc.src)) {
				return nil
			}
			host, err := netlink.LinkByName(l.HostIf)
			if err != nil {
				return err
			}
			return netlink.RouteAdd(&netlink.Route{LinkIndex: host.Attrs().Index, Dst: ipNet(netip.MustParsePrefix("10.77.0.0/24")), Gw: net.IP(l.SandboxAddr.Addr().AsSlice())})
		})
		t.Logf("from %s:\n%s", tc.src, out)
		if got, _ := strings.CutPrefix(strings.TrimSpace(out), "198.51.100.1:8080: "); !strings.HasPrefix(got, tc.want) {
			t.Errorf("connect from %s: %q, want %s", tc.src, got, tc.want)
		}
	}
}
