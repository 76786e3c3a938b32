package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/cubefleet/cubefleet/api"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/server"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// nodeBody is a Cubelet-shaped register body for node id (the registry's golden body).
func nodeBody(t *testing.T, name, id string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testkit.PackageDir(), "..", "nodes", "nodetest", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(b, []byte("10.0.0.7"), []byte(id))
}

// post sends a node-agent call to the test server.
func (c *cliEnv) post(path, token string, body []byte) (int, []byte) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.url+path, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func TestNodesCommands(t *testing.T) {
	eachDatabase(t, func(t *testing.T, c *cliEnv) {
		var site, pool struct{ ID string }
		json.Unmarshal([]byte(c.admin("api", "compute.sites.create", `{"tenantId":"root","kind":"shared","region":"eu-central"}`)), &site)
		json.Unmarshal([]byte(c.admin("api", "compute.pools.create", `{"tenantId":"root","siteId":"`+site.ID+`","class":"vps-host"}`)), &pool)
		var b strings.Builder
		record := func(args ...string) string {
			t.Helper()
			code, out, errOut := c.run("", withToken(args, c.tokenFile)...)
			fmt.Fprintf(&b, "$ cubefleet %s\nexit %d\n", strings.Join(args, " "), code)
			if out != "" {
				fmt.Fprintf(&b, "stdout:\n%s", out)
			}
			if errOut != "" {
				fmt.Fprintf(&b, "stderr:\n%s", errOut)
			}
			b.WriteString("\n")
			return out
		}
		record("nodes", "list")
		token := strings.TrimSpace(record("nodes", "join-token", "create", "--pool", pool.ID, "--uses", "2", "--ttl", "30m", "--any-ip"))
		if !strings.HasPrefix(token, "cfj_") {
			t.Fatalf("join token %q", token)
		}
		creds := map[string]string{}
		for _, id := range []string{"10.0.0.7", "10.0.0.8"} {
			code, out := c.post(nodeapi.PathRegister, token, nodeBody(t, "register.json", id))
			var reg nodeapi.RegisterResponse
			json.Unmarshal(out, &reg)
			if code != 200 || reg.NodeCredential == "" {
				t.Fatalf("join %s: %d %s", id, code, out)
			}
			creds[id] = reg.NodeCredential
		}
		if code, out := c.post(nodeapi.StatusPath("10.0.0.7"), creds["10.0.0.7"], nodeBody(t, "status.json", "10.0.0.7")); code != 200 {
			t.Fatalf("status: %d %s", code, out)
		}
		record("nodes", "list")
		record("nodes", "get", "10.0.0.7")
		record("nodes", "cordon", "10.0.0.7", "--detail", "kernel update")
		record("nodes", "cordon", "10.0.0.7", "--detail", "kernel update") // no change
		record("nodes", "cordon", "10.0.0.7", "--detail", "kernel update", "-o", "json")
		record("nodes", "drain", "10.0.0.7", "--reason", "new kernel")
		record("nodes", "drain", "10.0.0.8")
		record("nodes", "list")
		record("nodes", "get", "10.0.0.7")
		record("nodes", "list", "--state", "ready")
		record("nodes", "list", "--state", "drained")
		record("nodes", "list", "--state", "Draining")
		record("nodes", "drain", "10.0.0.7", "--timeout", "1m")
		record("nodes", "drain", "10.0.0.7", "--wait", "--poll", "1ms")
		record("nodes", "drain", "10.0.0.7", "--deadline", "500ms")
		record("nodes", "drain", "10.0.0.7", "--deadline", "8d")
		record("nodes", "label", "10.0.0.7", "rack=r12", "kubernetes.io/os-")
		record("nodes", "label", "10.0.0.7", "rack=r12", "kubernetes.io/os-")
		record("nodes", "list", "--state", "Ready")
		record("nodes", "delete", "10.0.0.7")
		record("nodes", "delete", "10.0.0.7", "--force")
		record("nodes", "uncordon", "10.0.0.8")
		record("nodes", "uncordon", "10.0.0.8") // no change
		record("nodes", "get", "10.0.0.7")
		record("nodes", "label", "10.0.0.8", "oops")
		record("nodes", "label", "10.0.0.8", "missing-")
		record("nodes", "label", "10.0.0.8", "-k=v")
		record("nodes", "label", "10.0.0.8", "--", "-k=v")
		record("nodes", "list", "--state", "Sleeping")
		record("nodes", "list", "--state", "NOTREADY")
		record("nodes", "list", "--pool", "nosuch")
		record("nodes", "list", "--pool", pool.ID)
		record("nodes", "join-token", "create", "--pool", "no-such-pool")
		record("nodes", "join-token", "create", "--pool", pool.ID, "--ip", "10.0.0.1", "--any-ip")
		testkit.Golden(t, "nodes.golden", []byte(c.normalize(strings.ReplaceAll(b.String(), token, "<join token>"))))

		// nodes list -o json is the API's output.
		var list struct {
			Items []struct {
				ID    string `json:"id"`
				State string `json:"state"`
			} `json:"items"`
			Now int64 `json:"now"`
		}
		if err := json.Unmarshal([]byte(c.admin("nodes", "list", "-o", "json")), &list); err != nil || len(list.Items) != 1 || list.Items[0].ID != "10.0.0.8" {
			t.Errorf("nodes list -o json: %+v %v", list, err)
		}
		// nodes label -o json is the API's output, with whether anything changed.
		var labelled struct {
			ID      string `json:"id"`
			Changed *bool  `json:"changed"`
		}
		if err := json.Unmarshal([]byte(c.admin("nodes", "label", "10.0.0.8", "missing-", "-o", "json")), &labelled); err != nil ||
			labelled.ID != "10.0.0.8" || labelled.Changed == nil || *labelled.Changed {
			t.Errorf("nodes label -o json: %+v %v", labelled, err)
		}
		// --deadline sets the drain's deadline that long from the drain.
		var drained struct {
			Drain struct {
				Deadline int64 `json:"deadline"`
			} `json:"drain"`
			Now int64 `json:"now"`
		}
		err := json.Unmarshal([]byte(c.admin("nodes", "drain", "10.0.0.8", "--deadline", "10m", "-o", "json")), &drained)
		if d := drained.Drain.Deadline - drained.Now; err != nil || d > (10*time.Minute).Milliseconds() || d < (10*time.Minute-5*time.Second).Milliseconds() {
			t.Errorf("nodes drain --deadline 10m -o json: %+v %v, want a deadline 10 minutes after the drain", drained, err)
		}
		// Events reach the log within a second.
		var eventsOut string
		testkit.WaitFor(t, 5*time.Second, "a node.deleted event", func() bool {
			eventsOut = c.admin("nodes", "events", "10.0.0.7")
			return strings.Contains(eventsOut, "node.deleted")
		})
		if !strings.Contains(eventsOut, "node.joined") || !strings.Contains(eventsOut, "node.cordoned") || !strings.Contains(eventsOut, "node.draining") {
			t.Errorf("events:\n%s", eventsOut)
		}
	})
}

