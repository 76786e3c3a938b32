package hostsetup

import (
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/agent"
	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/agent/hostinfo"
)

// testHost is the fake host tree name of hostinfo's tests (compute, conflicts, isolated or vm).
func testHost(name string) hostinfo.Host {
	return hostinfo.Host{Root: "../hostinfo/testdata/host/" + name}
}

// loadTest loads a configuration from an env file with content file (mode 0600), env as the
// process environment and flags, on the fake host named host.
func loadTest(t *testing.T, host, file string, env, flags map[string]string) (*agent.Config, error) {
	t.Helper()
	f := map[string]string{"env-file": agenttest.EnvFile(t, file)}
	maps.Copy(f, flags)
	return agent.Load(agent.Sources{Flags: f, Getenv: func(k string) string { return env[k] }, Host: testHost(host)})
}

// testConfig loads the configuration of a compute node on 127.0.0.1 (fake host "compute", the
// process runtime, its sandboxes in a directory of the test) reporting to endpoints every 100 ms
// with the join token join ("" for none), with its state in stateDir and its health endpoint on
// a free port.
func testConfig(t *testing.T, stateDir, join string, endpoints ...string) *agent.Config {
	t.Helper()
	env := map[string]string{
		"ONE_CLICK_DEPLOY_ROLE": "compute", "CUBEFLEET_CONTROL_PLANE": strings.Join(endpoints, ","),
		"CUBE_S3_ENDPOINT": "http://127.0.0.1:9000", "CUBE_SANDBOX_NODE_IP": "127.0.0.1", "CUBEFLEET_ALLOW_LOOPBACK": "1",
		"CUBEFLEET_JOIN_TOKEN": join, "CUBEFLEET_AGENT_STATE_DIR": stateDir, "CUBEFLEET_REPORT_PERIOD": "100ms", "CUBEFLEET_RUNTIME": "process",
		"CUBEFLEET_SANDBOX_DIR": agenttest.SandboxDir(t), "CUBEFLEET_SANDBOX_ALLOW_OWN_USER": strconv.FormatBool(os.Geteuid() != 0),
	}
	cfg, err := loadTest(t, "compute", "", env, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	return cfg
}

// running is an agent serving on 127.0.0.1 until the test ends (or stop is called).
type running struct {
	a    *agent.Agent
	url  string // the health endpoint
	stop func()
}

// startAgent runs an agent for cfg.
func startAgent(t *testing.T, cfg *agent.Config) *running {
	t.Helper()
	a, err := agent.New(cfg, agent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr, stop := agenttest.Serve(t, cfg.Listen, a.Serve)
	return &running{a: a, url: "http://" + addr + "/healthz", stop: stop}
}
