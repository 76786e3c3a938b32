package sandboxnet

import (
	"net/netip"
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// BenchmarkNetworkNamespace measures what a network namespace adds to starting a process: a
// fork, exec and wait of /bin/true, with a new network namespace ("netns", and bringing up its
// loopback is the process's own cost, not timed) and without ("none"). Root only.
//
//	go test -run '^$' -bench BenchmarkNetworkNamespace -benchtime 200x ./internal/agent/sandboxnet/
func BenchmarkNetworkNamespace(b *testing.B) {
	requireRootB(b)
	for _, c := range []struct {
		name  string
		flags uintptr
	}{{"none", 0}, {"netns", syscall.CLONE_NEWNET}} {
		b.Run(c.name, func(b *testing.B) {
			took := make([]time.Duration, 0, b.N)
			for range b.N {
				began := time.Now()
				pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Cloneflags: c.flags}})
				if err != nil {
					b.Fatal(err)
				}
				var ws syscall.WaitStatus
				syscall.Wait4(pid, &ws, 0, nil)
				took = append(took, time.Since(began))
			}
			reportP50(b, took)
		})
	}
}

// BenchmarkPublicLink measures a public sandbox's link: Setup of the veth pair into a process's
// new network namespace (addresses, routes), the part of a public sandbox's start the warm pool
// takes off a claim; "allow" with a template's egressAllow of two prefixes and a control plane
// address (the link's rules in the host's policy replaced, then removed by Teardown, untimed).
// It runs in a network namespace of its own (the calling thread's), so the host's interfaces
// and nftables are not touched. Root only.
//
//	go test -run '^$' -bench BenchmarkPublicLink -benchtime 200x ./internal/agent/sandboxnet/
func BenchmarkPublicLink(b *testing.B) {
	b.Run("none", func(b *testing.B) { benchmarkLink(b, nil) })
	b.Run("allow", func(b *testing.B) {
		benchmarkLink(b, []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("172.16.5.0/24")})
	})
}

func benchmarkLink(b *testing.B, allow []netip.Prefix) {
	requireRootB(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		b.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New() // this thread, and the processes it starts, are in it now
	if err != nil {
		b.Fatal(err)
	}
	defer func() { netns.Set(orig); ns.Close() }()
	// The host policy every link's rules join, as the agent sets it up at start.
	if err := EnsureHost(netip.MustParsePrefix("192.168.0.0/18"), b.TempDir(), 0); err != nil {
		b.Fatal(err)
	}
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		pid, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "30"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}})
		if err != nil {
			b.Fatal(err)
		}
		l, _ := LinkFor(netip.MustParsePrefix("192.168.0.0/18"), i)
		if allow != nil {
			l.Allow, l.Deny = allow, []netip.Addr{netip.MustParseAddr("10.20.0.9")}
		}
		b.StartTimer()
		began := time.Now()
		err = l.Setup(pid)
		took = append(took, time.Since(began))
		b.StopTimer()
		l.Teardown()
		syscall.Kill(pid, syscall.SIGKILL)
		syscall.Wait4(pid, nil, 0, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportP50(b, took)
}

func requireRootB(b *testing.B) {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("needs root: makes network namespaces")
	}
}

func reportP50(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[min(len(took)-1, len(took)*99/100)].Microseconds())/1000, "p99-ms")
}
