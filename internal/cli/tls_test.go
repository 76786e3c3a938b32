package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/privatefile"
	"github.com/cubefleet/cubefleet/internal/server"
	"github.com/cubefleet/cubefleet/internal/server/servertest"
	"github.com/cubefleet/cubefleet/internal/testkit"
	"github.com/cubefleet/cubefleet/internal/tlstest"
)

// TestServerTLSCommand runs `cubefleet server --tls-cert --tls-key` with --internal-listen:
// the listening line shows https:// for both, and the CLI calls it with the CA from --ca-file,
// CUBEFLEET_CA_FILE or ca_file in the config file; without one it fails (exit 1) with an error
// naming the URL and --ca-file, and an http:// URL is told to use https://.
func TestServerTLSCommand(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	_, files := tlstest.Write(t, dir)
	srv := start(t, nil, "server", "--dev", "--listen", "127.0.0.1:0", "--internal-listen", "127.0.0.1:0",
		"--tls-cert", files.Cert, "--tls-key", files.Key, "--log-format", "json")
	url := srv.listening(t, regexp.MustCompile(`listening on (https://127\.0\.0\.1:\d+) \(node-agent routes on (https://127\.0\.0\.1:\d+)\)`))[1]
	errOut := &srv.err
	if !strings.Contains(errOut.String(), `"tls":true`) || !strings.Contains(errOut.String(), `"msg":"TLS certificate loaded"`) {
		t.Errorf("the log does not say TLS is on:\n%s", errOut.String())
	}
	xdg := filepath.Join(dir, "xdg")
	c := &cliEnv{t: t, url: url, dir: dir, env: map[string]string{"CUBEFLEET_URL": url, "XDG_CONFIG_HOME": xdg}}

	// --ca-file.
	if code, list, errs := c.run("", "keys", "list", "--tenant", "root", "--ca-file", files.CA); code != ExitOK || !strings.Contains(list, "admin") {
		t.Errorf("keys list --ca-file: %d %s %s", code, list, errs)
	}
	// Without it: exit 1 and what to do.
	code, _, errs := c.run("", "keys", "list", "--tenant", "root")
	want := "error: the TLS certificate of the control plane at " + url + " does not verify (x509: certificate signed by unknown authority): pass --ca-file FILE"
	if code != ExitFailure || !strings.HasPrefix(errs, want) {
		t.Errorf("keys list without --ca-file: exit %d, stderr %q; want 1 and %q", code, errs, want)
	}
	// CUBEFLEET_CA_FILE, then ca_file in the config file.
	c.env["CUBEFLEET_CA_FILE"] = files.CA
	if code, list, errs := c.run("", "tenants", "list"); code != ExitOK || !strings.Contains(list, "globex") {
		t.Errorf("tenants list with CUBEFLEET_CA_FILE: %d %s %s", code, list, errs)
	}
	delete(c.env, "CUBEFLEET_CA_FILE")
	if err := privatefile.Write(filepath.Join(xdg, "cubefleet", "config.json"), []byte(`{"ca_file":"`+files.CA+`"}`)); err != nil {
		t.Fatal(err)
	}
	if code, st, errs := c.run("", "fleet", "status", "--tenant", "root"); code != ExitOK {
		t.Errorf("fleet status with ca_file in the config file: %d %s %s", code, st, errs)
	}
	// A CA file that is not one.
	if code, _, errs := c.run("", "tenants", "list", "--ca-file", files.Key); code != ExitFailure || !strings.Contains(errs, "error: CA file from --ca-file: "+files.Key+" holds no PEM certificate") {
		t.Errorf("--ca-file KEY: %d %q", code, errs)
	}
	// http:// to the HTTPS listener.
	plain := "http://" + strings.TrimPrefix(url, "https://")
	if code, _, errs := c.run("", "tenants", "list", "--url", plain); code != ExitFailure || !strings.Contains(errs, plain+" serves HTTPS only: use https:// in --url") {
		t.Errorf("--url http://: %d %q", code, errs)
	}

	if code := srv.stop(t); code != ExitOK {
		t.Errorf("exit %d after cancel: %s", code, errOut.String())
	}
}

// TestServerTLSRefusals: --tls-cert without --tls-key (and the reverse) is a usage error (exit
// 2) naming the missing flag; a key file of mode 0644 stops the start (exit 1) with the fix,
// before the data directory is created.
func TestServerTLSRefusals(t *testing.T) {
	dir := t.TempDir()
	_, files := tlstest.Write(t, dir)
	data := filepath.Join(dir, "data")
	c := &cliEnv{t: t, dir: dir, env: map[string]string{}}
	code, _, errs := c.run("", "server", "--data-dir", data, "--listen", "127.0.0.1:0", "--tls-cert", files.Cert)
	if code != ExitUsage || errs != "error: --tls-key is missing: --tls-cert needs it (give both PEM files, or neither)\n" {
		t.Errorf("--tls-cert alone: exit %d, %q", code, errs)
	}
	code, _, errs = c.run("", "server", "--data-dir", data, "--listen", "127.0.0.1:0", "--tls-key", files.Key)
	if code != ExitUsage || !strings.HasPrefix(errs, "error: --tls-cert is missing") {
		t.Errorf("--tls-key alone: exit %d, %q", code, errs)
	}
	os.Chmod(files.Key, 0o644)
	code, _, errs = c.run("", "server", "--data-dir", data, "--listen", "127.0.0.1:0", "--tls-cert", files.Cert, "--tls-key", files.Key)
	if code != ExitFailure || !strings.Contains(errs, files.Key+" has mode 0644; run chmod 600 "+files.Key) {
		t.Errorf("key mode 0644: exit %d, %q", code, errs)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused start created the data dir: %v", err)
	}
}

