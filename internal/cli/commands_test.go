package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/privatefile"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

func TestGoldenTables(t *testing.T) {
	eachDatabase(t, func(t *testing.T, c *cliEnv) {
		testkit.Golden(t, "keys_permissions.golden", []byte(c.admin("keys", "permissions")))
		testkit.Golden(t, "keys_permissions_acme.golden", []byte(c.admin("keys", "permissions", "--tenant", "acme")))
		testkit.Golden(t, "tenants_list.golden", []byte(c.admin("tenants", "list")))
		testkit.Golden(t, "tenants_list_json.golden", []byte(c.admin("tenants", "list", "--output", "json")))
	})
}

// TestGoldenErrors records the exit code, stdout and stderr of failing command lines: coded
// failures exit 1 with `error: CODE: message`, usage errors exit 2.
func TestGoldenErrors(t *testing.T) {
	eachDatabase(t, func(t *testing.T, c *cliEnv) {
		loose := filepath.Join(c.dir, "loose.token")
		os.WriteFile(loose, []byte("cfk_whatever\n"), 0o644)
		weak := strings.TrimSpace(c.admin("keys", "create", "--tenant", "root", "--name", "weak", "--grant", "audit:read@tenant/acme"))
		weakFile := filepath.Join(c.dir, "weak.token")
		if err := privatefile.Write(weakFile, []byte(weak)); err != nil {
			t.Fatal(err)
		}
		tf := []string{"--token-file", c.tokenFile}
		cases := [][]string{
			append([]string{"tenants", "create", "Bad Name"}, tf...),
			append([]string{"api", "compute.sites.create", `{"tenantId":"root","kind":"x","region":"EU"}`}, tf...),
			append([]string{"api", "no.such.method"}, tf...),
			append([]string{"keys", "create", "--tenant", "root", "--name", "ci", "--grant", "bogus"}, tf...),
			{"bogus"},
			{"tenants", "list"},
			{"tenants", "list", "--token-file", weakFile},
			{"tenants", "list", "--token-file", loose},
			{"tenants", "list", "--token-file", filepath.Join(c.dir, "missing.token")},
			{"tenants", "list", "--url", "localhost:3010"},
			{"tenants", "list", "--url", "127.0.0.1:3010"},
			{"tenants", "list", "--url", "[::1]:3010"},
			{"flet"},
			{"fleet", "plna"},
			{"nodes", "cordn", "10.0.0.7"},
			// A typo, or a command word with flags after it: the word is the mistake.
			{"sandboxs", "list", "--tenant", "root"},
			{"nodez", "get", "10.0.0.7", "--output", "json", "--bogus"},
			{"fleet", "plna", "--tenant", "root"},
			// A missing argument is named.
			{"fleet", "plan"},
			{"fleet", "plan", "--tenant", "root"},
			{"sandboxes", "get", "--tenant", "root"},
			{"templates", "get", "--tenant", "root"},
			{"keys", "create", "--tenant", "acme"},
			{"keys", "create", "--tenant", "acme", "--name", "x", "--grant", "audit:read@tenant/acme", "--expires", "soon"},
			{"tenants", "bogus"},
			{"tenants", "list", "--output", "yaml"},
			{"api"},
			{"api", "iam.tenants.list", "not json"},
			{"audit", "list", "--since", "yesterday"},
			{"server", "--api-body-budget", "lots"},
			{"server", "--api-workers", "-1"},
			{"server", "--env-ref-allow", "1BAD", "--data-dir", filepath.Join(c.dir, "unused")},
		}
		var b strings.Builder
		for _, args := range cases {
			code, out, errOut := c.run("", args...)
			fmt.Fprintf(&b, "$ cubefleet %s\nexit %d\n", strings.Join(args, " "), code)
			if out != "" {
				fmt.Fprintf(&b, "stdout:\n%s", out)
			}
			if errOut != "" {
				fmt.Fprintf(&b, "stderr:\n%s", errOut)
			}
			b.WriteString("\n")
		}
		testkit.Golden(t, "errors.golden", []byte(c.normalize(b.String())))
	})
}

