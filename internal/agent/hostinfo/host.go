// Package hostinfo reads the machine a node agent runs on, from files only (nothing runs in a
// shell): its IPv4 routes, addresses and nameservers, the node IP Cube Sandbox's installer would
// pick, what a sandbox network would overlap, and the facts the agent reports and `agent
// install` checks (architecture, CPUs, memory, kernel, KVM, cgroup v2). Host.Root points it at
// a fake tree for tests and image builds.
package hostinfo

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Host reads what the agent needs to know about the machine it runs on from files: /proc/net/route,
// /proc/net/fib_trie, /etc/resolv.conf, /proc/cpuinfo, /proc/meminfo, /proc/sys/kernel/*,
// /proc/self/mountinfo with the cgroup v2 hierarchy it names, and /dev/kvm. Nothing is run in a shell. The zero value reads the real
// machine; tests point Root at a fake tree.
type Host struct {
	// Root is the directory those paths are read under; "" means "/".
	Root string
}

// real reports whether h reads the running machine (not a fake tree).
func (h Host) real() bool { return h.Root == "" || h.Root == "/" }

// Path returns where h reads the machine's absolute path p: p itself on the running machine,
// else p under Root.
func (h Host) Path(p string) string {
	if h.real() {
		return p
	}
	return filepath.Join(h.Root, p)
}

func (h Host) read(p string) ([]byte, error) { return os.ReadFile(h.Path(p)) }

// Route is one IPv4 route of the main table (/proc/net/route).
type Route struct {
	Iface   string       // the interface, e.g. eth0
	Dst     netip.Prefix // 0.0.0.0/0 for a default route
	Gateway netip.Addr   // 0.0.0.0 for a directly connected network
	Metric  int          // lower wins
}

// Default reports whether r is a default route.
func (r Route) Default() bool { return r.Dst.Bits() == 0 }

// Routes reads the IPv4 routes from /proc/net/route (the main table). Routes that are not up
// are left out.
func (h Host) Routes() ([]Route, error) {
	data, err := h.read("/proc/net/route")
	if err != nil {
		return nil, err
	}
	var routes []Route
	sc := bufio.NewScanner(bytes.NewReader(data))
	first := true
	for sc.Scan() {
		if first { // header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		dst, err1 := hexIPv4(f[1])
		gw, err2 := hexIPv4(f[2])
		flags, err3 := strconv.ParseUint(f[3], 16, 32)
		metric, err4 := strconv.Atoi(f[6])
		mask, err5 := hexIPv4(f[7])
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return nil, fmt.Errorf("/proc/net/route: %q: %w", sc.Text(), err)
		}
		if flags&0x1 == 0 { // RTF_UP
			continue
		}
		bits := maskBits(mask)
		if bits < 0 {
			return nil, fmt.Errorf("/proc/net/route: %q: mask %s is not contiguous", sc.Text(), mask)
		}
		routes = append(routes, Route{Iface: f[0], Dst: netip.PrefixFrom(dst, bits).Masked(), Gateway: gw, Metric: metric})
	}
	return routes, sc.Err()
}

// hexIPv4 decodes an address of /proc/net/route: 8 hex digits, in the host's byte order
// (little-endian on x86_64 and aarch64).
func hexIPv4(s string) (netip.Addr, error) {
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil || len(s) != 8 {
		return netip.Addr{}, fmt.Errorf("%q is not an address", s)
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(v))
	return netip.AddrFrom4(b), nil
}

// maskBits returns the prefix length of a contiguous netmask, -1 for another mask.
func maskBits(mask netip.Addr) int {
	b := mask.As4()
	v := binary.BigEndian.Uint32(b[:])
	n := 0
	for v&0x80000000 != 0 {
		n++
		v <<= 1
	}
	if v != 0 {
		return -1
	}
	return n
}

