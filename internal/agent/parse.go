package agent

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The sandbox network's mask range (Cube Sandbox's check_cidr_preflight).
const (
	MinNetworkBits = 16
	MaxNetworkBits = 24
)

var cidrPattern = regexp.MustCompile(`^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})/([0-9]{1,2})$`)

// ParseNetworkCIDR parses the sandbox network (CUBE_SANDBOX_NETWORK_CIDR): `a.b.c.d/m` with
// octets of at most three digits and at most 255, a mask from /16 to /24, the address aligned
// to its network, and not inside 0.0.0.0/8, loopback, link-local, multicast or 240.0.0.0/4. An
// unaligned value's error suggests the aligned one.
func ParseNetworkCIDR(s string) (netip.Prefix, error) {
	m := cidrPattern.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 network like 192.168.0.0/18", s)
	}
	var b [4]byte
	for i := range 4 {
		n, _ := strconv.Atoi(m[i+1])
		if n > 255 {
			return netip.Prefix{}, fmt.Errorf("%q: octet %d is %d, more than 255", s, i+1, n)
		}
		b[i] = byte(n)
	}
	bits, _ := strconv.Atoi(m[5])
	if bits < MinNetworkBits || bits > MaxNetworkBits {
		return netip.Prefix{}, fmt.Errorf("%q: mask /%d is out of range; use a mask from /%d to /%d (e.g. 192.168.0.0/18)", s, bits, MinNetworkBits, MaxNetworkBits)
	}
	p := netip.PrefixFrom(netip.AddrFrom4(b), bits)
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q is not aligned to its network; use %s", s, p.Masked())
	}
	for _, r := range unusableNetworks {
		if r.prefix.Overlaps(p) {
			return netip.Prefix{}, fmt.Errorf("%q is inside %s (%s), which cannot carry sandbox traffic; use a private network such as %s", s, r.prefix, r.what, DefaultNetworkCIDR)
		}
	}
	return p, nil
}

// unusableNetworks are the IPv4 ranges a sandbox network must not overlap: they are not
// routed as unicast between hosts.
var unusableNetworks = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network"`},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved, with the broadcast address"},
}

// parseEndpoints parses ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR: host:port entries separated by
// commas, each optionally with http:// or https://; entries without a scheme get scheme://
// (http, or https with CUBEFLEET_CONTROL_PLANE_TLS=1).
func parseEndpoints(s, defaultScheme string) ([]string, error) {
	var out []string
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("%q has an empty entry; list host:port entries separated by commas, e.g. 10.0.0.1:%d,10.0.0.2:%d", s, DefaultControlPlanePort, DefaultControlPlanePort)
		}
		scheme := defaultScheme
		rest := item
		if i := strings.Index(item, "://"); i >= 0 {
			scheme, rest = strings.ToLower(item[:i]), item[i+3:]
			if scheme != "http" && scheme != "https" {
				return nil, fmt.Errorf("%q: scheme %s is not http or https", item, scheme)
			}
		}
		rest = strings.TrimSuffix(rest, "/")
		host, port, err := net.SplitHostPort(rest)
		if err != nil || host == "" || strings.ContainsAny(rest, "/?#@") {
			return nil, fmt.Errorf("%q is not host:port; e.g. 10.0.0.1:%d", item, DefaultControlPlanePort)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q: port %q is not a number from 1 to 65535", item, port)
		}
		if a, err := netip.ParseAddr(host); err == nil {
			if why := notDialable(a); why != "" {
				return nil, fmt.Errorf("%q: %s is %s, not an address the agent can connect to; write the control node's address", item, host, why)
			}
		}
		out = append(out, scheme+"://"+net.JoinHostPort(host, port))
	}
	return out, nil
}

// parseS3Endpoint checks CUBE_S3_ENDPOINT: an http or https URL with a host (an IPv6 address
// in brackets), an optional port from 1 to 65535, no credentials, no query or fragment.
func parseS3Endpoint(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http or https URL; copy CUBE_S3_ENDPOINT from the control node's env file, e.g. http://10.0.0.1:9000", s)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("%q has no host; write http(s)://host[:port], e.g. http://10.0.0.1:9000 (an IPv6 address in brackets: http://[fd00::1]:9000)", s)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", fmt.Errorf("%q has a query or a fragment; write http(s)://host[:port]", s)
	}
	if u.User != nil {
		return "", fmt.Errorf("%q holds credentials; put them in CUBE_S3_ACCESS_KEY_ID and CUBE_S3_SECRET_ACCESS_KEY instead", u.Redacted())
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%q: port %q is not a number from 1 to 65535", s, p)
		}
	}
	return s, nil
}

// notDialable says why a is no address to connect to ("unspecified", "multicast",
// "broadcast" or "reserved"), or returns "" when it is one. Loopback and private addresses are
// fine (the control role reports to 127.0.0.1).
func notDialable(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsUnspecified() || a.Is4() && a.As4()[0] == 0:
		return "unspecified (to a listener it means any address; there is no host to connect to)"
	case a.IsMulticast():
		return "a multicast address"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the broadcast address"
	case a.Is4() && a.As4()[0] >= 240:
		return "a reserved address (240.0.0.0/4)"
	}
	return ""
}

// checkBucketName checks an S3 bucket name against the S3 naming rules, returning the rule
// broken: 3 to 63 characters; lowercase letters, digits, dots and hyphens; a letter or digit
// first and last; no two dots in a row, nor a dot beside a hyphen; not an IPv4 address.
func checkBucketName(name string) error {
	if n := len(name); n < 3 || n > 63 {
		return fmt.Errorf("it has %d characters, and a bucket name has 3 to 63", n)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return fmt.Errorf("it holds %q, and a bucket name holds only lowercase letters, digits, dots and hyphens", c)
		}
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return errors.New("a bucket name starts and ends with a lowercase letter or a digit")
	}
	for _, bad := range []string{"..", ".-", "-."} {
		if strings.Contains(name, bad) {
			return fmt.Errorf("it holds %q, and a bucket name has no two dots in a row and no dot beside a hyphen", bad)
		}
	}
	if a, err := netip.ParseAddr(name); err == nil && a.Is4() {
		return errors.New("a bucket name is not an IP address")
	}
	return nil
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "0", "false", "no", "off":
		return false, nil
	case "1", "true", "yes", "on":
		return true, nil
	}
	return false, fmt.Errorf("%q is not 0 or 1", s)
}

// bareSeconds is a number of seconds without a unit: "120", "1.5".
var bareSeconds = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// parseDuration reads a Go duration ("1s", "500ms", "2m") or a bare decimal number of seconds
// ("120", "1.5").
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if bareSeconds.MatchString(s) {
		n, err := strconv.ParseFloat(s, 64)
		if err != nil || n > 1_000_000_000 {
			return 0, fmt.Errorf("%s seconds is out of range", s)
		}
		return time.Duration(n * float64(time.Second)).Round(time.Microsecond), nil
	}
	return time.ParseDuration(s)
}
