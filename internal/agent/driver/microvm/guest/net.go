package guest

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
)

// NetArg is the guest kernel's command-line argument that gives a public guest its NIC: the
// address and gateway of its link, "<address>/<bits>,<gateway>" (e.g.
// cubefleet.net=192.168.0.2/30,192.168.0.1). A guest without it has loopback only.
const NetArg = "cubefleet.net="

// ParseNet parses NetArg's value: the NIC's address in its network and the gateway, which must
// be in that network. Errors name the value.
func ParseNet(v string) (netip.Prefix, netip.Addr, error) {
	a, g, ok := strings.Cut(v, ",")
	addr, err := netip.ParsePrefix(a)
	if err != nil || !ok || !addr.Addr().Is4() {
		return netip.Prefix{}, netip.Addr{}, fmt.Errorf("%s%s: want <IPv4 address>/<bits>,<gateway>", NetArg, v)
	}
	gw, err := netip.ParseAddr(g)
	if err != nil || !addr.Masked().Contains(gw) || gw == addr.Addr() {
		return netip.Prefix{}, netip.Addr{}, fmt.Errorf("%s%s: the gateway must be another address of %s", NetArg, v, addr.Masked())
	}
	return addr, gw, nil
}

// setupNetwork brings up the loopback and, when cmdline has NetArg, the guest's NIC (eth0) with
// its address and a default route through its gateway.
func setupNetwork(cmdline string) error {
	if lo, err := netlink.LinkByName("lo"); err == nil {
		netlink.LinkSetUp(lo)
	}
	var v string
	for _, f := range strings.Fields(cmdline) {
		if s, ok := strings.CutPrefix(f, NetArg); ok {
			v = s
		}
	}
	if v == "" {
		return nil
	}
	addr, gw, err := ParseNet(v)
	if err != nil {
		return err
	}
	var eth netlink.Link
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if eth, err = netlink.LinkByName("eth0"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the guest's NIC (eth0) did not appear: %w", err)
		}
	}
	ipn := &net.IPNet{IP: net.IP(addr.Addr().AsSlice()), Mask: net.CIDRMask(addr.Bits(), 32)}
	if err := netlink.AddrAdd(eth, &netlink.Addr{IPNet: ipn}); err != nil {
		return fmt.Errorf("address eth0: %w", err)
	}
	if err := netlink.LinkSetUp(eth); err != nil {
		return fmt.Errorf("bring up eth0: %w", err)
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: net.IP(gw.AsSlice())}); err != nil {
		return fmt.Errorf("route through %s: %w", gw, err)
	}
	phase("network up: " + addr.String())
	return nil
}
