package fleetssh_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/fleetssh"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestRun runs a command on Debian's sshd on loopback with its host key known; an unknown or
// changed host key is refused before anything runs.
func TestRun(t *testing.T) {
	s := testkit.StartSSHD(t)
	stand := "#!/bin/sh\necho \"wg $*\"\n"
	if err := os.WriteFile(filepath.Join(s.Bin, "wg"), []byte(stand), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := fleetssh.NewDialer(s.KeyFile, s.KnownHosts, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.Run(ctx, "127.0.0.1", s.Port, s.User, "wg show wg0 allowed-ips")
	if err != nil || out != "wg show wg0 allowed-ips\n" {
		t.Fatalf("run: %q %v", out, err)
	}
	if _, err := d.Run(ctx, "127.0.0.1", s.Port, s.User, "exit 3"); err == nil || !strings.Contains(err.Error(), "exit") {
		t.Errorf("a failing command: %v", err)
	}

	s.WriteKnownHost(t, s.OtherHostKey(t))
	d, err = fleetssh.NewDialer(s.KeyFile, s.KnownHosts, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var he *fleetssh.HostKeyError
	if _, err := d.Run(ctx, "127.0.0.1", s.Port, s.User, "true"); !errors.As(err, &he) || !he.Changed || !strings.Contains(err.Error(), "changed") {
		t.Errorf("a changed host key: %v", err)
	}
	if err := os.WriteFile(s.KnownHosts, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d, _ = fleetssh.NewDialer(s.KeyFile, s.KnownHosts, 5*time.Second)
	if _, err := d.Run(ctx, "127.0.0.1", s.Port, s.User, "true"); !errors.As(err, &he) || he.Changed {
		t.Errorf("an unknown host key: %v", err)
	}
	if _, err := fleetssh.NewDialer(filepath.Join(t.TempDir(), "none"), s.KnownHosts, time.Second); err == nil {
		t.Error("a missing key file was accepted")
	}
}