// LocalAddrs returns the IPv4 addresses assigned to this host, loopback included, from the
// "/32 host LOCAL" entries of /proc/net/fib_trie, sorted.
func (h Host) LocalAddrs() ([]netip.Addr, error) {
	data, err := h.read("/proc/net/fib_trie")
	if err != nil {
		return nil, err
	}
	seen := map[netip.Addr]bool{}
	var cur netip.Addr
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		t := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(t, "|-- "); ok {
			cur, _ = netip.ParseAddr(strings.TrimSpace(rest))
			continue
		}
		if f := strings.Fields(t); len(f) == 3 && f[0] == "/32" && f[1] == "host" && f[2] == "LOCAL" && cur.Is4() {
			seen[cur] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out, nil
}

// InterfaceAddr is a local address with the interface it belongs to, as far as the connected
// routes tell ("" when no connected route covers it).
type InterfaceAddr struct {
	Iface string     // "" when unknown
	Addr  netip.Addr // IPv4
}

// InterfaceAddrs joins LocalAddrs with the connected routes (gateway 0.0.0.0) to name each
// address's interface; the most specific route wins.
func (h Host) InterfaceAddrs() ([]InterfaceAddr, error) {
	addrs, err := h.LocalAddrs()
	if err != nil {
		return nil, err
	}
	routes, err := h.Routes()
	if err != nil {
		return nil, err
	}
	out := make([]InterfaceAddr, 0, len(addrs))
	for _, a := range addrs {
		ia := InterfaceAddr{Addr: a}
		best := -1
		for _, r := range routes {
			if r.Gateway.IsUnspecified() && !r.Default() && r.Dst.Contains(a) && r.Dst.Bits() > best {
				ia.Iface, best = r.Iface, r.Dst.Bits()
			}
		}
		if a.IsLoopback() && ia.Iface == "" {
			ia.Iface = "lo"
		}
		out = append(out, ia)
	}
	return out, nil
}

// Nameservers returns the IPv4 nameservers of /etc/resolv.conf; none when the file is missing.
func (h Host) Nameservers() ([]netip.Addr, error) {
	data, err := h.read("/etc/resolv.conf")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "nameserver" {
			if a, err := netip.ParseAddr(f[1]); err == nil && a.Is4() {
				out = append(out, a)
			}
		}
	}
	return out, sc.Err()
}

// DetectNodeIP returns the node's address as Cube Sandbox's installer finds it when
// CUBE_SANDBOX_NODE_IP is unset: the address of the interface of the default route with the
// lowest metric (the one in that interface's connected network), else the first global
// (not loopback, not link-local) address. It errors when there is none.
func (h Host) DetectNodeIP() (netip.Addr, error) {
	ifaddrs, err := h.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}, err
	}
	routes, err := h.Routes()
	if err != nil {
		return netip.Addr{}, err
	}
	var def *Route
	for i, r := range routes {
		if r.Default() && (def == nil || r.Metric < def.Metric) {
			def = &routes[i]
		}
	}
	if def != nil {
		for _, ia := range ifaddrs {
			if ia.Iface == def.Iface && GlobalUnicast(ia.Addr) {
				return ia.Addr, nil
			}
		}
	}
	for _, ia := range ifaddrs {
		if GlobalUnicast(ia.Addr) && !isCubeDevice(ia.Iface) {
			return ia.Addr, nil
		}
	}
	return netip.Addr{}, errors.New("no global IPv4 address on this host")
}

// GlobalUnicast reports whether a is an IPv4 address other hosts can route to: not loopback,
// link-local, multicast, broadcast, unspecified or in 0.0.0.0/8 or 240.0.0.0/4.
func GlobalUnicast(a netip.Addr) bool {
	if !a.Is4() || a.IsLoopback() {
		return false
	}
	b := a.As4()
	return a.IsGlobalUnicast() && !a.IsLinkLocalUnicast() && b[0] != 0 && b[0] < 240
}

// isCubeDevice reports whether iface belongs to the sandbox network runtime: cube-dev,
// cube-router, or a TAP named after an IPv4 address (`10.0.0.1` or `z10.0.0.1`).
func isCubeDevice(iface string) bool {
	if iface == "cube-dev" || iface == "cube-router" {
		return true
	}
	a, err := netip.ParseAddr(strings.TrimPrefix(iface, "z"))
	return err == nil && a.Is4()
}

// Facts is what the agent reports about the machine: its physical size and identity.
type Facts struct {
	Arch          string   // uname machine: x86_64, aarch64, ...
	CPUCount      int64    // logical CPUs: "processor" entries of /proc/cpuinfo, else runtime.NumCPU
	MemTotalKB    int64    // MemTotal of /proc/meminfo, in kB (KiB)
	CPUVendor     string   // vendor_id (x86) or "CPU implementer" (arm64)
	CPUModel      string   // "model name" (x86) or "CPU part" (arm64)
	CPUFlags      []string // "flags" (x86) or "Features" (arm64) of the first CPU
	KernelRelease string   // /proc/sys/kernel/osrelease
	KernelVersion string   // /proc/version
	KVM           bool     // /dev/kvm exists
	KVMAPIVersion int      // KVM_GET_API_VERSION, 0 when unknown
	Hypervisor    bool     // the CPU flag "hypervisor": this host is itself a virtual machine
	Cgroup2       bool     // /sys/fs/cgroup is a cgroup v2 (unified) mount (Cgroup.Unified)
	// CgroupCPU says where the cpu controller is: "cgroup v2" (its hierarchy's
	// cgroup.controllers lists it), "cgroup v1" (a cgroup v1 hierarchy has it, as on a v1 or
	// hybrid host), "" when no hierarchy has it.
	CgroupCPU string
}

