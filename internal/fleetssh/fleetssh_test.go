package fleetssh_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
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

// TestRunVia reaches a Cube's sshd on 127.0.0.2 through a jump host on 127.0.0.1, both host
// keys checked: a changed key of the Cube fails it, and a jump host that forwards nothing
// says which hop failed.
func TestRunVia(t *testing.T) {
	jump := testkit.StartSSHDWith(t, testkit.SSHDOptions{Forwarding: true})
	cube := testkit.StartSSHDWith(t, testkit.SSHDOptions{Addr: "127.0.0.2", Like: jump})
	ctx := context.Background()
	d, err := fleetssh.NewDialer(jump.KeyFile, jump.KnownHosts, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	j := fleetssh.Host{Host: "127.0.0.1", Port: jump.Port, User: jump.User}
	c := fleetssh.Host{Host: "127.0.0.2", Port: cube.Port, User: cube.User}
	if out, err := d.RunVia(ctx, j, c, "echo on $SSH_CONNECTION"); err != nil || !strings.Contains(out, "127.0.0.2 "+strconv.Itoa(cube.Port)) {
		t.Fatalf("through the jump host: %q %v", out, err)
	}
	cube.AddKnownHost(t, cube.OtherHostKey(t))
	d, _ = fleetssh.NewDialer(jump.KeyFile, jump.KnownHosts, 5*time.Second)
	var he *fleetssh.HostKeyError
	if _, err := d.RunVia(ctx, j, c, "true"); !errors.As(err, &he) || !he.Changed || he.Host != c.Host+":"+strconv.Itoa(c.Port) {
		t.Errorf("a changed host key of the Cube: %v", err)
	}
	cube.AddKnownHost(t, cube.HostKey())
	closed := testkit.StartSSHDWith(t, testkit.SSHDOptions{Addr: "127.0.0.3", Like: jump})
	d, _ = fleetssh.NewDialer(jump.KeyFile, jump.KnownHosts, 5*time.Second)
	if _, err := d.RunVia(ctx, fleetssh.Host{Host: "127.0.0.3", Port: closed.Port, User: closed.User}, c, "true"); err == nil || !strings.Contains(err.Error(), "through the jump host") {
		t.Errorf("a jump host without forwarding: %v", err)
	}
}
