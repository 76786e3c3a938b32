package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestJoinTokenCreateUsage: join-token create refuses, as usage errors (exit 2, before any
// call), --uses below 1, a --ttl outside 1s..168h (naming --ttl and the range, both ends
// alike), and an --ip no node can have (unspecified, multicast, broadcast); none makes a token.
func TestJoinTokenCreateUsage(t *testing.T) {
	c := mustServe(t, "")
	var site, pool struct{ ID string }
	json.Unmarshal([]byte(c.admin("api", "compute.sites.create", `{"tenantId":"root","kind":"shared","region":"eu-central"}`)), &site)
	json.Unmarshal([]byte(c.admin("api", "compute.pools.create", `{"tenantId":"root","siteId":"`+site.ID+`","class":"vps-host"}`)), &pool)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--uses", "0"}, "--uses 0: a join token allows 1 to 10000 registrations"},
		{[]string{"--uses", "-3"}, "--uses -3: a join token allows 1 to 10000 registrations"},
		{[]string{"--uses", "10001"}, "--uses 10001"},
		{[]string{"--ttl", "169h"}, "--ttl 169h0m0s: a join token lives 1s to 168h"},
		{[]string{"--ttl", "0s"}, "--ttl 0s: a join token lives 1s to 168h"},
		{[]string{"--ttl", "500ms"}, "--ttl 500ms: a join token lives 1s to 168h"},
		{[]string{"--ip", "0.0.0.0"}, `--ip "0.0.0.0" is the unspecified address, not a node's`},
		{[]string{"--ip", "224.0.0.1"}, `--ip "224.0.0.1" is a multicast address, not a node's`},
		{[]string{"--ip", "255.255.255.255"}, "the broadcast address"},
		{[]string{"--ip", "::"}, "the unspecified address"},
		{[]string{"--ip", "not-an-ip"}, `--ip "not-an-ip" is not an IP address`},
	} {
		args := append([]string{"nodes", "join-token", "create", "--pool", pool.ID}, tc.args...)
		code, out, errOut := c.run("", append(args, "--token-file", c.tokenFile)...)
		if code != ExitUsage || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d saying %q", strings.Join(tc.args, " "), code, out, errOut, ExitUsage, tc.want)
		}
	}
	// The edges are accepted.
	for _, args := range [][]string{{"--uses", "1", "--ttl", "1s"}, {"--uses", "10000", "--ttl", "168h", "--any-ip"}, {"--ip", "127.0.0.1"}} {
		c.admin(append([]string{"nodes", "join-token", "create", "--pool", pool.ID}, args...)...)
	}
}
