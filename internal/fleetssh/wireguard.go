package fleetssh

import (
	"fmt"
	"net/netip"
	"strings"
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
