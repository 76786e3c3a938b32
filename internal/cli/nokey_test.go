package cli

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/privatefile"
	"github.com/cubefleet/cubefleet/internal/server"
)

// TestNoAPIKeySaysWhy: a command run without a key names the token file it looked for and
// says why it is missing: a --dev server keeps its key in its own data directory; a server
// without --dev writes none; a --dev server that wrote it while the command ran (the quick
// start's race) means: run it again.
func TestNoAPIKeySaysWhy(t *testing.T) {
	t.Run("a --dev server started elsewhere", func(t *testing.T) {
		c := mustServe(t, "")
		code, _, errOut := c.run("", "tenants", "list")
		want := "error: UNAUTHENTICATED: no API key: the default token file " + filepath.Join(c.dir, ".cubefleet", "admin.token") + " does not exist; the control plane at " + c.url +
			" is a --dev server, which keeps its administrator key in admin.token in its --data-dir (./.cubefleet where it was started): run the command in that directory, or pass --token-file DIR/admin.token\n"
		if code != ExitFailure || errOut != want {
			t.Errorf("exit %d\n%s\nwant\n%s", code, errOut, want)
		}
	})
	t.Run("a server without --dev", func(t *testing.T) {
		c := mustServe(t, "", func(cfg *server.Config) { cfg.Dev = false })
		code, _, errOut := c.run("", "tenants", "list")
		want := "error: UNAUTHENTICATED: no API key: the default token file " + filepath.Join(c.dir, ".cubefleet", "admin.token") + " does not exist, and the control plane at " + c.url +
			" is not a --dev server, so nothing writes it: pass --token-file FILE (a key from cubefleet server init --token-out FILE, or cubefleet keys create) or set CUBEFLEET_TOKEN\n"
		if code != ExitFailure || errOut != want {
			t.Errorf("exit %d\n%s\nwant\n%s", code, errOut, want)
		}
	})
	t.Run("written while the command ran", func(t *testing.T) {
		dir := t.TempDir()
		t.Chdir(dir)
		// A --dev server that has just started: it writes the key, then answers.
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/healthz" {
				w.Write([]byte(`{"status":"ok","dev":true}`))
				return
			}
			os.MkdirAll(filepath.Join(dir, ".cubefleet"), 0o700)
			privatefile.Write(filepath.Join(dir, ".cubefleet", "admin.token"), []byte("cfk_x\n"))
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"code":"UNAUTHENTICATED","message":"missing API key"}}`))
		}))
		t.Cleanup(srv.Close)
		code, _, errOut := runCLI(t, map[string]string{"CUBEFLEET_URL": srv.URL, "HOME": dir}, "tenants", "list")
		want := "error: UNAUTHENTICATED: no API key: the default token file " + filepath.Join(dir, ".cubefleet", "admin.token") +
			" did not exist when this command started and does now: the --dev control plane at " + srv.URL + " had just written it; run the command again\n"
		if code != ExitFailure || !strings.HasPrefix(errOut, want) {
			t.Errorf("exit %d\n%s\nwant\n%s", code, errOut, want)
		}
	})
}
