package agent

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/agent/envfile"
)

func TestSettingsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Settings() {
		if s.Key == "" || len(s.Env) == 0 || s.Usage == "" || seen[s.Key] {
			t.Errorf("setting %+v: empty key, env or usage, or a repeated key", s)
		}
		seen[s.Key] = true
		for _, e := range s.Env {
			if !envfile.ValidName(e) {
				t.Errorf("setting %s: %q is not a variable name", s.Key, e)
			}
		}
		if !strings.HasPrefix(s.Env[0], "CUBEFLEET_") {
			t.Errorf("setting %s: the first variable %s is not a CUBEFLEET_ one", s.Key, s.Env[0])
		}
	}
}

// TestExampleEnvFile: examples/agent.env, which the missing-env-file error points at, is a
// valid env file for a compute node once the join token file exists, and names only settings
// the agent knows (also on the lines that are commented out).
func TestExampleEnvFile(t *testing.T) {
	data, err := os.ReadFile("../../examples/agent.env")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, s := range Settings() {
		for _, e := range s.Env {
			known[e] = true
		}
	}
	vars, err := envfile.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, v := range vars {
		names[v.Name] = true
	}
	for _, m := range regexp.MustCompile(`(?m)^# ([A-Z][A-Z0-9_]*)=`).FindAllStringSubmatch(string(data), -1) {
		names[m[1]] = true
	}
	for n := range names {
		if !known[n] {
			t.Errorf("examples/agent.env sets %s, which is no setting of the agent", n)
		}
	}
	tok := filepath.Join(t.TempDir(), "join.token")
	os.WriteFile(tok, []byte("cfj_example\n"), 0o600)
	cfg, err := loadTest(t, "compute", string(data), nil, map[string]string{"join-token-file": tok})
	if err != nil {
		t.Fatalf("examples/agent.env: %v", err)
	}
	if cfg.Role != RoleCompute || cfg.NodeID() != "10.0.0.5" || cfg.ControlPlane[0] != "http://10.0.0.1:3010" || cfg.JoinToken.Reveal() != "cfj_example" {
		t.Errorf("examples/agent.env: %+v", cfg)
	}
	// The error for a missing env file points at it.
	_, err = Load(Sources{Flags: map[string]string{"env-file": filepath.Join(t.TempDir(), ".env")}, Host: testHost("compute")})
	if err == nil || !strings.Contains(err.Error(), "start from examples/agent.env in the cubefleet repository; docs/agent.md lists every setting") {
		t.Errorf("missing env file: %v", err)
	}
}
