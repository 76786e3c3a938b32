package ionos_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/ionos"
)

func writeToken(tb testing.TB, dir, content string, mode os.FileMode) string {
	tb.Helper()
	p := filepath.Join(dir, "token.txt")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		tb.Fatal(err)
	}
	return p
}

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	good := writeToken(t, dir, "  "+secret+"\n", 0o600)
	tok, err := ionos.ReadTokenFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if tok.IsZero() || tok.String() != "[redacted]" {
		t.Errorf("token %v zero %v", tok, tok.IsZero())
	}

	link := filepath.Join(t.TempDir(), "link.txt")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, want string
	}{
		{"mode 0644", writeToken(t, t.TempDir(), secret, 0o644), "mode 0644"},
		{"mode 0640", writeToken(t, t.TempDir(), secret, 0o640), "mode 0640"},
		{"mode 0400", writeToken(t, t.TempDir(), secret, 0o400), "mode 0400"},
		{"symlink", link, "symbolic link"},
		{"directory", t.TempDir(), "not a regular file"},
		{"fifo", fifo, "not a regular file"},
		{"missing", filepath.Join(dir, "absent.txt"), "does not exist"},
		{"empty", writeToken(t, t.TempDir(), " \n", 0o600), "is empty"},
		{"two lines", writeToken(t, t.TempDir(), secret+"\n"+secret, 0o600), "more than one token"},
	}
	if os.Getuid() == 0 {
		other := writeToken(t, t.TempDir(), secret, 0o600)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct{ name, path, want string }{"another owner", other, "owned by uid 65534"})
	} else {
		t.Log("not root: the other-owner case needs chown and is skipped")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ionos.ReadTokenFile(tc.path)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ionos.ErrInsecureTokenFile) || cubefleet.ErrorCode(err) != cubefleet.CodeInvalidInput {
				t.Errorf("error %v is not an INVALID_INPUT refusal", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
				t.Errorf("error %q does not name the file and %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error reveals the token: %v", err)
			}
		})
	}
}