// TestKubectlAliases: the singular and kubectl's short forms name the same commands.
func TestKubectlAliases(t *testing.T) {
	c := mustServe(t, "")
	for _, group := range [][]string{{"sandboxes", "sandbox", "sb"}, {"nodes", "node", "no"}} {
		args := []string{"list", "--token-file", c.tokenFile}
		if group[0] == "sandboxes" {
			args = append(args, "--tenant", "root")
		}
		code, want, errOut := c.run("", append([]string{group[0]}, args...)...)
		if code != 0 {
			t.Fatalf("%s list: exit %d %s", group[0], code, errOut)
		}
		for _, alias := range group[1:] {
			if code, out, errOut := c.run("", append([]string{alias}, args...)...); code != 0 || out != want {
				t.Errorf("%s list: exit %d\n%s%s\nwant what %s list prints:\n%s", alias, code, out, errOut, group[0], want)
			}
		}
	}
}

// TestGoldenErrorsJSON: with --output json every failure prints one JSON object on stdout,
// {"error":{"code","message","details"}}, or, for a command that has a result to show although
// it failed, that result with an "error" member; stderr keeps the text, the exit code is the
// same. Without --output json stdout stays empty.
func TestGoldenErrorsJSON(t *testing.T) {
	c := fleetEnv(t)
	tf := []string{"--token-file", c.tokenFile}
	writeFile(t, "site.json", `{"version": 1, "sites": [{"name": "fra", "kind": "shared", "region": "eu-central"}]}`)
	cases := [][]string{
		append([]string{"tenants", "create", "Bad Name", "-o", "json"}, tf...),
		append([]string{"api", "compute.sites.create", `{"tenantId":"root","kind":"x","region":"EU"}`, "--output=json"}, tf...),
		append([]string{"api", "no.such.method", "-ojson"}, tf...),
		append([]string{"nodes", "get", "10.9.9.9", "--output", "json"}, tf...),
		append([]string{"nodes", "list", "--state", "sleeping", "-o", "json"}, tf...),
		append([]string{"fleet", "plan", "site.json", "--tenant", "root", "--fail-on-drift", "-o", "json"}, tf...),
		{"tenants", "list", "-o", "json"},
		{"tenants", "list", "--url", "localhost:3010", "-o", "json"},
		{"bogus", "-o", "json"},
		{"tenants", "list", "--bogus", "-o", "json"},
		{"keys", "create", "--tenant", "acme", "-o", "json"},
		{"audit", "list", "--since", "yesterday", "-o", "json"},
		{"tenants", "list", "--output", "yaml"},
		{"nodes", "get", "10.9.9.9", "-o", "table"},
	}
	var b strings.Builder
	for _, args := range cases {
		code, out, errOut := c.run("", args...)
		fmt.Fprintf(&b, "$ cubefleet %s\nexit %d\n", strings.Join(args, " "), code)
		if out != "" {
			fmt.Fprintf(&b, "stdout:\n%s", out)
		}
		if errOut != "" {
			fmt.Fprintf(&b, "stderr:\n%s", errOut)
		}
		b.WriteString("\n")
		if slices.Contains(args, "json") || slices.Contains(args, "--output=json") || slices.Contains(args, "-ojson") {
			var v struct {
				Error *struct{ Code, Message string }
			}
			if err := json.Unmarshal([]byte(out), &v); err != nil || v.Error == nil || v.Error.Code == "" || v.Error.Message == "" {
				t.Errorf("%v: stdout is not one JSON object with an error: %v\n%s", args, err, out)
			}
		} else if out != "" {
			t.Errorf("%v: stdout %q, want none without --output json", args, out)
		}
	}
	testkit.Golden(t, "errors_json.golden", []byte(c.normalize(b.String())))
}

