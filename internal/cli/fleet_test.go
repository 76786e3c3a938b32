package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/agent/envfile"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// fleetEnv is a --dev server on SQLite with root's secrets hetzner and pip-index, and a copy of
// examples/fleet.json in the working directory as fleet.json.
func fleetEnv(t *testing.T) *cliEnv {
	t.Helper()
	c := mustServe(t, "")
	for _, s := range []string{"hetzner", "pip-index"} {
		if code, out, errOut := c.run("value-of-"+s, "secrets", "create", s, "--tenant", "root", "--token-file", c.tokenFile); code != 0 {
			t.Fatalf("secrets create: %d %s %s", code, out, errOut)
		}
	}
	example, err := os.ReadFile(filepath.Join(testkit.PackageDir(), "..", "..", "examples", "fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, "fleet.json", string(example))
	return c
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// transcript runs each command line (split at blanks) as the administrator and records it, its
// exit code, stdout and stderr, normalized, for a golden file.
func (c *cliEnv) transcript(lines ...string) string {
	c.t.Helper()
	var b strings.Builder
	for _, line := range lines {
		b.WriteString(c.transcriptArgs(strings.Fields(line)...))
	}
	return b.String()
}

// transcriptArgs is transcript for one command line given as its arguments, shown quoted for
// the shell.
func (c *cliEnv) transcriptArgs(args ...string) string {
	c.t.Helper()
	var b strings.Builder
	code, out, errOut := c.run("", append(args, "--token-file", c.tokenFile)...)
	shown := make([]string, len(args))
	for i, a := range args {
		shown[i] = envfile.Quote(a)
	}
	fmt.Fprintf(&b, "$ cubefleet %s\n%s", strings.Join(shown, " "), out)
	if errOut != "" {
		fmt.Fprintf(&b, "[stderr]\n%s", errOut)
	}
	fmt.Fprintf(&b, "[exit %d]\n\n", code)
	return c.normalize(b.String())
}

func TestFleetCommandsGolden(t *testing.T) {
	c := fleetEnv(t)
	testkit.Golden(t, "fleet_lifecycle.golden", []byte(c.transcript(
		"fleet status --tenant root",
		"fleet plan fleet.json --tenant root",
		"fleet plan fleet.json --tenant root --calls",
		"fleet apply fleet.json --tenant root",
		"fleet apply fleet.json --tenant root --yes",
		"fleet plan fleet.json --tenant root --fail-on-drift",
		"fleet apply fleet.json --tenant root --yes",
		"fleet status --tenant root --fail-on-drift",
		"fleet export --tenant root",
	)))

	edited, _ := os.ReadFile("fleet.json")
	doc := strings.Replace(string(edited), `"disruptionBudget": 0.1`, `"disruptionBudget": 0.25`, 1)
	doc = strings.Replace(doc, `{ "name": "burst", "site": "fra", "class": "provider", "providerAccount": "cloud" }`,
		`{ "name": "burst", "site": "fra", "class": "vps-host" }`, 1)
	doc = strings.Replace(doc, `"tenant": "acme"`, `"tenant": "nobody"`, 1)
	// A template that names a flavor nobody defined: blocked, with why, and no null for its flavorId.
	doc = strings.Replace(doc, `"flavor": "g1.small"`, `"flavor": "g1.large"`, 1)
	writeFile(t, "edited.json", doc)
	// Deletes carry ids, which derive from the administrator's principal id (new each run).
	hash := regexp.MustCompile(`"planHash": "[0-9a-f]{64}"`)
	testkit.Golden(t, "fleet_blocked.golden", []byte(hash.ReplaceAllString(c.transcript(
		"fleet plan edited.json --tenant root",
		"fleet apply edited.json --tenant root --yes",
		"fleet plan edited.json --tenant root --prune --output json",
	), `"planHash": "<hash>"`)))

	writeFile(t, "bad.json", `{"version": 2, "sites": [{"name": "Fra", "kind": "shared", "region": "eu"}],
 "pools": [{"name": "p", "site": "fra", "class": "vps-host", "offers": [{"tenant": "acme", "quota": {"gpu": -1}}]}],
 "providerAccounts": [{"name": "a", "provider": "hetzner-cloud", "config": {"token": "hunter2-literal"}}]}`)
	writeFile(t, "notjson.json", `{"version": 1,`)
	// A template naming a pool and a flavor the document does not define.
	writeFile(t, "refs.json", `{"version": 1, "sandboxTemplates": [{"name": "t", "pool": "gpu", "flavor": "g1.large", "imageId": "img", "network": "private"}]}`)
	out := c.transcript(
		"fleet plan bad.json --tenant root",
		"fleet plan notjson.json --tenant root",
		"fleet plan missing.json --tenant root",
		"fleet plan fleet.json",
		"fleet apply fleet.json --tenant root --yes --plan-hash abc",
		"fleet plan fleet.json --tenant acme",
	)
	if strings.Contains(out, "hunter2") {
		t.Fatal("an error repeated a literal secret")
	}
	testkit.Golden(t, "fleet_errors.golden", []byte(out))
}

// TestFleetStdin pipes the document through standard input ("-") for plan and for apply --yes:
// the document is read once, so the apply sends what it planned.
func TestFleetStdin(t *testing.T) {
	c := fleetEnv(t)
	doc, err := os.ReadFile("fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := c.run(string(doc), "fleet", "plan", "-", "--tenant", "root", "--token-file", c.tokenFile)
	if code != 0 || !strings.Contains(out, "8 to create") {
		t.Fatalf("plan -: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = c.run(string(doc), "fleet", "apply", "-", "--tenant", "root", "--yes", "--token-file", c.tokenFile)
	if code != 0 || !strings.Contains(out, "Applied 8 calls") {
		t.Fatalf("apply - --yes: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = c.run(string(doc), "fleet", "plan", "-", "--tenant", "root", "--fail-on-drift", "--token-file", c.tokenFile)
	if code != 0 || !strings.Contains(out, "0 to create, 0 to update, 0 to delete, 8 unchanged.") {
		t.Fatalf("plan - after apply: exit %d\n%s%s", code, out, errOut)
	}
}

// TestFleetPlanSaysHowToApplyGolden: a text plan ends with the command that applies exactly it
// (its plan hash, and every flag that changes what or where it applies); a plan without --prune
// counts what the document no longer lists (their names with --calls and in --output json);
// apply without --yes keeps --prune, --deny-delete, --url and --token-file in the command it
// suggests, and says when --deny-delete would refuse the plan.
func TestFleetPlanSaysHowToApplyGolden(t *testing.T) {
	c := fleetEnv(t)
	c.admin("fleet", "apply", "fleet.json", "--tenant", "root", "--yes")
	example, _ := os.ReadFile("fleet.json")
	trimmed := strings.Replace(string(example), `,
      "offers": [{ "tenant": "acme", "quota": { "vcpu": 64, "gpu": 2 }, "priority": 5 }]`, "", 1)
	trimmed = strings.Replace(trimmed, `"flavors": [{ "pool": "vps-fra", "name": "g1.small", "vcpu": 2, "memoryGiB": 4, "diskGiB": 40 }]`,
		`"flavors": [{ "pool": "vps-fra", "name": "g1.small", "vcpu": 4, "memoryGiB": 4, "diskGiB": 40 }]`, 1)
	withoutOne := strings.Replace(string(example), `,
      "offers": [{ "tenant": "acme", "quota": { "vcpu": 64, "gpu": 2 }, "priority": 5 }]`, "", 1)
	if trimmed == string(example) || withoutOne == string(example) {
		t.Fatal("examples/fleet.json changed: update the edits of this test")
	}
	writeFile(t, "trimmed.json", trimmed)
	writeFile(t, "without offer.json", withoutOne)
	// Deletes carry ids, which derive from the administrator's principal id (new each run).
	hash := regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	out := c.transcript(
		"fleet plan fleet.json --tenant root",
		"fleet plan trimmed.json --tenant root",
		"fleet plan trimmed.json --tenant root --calls",
		"fleet plan trimmed.json --tenant root --output json",
		"fleet apply trimmed.json --tenant root --prune --url "+c.url,
		"fleet apply trimmed.json --tenant root --deny-delete",
		"fleet apply trimmed.json --tenant root --prune --deny-delete --url "+c.url,
		"fleet apply trimmed.json --tenant root --prune --deny-delete --yes",
	)
	// A file name with a blank, quoted for the shell.
	out += c.transcriptArgs("fleet", "apply", "without offer.json", "--tenant", "root", "--prune")
	testkit.Golden(t, "fleet_how_to_apply.golden", []byte(hash.ReplaceAllString(out, "<hash>")))
}

// TestFleetValidateGolden: fleet validate checks a document offline (no control plane is
// reachable here) with the server's decoder and rules: a valid document, with "$schema" for
// editors, is described; an invalid one gets exactly the errors fleet plan gets from the server;
// references the document does not define are warnings with their paths, errors with --strict;
// an offer's tenant, which no document defines, is neither.
func TestFleetValidateGolden(t *testing.T) {
	c := fleetEnv(t)
	example, _ := os.ReadFile("fleet.json")
	writeFile(t, "with-schema.json", strings.Replace(string(example), "{\n", "{\n  \"$schema\": \"https://cubefleet.dev/schemas/fleet-document-v1.json\",\n", 1))
	writeFile(t, "bad.json", `{"version": 2, "sites": [{"name": "Fra", "kind": "shared", "region": "eu"}],
 "pools": [{"name": "p", "site": "fra", "class": "vps-host", "offers": [{"tenant": "acme", "quota": {"gpu": -1}}]}],
 "$schema": 7,
 "providerAccounts": [{"name": "a", "provider": "hetzner-cloud", "config": {"token": "hunter2-literal"}}]}`)
	writeFile(t, "notjson.json", `{"version": 1,`)
	// A template naming a pool and a flavor the document does not define.
	writeFile(t, "refs.json", `{"version": 1, "sandboxTemplates": [{"name": "t", "pool": "gpu", "flavor": "g1.large", "imageId": "img", "network": "private"}]}`)
	for _, f := range []string{"bad.json", "notjson.json", "with-schema.json"} {
		planCode, _, planErr := c.run("", "fleet", "plan", f, "--tenant", "root", "--token-file", c.tokenFile)
		code, _, errOut := c.run("", "fleet", "validate", f, "--url", "http://127.0.0.1:1")
		if f == "with-schema.json" {
			if planCode != 0 || code != 0 {
				t.Errorf("%s: plan exit %d, validate exit %d; want both 0\n%s%s", f, planCode, code, planErr, errOut)
			}
			continue
		}
		if code != planCode || errOut != planErr {
			t.Errorf("fleet validate %s: exit %d\n%s\nfleet plan (the server's errors): exit %d\n%s", f, code, errOut, planCode, planErr)
		}
	}
	c.env = map[string]string{"CUBEFLEET_URL": "http://127.0.0.1:1"} // nothing listens there
	doc, _ := os.ReadFile("with-schema.json")
	out := c.transcript(
		"fleet validate fleet.json",
		"fleet validate fleet.json --strict", // an offer's tenant is never the document's to define
		"fleet validate with-schema.json --output json",
		"fleet validate bad.json",
		"fleet validate bad.json --output json",
		"fleet validate refs.json",
		"fleet validate refs.json --strict",
		"fleet validate missing.json",
		"fleet validate",
	)
	code, stdout, stderr := c.run(string(doc), "fleet", "validate", "-")
	out += fmt.Sprintf("$ cubefleet fleet validate - < with-schema.json\n%s%s[exit %d]\n", stdout, stderr, code)
	if strings.Contains(out, "hunter2") {
		t.Fatal("an error repeated a literal secret")
	}
	testkit.Golden(t, "fleet_validate.golden", []byte(c.normalize(out)))
}
