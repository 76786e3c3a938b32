package fleetssh

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"golang.org/x/crypto/curve25519"
)

// maxPeersOutput bounds the `wg show` output AllowedIPs reads (1 MiB).
const maxPeersOutput = 1 << 20

// AllowedIPs parses the output of `wg show INTERFACE allowed-ips` (one peer a line: its public
// key, a tab, its allowed IPs separated by spaces, or "(none)") into each allowed prefix's
// peer key, prefixes in canonical form (10.7.0.11/32). Errors name the line that is not of
// that shape; the output is the remote host's and is treated as hostile.
func AllowedIPs(out string) (map[netip.Prefix]string, error) {
	if len(out) > maxPeersOutput {
		return nil, fmt.Errorf("wg show: more than %d bytes of output", maxPeersOutput)
	}
	peers := map[netip.Prefix]string{}
	for i, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		key, ips, ok := strings.Cut(line, "\t")
		if !ok || len(key) != 44 || !strings.HasSuffix(key, "=") {
			return nil, fmt.Errorf("wg show line %d: want a peer's base64 public key, a tab and its allowed IPs", i+1)
		}
		if ips == "(none)" {
			continue
		}
		for _, f := range strings.Fields(ips) {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("wg show line %d: allowed IP %q is not a prefix", i+1, f)
			}
			peers[p.Masked()] = key
		}
	}
	return peers, nil
}

// WireGuardHost is the host that holds a WireGuard peer per Cube: reached over SSH at
// Host:Port as User, its interface Interface (a Linux interface name) and ConfigFile, the
// interface's configuration file where peers are persisted ("" means
// /etc/wireguard/<Interface>.conf).
type WireGuardHost struct {
	Host       string
	Port       int
	User       string
	Interface  string
	ConfigFile string
}

var (
	ifacePattern   = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)
	keyPattern     = regexp.MustCompile(`^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$`)
	commentPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{0,128}$`)
	pathPattern    = regexp.MustCompile(`^/[A-Za-z0-9_./-]{1,255}$`)
)

// config is the interface's configuration file.
func (h WireGuardHost) config() string {
	if h.ConfigFile != "" {
		return h.ConfigFile
	}
	return "/etc/wireguard/" + h.Interface + ".conf"
}

// check validates what goes into a remote command: every value is checked against a strict
// pattern, so nothing needs quoting beyond single quotes.
func (h WireGuardHost) check(key, comment string) error {
	switch {
	case !ifacePattern.MatchString(h.Interface):
		return fmt.Errorf("wireguard interface %q: want 1 to 15 letters, digits, '_', '.' or '-'", h.Interface)
	case !pathPattern.MatchString(h.config()) || strings.Contains(h.config(), ".."):
		return fmt.Errorf("wireguard config file %q: want an absolute path of letters, digits, '_', '.', '/' or '-'", h.config())
	case !keyPattern.MatchString(key):
		return fmt.Errorf("wireguard public key %q: want 44 characters of base64 (a Curve25519 key)", key)
	case !commentPattern.MatchString(comment):
		return fmt.Errorf("wireguard peer comment %q: want at most 128 letters, digits, '_', '.', ':' or '-'", comment)
	}
	return nil
}

// Peers lists the interface's peers as `wg show INTERFACE allowed-ips` prints them (see
// AllowedIPs).
func (d *Dialer) Peers(ctx context.Context, h WireGuardHost) (map[netip.Prefix]string, error) {
	if err := h.check(strings.Repeat("A", 43)+"=", ""); err != nil {
		return nil, err
	}
	out, err := d.Run(ctx, h.Host, h.Port, h.User, "wg show '"+h.Interface+"' allowed-ips")
	if err != nil {
		return nil, err
	}
	return AllowedIPs(out)
}

// AddPeer makes key a peer of the interface allowing exactly ip/32, live (`wg set`) and in the
// configuration file (a [Peer] section with comment as "# cubefleet <comment>", written to a
// new file renamed over the old one, mode 0600), so it survives a restart of the interface.
// It is idempotent: a peer already there is left as it is. It refuses, changing nothing,
// when ip/32 is allowed to another peer.
func (d *Dialer) AddPeer(ctx context.Context, h WireGuardHost, key string, ip netip.Addr, comment string) error {
	if err := h.check(key, comment); err != nil {
		return err
	}
	peers, err := d.Peers(ctx, h)
	if err != nil {
		return err
	}
	if other, ok := peers[netip.PrefixFrom(ip, 32)]; ok && other != key {
		return fmt.Errorf("wireguard %s on %s: %s/32 is already allowed to peer %s: remove that peer first if its Cube is gone", h.Interface, h.Host, ip, other)
	}
	script := fmt.Sprintf(`set -eu
