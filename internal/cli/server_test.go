package cli

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestServerSIGHUP runs the built binary's `server --dev` as a child process and sends it
// SIGHUP: with or without --scheduler-config it logs what the signal did and keeps answering
// /readyz.
func TestServerSIGHUP(t *testing.T) {
	bin := buildCubefleet(t)
	tests := []struct {
		name    string
		config  string // --scheduler-config's content; "" leaves the flag out
		wantLog string
	}{
		{"no scheduler config", "", "SIGHUP: nothing to reload (no --scheduler-config)"},
		{"scheduler config", "scheduler:\n  profile: binpack_utilization\n", "scheduler configuration reloaded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			listen := freeLoopback(t)
			args := []string{"server", "--dev", "--listen", listen, "--data-dir", filepath.Join(dir, "data"), "--drift-every", "-1s"}
			if tt.config != "" {
				file := filepath.Join(dir, "cubemaster.yaml")
				if err := os.WriteFile(file, []byte(tt.config), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--scheduler-config", file)
			}
			cmd := exec.Command(bin, args...)
			cmd.Dir = dir
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
			logs := &testkit.SyncBuffer{}
			cmd.Stdout, cmd.Stderr = logs, logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-done
			})
			waitLog := func(want string) {
				t.Helper()
				deadline := time.Now().Add(60 * time.Second)
				for !strings.Contains(logs.String(), want) {
					select {
					case err := <-done:
						done <- err
						t.Fatalf("the server exited (%v) before logging %q\n%s", err, want, logs.String())
					case <-time.After(20 * time.Millisecond):
					}
					if time.Now().After(deadline) {
						t.Fatalf("no %q in the server's output\n%s", want, logs.String())
					}
				}
			}
			waitLog("listening on")
			if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			waitLog(tt.wantLog)
			resp, err := http.Get("http://" + listen + "/readyz")
			if err != nil {
				t.Fatalf("GET /readyz after SIGHUP: %v\n%s", err, logs.String())
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /readyz after SIGHUP: %s", resp.Status)
			}
			if n := strings.Count(logs.String(), tt.wantLog); n != 1 {
				t.Errorf("%q logged %d times, want once\n%s", tt.wantLog, n, logs.String())
			}
		})
	}
}

// TestServerHelpPrivateWebhookTargets: the help of --allow-private-webhook-targets says what
// the flag allows (loopback and private addresses) and what stays refused with it.
func TestServerHelpPrivateWebhookTargets(t *testing.T) {
	code, out, _ := runOffline("server", "--help")
	if code != ExitOK {
		t.Fatalf("server --help: exit %d", code)
	}
	usage := newServerCmd(IO{}).Flags().Lookup("allow-private-webhook-targets").Usage
	if !strings.Contains(out, usage) {
		t.Fatalf("server --help lacks the flag's usage %q", usage)
	}
	for _, c := range []struct {
		text string
		want bool
	}{
		{"loopback and private", true},
		{"link-local, cloud metadata, unspecified and reserved ones stay refused", true},
		{"link-local and other non-public addresses", false},
	} {
		if strings.Contains(usage, c.text) != c.want {
			t.Errorf("--allow-private-webhook-targets help %q: contains %q = %v, want %v", usage, c.text, !c.want, c.want)
		}
	}
}

// TestWebhooksCreateHelpListsEveryType: `webhooks create --help` names every event type a
// subscription may name (the server's table) and the families' wildcards.
func TestWebhooksCreateHelpListsEveryType(t *testing.T) {
	code, out, _ := runOffline("webhooks", "create", "--help")
	if code != ExitOK {
		t.Fatalf("webhooks create --help: exit %d", code)
	}
	for typ := range controlplane.EventTypes() {
		if !strings.Contains(out, typ) {
			t.Errorf("webhooks create --help does not name %s", typ)
		}
	}
	for _, w := range []string{"fleet.*", "node.* (root)", "sandbox.*", "sandbox.started", "fleet.applied"} {
		if !strings.Contains(out, w) {
			t.Errorf("webhooks create --help does not name %s", w)
		}
	}
}
