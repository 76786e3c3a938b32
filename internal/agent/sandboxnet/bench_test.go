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
// takes off a claim. It runs in a network namespace of its own (the calling thread's), so the
// host's interfaces are not touched. Root only.
//
//	go test -run '^$' -bench BenchmarkPublicLink -benchtime 200x ./internal/agent/sandboxnet/
func BenchmarkPublicLink(b *testing.B) {
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
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		pid, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "30"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}})
		if err != nil {
			b.Fatal(err)
		}
		l, _ := LinkFor(netip.MustParsePrefix("192.168.0.0/18"), i)
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