conf='%[1]s'
wg set '%[2]s' peer '%[3]s' allowed-ips '%[4]s/32'
if ! grep -qxF 'PublicKey = %[3]s' "$conf" 2>/dev/null; then
  tmp="$conf.cubefleet.$$"
  umask 077
  { cat "$conf" 2>/dev/null || true; printf '\n[Peer]\n# cubefleet %[5]s\nPublicKey = %[3]s\nAllowedIPs = %[4]s/32\n'; } > "$tmp"
  mv -f "$tmp" "$conf"
fi
`, h.config(), h.Interface, key, ip, comment)
	_, err = d.Run(ctx, h.Host, h.Port, h.User, script)
	return err
}

// RemovePeer removes exactly the peer key from the interface, live and from the configuration
// file (its [Peer] section and the blank line AddPeer put before it). It is idempotent: a peer already gone is no error. It
// refuses, changing nothing, when key allows anything but ip/32: then it is not the Cube's
// peer.
func (d *Dialer) RemovePeer(ctx context.Context, h WireGuardHost, key string, ip netip.Addr) error {
	if err := h.check(key, ""); err != nil {
		return err
	}
	peers, err := d.Peers(ctx, h)
	if err != nil {
		return err
	}
	for p, k := range peers {
		if k == key && p != netip.PrefixFrom(ip, 32) {
			return fmt.Errorf("wireguard %s on %s: peer %s allows %s, not only %s/32: it is not this Cube's peer alone; remove it by hand", h.Interface, h.Host, key, p, ip)
		}
	}
	script := fmt.Sprintf(`set -eu
conf='%[1]s'
wg set '%[2]s' peer '%[3]s' remove
if grep -qxF 'PublicKey = %[3]s' "$conf" 2>/dev/null; then
  tmp="$conf.cubefleet.$$"
  umask 077
  awk -v key='PublicKey = %[3]s' '
    /^[ \t]*\[/ { n++ }
    { sec[n] = sec[n] $0 "\n"; if ($0 == key) drop[n] = 1 }
    END { for (i = 0; i <= n; i++) { if (drop[i+1] && sec[i] ~ /\n\n$/) sub(/\n$/, "", sec[i]); if (!drop[i]) printf "%%s", sec[i] } }' "$conf" > "$tmp"
  mv -f "$tmp" "$conf"
fi
`, h.config(), h.Interface, key)
	_, err = d.Run(ctx, h.Host, h.Port, h.User, script)
	return err
}

// NewWireGuardKey returns a new WireGuard key pair in base64 (wg genkey, wg pubkey): the
// private key (a secret: never log it) and its public key.
func NewWireGuardKey() (private, public string, err error) {
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		return "", "", fmt.Errorf("wireguard key: %w", err)
	}
	k[0] &= 248
	k[31] = (k[31] & 127) | 64
	pub, err := curve25519.X25519(k[:], curve25519.Basepoint)
	if err != nil {
		return "", "", fmt.Errorf("wireguard key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(k[:]), base64.StdEncoding.EncodeToString(pub), nil
}
