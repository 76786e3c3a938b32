package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/cubefleet/cubefleet/api"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
	"github.com/cubefleet/cubefleet/internal/server"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// shellish is what the sandboxes of these tests do: "echo WORDS" prints the words, "fail N"
// writes to stderr and exits N, "die" is killed by SIGKILL, "sleep" runs until stopped,
// "nostart" fails to start.
func shellish(sp nodeapi.SandboxSpec) sandboxtest.Run {
	if len(sp.Argv) == 0 {
		return sandboxtest.Run{}
	}
	switch sp.Argv[0] {
	case "echo":
		return sandboxtest.Run{Stdout: []byte(strings.Join(sp.Argv[1:], " ") + "\n"), For: time.Millisecond}
	case "nostart":
		return sandboxtest.Run{FailStart: "exec: nostart: not found"}
	case "fail":
		n, _ := strconv.Atoi(sp.Argv[1])
		return sandboxtest.Run{Exit: n, Stderr: []byte("failing\n"), For: time.Millisecond, CPUMillis: 120, PeakMemoryBytes: 39321600}
	}
	return sandboxtest.Run{}
}

// sandboxEnv starts a --dev control plane on the real clock (the scheduler takes nodes that
// reported since it started), a pool with a flavor and tenant root's template "py", and an
// agent on 127.0.0.2 that runs shellish sandboxes.
func sandboxEnv(t *testing.T, database string) (*cliEnv, *sandboxtest.Agent) {
	t.Helper()
	c := mustServe(t, database, func(cfg *server.Config) { cfg.Now = nil })
	api, err := client.Connect(client.Options{URL: c.url, TokenFile: c.tokenFile, Getenv: func(string) string { return "" }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var site, pool, flavor struct{ ID string }
	var join struct{ Token string }
	for _, step := range []struct {
		method string
		in     map[string]any
		out    any
	}{
		{"compute.sites.create", map[string]any{"tenantId": "root", "kind": "shared", "region": "eu-central"}, &site},
		{"compute.pools.create", map[string]any{"tenantId": "root", "siteId": &site.ID, "class": "vps-host"}, &pool},
		{"compute.flavors.create", map[string]any{"tenantId": "root", "poolId": &pool.ID, "name": "small", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1}, &flavor},
		{"compute.sandboxTemplates.create", map[string]any{"tenantId": "root", "poolId": &pool.ID, "flavorId": &flavor.ID, "name": "py", "imageId": "python-3.12", "network": "private"}, nil},
		{"nodes.joinTokens.create", map[string]any{"pool": &pool.ID, "ip": "127.0.0.2"}, &join},
	} {
		if err := api.Call(context.Background(), step.method, step.in, step.out); err != nil {
			t.Fatalf("%s: %v", step.method, err)
		}
	}
	a := sandboxtest.Join(t, c.url, join.Token, "127.0.0.2", 8)
	a.Behave = shellish
	a.Start(200 * time.Millisecond)
	testkit.WaitFor(t, 10*time.Second, "the template prepared on the node", func() bool {
		var n struct{ LocalTemplates []string }
		api.Call(context.Background(), "nodes.get", map[string]any{"nodeId": "127.0.0.2"}, &n)
		return len(n.LocalTemplates) == 1
	})
	return c, a
}

var timePattern = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)

// normalizeSandboxes is normalize with times made placeholders too.
func (c *cliEnv) normalizeSandboxes(s string) string {
	return timePattern.ReplaceAllString(c.normalize(s), "<time>")
}

// TestSandboxesCommands runs sandboxes through the CLI: create --wait prints the command's
// output as a local run would and exits with its status; get, list, wait, logs and delete print
// what people read (golden files) and JSON for scripts.
func TestSandboxesCommands(t *testing.T) {
	eachDatabase := func(t *testing.T, fn func(t *testing.T, database string)) {
		t.Run("sqlite", func(t *testing.T) { fn(t, "") })
		t.Run("postgres", func(t *testing.T) { fn(t, storetest.PostgresURL(t)) })
	}
	eachDatabase(t, func(t *testing.T, database string) {
		c, _ := sandboxEnv(t, database)
		tok := []string{"--token-file", c.tokenFile}
		run := func(args ...string) (int, string, string) {
			t.Helper()
			return c.run("", append(append([]string{}, tok...), args...)...)
		}
		// Arguments with a blank and a quote: list and get quote the command for the shell.
		code, out, errOut := run("sandboxes", "create", "--tenant", "root", "--template", "py", "--wait", "--", "echo", "it's", "hello world")
		if code != 0 || out != "it's hello world\n" || errOut != "" {
			t.Fatalf("create --wait: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		code, out, errOut = run("sandboxes", "create", "--tenant", "root", "--template", "py", "--wait", "--", "fail", "3")
		if code != 3 || out != "" || errOut != "failing\n" {
			t.Fatalf("create --wait of a failing command: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		code, out, _ = run("sandboxes", "create", "--tenant", "root", "--template", "py", "--", "sleep")
		if code != 0 || !strings.Contains(out, "running on node 127.0.0.2.") {
			t.Fatalf("create: exit %d %q", code, out)
		}
		running := idPattern.FindString(out)
		code, out, _ = run("sandboxes", "wait", running, "--tenant", "root", "--until", "running")
		if code != 0 || out != "Sandbox "+running+" is running on node 127.0.0.2.\n" {
			t.Fatalf("wait --until running: exit %d %q", code, out)
		}
		testkit.Golden(t, "sandboxes_list.golden", []byte(c.normalizeSandboxes(c.admin("sandboxes", "list", "--tenant", "root"))))
		_, listJSON, _ := run("sandboxes", "list", "--tenant", "root", "--state", "exited", "--output", "json")
		ids := idPattern.FindAllString(listJSON, -1)
		var ended string
		for _, id := range ids {
			if strings.HasPrefix(id, "sbx_") {
				ended = id
				break
			}
		}
		testkit.Golden(t, "sandboxes_get.golden", []byte(c.normalizeSandboxes(c.admin("sandboxes", "get", ended, "--tenant", "root"))))
		code, out, errOut = run("sandboxes", "logs", ended, "--tenant", "root")
		if code != 0 || out+errOut == "" {
			t.Fatalf("logs: exit %d %q %q", code, out, errOut)
		}
		code, _, errOut = run("sandboxes", "logs", running, "--tenant", "root") // what arrived so far
		if code != 0 {
			t.Errorf("logs of a running sandbox: exit %d %q", code, errOut)
		}
		code, out, _ = run("sandboxes", "wait", running, "--tenant", "root", "--timeout", "300ms")
		if code != 1 {
			t.Errorf("wait past its timeout: exit %d %q", code, out)
		}
		out = c.admin("sandboxes", "delete", running, "--tenant", "root")
		if out != "Deleted sandbox "+running+": node 127.0.0.2 stops it (SIGTERM, then SIGKILL after its grace).\n" {
			t.Errorf("delete: %q", out)
		}
		code, _, errOut = run("sandboxes", "get", running, "--tenant", "root")
		if code != 1 || !strings.Contains(errOut, "NOT_FOUND") {
			t.Errorf("get after delete: exit %d %q", code, errOut)
		}
		// Usage errors: exit 2, nothing created.
		for _, args := range [][]string{
			{"sandboxes", "create", "--tenant", "root", "--template", "py", "--async", "--wait", "--", "echo"},
			{"sandboxes", "create", "--tenant", "root", "--template", "py", "echo"},
			{"sandboxes", "create", "--tenant", "root", "--template", "py", "--timeout", "1500ms", "--", "echo"},
			{"sandboxes", "create", "--tenant", "root", "--template", "py", "--env", "NOEQUALS", "--", "echo"},
			{"sandboxes", "list", "--tenant", "root", "--state", "sleeping"},
		} {
			if code, _, errOut := run(args...); code != ExitUsage {
				t.Errorf("%s: exit %d %q, want 2", strings.Join(args, " "), code, errOut)
			}
		}
		// A piped input holding data is refused, not dropped: the sandbox would not read it.
		code, _, errOut = c.run("x\n", append(tok, "sandboxes", "create", "--tenant", "root", "--template", "py", "--wait", "--", "echo")...)
		if code != ExitUsage || !strings.Contains(errOut, "standard input holds data") || !strings.Contains(errOut, "</dev/null") {
			t.Errorf("create --wait with data on stdin: exit %d %q", code, errOut)
		}
	})
}

// TestEndStatus: create --wait exits as a shell would: the command's code, 128 plus the
// signal's number, 1 (an error) for a sandbox that failed or was lost.
func TestEndStatus(t *testing.T) {
	code := func(n int) *int { return &n }
	for _, c := range []struct {
		s    api.Sandbox
		want string
	}{
		{api.Sandbox{State: api.SandboxExited, Result: &api.SandboxResult{ExitCode: code(0)}}, "<nil>"},
		{api.Sandbox{State: api.SandboxExited, Result: &api.SandboxResult{ExitCode: code(7)}}, "exit status 7"},
		{api.Sandbox{State: api.SandboxKilled, Result: &api.SandboxResult{Signal: "SIGKILL"}}, "exit status 137"},
		{api.Sandbox{State: api.SandboxKilled, Result: &api.SandboxResult{Signal: "SIGTERM"}}, "exit status 143"},
		{api.Sandbox{State: api.SandboxKilled, Result: &api.SandboxResult{}}, "exit status 137"},
		{api.Sandbox{ID: "sbx_1", State: api.SandboxLost, Reason: "node_down", Message: "node 10.0.0.5 is Down", Result: &api.SandboxResult{}},
			"sandbox sbx_1 lost (node_down): node 10.0.0.5 is Down"},
		{api.Sandbox{ID: "sbx_2", State: api.SandboxFailed, Reason: "failed", Result: &api.SandboxResult{}}, "sandbox sbx_2 failed (failed)"},
	} {
		if got := fmt.Sprint(endStatus(c.s)); got != c.want {
			t.Errorf("%+v: %s, want %s", c.s, got, c.want)
		}
	}
}

// TestKillSaysWhyOnce: the lines about a killed sandbox name its reason and its signal once,
// whether the agent's message already names them or not.
func TestKillSaysWhyOnce(t *testing.T) {
	term := &api.SandboxResult{Signal: "SIGTERM"}
	for _, c := range []struct {
		s                 api.Sandbox
		endErr, waitedFor string
	}{
		{api.Sandbox{ID: "sbx_1", State: api.SandboxKilled, Reason: "stopped", Message: "stopped: killed by SIGTERM", Result: term},
			"sandbox sbx_1 killed: stopped: killed by SIGTERM", "Sandbox sbx_1 killed: stopped: killed by SIGTERM."},
		{api.Sandbox{ID: "sbx_2", State: api.SandboxKilled, Reason: "timeout", Message: "timeout after 5s: killed by SIGKILL after ignoring SIGTERM for 10s", Result: &api.SandboxResult{Signal: "SIGKILL"}},
			"sandbox sbx_2 killed: timeout after 5s: killed by SIGKILL after ignoring SIGTERM for 10s", "Sandbox sbx_2 killed: timeout after 5s: killed by SIGKILL after ignoring SIGTERM for 10s."},
		{api.Sandbox{ID: "sbx_3", State: api.SandboxKilled, Reason: "node_drained", Message: "its node's drain deadline passed", Result: term},
			"sandbox sbx_3 killed (node_drained): its node's drain deadline passed", "Sandbox sbx_3 killed (signal SIGTERM): its node's drain deadline passed."},
	} {
		if got := endError(c.s).Error(); got != c.endErr {
			t.Errorf("endError = %q, want %q", got, c.endErr)
		}
		if got := waitedLine(c.s); got != c.waitedFor {
			t.Errorf("waitedLine = %q, want %q", got, c.waitedFor)
		}
	}
}

// TestSandboxesTrialFixes: what people read when a sandbox fails without --wait (exit 1, the
// reason), a wait runs out (the sandbox, where it is and the command that waits on), a create
// --wait waits for room (progress on stderr), a sandbox that never ran is deleted, and the
// usage errors of durations, repeated labels, unknown and overlong templates (golden file).
func TestSandboxesTrialFixes(t *testing.T) {
	for _, db := range []struct{ name, url string }{{"sqlite", ""}, {"postgres", "postgres"}} {
		t.Run(db.name, func(t *testing.T) {
			url := db.url
			if url != "" {
				url = storetest.PostgresURL(t)
			}
			c, _ := sandboxEnv(t, url)
			var transcript strings.Builder
			run := func(args ...string) (int, string, string) {
				t.Helper()
				code, out, errOut := c.run("", append([]string{"--token-file", c.tokenFile}, args...)...)
				shown := make([]string, len(args))
				for i, a := range args {
					shown[i] = commandText([]string{a})
				}
				fmt.Fprintf(&transcript, "$ cubefleet %s\nexit %d\n%s%s\n", strings.Join(shown, " "), code, out, errOut)
				return code, out, errOut
			}
			run("sandboxes", "create", "--tenant", "root", "--template", "py", "--", "nostart")
			_, out, _ := run("sandboxes", "create", "--tenant", "root", "--template", "py", "--", "sleep")
			running := idPattern.FindString(out)
			run("sandboxes", "wait", running, "--tenant", "root", "--timeout", "300ms")
			run("sandboxes", "create", "--tenant", "root", "--template", "py", "--node-selector", "zone=nowhere", "--wait", "--max-wait", "1500ms", "--", "echo")
			_, out, _ = run("sandboxes", "list", "--tenant", "root", "--state", "pending", "--output", "json")
			pending := idPattern.FindString(out)
			transcript.Reset() // the ids and JSON above vary; what follows is the golden part
			run("sandboxes", "create", "--tenant", "root", "--template", "py", "--", "nostart")
			run("sandboxes", "wait", running, "--tenant", "root", "--timeout", "300ms")
			run("sandboxes", "create", "--tenant", "root", "--template", "py", "--node-selector", "zone=nowhere", "--wait", "--max-wait", "1500ms", "--", "echo")
			run("sandboxes", "delete", pending, "--tenant", "root")
			run("sandboxes", "create", "--tenant", "root", "--template", "py", "--timeout", "-5s", "--", "echo")
			run("sandboxes", "create", "--tenant", "root", "--template", "py", "--timeout", "999999h", "--", "echo")
			run("sandboxes", "wait", running, "--tenant", "root", "--timeout", "-5s")
			run("sandboxes", "create", "--tenant", "root", "--template", "py", "--label", "app=web", "--label", "app=two", "--", "echo")
			run("sandboxes", "create", "--tenant", "root", "--template", strings.Repeat("x", 5000), "--", "echo")
			run("sandboxes", "list", "--tenant", "root", "--template", "UNKNOWN")
			testkit.Golden(t, "sandboxes_trial.golden", []byte(c.normalizeSandboxes(transcript.String())))
		})
	}
}

// TestStateText: a table's state of a sandbox, warm pool top-ups said so.
func TestStateText(t *testing.T) {
	for _, c := range []struct {
		s    api.Sandbox
		want string
	}{
		{api.Sandbox{State: api.SandboxPending, Reason: sandboxes.ReasonWaitingForRoom}, "pending (waiting_for_room)"},
		{api.Sandbox{State: api.SandboxPending, Reason: sandboxes.ReasonWaitingForRoom, Warm: true}, "pending (warm top-up)"},
		{api.Sandbox{State: api.SandboxStarting, Reason: sandboxes.ReasonPlaced, Warm: true}, "starting (warm top-up)"},
		{api.Sandbox{State: api.SandboxRunning, Reason: sandboxes.ReasonWarmReady, Warm: true}, "idle (warm)"},
		{api.Sandbox{State: api.SandboxRunning, Reason: sandboxes.ReasonClaimed, Warm: true, ClaimedAt: 1}, "running"},
	} {
		if got := stateText(c.s); got != c.want {
			t.Errorf("%+v: %q, want %q", c.s, got, c.want)
		}
	}
}

// TestWaitMovesToAnotherReplica: with several control plane URLs, sandboxes wait and create
// --wait go on at the next when the one in use cannot be reached (here: nothing listens on the
// first); a single URL that cannot be reached is tried again (not tested: that takes
// reconnectFor).
func TestWaitMovesToAnotherReplica(t *testing.T) {
	c, _ := sandboxEnv(t, "")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + l.Addr().String()
	l.Close()
	_, out, _ := c.run("", "--token-file", c.tokenFile, "sandboxes", "create", "--tenant", "root", "--template", "py", "--async", "--", "sleep")
	id := idPattern.FindString(out)
	urls := gone + ", " + c.url
	code, out, errOut := c.run("", "--token-file", c.tokenFile, "--url", urls, "sandboxes", "wait", id, "--tenant", "root", "--until", "running", "--timeout", "30s")
	if code != 0 || out != "Sandbox "+id+" is running on node 127.0.0.2.\n" {
		t.Fatalf("wait with the first of two URLs gone: exit %d %q %q", code, out, errOut)
	}
	// create --wait: its create goes to the first URL, so the live one comes first; the wait
	// goes on wherever it can.
	code, out, errOut = c.run("", "--token-file", c.tokenFile, "--url", c.url+","+gone, "sandboxes", "create", "--tenant", "root", "--template", "py", "--wait", "--", "echo", "hi")
	if code != 0 || out != "hi\n" {
		t.Fatalf("create --wait with two URLs: exit %d %q %q", code, out, errOut)
	}
	code, _, errOut = c.run("", "--token-file", c.tokenFile, "--url", c.url+",127.0.0.1:1", "sandboxes", "wait", id, "--tenant", "root")
	if code != ExitFailure || !strings.Contains(errOut, `"127.0.0.1:1" has no scheme`) {
		t.Errorf("a bad second URL: exit %d %q", code, errOut)
	}
}

// TestWaitStoppedUnreachable: a wait whose reconnecting gave up names the sandbox, says it keeps
// running and gives the command that waits on it, as an interruption does.
func TestWaitStoppedUnreachable(t *testing.T) {
	cmd := &cobra.Command{}
	cmd.SetContext(context.Background())
	lost := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	err := waitStopped(cmd, nil, context.Background(), "acme", "sbx_1", fmt.Errorf("sandboxes.wait: %w", lost), 0)
	want := "the control plane could not be reached for 1m0s: sandboxes.wait: dial tcp: connection refused; sandbox sbx_1 keeps running (cubefleet sandboxes wait sbx_1 --tenant acme, or cubefleet sandboxes delete sbx_1 --tenant acme)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	other := errors.New("sandboxes.wait: PERMISSION_DENIED")
	if err := waitStopped(cmd, nil, context.Background(), "acme", "sbx_1", other, 0); err != other {
		t.Errorf("an answer that is no lost connection: %v, want it as it is", err)
	}
}