func TestKeysLifecycle(t *testing.T) {
	eachDatabase(t, func(t *testing.T, c *cliEnv) {
		code, out, errOut := c.run("", "keys", "create", "--tenant", "root", "--name", "ci", "--expires", "90d",
			"--grant", "compute:fleet:admin@compute-fleet/global", "--grant", "compute:pools:*@tenant/root", "--token-file", c.tokenFile)
		if code != ExitOK {
			t.Fatalf("keys create: %d %s %s", code, out, errOut)
		}
		token := strings.TrimSpace(out)
		if !regexp.MustCompile(`^cfk_[A-Za-z0-9_-]{43}$`).MatchString(token) || strings.Count(out, "\n") != 1 {
			t.Fatalf("stdout %q: want the key alone on one line", out)
		}
		if !strings.Contains(errOut, "shown only this once") || strings.Contains(errOut, token) {
			t.Errorf("stderr %q: want the warning, without the key", errOut)
		}
		ciFile := filepath.Join(c.dir, "ci.token")
		privatefile.Write(ciFile, []byte(token+"\n"))

		// The key works through CUBEFLEET_TOKEN, holds only what it was given.
		c.env["CUBEFLEET_TOKEN"] = token
		code, _, errOut = c.run("", "api", "compute.pools.list", `{"tenantId":"root"}`)
		if code != ExitOK {
			t.Errorf("pools list with the CI key: %d %s", code, errOut)
		}
		code, _, errOut = c.run("", "tenants", "list")
		if code != ExitFailure || !strings.Contains(errOut, "error: FORBIDDEN:") {
			t.Errorf("tenants list with the CI key: %d %s", code, errOut)
		}
		delete(c.env, "CUBEFLEET_TOKEN")

		list := c.admin("keys", "list", "--tenant", "root")
		if !strings.Contains(list, " ci ") || strings.Contains(list, token) || !strings.Contains(list, "compute:fleet:admin@compute-fleet/global") {
			t.Errorf("keys list:\n%s", list)
		}
		var keys struct {
			Items []struct {
				ID, PrincipalName string
				ExpiresAt         *int64
			}
		}
		json.Unmarshal([]byte(c.admin("keys", "list", "--tenant", "root", "-o", "json")), &keys)
		var id string
		for _, k := range keys.Items {
			if k.PrincipalName == "ci" {
				id = k.ID
				if k.ExpiresAt == nil || *k.ExpiresAt != testNow().Add(90*24*time.Hour).UnixMilli() {
					t.Errorf("expiresAt = %v, want 90 days after creation", k.ExpiresAt)
				}
			}
		}
		if out := c.admin("keys", "revoke", id, "--tenant", "root"); !strings.Contains(out, "Revoked key "+id) {
			t.Errorf("revoke: %s", out)
		}
		code, _, errOut = c.run("", "api", "compute.pools.list", `{"tenantId":"root"}`, "--token-file", ciFile)
		if code != ExitFailure || !strings.Contains(errOut, "error: UNAUTHENTICATED: API key "+id+" was revoked") {
			t.Errorf("revoked key: %d %s", code, errOut)
		}
	})
}

