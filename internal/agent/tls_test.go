package agent

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/capool"
	"github.com/cubefleet/cubefleet/internal/server"
	"github.com/cubefleet/cubefleet/internal/server/servertest"
	"github.com/cubefleet/cubefleet/internal/tlstest"
)

// TestLoadTLSSettings: CUBEFLEET_CONTROL_PLANE_TLS makes scheme-less addresses (and the
// expansion of ONE_CLICK_CONTROL_PLANE_IP) https://; CUBEFLEET_CA_FILE is read at load, and one
// that cannot be read or holds no certificate is an error naming the setting, found with the
// control-plane address (before the S3 endpoint).
func TestLoadTLSSettings(t *testing.T) {
	dir := t.TempDir()
	_, files := tlstest.Write(t, dir)
	garbage := filepath.Join(dir, "garbage.pem")
	os.WriteFile(garbage, []byte("not PEM\n"), 0o644)
	for _, tc := range []struct {
		name  string
		env   map[string]string
		flags map[string]string
		file  string // default agenttest.ComputeEnv
		want  []string
		path  string // the variable the error names; "" when Load succeeds
		msg   string
		check func(t *testing.T, c *Config)
	}{
		{name: "the control-plane IP becomes https://<ip>:3010", env: map[string]string{"CUBEFLEET_CONTROL_PLANE_TLS": "1"}, want: []string{"https://10.0.0.1:3010"}},
		{name: "from the env file too", file: agenttest.ComputeEnv + "CUBEFLEET_CONTROL_PLANE_TLS=yes\n", want: []string{"https://10.0.0.1:3010"}},
		{name: "the flag alone", flags: map[string]string{"control-plane-tls": "1", "control-plane": "cp1:3010,https://10.0.0.3:3010,https://cp2:443"},
			want: []string{"https://cp1:3010", "https://10.0.0.3:3010", "https://cp2:443"}},
		{name: "an https:// address without the switch", env: map[string]string{"ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR": "https://10.0.0.1:3010"}, want: []string{"https://10.0.0.1:3010"}},
		{name: "off by default", want: []string{"http://10.0.0.1:3010"}},
		{name: "the control role's default", file: "CUBE_SANDBOX_NODE_IP=10.0.0.5\nCUBEFLEET_CONTROL_PLANE_TLS=1\n", want: []string{"https://127.0.0.1:3010"}},
		{name: "switch not 0/1", env: map[string]string{"CUBEFLEET_CONTROL_PLANE_TLS": "sometimes"}, path: "CUBEFLEET_CONTROL_PLANE_TLS", msg: `"sometimes" is not 0 or 1`},
		{name: "a CA file", env: map[string]string{"CUBEFLEET_CONTROL_PLANE_TLS": "1", "CUBEFLEET_CA_FILE": files.CA}, want: []string{"https://10.0.0.1:3010"},
			check: func(t *testing.T, c *Config) {
				if c.CAFile != files.CA || c.RootCAs == nil || len(c.Warnings) != 0 {
					t.Errorf("CA file %q, roots %v, warnings %q", c.CAFile, c.RootCAs != nil, c.Warnings)
				}
			}},
		// Once TLS is on, every endpoint must be https://: a plain one would get the join token
		// and the node credential in clear text when the agent fails over to it.
		{name: "TLS on and an http:// endpoint", env: map[string]string{"CUBEFLEET_CONTROL_PLANE_TLS": "1", "ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR": "127.0.0.99:3010,http://127.0.0.5:3010"},
			path: "ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR", msg: "http://127.0.0.5:3010 is plain HTTP but TLS is on (CUBEFLEET_CONTROL_PLANE_TLS=1): the agent would send its join token and node credential to it in clear text; once TLS is on, every endpoint must be https://"},
		{name: "https:// and http:// mixed without the switch", flags: map[string]string{"control-plane": "https://10.0.0.1:3010,http://10.0.0.2:3010"},
			path: "--control-plane", msg: "http://10.0.0.2:3010 is plain HTTP but TLS is on (https://10.0.0.1:3010 is in the list)"},
		{name: "a CA file and an http:// address", flags: map[string]string{"ca-file": files.CA}, path: "ONE_CLICK_CONTROL_PLANE_IP",
			msg: "http://10.0.0.1:3010 is plain HTTP but TLS is on (--ca-file is set): the agent would send"},
		{name: "a CA file and the control role's plain default", file: "CUBE_SANDBOX_NODE_IP=10.0.0.5\n", env: map[string]string{"CUBEFLEET_CA_FILE": files.CA},
			path: "CUBEFLEET_CA_FILE", msg: "http://127.0.0.1:3010 is plain HTTP but TLS is on (CUBEFLEET_CA_FILE is set)"},
		{name: "a CA file with https:// addresses", env: map[string]string{"CUBEFLEET_CA_FILE": files.CA, "ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR": "https://10.0.0.1:3010,https://10.0.0.2:3010"},
			want: []string{"https://10.0.0.1:3010", "https://10.0.0.2:3010"}},
		{name: "a missing CA file", env: map[string]string{"CUBEFLEET_CA_FILE": filepath.Join(dir, "missing.pem")}, path: "CUBEFLEET_CA_FILE", msg: "missing.pem: no such file"},
		{name: "a CA file without a certificate", flags: map[string]string{"ca-file": garbage}, path: "--ca-file", msg: garbage + " holds no PEM certificate"},
		{name: "a key is not a CA certificate", file: agenttest.ComputeEnv + "CUBEFLEET_CA_FILE=" + files.Key + "\n", path: "CUBEFLEET_CA_FILE", msg: "holds no PEM certificate"},
		{name: "the CA file is checked before S3", file: "ONE_CLICK_DEPLOY_ROLE=compute\nONE_CLICK_CONTROL_PLANE_IP=10.0.0.1\n",
			env: map[string]string{"CUBEFLEET_CA_FILE": garbage}, path: "CUBEFLEET_CA_FILE", msg: "holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := tc.file
			if file == "" {
				file = agenttest.ComputeEnv
			}
			cfg, err := loadTest(t, "compute", file, tc.env, tc.flags)
			if got := errPath(err); got != tc.path {
				t.Fatalf("error %v names %q, want %q", err, got, tc.path)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tc.msg) {
					t.Errorf("error %q\nwant it to contain %q", err, tc.msg)
				}
				return
			}
			if !reflect.DeepEqual(cfg.ControlPlane, tc.want) {
				t.Errorf("control plane %v, want %v", cfg.ControlPlane, tc.want)
			}
			if tc.check != nil {
				tc.check(t, cfg)
			}
		})
	}

	// A relative CA file is made absolute (the installed service runs elsewhere; hostsetup's
	// TestEnvFileVarsTLS checks that install carries it into the env file it writes).
	host := testHost("compute")
	host.Root, _ = filepath.Abs(host.Root)
	envFile := filepath.Join(dir, "compute.env")
	os.WriteFile(envFile, []byte(agenttest.ComputeEnv+"CUBEFLEET_CONTROL_PLANE_TLS=1\nCUBEFLEET_CA_FILE=ca.pem\n"), 0o600)
	t.Chdir(dir)
	cfg, err := Load(Sources{Flags: map[string]string{"env-file": envFile}, Host: host})
	if err != nil || cfg.CAFile != files.CA {
		t.Fatalf("relative CA file: %v %v", cfg, err)
	}
}

// TestRegisterOverTLS runs a real control plane whose node-agent routes are on an HTTPS
// --internal-listen: the agent joins over https:// trusting the test CA and reports. (agent
// check over TLS: hostsetup's TestCheckOverTLS.)
func TestRegisterOverTLS(t *testing.T) {
	dir := t.TempDir()
	_, files := tlstest.Write(t, dir)
	cp := servertest.StartControlPlane(t, server.Config{TLSCert: files.Cert, TLSKey: files.Key}, files.CA)
	srv := cp.Server
	roots, err := capool.Load(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	join := struct{ Token string }{cp.JoinToken(t, "127.0.0.1")}

	cfg := testConfig(filepath.Join(dir, "state"), join.Token, srv.InternalURL())
	cfg.RootCAs, cfg.CAFile = roots, files.CA
	cfg.S3.Endpoint = ""
	r := startAgent(t, cfg)
	deadline := time.Now().Add(10 * time.Second)
	for r.a.Health().State != StateReporting || r.a.Health().LastReportAt == "" {
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not report over TLS: %+v\n%s", r.a.Health(), r.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.HasPrefix(srv.InternalURL(), "https://") {
		t.Fatalf("InternalURL %s", srv.InternalURL())
	}
}
