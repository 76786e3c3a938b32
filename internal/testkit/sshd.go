package testkit

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// SSHD is Debian's openssh-server run by a test on 127.0.0.1 with its own host key: Port is
// its port, User the account it lets in (the test's), KeyFile the client's private key it
// accepts, KnownHosts a known_hosts file holding its host key, Bin a directory first on the
// PATH of its sessions (put stand-ins such as `wg` there).
type SSHD struct {
	Port       int
	User       string
	KeyFile    string
	KnownHosts string
	Bin        string
	dir        string
}

// StartSSHD starts sshd (skipping the test when /usr/sbin/sshd is absent, except under CI,
// where it fails) and stops it when the test ends.
func StartSSHD(t testing.TB) *SSHD {
	t.Helper()
	const sshd = "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("openssh-server is not installed (scripts/test.sh installs it): %v", err)
		}
		t.Skipf("openssh-server is not installed: %v", err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &SSHD{User: u.Username, KeyFile: filepath.Join(dir, "id_ed25519"), KnownHosts: filepath.Join(dir, "known_hosts"), Bin: filepath.Join(dir, "bin"), dir: dir}
	if err := os.Mkdir(s.Bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{s.KeyFile, filepath.Join(dir, "host_ed25519")} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil && u.Uid == "0" {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	config := fmt.Sprintf(`ListenAddress 127.0.0.1:%d
HostKey %s/host_ed25519
AuthorizedKeysFile %s/id_ed25519.pub
PidFile %s/sshd.pid
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowTcpForwarding no
PermitRootLogin prohibit-password
SetEnv PATH=%s:/usr/bin:/bin
`, s.Port, dir, dir, dir, s.Bin)
	cfg := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sshd, "-D", "-e", "-f", cfg)
	var log SyncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("sshd:\n%s", log.String())
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.Port)); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd did not listen on 127.0.0.1:%d:\n%s", s.Port, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	pub, err := os.ReadFile(filepath.Join(dir, "host_ed25519.pub"))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(pub))
	s.WriteKnownHost(t, fields[0]+" "+fields[1])
	return s
}

// WriteKnownHost makes known_hosts hold hostKey ("ssh-ed25519 AAAA...") for the server.
func (s *SSHD) WriteKnownHost(t testing.TB, hostKey string) {
	t.Helper()
	line := fmt.Sprintf("[127.0.0.1]:%d %s\n", s.Port, hostKey)
	if err := os.WriteFile(s.KnownHosts, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
}

// OtherHostKey is a host key that is not the server's.
func (s *SSHD) OtherHostKey(t testing.TB) string {
	t.Helper()
	key := filepath.Join(s.dir, "other_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(pub))
	return f[0] + " " + f[1]
}

// WireGuardStandIn puts a `wg` stand-in first on the PATH of the server's sessions and returns
// the file where it records the peers, one "KEY<TAB>IP/32" line each (what `wg show IF
// allowed-ips` prints, and prints back): `wg set IF peer KEY allowed-ips IP` adds or replaces
// a line, `wg set IF peer KEY remove` deletes it, and every call is appended to calls.log
// beside it.
func (s *SSHD) WireGuardStandIn(t testing.TB, iface string) string {
	t.Helper()
	peers := filepath.Join(s.dir, "peers.txt")
	if err := os.WriteFile(peers, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
set -eu
peers='` + peers + `'
echo "wg $*" >> '` + filepath.Join(s.dir, "calls.log") + `'
case "$*" in
"show ` + iface + ` allowed-ips") cat "$peers" ;;
"set ` + iface + ` peer "*" remove") grep -v "^$4	" "$peers" > "$peers.new" || true; mv "$peers.new" "$peers" ;;
"set ` + iface + ` peer "*" allowed-ips "*) { grep -v "^$4	" "$peers" || true; printf '%s\t%s\n' "$4" "$6"; } > "$peers.new"; mv "$peers.new" "$peers" ;;
*) echo "wg stand-in: unexpected: $*" >&2; exit 1 ;;
esac
`
	if err := os.WriteFile(filepath.Join(s.Bin, "wg"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return peers
}
