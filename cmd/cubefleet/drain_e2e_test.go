package main_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// TestDrainWaitBinary drives `cubefleet nodes drain --wait` as a process against a `cubefleet
// server --dev` process, for a stock Cubelet reporting from loopback: progress lines as its
// count falls, exit 0 once it reports none; then a real SIGINT (Ctrl-C) while waiting exits 1
// and leaves the node draining.
func TestDrainWaitBinary(t *testing.T) {
	for name, dsn := range databases(t) {
		t.Run(name, func(t *testing.T) {
			c := startServerB(t, dsn(t), "--node-agent-allow-unauthenticated", "127.0.0.0/8")
			regBody, err := os.ReadFile(filepath.Join("..", "..", "internal", "nodes", "nodetest", "testdata", "register.json"))
			if err != nil {
				t.Fatal(err)
			}
			statusBody, err := os.ReadFile(filepath.Join("..", "..", "internal", "nodes", "nodetest", "testdata", "status.json"))
			if err != nil {
				t.Fatal(err)
			}
			post := func(path string, body []byte) {
				t.Helper()
				resp, err := http.Post(c.url+path, "application/json", bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("POST %s: %d", path, resp.StatusCode)
				}
			}
			report := func(mvm int) {
				t.Helper()
				post(nodeapi.StatusPath("10.0.0.7"),
					bytes.Replace(statusBody, []byte(`"mvm_num": 4`), []byte(fmt.Sprintf(`"mvm_num": %d`, mvm)), 1))
			}
			post(nodeapi.PathRegister, regBody)
			report(2)

			// drain starts `cubefleet nodes drain 10.0.0.7 --wait` and returns it with a
			// reader of its standard error.
			drain := func() (*exec.Cmd, *bufio.Reader, *bytes.Buffer) {
				t.Helper()
				cmd := exec.Command(c.bin, "--url", c.url, "--token-file", filepath.Join(c.dataDir, "admin.token"),
					"nodes", "drain", "10.0.0.7", "--reason", "e2e", "--wait", "--poll", "200ms", "--timeout", "1m")
				cmd.Env = append(os.Environ(), "NO_COLOR=1", "XDG_CONFIG_HOME="+t.TempDir())
				var out bytes.Buffer
				cmd.Stdout = &out
				stderr, err := cmd.StderrPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cmd.Process.Kill() })
				return cmd, bufio.NewReader(stderr), &out
			}
			line := func(r *bufio.Reader) string {
				t.Helper()
				got := make(chan string, 1)
				go func() { s, _ := r.ReadString('\n'); got <- s }()
				select {
				case s := <-got:
					return s
				case <-time.After(20 * time.Second):
					t.Fatal("no line on stderr")
				}
				return ""
			}
			exitCode := func(cmd *exec.Cmd) int {
				t.Helper()
				err := cmd.Wait()
				if ee := new(exec.ExitError); errors.As(err, &ee) {
					return ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				return 0
			}

			cmd, stderr, stdout := drain()
			if s := line(stderr); !strings.HasPrefix(s, "10.0.0.7: 2 sandboxes left (") {
				t.Fatalf("first progress line %q", s)
			}
			report(1)
			if s := line(stderr); !strings.HasPrefix(s, "10.0.0.7: 1 sandbox left (") {
				t.Fatalf("second progress line %q", s)
			}
			report(0)
			rest := line(stderr)
			if code := exitCode(cmd); code != 0 || rest != "" || !strings.HasPrefix(stdout.String(), "Drained node 10.0.0.7: cordoned, no sandboxes left (") {
				t.Fatalf("drained: exit %d, stderr %q, stdout %q", code, rest, stdout.String())
			}
			if table := c.ok("nodes", "list"); !strings.Contains(table, "Ready,Drained") {
				t.Errorf("nodes list after the drain:\n%s", table)
			}

			// Ctrl-C while waiting.
			c.ok("nodes", "uncordon", "10.0.0.7")
			report(3)
			cmd, stderr, _ = drain()
			if s := line(stderr); !strings.HasPrefix(s, "10.0.0.7: 3 sandboxes left (") {
				t.Fatalf("progress line %q", s)
			}
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			msg := line(stderr)
			if code := exitCode(cmd); code != 1 || !strings.HasPrefix(msg, "error: interrupted: node 10.0.0.7 is not drained yet: it still runs 3 sandboxes") {
				t.Fatalf("interrupted: exit %d, stderr %q", code, msg)
			}
			if table := c.ok("nodes", "list"); !strings.Contains(table, "Ready,Draining") {
				t.Errorf("nodes list after the interruption:\n%s", table)
			}
		})
	}
}
