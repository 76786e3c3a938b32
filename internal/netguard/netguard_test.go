package netguard_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/netguard"
)

func TestPublic(t *testing.T) {
	for _, c := range []struct {
		addr   string
		public bool
	}{
		{"93.184.216.34", true}, {"2606:2800:220:1:248:1893:25c8:1946", true}, {"8.8.8.8", true},
		{"127.0.0.1", false}, {"127.9.9.9", false}, {"::1", false},
		{"10.0.0.1", false}, {"172.16.5.4", false}, {"192.168.0.1", false}, {"fd00::1", false}, {"fd00:ec2::254", false},
		{"169.254.169.254", false}, {"fe80::1", false}, {"0.0.0.0", false}, {"::", false}, {"224.0.0.1", false}, {"ff02::1", false},
		{"100.64.0.1", false}, {"198.18.0.1", false}, {"255.255.255.255", false}, {"::ffff:10.0.0.1", false}, {"::ffff:8.8.8.8", true},
		{"64:ff9b::a00:1", false}, {"2002:a00:1::", false}, {"192.0.2.1", false},
	} {
		if got := netguard.Public(netip.MustParseAddr(c.addr)); got != c.public {
			t.Errorf("Public(%s) = %v, want %v", c.addr, got, c.public)
		}
	}
}

// TestDialRefusesPrivateAnswers: the dialler refuses a private answer before connecting, and
// allows it with AllowPrivate (the connection then goes to a closed loopback port).
func TestDialRefusesPrivateAnswers(t *testing.T) {
	g := &netguard.Guard{Resolver: fixed{"x.test": {netip.MustParseAddr("127.0.0.1")}}}
	_, err := g.DialContext(context.Background(), "tcp", "x.test:1")
	if !errors.Is(err, netguard.ErrRefused) {
		t.Fatalf("dial of a loopback answer: %v, want ErrRefused", err)
	}
	g.AllowPrivate = true
	_, err = g.DialContext(context.Background(), "tcp", "x.test:1")
	if err == nil || errors.Is(err, netguard.ErrRefused) {
		t.Fatalf("dial with AllowPrivate: %v, want a refused connection, not a refused address", err)
	}
}

// TestAllowPrivateKeepsMetadataOut: --allow-private-webhook-targets lets loopback and private
// addresses through and nothing else: the metadata addresses, link-local, unspecified and
// multicast ones stay refused in every spelling, literal or resolved, and a refusal suggests the
// flag only for an address it would allow.
func TestAllowPrivateKeepsMetadataOut(t *testing.T) {
	for _, c := range []struct {
		addr           string
		public, anyway bool // allowed without AllowPrivate; allowed with it
	}{
		{"93.184.216.34", true, true},
		{"::ffff:93.184.216.34", true, true},
		{"127.0.0.1", false, true},
		{"::1", false, true},
		{"::ffff:127.0.0.1", false, true},
		{"10.1.2.3", false, true},
		{"192.168.0.1", false, true},
		{"fd12:3456::1", false, true},
		{"169.254.169.254", false, false},
		{"::ffff:169.254.169.254", false, false},
		{"::ffff:a9fe:a9fe", false, false},
		{"::169.254.169.254", false, false},
		{"64:ff9b::169.254.169.254", false, false},
		{"2002:a9fe:a9fe::1", false, false},
		{"fd00:ec2::254", false, false},
		{"100.100.100.200", false, false},
		{"169.254.1.1", false, false},
		{"fe80::1", false, false},
		{"0.0.0.0", false, false},
		{"0.1.2.3", false, false},
		{"::ffff:0.0.0.0", false, false},
		{"::", false, false},
		{"224.0.0.1", false, false},
		{"ff02::1", false, false},
	} {
		for _, private := range []bool{false, true} {
			want := c.public || private && c.anyway
			addr := netip.MustParseAddr(c.addr)
			g := &netguard.Guard{AllowPrivate: private, Resolver: fixed{"h.test": {addr}}}
			host := c.addr
			if addr.Is6() {
				host = "[" + host + "]"
			}
			for _, u := range []string{"http://" + host + "/hook", "http://h.test/hook"} {
				_, err := g.CheckURL(context.Background(), u)
				if (err == nil) != want || err != nil && !errors.Is(err, netguard.ErrRefused) {
					t.Errorf("AllowPrivate=%v %s: %v, want allowed=%v", private, u, err, want)
				}
				// The flag is suggested only where it would help: a loopback or private address.
				const hint = "start the server with --allow-private-webhook-targets"
				if err != nil && strings.Contains(err.Error(), hint) != (!private && c.anyway) {
					t.Errorf("AllowPrivate=%v %s: %v: suggests the flag = %v, want %v", private, u, err, !(!private && c.anyway), !private && c.anyway)
				}
			}
			_, err := g.DialContext(context.Background(), "tcp", "h.test:1")
			if refused := errors.Is(err, netguard.ErrRefused); refused == want {
				t.Errorf("AllowPrivate=%v dial %s: %v, want allowed=%v", private, c.addr, err, want)
			}
		}
	}
}

// TestRedact: the user name and password of a URL never reach a message.
func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://u:p4ss@h.test/x":                          "https://h.test/x",
		`url "http://admin:s3cret@10.0.0.1:8080/hook": no`: `url "http://10.0.0.1:8080/hook": no`,
		"Post \"https://tok@h/x\": EOF; http://a:b@c/":     "Post \"https://h/x\": EOF; http://c/",
		"https://h.test/x?email=a@b":                       "https://h.test/x?email=a@b",
		"no url here: a@b":                                 "no url here: a@b",
	} {
		if got := netguard.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	_, err := (&netguard.Guard{}).CheckURL(context.Background(), "http://u:s3cret@h%zz/")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("CheckURL of an unparseable URL with a password: %v", err)
	}
}

type fixed map[string][]netip.Addr

func (f fixed) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return f[host], nil
}

// FuzzCheckURL: any string is refused with an error or accepted as an http(s) URL with a host
// and no credentials; nothing panics.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"http://93.184.216.34/x", "https://[2606:2800::1]:8443/a?b=c", "http://user@h/", "ftp://x", "http://%zz", "", "http://[::ffff:127.0.0.1]/"} {
		f.Add(s)
	}
	g := &netguard.Guard{Resolver: fixed{}}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := g.CheckURL(context.Background(), s)
		if err != nil {
			return
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil || strings.Contains(s, "#") {
			t.Fatalf("accepted %q as %+v", s, u)
		}
		addr, perr := netip.ParseAddr(strings.Trim(u.Hostname(), "[]"))
		if perr != nil || !netguard.Public(addr) {
			t.Fatalf("accepted %q, whose host is not a public address", s)
		}
	})
}

// TestCheckURLPort: a port past 65535 (or 0) is refused naming the port; 1 to 65535 and none
// are fine.
func TestCheckURLPort(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"https://93.184.216.34/hook", ""},
		{"https://93.184.216.34:1/hook", ""},
		{"https://93.184.216.34:65535/hook", ""},
		{"https://93.184.216.34:65536/hook", "port 65536 is out of range"},
		{"https://93.184.216.34:0/hook", "port 0 is out of range"},
		{"http://[2606:2800:220:1:248:1893:25c8:1946]:99999999999999999999/", "port 99999999999999999999 is out of range"},
	} {
		_, err := (&netguard.Guard{}).CheckURL(context.Background(), c.url)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckURL(%s): %v, want %q", c.url, err, c.want)
		}
	}
}