// TestAgentOverTLS runs the built binary's `agent run` against a real control plane whose
// node-agent routes are on an HTTPS --internal-listen: with --control-plane-tls and --ca-file
// it joins and is listed Ready, and `agent check` passes with the same settings; without the
// CA file the check fails and says to set it.
func TestAgentOverTLS(t *testing.T) {
	bin := buildCubefleet(t)
	dir := t.TempDir()
	_, files := tlstest.Write(t, dir)
	srv := servertest.Start(t, server.Config{
		InternalListen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"), Dev: true,
		TLSCert: files.Cert, TLSKey: files.Key,
	}, nil)
	c := &cliEnv{t: t, url: srv.URL(), dir: dir, tokenFile: srv.AdminTokenPath(),
		env: map[string]string{"CUBEFLEET_URL": srv.URL(), "CUBEFLEET_CA_FILE": files.CA, "XDG_CONFIG_HOME": filepath.Join(dir, "xdg")}}
	var site, pool struct{ ID string }
	json.Unmarshal([]byte(c.admin("api", "compute.sites.create", `{"tenantId":"root","kind":"shared","region":"eu-central"}`)), &site)
	json.Unmarshal([]byte(c.admin("api", "compute.pools.create", `{"tenantId":"root","siteId":"`+site.ID+`","class":"vps-host"}`)), &pool)
	token := strings.TrimSpace(c.admin("nodes", "join-token", "create", "--pool", pool.ID, "--ip", "127.0.0.1"))

	listen := freeLoopback(t)
	internal := strings.TrimPrefix(srv.InternalURL(), "https://")
	args := agentArgs(t, dir, internal, listen)
	if err := os.WriteFile(filepath.Join(dir, "join.token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsArgs := append(append([]string{}, args...), "--control-plane-tls", "--ca-file", files.CA)
	_, logs, _ := startAgentProcess(t, bin, dir, tlsArgs...)
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("last nodes get: %s\nagent log:\n%s", last, logs.String())
		}
	}()
	testkit.WaitFor(t, 20*time.Second, "the node Ready over TLS", func() bool {
		code, out, errs := c.run("", "nodes", "get", "127.0.0.1", "-o", "json", "--token-file", c.tokenFile)
		last = out + errs
		var n struct{ State string }
		json.Unmarshal([]byte(out), &n)
		return code == ExitOK && n.State == "Ready"
	})
	if !strings.Contains(logs.String(), `"control_plane":"`+srv.InternalURL()+`"`) {
		t.Errorf("the agent's log does not show the https:// control plane:\n%s", logs.String())
	}

	var out, errOut bytes.Buffer
	noEnv := func(string) string { return "" }
	code := Run(context.Background(), append([]string{"agent", "check", "--timeout", "10s"}, tlsArgs...), IO{Out: &out, Err: &errOut, Getenv: noEnv})
	if code != ExitOK || !strings.Contains(out.String(), "ok    control plane: "+srv.InternalURL()+nodeapi.PathReadyz+": ready") ||
		!strings.Contains(out.String(), "ok    node listed: "+srv.InternalURL()+nodeapi.NodePath("127.0.0.1")) {
		t.Errorf("agent check over TLS: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	// The environment works as the flags do.
	out.Reset()
	env := map[string]string{"CUBEFLEET_CONTROL_PLANE_TLS": "1", "CUBEFLEET_CA_FILE": files.CA}
	code = Run(context.Background(), append([]string{"agent", "check", "--timeout", "10s"}, args...), IO{Out: &out, Err: &errOut, Getenv: func(k string) string { return env[k] }})
	if code != ExitOK {
		t.Errorf("agent check with CUBEFLEET_CONTROL_PLANE_TLS and CUBEFLEET_CA_FILE: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	// Without the CA file the certificate does not verify.
	out.Reset()
	code = Run(context.Background(), append([]string{"agent", "check", "--timeout", "0", "--control-plane-tls"}, args...), IO{Out: &out, Err: &errOut, Getenv: noEnv})
	if code != ExitFailure || !strings.Contains(out.String(), "FAIL  control plane: "+srv.InternalURL()) || !strings.Contains(out.String(), "set CUBEFLEET_CA_FILE or --ca-file") {
		t.Errorf("agent check without the CA: exit %d\n%s", code, out.String())
	}
	// A CA file that holds no certificate is a configuration error naming the setting.
	out.Reset()
	errOut.Reset()
	code = Run(context.Background(), append([]string{"agent", "check", "--timeout", "0", "--control-plane-tls", "--ca-file", files.Key}, args...), IO{Out: &out, Err: &errOut, Getenv: noEnv})
	if code != ExitFailure || !strings.Contains(errOut.String(), "error: INVALID_INPUT: --ca-file: "+files.Key+" holds no PEM certificate") {
		t.Errorf("agent check --ca-file KEY: exit %d\n%s", code, errOut.String())
	}
}