func TestSecretsCommands(t *testing.T) {
	eachDatabase(t, func(t *testing.T, c *cliEnv) {
		const value = "hz-0123456789-secret"
		code, out, errOut := c.run(value+"\n", "secrets", "create", "hetzner", "--tenant", "acme", "--token-file", c.tokenFile)
		if code != ExitOK || !strings.Contains(out, "secret://hetzner") || strings.Contains(out+errOut, value) {
			t.Fatalf("create from stdin: %d %q %q", code, out, errOut)
		}
		file := filepath.Join(c.dir, "ionos.secret")
		privatefile.Write(file, []byte("ionos-password\n"))
		c.admin("secrets", "create", "ionos", "--tenant", "acme", "--from-file", file)
		loose := filepath.Join(c.dir, "loose.secret")
		os.WriteFile(loose, []byte("x"), 0o644)
		code, _, errOut = c.run("", "secrets", "create", "loose", "--tenant", "acme", "--from-file", loose, "--token-file", c.tokenFile)
		if code != ExitFailure || !strings.Contains(errOut, "chmod 600") {
			t.Errorf("loose file: %d %s", code, errOut)
		}
		code, _, errOut = c.run("", "secrets", "create", "empty", "--tenant", "acme", "--token-file", c.tokenFile)
		if code != ExitUsage {
			t.Errorf("no value: %d %s", code, errOut)
		}
		list := c.admin("secrets", "list", "--tenant", "acme")
		if !strings.Contains(list, "hetzner") || !strings.Contains(list, "ionos") || strings.Contains(list, value) || strings.Contains(list, "ionos-password") {
			t.Errorf("list:\n%s", list)
		}
		js := c.admin("secrets", "list", "--tenant", "acme", "-o", "json")
		if strings.Contains(js, value) || !json.Valid([]byte(js)) {
			t.Errorf("list json: %s", js)
		}
		c.admin("secrets", "delete", "hetzner", "--tenant", "acme")
		if list := c.admin("secrets", "list", "--tenant", "acme"); strings.Contains(list, "hetzner") {
			t.Errorf("after delete:\n%s", list)
		}
	})
}

func TestAuditAndAPICommands(t *testing.T) {
	c := mustServe(t, "")
	c.admin("tenants", "create", "initech")
	out := c.admin("api", "iam.tenants.list")
	var tenants struct{ Items []struct{ ID string } }
	if err := json.Unmarshal([]byte(out), &tenants); err != nil || len(tenants.Items) != 4 {
		t.Errorf("api iam.tenants.list: %s %v", out, err)
	}
	code, out, _ := c.run(`{"tenantId":"root","kind":"shared","region":"eu"}`, "api", "compute.sites.create", "-", "--token-file", c.tokenFile)
	if code != ExitOK || !strings.Contains(out, `"region": "eu"`) {
		t.Errorf("api with stdin: %d %s", code, out)
	}
	audit := c.admin("audit", "list", "--tenant", "root", "--since", "2025-12-31T00:00:00Z")
	for _, want := range []string{"iam.tenants.create", "compute.sites.create", "ok"} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit list lacks %s:\n%s", want, audit)
		}
	}
	if out := c.admin("audit", "list", "--tenant", "acme"); strings.TrimSpace(out) != "TIME  METHOD  OUTCOME  PRINCIPAL  TARGET  REQUEST" {
		t.Errorf("empty audit list:\n%q", out)
	}
}

// TestAuditListPagesAsNodesEventsGolden: audit list reads the log as nodes events does, on
// SQLite and PostgreSQL alike: the newest --limit rows by default (oldest first, olderExist
// with --output json), and forwards from --since or --cursor, --limit rows a page.
func TestAuditListPagesAsNodesEventsGolden(t *testing.T) {
	eachDatabase(t, func(t *testing.T, c *cliEnv) {
		for _, name := range []string{"t1", "t2", "t3", "t4"} { // one audit row each
			c.admin("tenants", "create", name)
		}
		var all struct {
			Items []struct{ ID, Method, Target string }
		}
		json.Unmarshal([]byte(c.admin("audit", "list", "--tenant", "root", "--since", "2025-12-31T00:00:00Z", "-o", "json")), &all)
		if len(all.Items) < 4 {
			t.Fatalf("audit rows: %+v", all.Items)
		}
		second := all.Items[1].ID
		out := c.transcript(
			"audit list --tenant root --limit 2",
			"audit list --tenant root --limit 2 --output json",
			"audit list --tenant root --since 2025-12-31T00:00:00Z --limit 2",
			"audit list --tenant root --limit 2 --cursor "+second,
			"audit list --tenant root --limit 1001",
		)
		testkit.Golden(t, "audit_list.golden", []byte(out))
	})
}

