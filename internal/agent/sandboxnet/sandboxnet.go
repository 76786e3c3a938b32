// Package sandboxnet is a sandbox's network: its own network namespace, with the loopback
// interface only for a template whose network is private (no route out: nothing to reach but
// itself). Any runtime driver uses it: the process driver from the sandbox's init, inside the
// namespace; a microVM driver for the namespace its QEMU runs in (no NIC for a private guest;
// for a public one a tap bridged to the veth pair of public.go).
package sandboxnet

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// LoopbackUp brings up the loopback interface (lo, 127.0.0.1 and ::1) of the calling thread's
// network namespace, as a new namespace has it down. It needs CAP_NET_ADMIN in the namespace.
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("read the flags of lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	return nil
}