// startDrain runs `cubefleet nodes drain args...` as the administrator in the background.
func (c *cliEnv) startDrain(args ...string) *bgRun {
	return start(c.t, func(k string) string { return c.env[k] }, append([]string{"nodes", "drain"}, append(args, "--token-file", c.tokenFile)...)...)
}

// TestNodesDrainWait runs `cubefleet nodes drain --wait` against a real server while a joined
// node reports 4, 2, then 0 sandboxes: one progress line per count, exit 0 once drained. Then
// the timeout (DEADLINE_EXCEEDED, exit 1), an interruption, an uncordon while waiting, and
// --output json.
func TestNodesDrainWait(t *testing.T) {
	eachDatabase(t, func(t *testing.T, c *cliEnv) {
		var site, pool struct{ ID string }
		json.Unmarshal([]byte(c.admin("api", "compute.sites.create", `{"tenantId":"root","kind":"shared","region":"eu-central"}`)), &site)
		json.Unmarshal([]byte(c.admin("api", "compute.pools.create", `{"tenantId":"root","siteId":"`+site.ID+`","class":"vps-host"}`)), &pool)
		token := strings.TrimSpace(c.admin("nodes", "join-token", "create", "--pool", pool.ID, "--any-ip"))
		code, out := c.post(nodeapi.PathRegister, token, nodeBody(t, "register.json", "10.0.0.7"))
		var reg nodeapi.RegisterResponse
		json.Unmarshal(out, &reg)
		if code != 200 || reg.NodeCredential == "" {
			t.Fatalf("join: %d %s", code, out)
		}
		report := func(mvm int) {
			t.Helper()
			body := bytes.Replace(nodeBody(t, "status.json", "10.0.0.7"), []byte(`"mvm_num": 4`), []byte(fmt.Sprintf(`"mvm_num": %d`, mvm)), 1)
			if code, out := c.post(nodeapi.StatusPath("10.0.0.7"), reg.NodeCredential, body); code != 200 {
				t.Fatalf("status: %d %s", code, out)
			}
		}
		report(4)

		// 4, 2, 0: drained.
		d := c.startDrain("10.0.0.7", "--reason", "retire", "--wait", "--poll", "100ms", "--timeout", "1m")
		d.waitStderr(t, "10.0.0.7: 4 sandboxes left (0s)\n")
		report(2)
		d.waitStderr(t, "10.0.0.7: 2 sandboxes left (0s)\n")
		report(0)
		if code := d.exit(t); code != ExitOK {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, d.out.String(), d.err.String())
		}
		if got, want := d.err.String(), "10.0.0.7: 4 sandboxes left (0s)\n10.0.0.7: 2 sandboxes left (0s)\n"; got != want {
			t.Errorf("progress:\n%s\nwant one line per count:\n%s", got, want)
		}
		if got, want := d.out.String(), "Drained node 10.0.0.7: cordoned, no sandboxes left (0s after it was asked).\n"; got != want {
			t.Errorf("stdout %q, want %q", got, want)
		}
		// Already drained, --output json: the node at once, no progress.
		code, stdout, stderr := c.run("", "nodes", "drain", "10.0.0.7", "--wait", "-o", "json", "--token-file", c.tokenFile)
		var v api.NodeOutput
		if err := json.Unmarshal([]byte(stdout), &v); code != ExitOK || err != nil || stderr != "" || v.Drain == nil ||
			v.Drain.State != api.DrainDrained || v.Drain.Reason != "retire" || v.Drain.DrainedAt == 0 || !v.Cordoned {
			t.Errorf("drain --wait -o json of a drained node: exit %d, %v\nstdout:\n%s\nstderr:\n%s", code, err, stdout, stderr)
		}

		// The timeout: DEADLINE_EXCEEDED naming the node and the count.
		c.admin("nodes", "uncordon", "10.0.0.7")
		report(3)
		code, stdout, stderr = c.run("", "nodes", "drain", "10.0.0.7", "--wait", "--poll", "100ms", "--timeout", "500ms", "--token-file", c.tokenFile)
		if code != ExitFailure || stdout != "" ||
			stderr != "10.0.0.7: 3 sandboxes left (0s)\nerror: DEADLINE_EXCEEDED: node 10.0.0.7 is not drained after 500ms: it still runs 3 sandboxes; it stays cordoned and draining (run the command again to keep waiting; uncordon ends the drain)\n" {
			t.Errorf("timeout: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}

		// The timeout with --output json: the node as last read on stdout, the error on stderr.
		code, stdout, stderr = c.run("", "nodes", "drain", "10.0.0.7", "--wait", "--poll", "100ms", "--timeout", "300ms", "-o", "json", "--token-file", c.tokenFile)
		v = api.NodeOutput{}
		if err := json.Unmarshal([]byte(stdout), &v); code != ExitFailure || err != nil || v.ID != "10.0.0.7" || v.Drain == nil || v.Drain.SandboxesLeft != 3 ||
			!strings.Contains(stderr, "error: DEADLINE_EXCEEDED: node 10.0.0.7 is not drained after 300ms: it still runs 3 sandboxes") {
			t.Errorf("timeout -o json: exit %d, %v\nstdout:\n%s\nstderr:\n%s", code, err, stdout, stderr)
		}
		var failed struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal([]byte(stdout), &failed); failed.Error.Code != "DEADLINE_EXCEEDED" || !strings.HasPrefix(failed.Error.Message, "node 10.0.0.7 is not drained after 300ms") {
			t.Errorf("timeout -o json: the node's error member is %+v\n%s", failed.Error, stdout)
		}

		// Ctrl-C: exit 1, the node stays draining.
		d = c.startDrain("10.0.0.7", "--wait", "--poll", "100ms")
		d.waitStderr(t, "10.0.0.7: 3 sandboxes left")
		d.cancel()
		if code := d.exit(t); code != ExitFailure || !strings.Contains(d.err.String(), "error: interrupted: node 10.0.0.7 is not drained yet: it still runs 3 sandboxes") || d.out.String() != "" {
			t.Errorf("interrupted: exit %d\nstdout:\n%s\nstderr:\n%s", code, d.out.String(), d.err.String())
		}
		// The same with --output json: the node as last read on stdout.
		d = c.startDrain("10.0.0.7", "--wait", "--poll", "100ms", "-o", "json")
		d.waitStderr(t, "10.0.0.7: 3 sandboxes left")
		d.cancel()
		v = api.NodeOutput{}
		if code := d.exit(t); code != ExitFailure || json.Unmarshal([]byte(d.out.String()), &v) != nil || v.Drain == nil || v.Drain.SandboxesLeft != 3 ||
			!strings.Contains(d.err.String(), "error: interrupted: node 10.0.0.7 is not drained yet") {
			t.Errorf("interrupted -o json: exit %d\nstdout:\n%s\nstderr:\n%s", code, d.out.String(), d.err.String())
		}
		v = api.NodeOutput{}
		json.Unmarshal([]byte(c.admin("nodes", "get", "10.0.0.7", "-o", "json")), &v)
		if v.Drain == nil || v.Drain.State != api.DrainDraining || v.Drain.SandboxesLeft != 3 {
			t.Errorf("after the interruption: %+v", v.Drain)
		}

		// Uncordon while waiting ends the wait with CONFLICT.
		d = c.startDrain("10.0.0.7", "--wait", "--poll", "100ms")
		d.waitStderr(t, "10.0.0.7: 3 sandboxes left")
		c.admin("nodes", "uncordon", "10.0.0.7")
		if code := d.exit(t); code != ExitFailure || !strings.Contains(d.err.String(), "error: CONFLICT: node 10.0.0.7 is no longer draining") {
			t.Errorf("uncordoned while waiting: exit %d\nstderr:\n%s", code, d.err.String())
		}

		// Deleted while waiting: NOT_FOUND saying so, the node as last read on stdout.
		report(3)
		d = c.startDrain("10.0.0.7", "--wait", "--poll", "100ms", "-o", "json")
		d.waitStderr(t, "10.0.0.7: 3 sandboxes left")
		c.admin("nodes", "delete", "10.0.0.7", "--force")
		v = api.NodeOutput{}
		if code := d.exit(t); code != ExitFailure || json.Unmarshal([]byte(d.out.String()), &v) != nil || v.ID != "10.0.0.7" || v.Drain == nil ||
			!strings.Contains(d.err.String(), "error: NOT_FOUND: node 10.0.0.7 was deleted while this waited for its drain (it ran 3 sandboxes when last read)") {
			t.Errorf("deleted while waiting: exit %d\nstdout:\n%s\nstderr:\n%s", code, d.out.String(), d.err.String())
		}

		// An unknown node: nothing was read, nothing on stdout.
		code, stdout, stderr = c.run("", "nodes", "drain", "10.9.9.9", "--wait", "--token-file", c.tokenFile)
		if code != ExitFailure || stdout != "" || stderr != "error: NOT_FOUND: node 10.9.9.9 not found\n" {
			t.Errorf("unknown node: exit %d %s%s", code, stdout, stderr)
		}
	})
}

// registerBody is the registry's golden register body for node id, changed by edit.
func registerBody(t *testing.T, id string, edit func(body map[string]any)) []byte {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(nodeBody(t, "register.json", id), &body); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(body)
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withToken adds --token-file tokenFile to args, before a "--" (after which every argument
// is positional).
func withToken(args []string, tokenFile string) []string {
	i := slices.Index(args, "--")
	if i < 0 {
		i = len(args)
	}
	return slices.Concat(args[:i], []string{"--token-file", tokenFile}, args[i:])
}

// record runs the CLI as the administrator and appends the command line, its exit code,
// stdout and stderr to b, as the golden transcripts show them; it returns stdout.
func (c *cliEnv) record(b *strings.Builder, args ...string) string {
	c.t.Helper()
	code, out, errOut := c.run("", withToken(args, c.tokenFile)...)
	fmt.Fprintf(b, "$ cubefleet %s\nexit %d\n", safeText(strings.Join(args, " ")), code) // escaped as the CLI escapes
	if out != "" {
		fmt.Fprintf(b, "stdout:\n%s", out)
	}
	if errOut != "" {
		fmt.Fprintf(b, "stderr:\n%s", errOut)
	}
	b.WriteString("\n")
	return out
}

// allowLoopbackCubelets lets stock Cubelets (no credentials) register from 127.0.0.0/8.
func allowLoopbackCubelets(cfg *server.Config) {
	cfg.NodeAgentAllowUnauthenticated = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
}

// TestNodesHostileText: the server refuses control characters in what a node sends, and what
// it lets through (bidi controls in versions and a cordon detail) and ids a caller types are
// shown escaped, on one line, in every table and "key: value" line; JSON keeps them exact.
func TestNodesHostileText(t *testing.T) {
	const (
		version = "v1\u202eevil\u2066"
		detail  = "kernel \u202eupdate\u2069"
	)
	eachDatabase(t, func(t *testing.T, c *cliEnv) {
		var site, pool struct{ ID string }
		json.Unmarshal([]byte(c.admin("api", "compute.sites.create", `{"tenantId":"root","kind":"shared","region":"eu-central"}`)), &site)
		json.Unmarshal([]byte(c.admin("api", "compute.pools.create", `{"tenantId":"root","siteId":"`+site.ID+`","class":"vps-host"}`)), &pool)
		token := strings.TrimSpace(c.admin("nodes", "join-token", "create", "--pool", pool.ID, "--any-ip", "--uses", "2"))
		escapes := func(body map[string]any) { body["cluster_label"] = "x\u001b[31mRED\nFAKE 1.2.3.4 Ready" }
		if code, out := c.post(nodeapi.PathRegister, token, registerBody(t, "10.0.0.7", escapes)); code != 400 {
			t.Fatalf("join with escapes in cluster_label: %d %s, want 400", code, out)
		}
		bidi := func(body map[string]any) {
			body["versions"] = []any{map[string]any{"component": "cubelet", "version": version}}
		}
		if code, out := c.post(nodeapi.PathRegister, token, registerBody(t, "10.0.0.7", bidi)); code != 200 {
			t.Fatalf("join: %d %s", code, out)
		}
		c.admin("nodes", "cordon", "10.0.0.7", "--detail", detail)
		var b strings.Builder
		c.record(&b, "nodes", "list")
		c.record(&b, "nodes", "get", "10.0.0.7")
		testkit.WaitFor(t, 20*time.Second, "the node.cordoned event", func() bool {
			return strings.Contains(c.admin("nodes", "events", "10.0.0.7"), "node.cordoned")
		})
		c.record(&b, "nodes", "events", "10.0.0.7")
		c.record(&b, "nodes", "get", "10.0.0.9\x1b[2J\nFAKE") // the server's message quotes the id
		got := c.normalize(b.String())
		testkit.Golden(t, "nodes_hostile.golden", []byte(got))
		for _, bad := range []string{"\x1b", "\u202e", "\u2066", "\u2069", "\nFAKE"} {
			if strings.Contains(got, bad) {
				t.Errorf("the output holds %q raw:\n%s", bad, got)
			}
		}

		// JSON is exact.
		var v api.NodeOutput
		if err := json.Unmarshal([]byte(c.admin("nodes", "get", "10.0.0.7", "-o", "json")), &v); err != nil ||
			len(v.Versions) != 1 || v.Versions[0].Version != version || v.CordonDetail != detail {
			t.Errorf("nodes get -o json: %v %+v %q", err, v.Versions, v.CordonDetail)
		}
	}, allowLoopbackCubelets)
}

// TestNodesListOrder: the table lists IP-shaped node ids in numeric order (IPv4, then IPv6),
// then the other ids as text; --output json keeps the API's order (by id as text).
func TestNodesListOrder(t *testing.T) {
	c := mustServe(t, "")
	var site, pool struct{ ID string }
	json.Unmarshal([]byte(c.admin("api", "compute.sites.create", `{"tenantId":"root","kind":"shared","region":"eu-central"}`)), &site)
	json.Unmarshal([]byte(c.admin("api", "compute.pools.create", `{"tenantId":"root","siteId":"`+site.ID+`","class":"vps-host"}`)), &pool)
	token := strings.TrimSpace(c.admin("nodes", "join-token", "create", "--pool", pool.ID, "--any-ip", "--uses", "10"))
	for _, id := range []string{"cube-b", "127.0.0.200", "fd00::2", "127.0.0.50", "cube-a", "10.0.0.7", "fd00::10", "9.9.9.9"} {
		body := registerBody(t, id, func(body map[string]any) {
			delete(body, "labels")
			if _, err := netip.ParseAddr(id); err != nil {
				body["host_ip"] = "10.1.0.1" // a node id that is not an address needs one
			}
		})
		if code, out := c.post(nodeapi.PathRegister, token, body); code != 200 {
			t.Fatalf("join %s: %d %s", id, code, out)
		}
	}
	var b strings.Builder
	c.record(&b, "nodes", "list")
	testkit.Golden(t, "nodes_order.golden", []byte(c.normalize(b.String())))

	var list struct{ Items []struct{ ID string } }
	json.Unmarshal([]byte(c.admin("nodes", "list", "-o", "json")), &list)
	var ids []string
	for _, n := range list.Items {
		ids = append(ids, n.ID)
	}
	if got, want := strings.Join(ids, " "), "10.0.0.7 127.0.0.200 127.0.0.50 9.9.9.9 cube-a cube-b fd00::10 fd00::2"; got != want {
		t.Errorf("nodes list -o json: ids %s, want the API's order %s", got, want)
	}
}

// TestNodesEvents reads a node's events: by default the newest --limit (the notice saying older
// ones exist, olderExist in JSON); from a time or a cursor, forwards, with the notice naming the
// next --cursor, --since (an RFC 3339 time; the server's clock is fixed), and --output json
// with the API's nextCursor.
func TestNodesEvents(t *testing.T) {
	c := mustServe(t, "")
	var site, pool struct{ ID string }
	json.Unmarshal([]byte(c.admin("api", "compute.sites.create", `{"tenantId":"root","kind":"shared","region":"eu-central"}`)), &site)
	json.Unmarshal([]byte(c.admin("api", "compute.pools.create", `{"tenantId":"root","siteId":"`+site.ID+`","class":"vps-host"}`)), &pool)
	token := strings.TrimSpace(c.admin("nodes", "join-token", "create", "--pool", pool.ID, "--any-ip"))
	if code, out := c.post(nodeapi.PathRegister, token, registerBody(t, "10.0.0.7", nil)); code != 200 {
		t.Fatalf("join: %d %s", code, out)
	}
	c.admin("nodes", "cordon", "10.0.0.7", "--detail", "one")
	c.admin("nodes", "uncordon", "10.0.0.7")
	c.admin("nodes", "cordon", "10.0.0.7", "--detail", "two")
	var all struct {
		Items []struct{ ID string }
	}
	testkit.WaitFor(t, 20*time.Second, "four events", func() bool {
		json.Unmarshal([]byte(c.admin("nodes", "events", "10.0.0.7", "-o", "json")), &all)
		return len(all.Items) == 4
	})
	var b strings.Builder
	c.record(&b, "nodes", "events", "10.0.0.7")
	out := c.record(&b, "nodes", "events", "10.0.0.7", "--limit", "2") // the newest two
	if !strings.Contains(out, "node.uncordoned") || strings.Contains(out, "node.joined") || !strings.Contains(out, "older ones exist") {
		t.Errorf("the newest two events, with the notice:\n%s", out)
	}
	c.record(&b, "nodes", "events", "10.0.0.7", "--limit", "2", "-o", "json")
	c.record(&b, "nodes", "events", "10.0.0.7", "--limit", "1001")
	out = c.record(&b, "nodes", "events", "10.0.0.7", "--since", "2026-01-02T03:04:05Z", "--limit", "3")
	if !strings.Contains(out, "--cursor "+all.Items[2].ID) {
		t.Errorf("the notice does not name the cursor after the third event (%s):\n%s", all.Items[2].ID, out)
	}
	c.record(&b, "nodes", "events", "10.0.0.7", "--limit", "3", "--cursor", all.Items[2].ID)
	c.record(&b, "nodes", "events", "10.0.0.7", "--limit", "2", "--type", "node.cordoned")
	c.record(&b, "nodes", "events", "10.0.0.7", "--since", "2026-01-02T03:04:05Z", "--limit", "4")
	c.record(&b, "nodes", "events", "10.0.0.7", "--since", "2026-01-02T03:04:06Z")
	c.record(&b, "nodes", "events", "--since", "yesterday")
	c.record(&b, "nodes", "events", "10.0.0.7", "--limit", "1", "-o", "json")
	c.record(&b, "nodes", "events", "10.0.0.7", "--cursor", all.Items[2].ID, "-o", "json")
	testkit.Golden(t, "nodes_events.golden", []byte(c.normalize(b.String())))
}

// TestNodesGetCountsUnknownSandboxes: nodes get counts the sandboxes that were running when the
// node stopped reporting, as unknown beside running and pending, with their ids (golden file).
func TestNodesGetCountsUnknownSandboxes(t *testing.T) {
	out := api.NodeOutput{Node: api.Node{ID: "10.0.0.9", IP: "10.0.0.9", Agent: "cubefleet", State: "Down", Labels: map[string]string{},
		UnschedulableReasons: []string{"not ready: Down"}},
		Now: 1767323045000,
		Sandboxes: &api.NodeSandboxes{Running: 1, Pending: 0, Unknown: 2, RunningIDs: []string{"sbx_01M8TK4V643D95W8ABR6PCMRT1"},
			PendingIDs: []string{}, UnknownIDs: []string{"sbx_01M8TK4V643D95W8ABR6PCMRT2", "sbx_01M8TK4V643D95W8ABR6PCMRT3"}, WarmIdle: 1}}
	var b bytes.Buffer
	if err := printNode(&b, out); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "nodes_get_unknown.golden", b.Bytes())
}
