package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestComputeCommands: templates (and its aliases), pools, flavors and sites list and get
// print kubectl-style tables (golden file) and the API's objects with --output json; the tables
// show the pool, flavor and site a row refers to by name when it has one; a name nobody has is
// NOT_FOUND naming the list command, and so is a create's unknown template.
func TestComputeCommands(t *testing.T) {
	c, _ := sandboxEnv(t, "")
	var transcript strings.Builder
	run := func(args ...string) (int, string, string) {
		t.Helper()
		code, out, errOut := c.run("", append([]string{"--token-file", c.tokenFile}, args...)...)
		fmt.Fprintf(&transcript, "$ cubefleet %s\nexit %d\n%s%s\n", strings.Join(args, " "), code, out, errOut)
		return code, out, errOut
	}
	run("templates", "list", "--tenant", "root")
	run("tpl", "get", "py", "--tenant", "root")
	run("template", "get", "nosuch", "--tenant", "root")
	run("pools", "list", "--tenant", "root")
	run("flavors", "list", "--tenant", "root")
	run("flavor", "get", "small", "--tenant", "root")
	run("sites", "list", "--tenant", "root")
	run("templates", "list", "--tenant", "root", "--limit", "0")
	run("sandboxes", "create", "--tenant", "root", "--template", "nosuch", "--", "echo")
	// Objects of a fleet document have names: the tables name the pool, flavor and site a row
	// refers to, and keep the id of one without a name (the pool made above through the API).
	writeFile(t, "named.json", `{"version": 1, "sites": [{"name": "fra", "kind": "shared", "region": "eu"}],
 "pools": [{"name": "vps-fra", "site": "fra", "class": "vps-host"}],
 "flavors": [{"pool": "vps-fra", "name": "g1.small", "vcpu": 2, "memoryGiB": 4, "diskGiB": 40}],
 "sandboxTemplates": [{"name": "py-small", "pool": "vps-fra", "flavor": "g1.small", "imageId": "ubuntu-24.04", "network": "private"}]}`)
	c.admin("fleet", "apply", "named.json", "--tenant", "root", "--yes")
	// get, not list: a fleet object's id derives from its key, so a list's order by id varies.
	run("templates", "get", "py-small", "--tenant", "root")
	run("pools", "get", "vps-fra", "--tenant", "root")
	run("flavors", "get", "g1.small", "--tenant", "root")
	testkit.Golden(t, "compute.golden", []byte(c.normalizeSandboxes(transcript.String())))

	_, out, _ := run("templates", "list", "--tenant", "root", "--output", "json")
	if !strings.Contains(out, `"items": [`) || !strings.Contains(out, `"imageId": "python-3.12"`) {
		t.Errorf("templates list --output json: %s", out)
	}
	_, out, _ = run("pools", "list", "--tenant", "root", "--output", "json")
	id := idPattern.FindString(out)
	if code, out, errOut := run("pools", "get", id, "--tenant", "root"); code != 0 || !strings.Contains(out, id) {
		t.Errorf("pools get %s: exit %d %q %q", id, code, out, errOut)
	}
}
