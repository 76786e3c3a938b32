package main_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// binary builds cubefleet once per test binary (CGO_ENABLED=0).
var binary = func() func(t testing.TB) string {
	var path string
	var err error
	built := false
	return func(t testing.TB) string {
		t.Helper()
		if !built {
			built = true
			dir, derr := os.MkdirTemp("", "cubefleet-e2e-")
			if derr != nil {
				t.Fatal(derr)
			}
			path = filepath.Join(dir, "cubefleet")
			// Static, as it ships: the microvm runtime boots this very binary as its guests' init.
			build := exec.Command("go", "build", "-o", path, ".")
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			out, berr := build.CombinedOutput()
			if berr != nil {
				err = fmt.Errorf("go build: %v: %s", berr, out)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		return path
	}
}()

// cluster is a running `cubefleet server --dev` child process.
type cluster struct {
	t       testing.TB
	bin     string
	url     string // https:// when caFile is set
	caFile  string // the CA of the server's --tls-cert, passed to the CLI as --ca-file; "" without TLS
	dataDir string
	pid     int
	logs    *testkit.SyncBuffer // the server's output
	stop    func()              // stops the server (also run at cleanup)
	crash   func()              // SIGKILLs the server: no shutdown, no last flush
	exit    int                 // the server's exit status, once stop returned
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startServer(t *testing.T, database string) *cluster { return startServerB(t, database) }

// startServerB starts `cubefleet server --dev` on database ("" for SQLite) on a free port, with
// extra flags, and waits until it is ready.
func startServerB(t testing.TB, database string, extra ...string) *cluster {
	t.Helper()
	return startServerCA(t, database, "", extra...)
}

// startServerCA is startServerB for a server whose extra flags include --tls-cert and
// --tls-key signed by the CA in caFile ("" for plain HTTP): its URL is https://, readiness is
// polled trusting caFile, and run passes --ca-file.
func startServerCA(t testing.TB, database, caFile string, extra ...string) *cluster {
	t.Helper()
	return startServerIn(t, filepath.Join(t.TempDir(), "data"), database, caFile, extra...)
}

// startServerIn is startServerCA with the data directory dataDir (a restart passes the same one).
func startServerIn(t testing.TB, dataDir, database, caFile string, extra ...string) *cluster {
	t.Helper()
	return startServerAt(t, freeAddr(t), dataDir, database, caFile, extra...)
}

// startServerAt is startServerIn listening on addr (a restart passes the address it had).
func startServerAt(t testing.TB, addr, dataDir, database, caFile string, extra ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: binary(t), dataDir: dataDir, caFile: caFile}
	c.url = "http://" + addr
	hc := http.DefaultClient
	if caFile != "" {
		c.url = "https://" + addr
		pem, err := os.ReadFile(caFile)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		hc = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		defer hc.CloseIdleConnections()
	}
	args := []string{"server", "--dev", "--data-dir", c.dataDir, "--listen", addr, "--log-format", "json"}
	if database != "" {
		args = append(args, "--database", database)
	}
	args = append(args, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, c.bin, args...)
	logs := &testkit.SyncBuffer{}
	c.logs = logs
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.pid = cmd.Process.Pid
	c.crash = func() {
		cmd.Process.Kill()
		c.stop()
	}
	var once sync.Once
	c.stop = func() {
		once.Do(func() {
			cancel()
			err := cmd.Wait()
			c.exit = cmd.ProcessState.ExitCode()
			if err != nil && !errors.Is(err, context.Canceled) {
				if ee := new(exec.ExitError); !errors.As(err, &ee) || ee.ExitCode() != 0 {
					t.Logf("server exit: %v\n%s", err, logs.String())
				}
			}
		})
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	t.Cleanup(c.stop)
	testkit.WaitFor(t, 30*time.Second, "the server to answer GET /readyz with 200", func() bool {
		resp, err := hc.Get(c.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return c
}

// run runs the CLI against the server with the admin key (or tokenFile) and returns stdout,
// stderr and the exit code.
func (c *cluster) run(tokenFile, stdin string, args ...string) (string, string, int) {
	c.t.Helper()
	if tokenFile == "" {
		tokenFile = filepath.Join(c.dataDir, "admin.token")
	}
	global := []string{"--url", c.url, "--token-file", tokenFile}
	if c.caFile != "" {
		global = append(global, "--ca-file", c.caFile)
	}
	cmd := exec.Command(c.bin, append(global, args...)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "XDG_CONFIG_HOME="+c.t.TempDir())
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee := new(exec.ExitError); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func (c *cluster) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run("", "", args...)
	if code != 0 {
		c.t.Fatalf("cubefleet %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func databases(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"sqlite":   func(*testing.T) string { return "" },
		"postgres": func(t *testing.T) string { return storetest.PostgresURL(t) },
	}
}

// TestExportEditPlanApply drives the built binary: apply the example, export it, edit the export,
// plan and apply the edit, and plan again to see nothing left to do.
func TestExportEditPlanApply(t *testing.T) {
	for name, dsn := range databases(t) {
		t.Run(name, func(t *testing.T) {
			c := startServer(t, dsn(t))
			for _, s := range []string{"hetzner", "pip-index"} {
				if out, errOut, code := c.run("", "value-of-"+s, "secrets", "create", s, "--tenant", "root"); code != 0 {
					t.Fatalf("secrets create: %d %s %s", code, out, errOut)
				}
			}
			c.ok("fleet", "apply", "../../examples/fleet.json", "--tenant", "root", "--yes")
			exported := filepath.Join(t.TempDir(), "fleet.json")
			c.ok("fleet", "export", "--tenant", "root", "--out", exported)
			if _, errOut, code := c.run("", "", "fleet", "export", "--tenant", "root", "--out", exported); code != 1 || !strings.Contains(errOut, "never overwrites") {
				t.Fatalf("export over an existing file: exit %d, %s", code, errOut)
			}
			data, err := os.ReadFile(exported)
			if err != nil {
				t.Fatal(err)
			}
			edited := strings.Replace(string(data), `"vcpu": 2`, `"vcpu": 3`, 1)
			if edited == string(data) {
				t.Fatalf("export has no flavor vcpu to edit:\n%s", data)
			}
			if err := os.WriteFile(exported, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			plan := c.ok("fleet", "plan", exported, "--tenant", "root")
			if !strings.HasPrefix(plan, "~ flavor vps-fra/g1.small (vcpu)\n    vcpu: 2 -> 3\n0 to create, 1 to update, 0 to delete, 7 unchanged.\n\nTo apply exactly this plan (1 call):\n  cubefleet fleet apply "+exported+" --tenant root") {
				t.Fatalf("plan of the edit:\n%s", plan)
			}
			if _, _, code := c.run("", "", "fleet", "plan", exported, "--tenant", "root", "--fail-on-drift"); code != 1 {
				t.Fatalf("plan --fail-on-drift with a change: exit %d, want 1", code)
			}
			c.ok("fleet", "apply", exported, "--tenant", "root", "--yes")
			if again := c.ok("fleet", "plan", exported, "--tenant", "root", "--fail-on-drift"); !strings.HasPrefix(again, "0 to create, 0 to update, 0 to delete, 8 unchanged.\n\nNothing to apply.") {
				t.Fatalf("plan after apply:\n%s", again)
			}
		})
	}
}

// TestPlanHashAcrossProcessesAndKeys plans in separate processes under two keys and applies
// the reviewed hash with the second key.
func TestPlanHashAcrossProcessesAndKeys(t *testing.T) {
	c := startServer(t, "")
	for _, s := range []string{"hetzner", "pip-index"} {
		c.run("", "v", "secrets", "create", s, "--tenant", "root")
	}
	args := []string{"keys", "create", "--tenant", "root", "--name", "ci", "--grant", "compute:fleet:admin@compute-fleet/global"}
	for _, kind := range []string{"sites", "providerAccounts", "pools", "ownerQuotas", "offers", "flavors", "sandboxTemplates"} {
		args = append(args, "--grant", "compute:"+kind+":*@tenant/root")
	}
	token := strings.TrimSpace(c.ok(args...))
	ciToken := filepath.Join(t.TempDir(), "ci.token")
	if err := os.WriteFile(ciToken, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hash := func(tokenFile string) string {
		out, errOut, code := c.run(tokenFile, "", "fleet", "plan", "../../examples/fleet.json", "--tenant", "root", "--output", "json")
		if code != 0 {
			t.Fatalf("plan: %d %s", code, errOut)
		}
		var p struct{ PlanHash string }
		if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.PlanHash) != 64 {
			t.Fatalf("plan output %q: %v", out, err)
		}
		return p.PlanHash
	}
	reviewed := hash("")
	if h := hash(ciToken); h != reviewed {
		t.Fatalf("planHash under the CI key %s, under the admin key %s", h, reviewed)
	}
	out, errOut, code := c.run(ciToken, "", "fleet", "apply", "../../examples/fleet.json", "--tenant", "root", "--plan-hash", reviewed)
	if code != 0 || !strings.Contains(out, "Applied 8 calls") {
		t.Fatalf("apply of the reviewed plan with the CI key: exit %d\n%s%s", code, out, errOut)
	}
	// The same hash is now stale.
	_, errOut, code = c.run(ciToken, "", "fleet", "apply", "../../examples/fleet.json", "--tenant", "root", "--plan-hash", reviewed)
	if code != 1 || !strings.Contains(errOut, "CONFIG_DRIFT") {
		t.Fatalf("apply of a stale hash: exit %d, %s", code, errOut)
	}
}
