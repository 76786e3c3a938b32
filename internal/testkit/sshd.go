package testkit

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SSHD is Debian's openssh-server run by a test on a loopback address with its own host key:
// Addr and Port are where it listens, User the account it lets in (the test's), KeyFile the
// client's private key it accepts, KnownHosts a known_hosts file holding its host key, Bin a
// directory first on the PATH of its sessions (put stand-ins such as `wg` there).
type SSHD struct {
	Addr       string
	Port       int
	User       string
	KeyFile    string
	KnownHosts string
	Bin        string
	dir        string
	hostKey    string // "ssh-ed25519 AAAA..."
}

// SSHDOptions are StartSSHDWith's settings; the zero value is StartSSHD's.
type SSHDOptions struct {
	// Addr is the loopback address to listen on; "" means 127.0.0.1.
	Addr string
	// Port is the port; 0 means a free one.
	Port int
	// Forwarding allows TCP forwarding, for a jump host (`ssh -J`).
	Forwarding bool
	// Like shares another server's client key and known_hosts file: the server accepts that
	// key, and its host key is added to that file (so one identity reaches every server).
	Like *SSHD
}

// StartSSHD starts sshd on 127.0.0.1 (skipping the test when /usr/sbin/sshd is absent, except
// under CI, where it fails) and stops it when the test ends.
func StartSSHD(t testing.TB) *SSHD { return StartSSHDWith(t, SSHDOptions{}) }

// StartSSHDWith starts sshd as StartSSHD does, with opts.
func StartSSHDWith(t testing.TB, opts SSHDOptions) *SSHD {
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
	s := &SSHD{Addr: cmp.Or(opts.Addr, "127.0.0.1"), User: u.Username, KeyFile: filepath.Join(dir, "id_ed25519"), KnownHosts: filepath.Join(dir, "known_hosts"), Bin: filepath.Join(dir, "bin"), dir: dir}
	if err := os.Mkdir(s.Bin, 0o755); err != nil {
		t.Fatal(err)
	}
	keys := []string{s.KeyFile, filepath.Join(dir, "host_ed25519")}
	if opts.Like != nil {
		s.KeyFile, s.KnownHosts, keys = opts.Like.KeyFile, opts.Like.KnownHosts, keys[1:]
	}
	for _, key := range keys {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil && u.Uid == "0" {
		t.Fatal(err)
	}
	s.Port = opts.Port
	if s.Port == 0 {
		l, err := net.Listen("tcp", net.JoinHostPort(s.Addr, "0"))
		if err != nil {
			t.Fatal(err)
		}
		s.Port = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	forwarding := "no"
	if opts.Forwarding {
		forwarding = "local"
	}
	config := fmt.Sprintf(`ListenAddress %s
HostKey %s/host_ed25519
AuthorizedKeysFile %s.pub
PidFile %s/sshd.pid
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowTcpForwarding %s
PermitRootLogin prohibit-password
SetEnv PATH=%s:/usr/bin:/bin
`, s.hostPort(), dir, s.KeyFile, dir, forwarding, s.Bin)
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
		if c, err := net.Dial("tcp", s.hostPort()); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd did not listen on %s:\n%s", s.hostPort(), log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	pub, err := os.ReadFile(filepath.Join(dir, "host_ed25519.pub"))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(pub))
	s.hostKey = fields[0] + " " + fields[1]
	if opts.Like != nil {
		s.AddKnownHost(t, s.hostKey)
	} else {
		s.WriteKnownHost(t, s.hostKey)
	}
	return s
}

func (s *SSHD) hostPort() string { return net.JoinHostPort(s.Addr, strconv.Itoa(s.Port)) }

// HostKey is the server's own host key ("ssh-ed25519 AAAA...").
func (s *SSHD) HostKey() string { return s.hostKey }

// WriteKnownHost makes known_hosts hold only hostKey ("ssh-ed25519 AAAA...") for the server.
func (s *SSHD) WriteKnownHost(t testing.TB, hostKey string) {
	t.Helper()
	line := fmt.Sprintf("[%s]:%d %s\n", s.Addr, s.Port, hostKey)
	if err := os.WriteFile(s.KnownHosts, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
}

// AddKnownHost appends hostKey for the server to known_hosts, keeping the other lines but any
// earlier one of this server.
func (s *SSHD) AddKnownHost(t testing.TB, hostKey string) {
	t.Helper()
	old, err := os.ReadFile(s.KnownHosts)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("[%s]:%d ", s.Addr, s.Port)
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(string(old)), "\n") {
		if l != "" && !strings.HasPrefix(l, prefix) {
			keep = append(keep, l)
		}
	}
	keep = append(keep, prefix+hostKey)
	if err := os.WriteFile(s.KnownHosts, []byte(strings.Join(keep, "\n")+"\n"), 0o600); err != nil {
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
