package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodes"
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

// TestJoinTokenListRevoke: join-token list shows usable tokens as a table (never the token),
// --all every one with its state, --output json the API's answer; revoke prints what it did,
// and a revoked token leaves the default list; an unknown id is exit 1 NOT_FOUND, a missing
// one a usage error.
func TestJoinTokenListRevoke(t *testing.T) {
	eachDatabase(t, func(t *testing.T, c *cliEnv) {
		var site, pool struct{ ID string }
		json.Unmarshal([]byte(c.admin("api", "compute.sites.create", `{"tenantId":"root","kind":"shared","region":"eu-central"}`)), &site)
		json.Unmarshal([]byte(c.admin("api", "compute.pools.create", `{"tenantId":"root","siteId":"`+site.ID+`","class":"vps-host"}`)), &pool)
		token := strings.TrimSpace(c.admin("nodes", "join-token", "create", "--pool", pool.ID, "--ip", "10.0.0.5", "--uses", "2"))
		c.admin("nodes", "join-token", "create", "--pool", pool.ID, "--any-ip")
		var list struct {
			Items []nodes.JoinToken `json:"items"`
		}
		if err := json.Unmarshal([]byte(c.admin("nodes", "join-token", "list", "-o", "json")), &list); err != nil || len(list.Items) != 2 {
			t.Fatalf("list -o json: %+v %v", list, err)
		}
		first := list.Items[0]
		if !strings.HasPrefix(token, first.Prefix) || first.IP != "10.0.0.5" || first.UsesLeft != 2 || first.State != nodes.JoinTokenUsable {
			t.Errorf("first token: %+v", first)
		}
		table := c.admin("nodes", "join-token", "list")
		for _, want := range []string{"ID", "PREFIX", "STATE", "USES LEFT", first.ID, first.Prefix + "...", "usable", "2/2", "10.0.0.5", "any"} {
			if !strings.Contains(table, want) {
				t.Errorf("list lacks %q:\n%s", want, table)
			}
		}
		if strings.Contains(table, token) {
			t.Errorf("list shows the token:\n%s", table)
		}
		if out := c.admin("nodes", "join-token", "revoke", first.ID); !strings.Contains(out, "Revoked join token "+first.ID+" ("+first.Prefix+"...") {
			t.Errorf("revoke: %q", out)
		}
		if table := c.admin("nodes", "join-token", "list"); strings.Contains(table, first.ID) {
			t.Errorf("a revoked token in the default list:\n%s", table)
		}
		if table := c.admin("nodes", "join-token", "list", "--all"); !strings.Contains(table, first.ID) || !strings.Contains(table, "revoked") {
			t.Errorf("list --all:\n%s", table)
		}
		if code, _, errOut := c.run("", "nodes", "join-token", "revoke", "jtk_01NOSUCHTOKEN0000000000000", "--token-file", c.tokenFile); code != ExitFailure || !strings.Contains(errOut, "NOT_FOUND") {
			t.Errorf("revoke unknown: exit %d %s", code, errOut)
		}
		if code, _, _ := c.run("", "nodes", "join-token", "revoke", "--token-file", c.tokenFile); code != ExitUsage {
			t.Errorf("revoke without an id: exit %d", code)
		}
	})
}
