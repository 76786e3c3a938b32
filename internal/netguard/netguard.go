// Package netguard decides which network addresses the control plane may call on a user's
// behalf (webhook URLs) and dials only those: the server-side request forgery guard. A URL is
// checked when it is given, and the address actually dialled is checked again at each
// connection, so a DNS answer that changes to a private address in between (DNS rebinding) is
// refused too (issue "Drift events", item 3).
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is wrapped by every refusal of an address or URL.
var ErrRefused = errors.New("address refused")

// Resolver answers a host's addresses; *net.Resolver implements it, and tests inject fixed
// answers.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard checks and dials addresses. The zero value refuses every non-public address and
// resolves with net.DefaultResolver.
type Guard struct {
	// AllowPrivate allows loopback and private (RFC 1918, fc00::/7) addresses as well
	// (--allow-private-webhook-targets); metadata, link-local, unspecified, multicast and
	// reserved addresses stay refused.
	AllowPrivate bool
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver
	// Timeout bounds one connection attempt (resolution included); zero means 10 s.
	Timeout time.Duration
}

// blocked lists the non-public ranges netip's predicates do not name.
var blocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: may translate to a private IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: embeds any IPv4 address
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated): embeds any IPv4 address
	netip.MustParsePrefix("2001::/32"),       // Teredo: embeds any IPv4 address
}

// Public reports whether addr is a public unicast address: not loopback, private (RFC 1918,
// fc00::/7), link-local (169.254.0.0/16 with the cloud metadata address 169.254.169.254,
// fe80::/10), unspecified, multicast, or one of the other reserved ranges, in any form (an
// IPv4-mapped ::ffff:a.b.c.d is judged as a.b.c.d).
func Public(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() ||
		addr.IsInterfaceLocalMulticast() || addr.IsMulticast() || addr.IsUnspecified() {
		return false
	}
	for _, p := range blocked {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

// metadata lists the cloud instance metadata addresses: refused even with AllowPrivate, since
// they hand out the host's cloud credentials (AWS, GCP, Azure, OpenStack and IONOS use
// 169.254.169.254; AWS's IPv6 endpoint is fd00:ec2::254; Alibaba's 100.100.100.200).
var metadata = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
}

// allowedPrivate reports whether addr (unmapped) is one AllowPrivate lets through: loopback
// or private (RFC 1918, fc00::/7), never a metadata address.
func allowedPrivate(addr netip.Addr) bool {
	return (addr.IsLoopback() || addr.IsPrivate()) && !slices.Contains(metadata, addr)
}

// allowed is the guard's decision on one address: a public one, or with AllowPrivate a
// loopback or private one. Link-local (the metadata range), unspecified (0.0.0.0, ::),
// multicast and reserved addresses are refused either way, in any IPv6 form of an IPv4
// address (::ffff:a.b.c.d).
func (g *Guard) allowed(addr netip.Addr) error {
	addr = addr.Unmap()
	if Public(addr) || g.AllowPrivate && allowedPrivate(addr) {
		return nil
	}
	if g.AllowPrivate {
		return fmt.Errorf("%w: %s is a link-local, metadata, unspecified or reserved address (--allow-private-webhook-targets allows only loopback and private ones)", ErrRefused, addr)
	}
	if allowedPrivate(addr) {
		return fmt.Errorf("%w: %s is a loopback or private address (start the server with --allow-private-webhook-targets to allow loopback and private ones)", ErrRefused, addr)
	}
	return fmt.Errorf("%w: %s is a link-local, metadata, unspecified or reserved address: webhooks deliver to public addresses only", ErrRefused, addr)
}

// userinfo matches the user name and password of a URL written in a text: "scheme://" and
// what comes before an "@" in the authority.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s"']*@`)

// Redact returns s with the user name and password of every URL in it removed
// ("https://u:p@h/x" becomes "https://h/x"): for any error or record text that may quote a URL.
func Redact(s string) string {
	return userinfo.ReplaceAllString(s, "$1")
}

// CheckURL checks a webhook URL: http or https, a host, a port (if any) from 1 to 65535, no
// user name or password, no fragment, at most 2048 bytes, and every address its host resolves to allowed. Errors name
// what is wrong; a refused address wraps ErrRefused.
func (g *Guard) CheckURL(ctx context.Context, raw string) (*url.URL, error) {
	if len(raw) > 2048 {
		return nil, fmt.Errorf("the URL is %d bytes long; at most 2048", len(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL it quotes, which may hold a password
		}
		return nil, fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("the URL's scheme is %q; only http and https are allowed", u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" || u.Opaque != "" {
		return nil, fmt.Errorf("the URL has no host")
	}
	if u.User != nil {
		return nil, fmt.Errorf("the URL holds a user name or password; the signature authenticates each delivery instead")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("the URL's port %s is out of range: give 1 to 65535, or none for the scheme's", p)
		}
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, fmt.Errorf("the URL has a fragment (#...), which is never sent")
	}
	if _, err := g.resolve(ctx, u.Hostname()); err != nil {
		return nil, err
	}
	return u, nil
}

// resolve returns host's addresses when every one is allowed.
func (g *Guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if addr, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{addr}, g.allowed(addr)
	}
	r := g.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no address", host)
	}
	for _, a := range addrs {
		if err := g.allowed(a); err != nil {
			return nil, fmt.Errorf("%s resolves to %s: %w", host, a.Unmap(), err)
		}
	}
	return addrs, nil
}

// DialContext resolves addr's host through the guard, refuses it when any answer is not
// allowed, and connects to the answers in turn; the address of each connection is checked
// again as it is made. It is an http.Transport's DialContext.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	timeout := g.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: cannot read the dialled address %q", ErrRefused, address)
		}
		return g.allowed(ap.Addr())
	}}
	var errs []error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}