// MemTotalMiB returns MemTotalKB in MiB (rounded down).
func (f Facts) MemTotalMiB() int64 { return f.MemTotalKB / 1024 }

// CPUIDHash returns a short fingerprint of the CPU's vendor, model and flags (the first 16 hex
// digits of their SHA-256), for matching hosts that can restore each other's snapshots.
func (f Facts) CPUIDHash() string {
	sum := sha256.Sum256([]byte(f.CPUVendor + "\n" + f.CPUModel + "\n" + strings.Join(f.CPUFlags, " ")))
	return hex.EncodeToString(sum[:8])
}

// KernelFingerprint returns the first 16 hex digits of the SHA-256 of /proc/version.
func (f Facts) KernelFingerprint() string {
	if f.KernelVersion == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(f.KernelVersion))
	return hex.EncodeToString(sum[:8])
}

// Facts reads the machine's facts. Only /proc/meminfo is required; anything else that cannot
// be read is left at its zero value.
func (h Host) Facts() (Facts, error) {
	var f Facts
	mem, err := h.read("/proc/meminfo")
	if err != nil {
		return f, fmt.Errorf("read the memory size: %w", err)
	}
	for _, l := range strings.Split(string(mem), "\n") {
		if rest, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return f, fmt.Errorf("/proc/meminfo: MemTotal %q: %w", rest, err)
			}
			f.MemTotalKB = n
		}
	}
	if f.MemTotalKB <= 0 {
		return f, errors.New("/proc/meminfo has no MemTotal")
	}
	if ci, err := h.read("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(ci), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if !ok {
				continue
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			switch k {
			case "processor":
				f.CPUCount++
			case "vendor_id", "CPU implementer":
				if f.CPUVendor == "" {
					f.CPUVendor = v
				}
			case "model name", "CPU part":
				if f.CPUModel == "" {
					f.CPUModel = v
				}
			case "flags", "Features":
				if f.CPUFlags == nil {
					f.CPUFlags = strings.Fields(v)
				}
			}
		}
	}
	if f.CPUCount == 0 {
		f.CPUCount = int64(runtime.NumCPU())
	}
	for _, fl := range f.CPUFlags {
		if fl == "hypervisor" {
			f.Hypervisor = true
		}
	}
	f.KernelRelease = h.trimmed("/proc/sys/kernel/osrelease")
	f.KernelVersion = h.trimmed("/proc/version")
	f.Arch = h.trimmed("/proc/sys/kernel/arch")
	if f.Arch == "" && h.real() {
		f.Arch = unameMachine()
	}
	if f.Arch == "" {
		f.Arch = map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	}
	if _, err := os.Stat(h.Path("/dev/kvm")); err == nil {
		f.KVM = true
		if h.real() {
			f.KVMAPIVersion = kvmAPIVersion()
		}
	}
	cg := h.Cgroup()
	f.Cgroup2 = cg.Unified()
	switch {
	case cg.Has("cpu"):
		f.CgroupCPU = "cgroup v2"
	case slices.Contains(cg.V1, "cpu"):
		f.CgroupCPU = "cgroup v1"
	}
	return f, nil
}

func (h Host) trimmed(p string) string {
	b, err := h.read(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func unameMachine() string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return ""
	}
	var b strings.Builder
	for _, c := range u.Machine {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

// kvmAPIVersion asks /dev/kvm for its API version (the KVM_GET_API_VERSION ioctl); 0 on failure.
func kvmAPIVersion() int {
	f, err := os.Open("/dev/kvm")
	if err != nil {
		return 0
	}
	defer f.Close()
	const kvmGetAPIVersion = 0xAE00
	v, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), kvmGetAPIVersion, 0)
	if errno != 0 {
		return 0
	}
	return int(v)
}
