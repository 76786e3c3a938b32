package client_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/testkit"
)

// exampleProgram returns the Go program of docs/go-client.md: the first go block after the
// `<!-- example: fleetctl -->` marker.
func exampleProgram(t *testing.T, repo string) []byte {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repo, "docs", "go-client.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- example: fleetctl -->\n```go\n")
	prog, _, closed := strings.Cut(rest, "\n```\n")
	if !ok || !closed {
		t.Fatal("docs/go-client.md has no go block after <!-- example: fleetctl -->")
	}
	return []byte(prog + "\n")
}

// TestExternalModule builds docs/go-client.md's example as a module of its own (it requires
// github.com/cubefleet/cubefleet through a replace directive, so it can import only the public
// packages: a probe importing an internal package must fail to build) and runs it against a
// real `cubefleet server --dev` with a real agent on 127.0.0.11: it applies a fleet document,
// creates a key, runs a sandbox, reads its output and matches a RESOURCE_EXHAUSTED with
// errors.As.
func TestExternalModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cubefleet and an external module, and runs a server and an agent")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	// A sandbox's user must pass through every parent of its directory.
	for _, d := range []string{work, filepath.Dir(work)} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(work, "cubefleet")
	build(t, repo, "-o", bin, "./cmd/cubefleet")

	// The external module.
	mod := filepath.Join(work, "fleetctl")
	probe := filepath.Join(mod, "probe")
	if err := os.MkdirAll(probe, 0o755); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"go.mod":                          fmt.Appendf(nil, "module example.com/fleetctl\n\ngo 1.26\n\nrequire github.com/cubefleet/cubefleet v0.0.0\n\nreplace github.com/cubefleet/cubefleet => %s\n", repo),
		"go.sum":                          sum,
		"main.go":                         exampleProgram(t, repo),
		filepath.Join("probe", "main.go"): []byte("package main\n\nimport _ \"github.com/cubefleet/cubefleet/internal/iam\"\n\nfunc main() {}\n"),
	} {
		if err := os.WriteFile(filepath.Join(mod, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fleetctl := filepath.Join(work, "fleetctl-bin")
	build(t, mod, "-o", fleetctl, ".")
	out, err := goCommand(mod, "build", "-o", os.DevNull, "./probe").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "use of internal package") {
		t.Errorf("an external module built a program importing internal/iam (%v): %s", err, out)
	}

	// The control plane: API on 127.0.0.1, node routes on 127.0.0.2.
	port := freePort(t)
	data := filepath.Join(work, "data")
	server := exec.Command(bin, "server", "--dev", "--data-dir", data, "--listen", "127.0.0.1:"+port, "--internal-listen", "127.0.0.2:"+port)
	serverLog := &testkit.SyncBuffer{}
	server.Stdout, server.Stderr = serverLog, serverLog
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		server.Process.Kill()
		server.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", serverLog.String())
		}
	})
	url := "http://127.0.0.1:" + port
	testkit.WaitFor(t, 30*time.Second, "the control plane ready", func() bool {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	token, err := os.ReadFile(filepath.Join(data, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}

	// The program, then the agent once the program wrote the node's join token.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	joinFile := filepath.Join(work, "node.token")
	run := exec.CommandContext(ctx, fleetctl)
	run.Env = append(os.Environ(), "CUBEFLEET_URL="+url, "CUBEFLEET_TOKEN="+strings.TrimSpace(string(token)),
		"NODE_IP=127.0.0.11", "JOIN_TOKEN_FILE="+joinFile)
	var runOut bytes.Buffer
	run.Stdout, run.Stderr = &runOut, &runOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	testkit.WaitFor(t, time.Minute, "the program's join token", func() bool {
		_, err := os.Stat(joinFile)
		return err == nil
	})
	env := filepath.Join(work, "node.env")
	startAgent(t, repo, bin, env, port, joinFile, work)

	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	got := runOut.String()
	if err != nil {
		t.Fatalf("the example program: %v\n%s", err, got)
	}
	t.Logf("the example program printed:\n%s", got)
	for _, want := range []string{"applied ", "sandbox sbx_", " exited: hello from a sandbox\n", "refused as expected: RESOURCE_EXHAUSTED (retry after 5s)\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("the example's output lacks %q:\n%s", want, got)
		}
	}
}

// startAgent writes the node's env file (docs/agent.md's two-node demo, one node) and runs
// `cubefleet agent run` until the test ends, then `agent down` (the agent and its sandboxes).
func startAgent(t *testing.T, repo, bin, env, port, joinFile, work string) {
	t.Helper()
	base, err := os.ReadFile(filepath.Join(repo, "examples", "agent.env"))
	if err != nil {
		t.Fatal(err)
	}
	settings := []string{
		"CUBE_SANDBOX_NODE_IP=127.0.0.11",
		"ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR=127.0.0.2:" + port,
		"CUBE_S3_ENDPOINT=http://127.0.0.1:" + port,
		"CUBE_S3_ACCESS_KEY_ID=demo",
		"CUBE_S3_SECRET_ACCESS_KEY=demo",
		"CUBEFLEET_ALLOW_LOOPBACK=1",
		"CUBEFLEET_RUNTIME=process",
		"CUBEFLEET_AGENT_STATE_DIR=" + filepath.Join(work, "state"),
		"CUBEFLEET_SANDBOX_DIR=" + filepath.Join(work, "sandboxes"),
		"CUBEFLEET_JOIN_TOKEN_FILE=" + joinFile,
	}
	if os.Geteuid() != 0 {
		settings = append(settings, "CUBEFLEET_SANDBOX_ALLOW_OWN_USER=1")
	}
	file := append(base, []byte("\n"+strings.Join(settings, "\n")+"\n")...)
	if err := os.WriteFile(env, file, 0o600); err != nil {
		t.Fatal(err)
	}
	agent := exec.Command(bin, "agent", "run", "--env-file", env)
	agentLog := &testkit.SyncBuffer{}
	agent.Stdout, agent.Stderr = agentLog, agentLog
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(bin, "agent", "down", "--env-file", env).CombinedOutput(); err != nil {
			t.Errorf("agent down: %v\n%s", err, out)
			agent.Process.Kill()
		}
		agent.Wait()
		if t.Failed() {
			t.Logf("agent log:\n%s", agentLog.String())
		}
	})
}

// build runs go build args in dir, failing the test with its output.
func build(t *testing.T, dir string, args ...string) {
	t.Helper()
	if out, err := goCommand(dir, append([]string{"build"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("go build %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
}

// goCommand is the go tool in dir, outside any workspace.
func goCommand(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	return cmd
}

// freePort returns a TCP port free on 127.0.0.1 (and so, most likely, on 127.0.0.2) now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