// TestServerDevCommand runs `cubefleet server --dev` as a user would: it prints the token file's
// path and never the key, on stdout or in its log, serves the CLI, and stops on cancel.
func TestServerDevCommand(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	srv := start(t, nil, "server", "--dev", "--listen", "127.0.0.1:0", "--log-format", "json")
	url := srv.listening(t, regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`))[1]
	out, errOut := &srv.out, &srv.err
	path := filepath.Join(".cubefleet", "admin.token")
	if err := privatefile.Check(path); err != nil {
		t.Fatalf("admin.token: %v", err)
	}
	if fi, err := os.Stat(".cubefleet"); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf(".cubefleet: %v %v, want mode 0700", fi.Mode().Perm(), err)
	}
	token, _ := os.ReadFile(path)
	tok := strings.TrimSpace(string(token))
	if !strings.Contains(out.String(), "written to "+path) {
		t.Errorf("stdout does not name %s: %q", path, out.String())
	}
	// The CLI finds ./.cubefleet/admin.token by default.
	c := &cliEnv{t: t, url: url, dir: dir, env: map[string]string{"CUBEFLEET_URL": url, "XDG_CONFIG_HOME": filepath.Join(dir, "xdg")}}
	if code, list, errs := c.run("", "tenants", "list"); code != ExitOK || !strings.Contains(list, "globex") {
		t.Errorf("tenants list against the dev server: %d %s %s", code, list, errs)
	}
	if code := srv.stop(t); code != ExitOK {
		t.Errorf("exit %d after cancel: %s", code, errOut.String())
	}
	for name, s := range map[string]string{"stdout": out.String(), "log": errOut.String()} {
		if strings.Contains(s, tok) || strings.Contains(s, tok[4:16]) {
			t.Errorf("%s contains the admin key", name)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(errOut.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("--log-format json wrote %q", line)
		}
	}
}

func TestServerInitCommand(t *testing.T) {
	dir := t.TempDir()
	c := &cliEnv{t: t, dir: dir, env: map[string]string{}}
	data, tok := filepath.Join(dir, "data"), filepath.Join(dir, "admin.key")
	code, out, errOut := c.run("", "server", "init", "--data-dir", data, "--token-out", tok)
	if code != ExitOK || !strings.Contains(out, "written to "+tok) {
		t.Fatalf("init: %d %s %s", code, out, errOut)
	}
	if err := privatefile.Check(tok); err != nil {
		t.Errorf("token file: %v", err)
	}
	key, _ := os.ReadFile(tok)
	if strings.Contains(out+errOut, strings.TrimSpace(string(key))) {
		t.Error("init printed the key")
	}
	again := filepath.Join(dir, "again.key")
	code, _, errOut = c.run("", "server", "init", "--data-dir", data, "--token-out", again)
	if code != ExitFailure || !strings.Contains(errOut, "error: CONFLICT: this control plane is already initialized") {
		t.Errorf("second init: %d %s", code, errOut)
	}
	if _, err := os.Stat(again); !os.IsNotExist(err) {
		t.Errorf("second init wrote %s", again)
	}
	code, _, errOut = c.run("", "server", "init", "--data-dir", data, "--token-out", tok)
	if code != ExitFailure || !strings.Contains(errOut, "refusing to overwrite") {
		t.Errorf("init onto an existing file: %d %s", code, errOut)
	}
	code, _, errOut = c.run("", "server", "init", "--data-dir", data)
	if code != ExitUsage {
		t.Errorf("init without --token-out: %d %s", code, errOut)
	}
	code, _, errOut = c.run("", "server", "--modules", "core,gpu")
	if code != ExitUsage || !strings.Contains(errOut, "unknown module") {
		t.Errorf("server --modules core,gpu: %d %s", code, errOut)
	}
}
