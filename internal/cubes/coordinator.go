package cubes

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/cubefleet/cubefleet"
)

// Coordinator configuration: the fixed origin list a coordinator (a front end that loads its
// Cubes once, at start) is rendered from, and the one `cubefleet server --origins` loads for
// static membership. Each Cube keeps SlotsPerCube coordinator slots.

const (
	// DefaultCubeCount is the number of origins a coordinator expects unless told otherwise
	// (--cube-count), so that an incomplete legacy origins file still fails.
	DefaultCubeCount = 12
	// SlotsPerCube is how many coordinator slots (concurrent workers) each Cube serves.
	SlotsPerCube = 3
	// MaxCubeCount bounds --cube-count.
	MaxCubeCount = 10000
	// maxOriginsBytes bounds an origins file (1 MiB).
	maxOriginsBytes = 1 << 20
)

// Coordinator is a rendered coordinator configuration: the Cube count, the normalised origins in
// file order, and their SlotsPerCube*CubeCount slots.
type Coordinator struct {
	CubeCount int               `json:"cubeCount"`
	Origins   []string          `json:"origins"`
	Slots     []CoordinatorSlot `json:"slots"`
}

// CoordinatorSlot is one coordinator slot: its index (0 to 3N-1), the origin of the Cube that
// serves it, and the slot's number on that Cube (0 to SlotsPerCube-1).
type CoordinatorSlot struct {
	Index  int    `json:"index"`
	Origin string `json:"origin"`
	Slot   int    `json:"slot"`
}

// ParseOrigins reads an origins file: one origin per line, blank lines and '#' comments (to the
// end of the line) ignored. Each origin is an http or https URL with a host and nothing after
// it but an optional "/" (no user, path, query or fragment); it is normalised (scheme and host
// in lower case, the scheme's default port dropped) before the uniqueness check. There must be
// exactly cubeCount origins (1 to MaxCubeCount). Every problem is reported at once: an
// INVALID_INPUT *cubefleet.Error whose Details["errors"] names each line ("line 3") or, for the
// count, "origins".
func ParseOrigins(data []byte, cubeCount int) (Coordinator, error) {
	var errs []cubefleet.FieldError
	add := func(path, format string, args ...any) {
		errs = append(errs, cubefleet.FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if cubeCount < 1 || cubeCount > MaxCubeCount {
		return Coordinator{}, cubefleet.Invalid("cubeCount", "the Cube count must be 1 to %d, not %d", MaxCubeCount, cubeCount)
	}
	if len(data) > maxOriginsBytes {
		return Coordinator{}, cubefleet.Invalid("origins", "the origins file is larger than %d bytes", maxOriginsBytes)
	}
	out := Coordinator{CubeCount: cubeCount, Origins: []string{}, Slots: []CoordinatorSlot{}}
	seen := map[string]int{} // normalised origin -> its line
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxOriginsBytes)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		at := "line " + strconv.Itoa(line)
		o, err := NormaliseOrigin(text)
		if err != nil {
			add(at, "%v", err)
			continue
		}
		if first, dup := seen[o]; dup {
			add(at, "%q repeats the origin of line %d (%s once normalised): each Cube is listed once", text, first, o)
			continue
		}
		seen[o] = line
		out.Origins = append(out.Origins, o)
	}
	if err := sc.Err(); err != nil {
		add("origins", "cannot read the origins: %v", err)
	}
	switch n := len(out.Origins); {
	case n == 0 && len(errs) == 0:
		add("origins", "the origins file lists no origin: give one http(s) origin per line, %d of them (--cube-count)", cubeCount)
	case n != cubeCount && len(errs) == 0:
		add("origins", "the origins file lists %d %s, --cube-count wants exactly %d: add or remove origins, or pass --cube-count %d",
			n, cubefleet.Plural(n, "origin", "origins"), cubeCount, n)
	}
	if len(errs) > 0 {
		return Coordinator{}, cubefleet.InvalidAll(errs)
	}
	for i, o := range out.Origins {
		for s := range SlotsPerCube {
			out.Slots = append(out.Slots, CoordinatorSlot{Index: i*SlotsPerCube + s, Origin: o, Slot: s})
		}
	}
	return out, nil
}

// NormaliseOrigin checks one origin and returns its normal form: "scheme://host[:port]" with
// scheme and host in lower case and the scheme's default port (80, 443) dropped; an IPv6 host
// stays in brackets. Errors say what is wrong with s.
func NormaliseOrigin(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.Host == "" && u.Scheme != "" {
		return "", fmt.Errorf("%q is not an origin: want http(s)://host[:port]", s)
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return "", fmt.Errorf("%q: the scheme must be http or https", s)
	case u.User != nil:
		return "", fmt.Errorf("%q: an origin carries no user or password", s)
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", fmt.Errorf("%q: an origin has no path, query or fragment: want http(s)://host[:port]", s)
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "" {
		return "", fmt.Errorf("%q: the origin names no host", s)
	}
	if strings.HasSuffix(u.Host, ":") {
		return "", fmt.Errorf("%q: the port is empty", s)
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%q: port %s: want 1 to 65535", s, port)
		}
		port = strconv.Itoa(n)
		if scheme == "http" && n == 80 || scheme == "https" && n == 443 {
			port = ""
		}
	}
	if strings.HasPrefix(u.Host, "[") {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", fmt.Errorf("%q: the host in brackets must be an IPv6 address", s)
		}
		host = a.String()
	} else if len(host) > 253 || strings.IndexFunc(host, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_')
	}) >= 0 || strings.HasPrefix(host, ".") || strings.Contains(host, "..") {
		return "", fmt.Errorf("%q: the host must be a DNS name or an IP address", s)
	}
	if port != "" {
		return scheme + "://" + net.JoinHostPort(host, port), nil
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host, nil
}
