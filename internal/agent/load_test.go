package agent

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/agent/hostinfo"
)

// loadTest loads a configuration from an env file with content file (mode 0600), env as the
// process environment and flags, on the fake host named host.
func loadTest(t *testing.T, host, file string, env, flags map[string]string) (*Config, error) {
	t.Helper()
	f := map[string]string{"env-file": agenttest.EnvFile(t, file)}
	maps.Copy(f, flags)
	return Load(Sources{Flags: f, Getenv: func(k string) string { return env[k] }, Host: testHost(host)})
}

// errPath returns the variable an INVALID_INPUT error names ("" for nil, "?" for another error).
func errPath(err error) string {
	if err == nil {
		return ""
	}
	var e *cubefleet.Error
	if !errors.As(err, &e) || e.Code != cubefleet.CodeInvalidInput {
		return "?"
	}
	p, _ := e.Details["path"].(string)
	return p
}

func TestLoadCompute(t *testing.T) {
	cfg, err := loadTest(t, "compute", agenttest.ComputeEnv, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Role: RoleCompute, ControlPlane: []string{"http://10.0.0.1:3010"}, NodeIP: mustAddr("10.0.0.5"),
		S3:          S3{Endpoint: "http://10.0.0.1:9000", AccessKeyID: "minio", SecretAccessKey: "s3cr3t$", Bucket: "cube-volumes", S3FSExtraOpts: "-ouse_path_request_style"},
		NetworkCIDR: mustPrefix("192.168.0.0/18"), Listen: "10.0.0.5:9999", StateDir: DefaultStateDir, ReportPeriod: time.Second,
		ClusterLabel: "default-cluster", Runtime: RuntimeMicroVM, MinMemoryKB: DefaultMinMemoryKB, RunCheck: true, RunCheckFrom: "the default",
		CheckTimeout: 120 * time.Second, EnvFile: cfg.EnvFile, Host: testHost("compute"),
		SandboxDir: DefaultSandboxDir, SandboxFirstUID: 2_000_000, SandboxUIDCount: 65_536, SandboxOutputLimit: 1 << 20, SandboxMaxConnections: 1024, SandboxSpares: 1, ImageDir: DefaultImageDir,
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("Load:\n got %+v\nwant %+v", cfg, want)
	}
	if s := fmt.Sprintf("%v %+v %#v", cfg.S3, cfg, cfg.S3.SecretAccessKey); strings.Contains(s, "s3cr3t") {
		t.Errorf("a formatted config shows the secret: %s", s)
	}
}

func TestLoadRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		host  string // default "compute"
		file  string // default agenttest.ComputeEnv; "-" for an empty file
		env   map[string]string
		flags map[string]string
		check func(t *testing.T, c *Config)
		path  string // the variable the error names; "" when Load succeeds
		msg   string // part of the error message
	}{
		{name: "role defaults to control, reporting to the local server", file: "CUBE_SANDBOX_NODE_IP=10.0.0.5",
			check: func(t *testing.T, c *Config) {
				if c.Role != RoleControl || !reflect.DeepEqual(c.ControlPlane, []string{"http://127.0.0.1:3010"}) {
					t.Errorf("role %s, control plane %v", c.Role, c.ControlPlane)
				}
				if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "CUBE_S3_ENDPOINT is not set") {
					t.Errorf("warnings %q", c.Warnings)
				}
			}},
		{name: "role is case-insensitive", env: map[string]string{"ONE_CLICK_DEPLOY_ROLE": "Compute"},
			check: func(t *testing.T, c *Config) {
				if c.Role != RoleCompute {
					t.Errorf("role %s", c.Role)
				}
			}},
		{name: "unknown role", env: map[string]string{"ONE_CLICK_DEPLOY_ROLE": "worker"}, path: "ONE_CLICK_DEPLOY_ROLE", msg: `"worker" is not a role; set it to compute`},
		{name: "compute without a control plane", file: "ONE_CLICK_DEPLOY_ROLE=compute\nCUBE_S3_ENDPOINT=http://x:9000\n",
			path: "ONE_CLICK_CONTROL_PLANE_IP", msg: "is not set; a compute node reports to a remote control plane: set ONE_CLICK_CONTROL_PLANE_IP="},
		{name: "control-plane IP unspecified", env: map[string]string{"ONE_CLICK_CONTROL_PLANE_IP": "0.0.0.0"}, path: "ONE_CLICK_CONTROL_PLANE_IP",
			msg: `0.0.0.0 is unspecified (to a listener it means any address; there is no host to connect to), not an address the agent can connect to; set it to the control node's address`},
		{name: "control-plane IP in 0/8", env: map[string]string{"ONE_CLICK_CONTROL_PLANE_IP": "0.1.2.3"}, path: "ONE_CLICK_CONTROL_PLANE_IP", msg: "0.1.2.3 is unspecified"},
		{name: "control-plane IP multicast", flags: map[string]string{"control-plane-ip": "224.0.0.1"}, path: "--control-plane-ip", msg: "224.0.0.1 is a multicast address"},
		{name: "control-plane IP broadcast", env: map[string]string{"CUBEFLEET_CONTROL_PLANE_IP": "255.255.255.255"}, path: "CUBEFLEET_CONTROL_PLANE_IP", msg: "255.255.255.255 is the broadcast address"},
		{name: "control-plane IP reserved", env: map[string]string{"CUBEFLEET_CONTROL_PLANE_IP": "240.0.0.1"}, path: "CUBEFLEET_CONTROL_PLANE_IP", msg: "reserved"},
		{name: "control-plane IP loopback is fine", env: map[string]string{"ONE_CLICK_CONTROL_PLANE_IP": "127.0.0.1"},
			check: func(t *testing.T, c *Config) {
				if !reflect.DeepEqual(c.ControlPlane, []string{"http://127.0.0.1:3010"}) {
					t.Errorf("control plane %v", c.ControlPlane)
				}
			}},
		{name: "control-plane address unspecified", env: map[string]string{"ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR": "10.0.0.1:3010,0.0.0.0:3010"}, path: "ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR",
			msg: `"0.0.0.0:3010": 0.0.0.0 is unspecified`},
		{name: "control-plane address IPv6 unspecified", flags: map[string]string{"control-plane": "[::]:3010"}, path: "--control-plane", msg: ":: is unspecified"},
		{name: "control-plane IP not IPv4", env: map[string]string{"ONE_CLICK_CONTROL_PLANE_IP": "cp.example"}, path: "ONE_CLICK_CONTROL_PLANE_IP", msg: `"cp.example" is not an IPv4 address`},
		{name: "CUBEOPS_ADDR beats the IP", env: map[string]string{"ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR": "10.0.0.9:4000"},
			check: func(t *testing.T, c *Config) {
				if !reflect.DeepEqual(c.ControlPlane, []string{"http://10.0.0.9:4000"}) {
					t.Errorf("control plane %v", c.ControlPlane)
				}
			}},
		{name: "a flag IP beats an ADDR from the env file", file: agenttest.ComputeEnv + "ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR=10.0.0.9:4000\n", flags: map[string]string{"control-plane-ip": "10.0.0.7"},
			check: func(t *testing.T, c *Config) {
				if !reflect.DeepEqual(c.ControlPlane, []string{"http://10.0.0.7:3010"}) {
					t.Errorf("control plane %v", c.ControlPlane)
				}
			}},
		{name: "several endpoints each get http://", env: map[string]string{"ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR": "10.0.0.1:3010, http://cp2.example:80,HTTP://10.0.0.3:3010/"},
			check: func(t *testing.T, c *Config) {
				want := []string{"http://10.0.0.1:3010", "http://cp2.example:80", "http://10.0.0.3:3010"}
				if !reflect.DeepEqual(c.ControlPlane, want) {
					t.Errorf("control plane %v, want %v", c.ControlPlane, want)
				}
			}},
		{name: "endpoint without a port", env: map[string]string{"ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR": "10.0.0.1"}, path: "ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR", msg: `"10.0.0.1" is not host:port`},
		{name: "empty endpoint entry", env: map[string]string{"ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR": "10.0.0.1:3010,,"}, path: "ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR", msg: "has an empty entry"},
		{name: "endpoint with a path", flags: map[string]string{"control-plane": "10.0.0.1:3010/api"}, path: "--control-plane", msg: "is not host:port"},
		{name: "endpoint port out of range", flags: map[string]string{"control-plane": "10.0.0.1:70000"}, path: "--control-plane", msg: "port \"70000\""},
		{name: "endpoint scheme", flags: map[string]string{"control-plane": "ftp://10.0.0.1:21"}, path: "--control-plane", msg: "scheme ftp"},
		{name: "S3 missing on compute", file: "ONE_CLICK_DEPLOY_ROLE=compute\nONE_CLICK_CONTROL_PLANE_IP=10.0.0.1\nCUBE_S3_ENDPOINT=\n",
			path: "CUBE_S3_ENDPOINT", msg: "copy the CUBE_S3_* lines"},
		{name: "S3 endpoint not a URL", env: map[string]string{"CUBE_S3_ENDPOINT": "10.0.0.1:9000"}, path: "CUBE_S3_ENDPOINT", msg: "is not an http or https URL"},
		{name: "S3 endpoint with credentials", env: map[string]string{"CUBE_S3_ENDPOINT": "http://user:pw@10.0.0.1:9000"}, path: "CUBE_S3_ENDPOINT", msg: "holds credentials"},
		{name: "S3 endpoint without a host", env: map[string]string{"CUBE_S3_ENDPOINT": "http://:9000"}, path: "CUBE_S3_ENDPOINT", msg: `"http://:9000" has no host`},
		{name: "S3 endpoint with a query", env: map[string]string{"CUBE_S3_ENDPOINT": "http://10.0.0.1:9000/?x=1"}, path: "CUBE_S3_ENDPOINT", msg: "has a query or a fragment"},
		{name: "S3 endpoint not http", env: map[string]string{"CUBE_S3_ENDPOINT": "s3://bucket"}, path: "CUBE_S3_ENDPOINT", msg: "is not an http or https URL"},
		{name: "S3 endpoint IPv6", env: map[string]string{"CUBE_S3_ENDPOINT": "http://[::1]:9000"},
			check: func(t *testing.T, c *Config) {
				if c.S3.HostPort() != "[::1]:9000" {
					t.Errorf("host:port %q", c.S3.HostPort())
				}
			}},
		{name: "S3 bucket too short", env: map[string]string{"CUBE_S3_BUCKET": "ab"}, path: "CUBE_S3_BUCKET", msg: `"ab" is not a valid S3 bucket name: it has 2 characters, and a bucket name has 3 to 63; it is used as written, never shortened or rewritten`},
		{name: "S3 bucket too long", file: agenttest.ComputeEnv + "CUBE_S3_BUCKET=" + strings.Repeat("a", 64) + "\n", path: "CUBE_S3_BUCKET", msg: "it has 64 characters, and a bucket name has 3 to 63"},
		{name: "S3 bucket upper case", flags: map[string]string{"s3-bucket": "Cube-Volumes"}, path: "--s3-bucket", msg: `it holds 'C', and a bucket name holds only lowercase letters, digits, dots and hyphens`},
		{name: "S3 bucket underscore", env: map[string]string{"CUBE_S3_BUCKET": "cube_volumes"}, path: "CUBE_S3_BUCKET", msg: `it holds '_'`},
		{name: "S3 bucket starts with a hyphen", env: map[string]string{"CUBE_S3_BUCKET": "-cube"}, path: "CUBE_S3_BUCKET", msg: "starts and ends with a lowercase letter or a digit"},
		{name: "S3 bucket ends with a dot", env: map[string]string{"CUBE_S3_BUCKET": "cube."}, path: "CUBE_S3_BUCKET", msg: "starts and ends with a lowercase letter or a digit"},
		{name: "S3 bucket two dots", env: map[string]string{"CUBE_S3_BUCKET": "cube..volumes"}, path: "CUBE_S3_BUCKET", msg: `it holds "..", and a bucket name has no two dots in a row`},
		{name: "S3 bucket dot beside a hyphen", env: map[string]string{"CUBE_S3_BUCKET": "cube.-volumes"}, path: "CUBE_S3_BUCKET", msg: `it holds ".-"`},
		{name: "S3 bucket an IP address", env: map[string]string{"CUBE_S3_BUCKET": "192.168.5.4"}, path: "CUBE_S3_BUCKET", msg: "a bucket name is not an IP address"},
		{name: "S3 bucket valid", env: map[string]string{"CUBE_S3_BUCKET": "cube.volumes-2"},
			check: func(t *testing.T, c *Config) {
				if c.S3.Bucket != "cube.volumes-2" {
					t.Errorf("bucket %q", c.S3.Bucket)
				}
			}},
		{name: "S3 without keys warns", env: map[string]string{"CUBE_S3_SECRET_ACCESS_KEY": ""}, file: strings.Replace(agenttest.ComputeEnv, "CUBE_S3_SECRET_ACCESS_KEY='s3cr3t$'", "", 1),
			check: func(t *testing.T, c *Config) {
				if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "CUBE_S3_SECRET_ACCESS_KEY is empty") {
					t.Errorf("warnings %q", c.Warnings)
				}
			}},
		{name: "node IP not IPv4", env: map[string]string{"CUBE_SANDBOX_NODE_IP": "fd00::5"}, path: "CUBE_SANDBOX_NODE_IP", msg: "is not an IPv4 address"},
		{name: "node IP loopback", env: map[string]string{"CUBE_SANDBOX_NODE_IP": "127.0.0.1"}, path: "CUBE_SANDBOX_NODE_IP", msg: "127.0.0.1 is a loopback address, which other hosts cannot reach"},
		{name: "node IP loopback allowed", env: map[string]string{"CUBE_SANDBOX_NODE_IP": "127.0.0.2"}, flags: map[string]string{"allow-loopback": "1"},
			check: func(t *testing.T, c *Config) {
				if c.NodeID() != "127.0.0.2" || c.Listen != "127.0.0.2:9999" {
					t.Errorf("node %s listen %s", c.NodeID(), c.Listen)
				}
			}},
		{name: "node IP link-local", env: map[string]string{"CUBE_SANDBOX_NODE_IP": "169.254.1.1"}, path: "CUBE_SANDBOX_NODE_IP", msg: "is not a routable unicast address"},
		{name: "node IP unspecified", flags: map[string]string{"node-ip": "0.0.0.0"}, path: "--node-ip", msg: "is not a routable unicast address"},
		{name: "node IP broadcast", env: map[string]string{"CUBEFLEET_NODE_IP": "255.255.255.255"}, path: "CUBEFLEET_NODE_IP", msg: "not a routable"},
		{name: "node IP detected from the default route", file: strings.Replace(agenttest.ComputeEnv, "CUBE_SANDBOX_NODE_IP=10.0.0.5", "CUBE_SANDBOX_NODE_IP=", 1),
			check: func(t *testing.T, c *Config) {
				if c.NodeID() != "10.0.0.5" || len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "using 10.0.0.5 from the default route") {
					t.Errorf("node %s, warnings %q", c.NodeID(), c.Warnings)
				}
			}},
		{name: "node IP not detectable", host: "isolated", file: strings.Replace(agenttest.ComputeEnv, "CUBE_SANDBOX_NODE_IP=10.0.0.5", "", 1),
			flags: map[string]string{"skip-cidr-conflict-check": "1"}, path: "CUBE_SANDBOX_NODE_IP", msg: "is not set and no address was found"},
		{name: "CIDR format", env: map[string]string{"CUBE_SANDBOX_NETWORK_CIDR": "192.168.0/18"}, path: "CUBE_SANDBOX_NETWORK_CIDR", msg: "is not an IPv4 network like 192.168.0.0/18"},
		{name: "CIDR mask", env: map[string]string{"CUBE_SANDBOX_NETWORK_CIDR": "10.0.0.0/12"}, path: "CUBE_SANDBOX_NETWORK_CIDR", msg: "mask /12 is out of range"},
		{name: "CIDR alignment", env: map[string]string{"CUBE_SANDBOX_NETWORK_CIDR": "192.168.64.1/18"}, path: "CUBE_SANDBOX_NETWORK_CIDR", msg: "not aligned to its network; use 192.168.64.0/18"},
		{name: "CIDR conflicts with the host", host: "conflicts", file: strings.Replace(agenttest.ComputeEnv, "10.0.0.5", "192.168.10.5", 1),
			path: "CUBE_SANDBOX_NETWORK_CIDR", msg: "192.168.0.0/18 overlaps the host's address 192.168.10.5 on eth0, route 192.168.10.0/24 dev eth0, nameserver 192.168.1.1 (/etc/resolv.conf): choose a network that overlaps none of them, e.g. 172.20.0.0/18 (or set CUBE_SANDBOX_NETWORK_CIDR_SKIP_CONFLICT_CHECK=1"},
		{name: "CIDR conflicts with a leftover cube-dev", host: "conflicts", file: strings.Replace(agenttest.ComputeEnv, "10.0.0.5", "192.168.10.5", 1) + "CUBE_SANDBOX_NETWORK_CIDR=10.200.0.0/18\n",
			path: "CUBE_SANDBOX_NETWORK_CIDR", msg: "a leftover cube-dev holding 10.200.0.0/20: choose a network that overlaps none of them, e.g. 172.20.0.0/18; or remove the leftover device (ip link delete cube-dev)"},
		{name: "CIDR conflict check skipped", host: "conflicts", file: strings.Replace(agenttest.ComputeEnv, "10.0.0.5", "192.168.10.5", 1) + "CUBE_SANDBOX_NETWORK_CIDR_SKIP_CONFLICT_CHECK=1\n",
			check: func(t *testing.T, c *Config) {
				if !c.SkipCIDRConflictCheck {
					t.Error("SkipCIDRConflictCheck not set")
				}
			}},
		{name: "skip switch not 0/1", env: map[string]string{"CUBE_SANDBOX_NETWORK_CIDR_SKIP_CONFLICT_CHECK": "maybe"}, path: "CUBE_SANDBOX_NETWORK_CIDR_SKIP_CONFLICT_CHECK", msg: `"maybe" is not 0 or 1`},
		{name: "a valid CIDR of the host", env: map[string]string{"CUBE_SANDBOX_NETWORK_CIDR": "10.100.0.0/16"},
			check: func(t *testing.T, c *Config) {
				if c.NetworkCIDR.String() != "10.100.0.0/16" {
					t.Errorf("network %s", c.NetworkCIDR)
				}
			}},
		{name: "flag beats environment beats file", file: agenttest.ComputeEnv + "CUBEFLEET_CLUSTER_LABEL=from-file\nCUBEFLEET_RUNTIME=process\nCUBEFLEET_REPORT_PERIOD=3s\n",
			env:   map[string]string{"CUBEFLEET_CLUSTER_LABEL": "from-env", "CUBEFLEET_RUNTIME": "microvm"},
			flags: map[string]string{"cluster-label": "from-flag"},
			check: func(t *testing.T, c *Config) {
				if c.ClusterLabel != "from-flag" || c.Runtime != RuntimeMicroVM || c.ReportPeriod != 3*time.Second {
					t.Errorf("cluster label %s, runtime %s, period %s", c.ClusterLabel, c.Runtime, c.ReportPeriod)
				}
			}},
		{name: "CUBEFLEET_ name beats Cube's name at the same level", env: map[string]string{"CUBEFLEET_NODE_IP": "10.0.0.6", "CUBE_SANDBOX_NODE_IP": "10.0.0.7"},
			check: func(t *testing.T, c *Config) {
				if c.NodeID() != "10.0.0.6" {
					t.Errorf("node %s", c.NodeID())
				}
			}},
		{name: "an empty environment variable is unset", env: map[string]string{"CUBE_SANDBOX_NODE_IP": "", "ONE_CLICK_DEPLOY_ROLE": ""},
			check: func(t *testing.T, c *Config) {
				if c.NodeID() != "10.0.0.5" || c.Role != RoleCompute {
					t.Errorf("node %s role %s", c.NodeID(), c.Role)
				}
			}},
		{name: "listen", flags: map[string]string{"listen": "0.0.0.0:19999"},
			check: func(t *testing.T, c *Config) {
				if c.Listen != "0.0.0.0:19999" || c.HealthURL() != "http://10.0.0.5:19999/healthz" {
					t.Errorf("listen %s, health %s", c.Listen, c.HealthURL())
				}
			}},
		{name: "listen not host:port", flags: map[string]string{"listen": "9999"}, path: "--listen", msg: "is not host:port"},
		{name: "listen port out of range", env: map[string]string{"CUBEFLEET_AGENT_LISTEN": "10.0.0.5:99999"}, path: "CUBEFLEET_AGENT_LISTEN", msg: `"10.0.0.5:99999": port "99999" is not a number from 1 to 65535`},
		{name: "listen port zero", flags: map[string]string{"listen": "10.0.0.5:0"}, path: "--listen", msg: `port "0" is not a number from 1 to 65535`},
		{name: "listen port a name", flags: map[string]string{"listen": "10.0.0.5:http"}, path: "--listen", msg: `port "http" is not a number`},
		{name: "report period zero", env: map[string]string{"CUBEFLEET_REPORT_PERIOD": "0s"}, path: "CUBEFLEET_REPORT_PERIOD", msg: `"0s" is outside the range from 100ms to 60s`},
		{name: "report period too short", env: map[string]string{"CUBEFLEET_REPORT_PERIOD": "10ms"}, path: "CUBEFLEET_REPORT_PERIOD", msg: `"10ms" is outside the range from 100ms to 60s`},
		{name: "report period too long", flags: map[string]string{"report-period": "61s"}, path: "--report-period", msg: `"61s" is outside the range from 100ms to 60s`},
		{name: "report period negative", flags: map[string]string{"report-period": "-1s"}, path: "--report-period", msg: "outside the range"},
		{name: "report period not a duration", flags: map[string]string{"report-period": "fast"}, path: "--report-period", msg: `"fast" is not a duration`},
		{name: "report period bounds", file: agenttest.ComputeEnv + "CUBEFLEET_REPORT_PERIOD=100ms\n", env: map[string]string{"CUBEFLEET_REPORT_PERIOD": "60"},
			check: func(t *testing.T, c *Config) {
				if c.ReportPeriod != time.Minute {
					t.Errorf("period %s", c.ReportPeriod)
				}
			}},
		{name: "report period in decimal seconds", env: map[string]string{"CUBEFLEET_REPORT_PERIOD": "1.5"},
			check: func(t *testing.T, c *Config) {
				if c.ReportPeriod != 1500*time.Millisecond {
					t.Errorf("period %s", c.ReportPeriod)
				}
			}},
		{name: "report period at the minimum", env: map[string]string{"CUBEFLEET_REPORT_PERIOD": "0.1"},
			check: func(t *testing.T, c *Config) {
				if c.ReportPeriod != 100*time.Millisecond {
					t.Errorf("period %s", c.ReportPeriod)
				}
			}},
		{name: "CIDR loopback", env: map[string]string{"CUBE_SANDBOX_NETWORK_CIDR": "127.0.0.0/16"}, path: "CUBE_SANDBOX_NETWORK_CIDR", msg: "inside 127.0.0.0/8 (loopback)"},
		{name: "check timeout in decimal seconds", flags: map[string]string{"timeout": "2.5"},
			check: func(t *testing.T, c *Config) {
				if c.CheckTimeout != 2500*time.Millisecond {
					t.Errorf("timeout %s", c.CheckTimeout)
				}
			}},
		{name: "report period in seconds", env: map[string]string{"CUBEFLEET_REPORT_PERIOD": "10"},
			check: func(t *testing.T, c *Config) {
				if c.ReportPeriod != 10*time.Second {
					t.Errorf("period %s", c.ReportPeriod)
				}
			}},
		{name: "runtime", flags: map[string]string{"runtime": "docker"}, path: "--runtime", msg: `"docker" is not a runtime driver; use microvm`},
		{name: "quota", env: map[string]string{"CUBEFLEET_QUOTA_CPU": "-1"}, path: "CUBEFLEET_QUOTA_CPU", msg: "is not a whole number >= 0"},
		{name: "quotas", file: agenttest.ComputeEnv + "CUBEFLEET_QUOTA_CPU=4000\nCUBEFLEET_QUOTA_MEM_MB=8192\nCUBEFLEET_MAX_MVM_NUM=10\nCUBEFLEET_CREATE_CONCURRENT_NUM=3\n",
			check: func(t *testing.T, c *Config) {
				if c.QuotaCPU != 4000 || c.QuotaMemMB != 8192 || c.MaxMVMNum != 10 || c.CreateConcurrentNum != 3 {
					t.Errorf("quotas %d %d %d %d", c.QuotaCPU, c.QuotaMemMB, c.MaxMVMNum, c.CreateConcurrentNum)
				}
			}},
		{name: "cluster label", flags: map[string]string{"cluster-label": "pool/a"}, path: "--cluster-label", msg: "must be at most 63 letters"},
		{name: "sandbox settings", file: agenttest.ComputeEnv + "CUBEFLEET_SANDBOX_DIR=/srv/sbx/\nCUBEFLEET_SANDBOX_UIDS=300000-300099\nCUBEFLEET_SANDBOX_ALLOW_OWN_USER=1\nCUBEFLEET_SANDBOX_OUTPUT_LIMIT=512KiB\nCUBEFLEET_SANDBOX_SPARES=0\n",
			check: func(t *testing.T, c *Config) {
				if c.SandboxDir != "/srv/sbx" || c.SandboxFirstUID != 300000 || c.SandboxUIDCount != 100 || !c.SandboxAllowOwnUser || c.SandboxOutputLimit != 512<<10 || c.SandboxSpares != 0 {
					t.Errorf("sandbox settings %s %d %d %v %d %d", c.SandboxDir, c.SandboxFirstUID, c.SandboxUIDCount, c.SandboxAllowOwnUser, c.SandboxOutputLimit, c.SandboxSpares)
				}
			}},
		{name: "sandbox output limit in bytes", env: map[string]string{"CUBEFLEET_SANDBOX_OUTPUT_LIMIT": "65536"},
			check: func(t *testing.T, c *Config) {
				if c.SandboxOutputLimit != 65536 {
					t.Errorf("output limit %d", c.SandboxOutputLimit)
				}
			}},
		{name: "sandbox dir relative", flags: map[string]string{"sandbox-dir": "sandboxes"}, path: "--sandbox-dir", msg: `"sandboxes" is not an absolute path`},
		{name: "sandbox dir in the state dir", env: map[string]string{"CUBEFLEET_AGENT_STATE_DIR": "/var/lib/cubefleet/agent", "CUBEFLEET_SANDBOX_DIR": "/var/lib/cubefleet/agent/sbx"},
			path: "CUBEFLEET_SANDBOX_DIR", msg: "is inside the state directory /var/lib/cubefleet/agent, which is private to the agent (mode 0700), so a sandbox's user could not reach its directory; use a directory beside it, e.g. /var/lib/cubefleet/sandboxes"},
		{name: "sandbox dir is the state dir", flags: map[string]string{"state-dir": "/srv/a", "sandbox-dir": "/srv/a/"}, path: "--sandbox-dir", msg: "is inside the state directory"},
		{name: "sandbox uids not a range", env: map[string]string{"CUBEFLEET_SANDBOX_UIDS": "2000000"}, path: "CUBEFLEET_SANDBOX_UIDS", msg: `"2000000" is not a range of user ids first-last, e.g. 2000000-2065535`},
		{name: "sandbox uids root", env: map[string]string{"CUBEFLEET_SANDBOX_UIDS": "0-100"}, path: "CUBEFLEET_SANDBOX_UIDS", msg: "is not a range of unprivileged user ids"},
		{name: "sandbox uids reversed", env: map[string]string{"CUBEFLEET_SANDBOX_UIDS": "200-100"}, path: "CUBEFLEET_SANDBOX_UIDS", msg: "last at least first"},
		{name: "sandbox uids too high", env: map[string]string{"CUBEFLEET_SANDBOX_UIDS": "4294967000-4294967294"}, path: "CUBEFLEET_SANDBOX_UIDS", msg: "below 4294967294"},
		{name: "sandbox own user not a switch", env: map[string]string{"CUBEFLEET_SANDBOX_ALLOW_OWN_USER": "sure"}, path: "CUBEFLEET_SANDBOX_ALLOW_OWN_USER", msg: `"sure" is not 0 or 1`},
		{name: "sandbox output limit too large", flags: map[string]string{"sandbox-output-limit": "65MiB"}, path: "--sandbox-output-limit", msg: "is not a size from 1 byte to 64MiB"},
		{name: "sandbox max connections zero", flags: map[string]string{"sandbox-max-connections": "0"}, path: "--sandbox-max-connections", msg: "is not a whole number from 1 to 1048576"},
		{name: "sandbox output limit zero", flags: map[string]string{"sandbox-output-limit": "0"}, path: "--sandbox-output-limit", msg: "is not a size"},
		{name: "sandbox output limit unit", flags: map[string]string{"sandbox-output-limit": "1MB"}, path: "--sandbox-output-limit", msg: "is not a size"},
		{name: "sandbox spares", env: map[string]string{"CUBEFLEET_SANDBOX_SPARES": "65"}, path: "CUBEFLEET_SANDBOX_SPARES", msg: `"65" is not a whole number from 0 to 64`},
		{name: "memory floor only rises", env: map[string]string{"CUBE_MIN_MEMORY_KB": "1000"},
			check: func(t *testing.T, c *Config) {
				if c.MinMemoryKB != DefaultMinMemoryKB || len(c.Warnings) != 1 {
					t.Errorf("floor %d, warnings %q", c.MinMemoryKB, c.Warnings)
				}
			}},
		{name: "memory floor raised", env: map[string]string{"CUBE_MIN_MEMORY_KB": "9000000"},
			check: func(t *testing.T, c *Config) {
				if c.MinMemoryKB != 9000000 {
					t.Errorf("floor %d", c.MinMemoryKB)
				}
			}},
		{name: "quickcheck off and timeout in seconds", env: map[string]string{"ONE_CLICK_RUN_QUICKCHECK": "0", "CUBE_QUICKCHECK_READY_TIMEOUT": "30"},
			check: func(t *testing.T, c *Config) {
				if c.RunCheck || c.CheckTimeout != 30*time.Second {
					t.Errorf("run check %v timeout %s", c.RunCheck, c.CheckTimeout)
				}
			}},
		{name: "check timeout too long", flags: map[string]string{"timeout": "2h"}, path: "--timeout", msg: "is not a duration from 0 to 1h"},
		{name: "join token", flags: map[string]string{"join-token": "cfj_abc"},
			check: func(t *testing.T, c *Config) {
				if c.JoinToken.Reveal() != "cfj_abc" {
					t.Errorf("join token %q", c.JoinToken.Reveal())
				}
			}},
		{name: "a node credential is not a join token", env: map[string]string{"CUBEFLEET_JOIN_TOKEN": "cfn_abc"}, path: "CUBEFLEET_JOIN_TOKEN", msg: "holds a node credential (cfn_...), not a join token"},
		{name: "not a join token", env: map[string]string{"CUBEFLEET_JOIN_TOKEN": "hunter2"}, path: "CUBEFLEET_JOIN_TOKEN", msg: "is not a join token (cfj_...)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host, file := tc.host, tc.file
			if host == "" {
				host = "compute"
			}
			switch file {
			case "":
				file = agenttest.ComputeEnv
			case "-":
				file = ""
			}
			cfg, err := loadTest(t, host, file, tc.env, tc.flags)
			if got := errPath(err); got != tc.path {
				t.Fatalf("error %v names %q, want %q", err, got, tc.path)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tc.msg) {
					t.Errorf("error %q\nwant it to contain %q", err, tc.msg)
				}
				return
			}
			if tc.check != nil {
				tc.check(t, cfg)
			}
		})
	}
}

// TestLoadOrder breaks all four groups and fixes them one at a time: the error always names
// the earliest broken group, in Cube Sandbox's order.
func TestLoadOrder(t *testing.T) {
	env := map[string]string{
		"ONE_CLICK_DEPLOY_ROLE":     "compute",
		"CUBE_S3_ENDPOINT":          "",
		"CUBE_SANDBOX_NODE_IP":      "127.0.0.1",
		"CUBE_SANDBOX_NETWORK_CIDR": "10.0.0.0/30",
	}
	steps := []struct {
		path string
		fix  func()
	}{
		{"ONE_CLICK_CONTROL_PLANE_IP", func() { env["ONE_CLICK_CONTROL_PLANE_IP"] = "10.0.0.1" }},
		{"CUBE_S3_ENDPOINT", func() { env["CUBE_S3_ENDPOINT"] = "http://10.0.0.1:9000" }},
		{"CUBE_SANDBOX_NODE_IP", func() { env["CUBE_SANDBOX_NODE_IP"] = "10.0.0.5" }},
		{"CUBE_SANDBOX_NETWORK_CIDR", func() { env["CUBE_SANDBOX_NETWORK_CIDR"] = "10.0.0.0/16" }},
		{"CUBE_SANDBOX_NETWORK_CIDR", func() { env["CUBE_SANDBOX_NETWORK_CIDR"] = "10.100.0.0/16" }}, // the conflict with eth0
		{"", nil},
	}
	// The role comes first of all.
	env["ONE_CLICK_DEPLOY_ROLE"] = "bogus"
	if _, err := loadTest(t, "compute", "", env, nil); errPath(err) != "ONE_CLICK_DEPLOY_ROLE" {
		t.Fatalf("with everything broken: %v", err)
	}
	env["ONE_CLICK_DEPLOY_ROLE"] = "compute"
	for i, s := range steps {
		_, err := loadTest(t, "compute", "", env, nil)
		if got := errPath(err); got != s.path {
			t.Fatalf("step %d: error %v names %q, want %q", i, err, got, s.path)
		}
		if s.fix != nil {
			s.fix()
		}
	}
}

func TestLoadEnvFile(t *testing.T) {
	host := testHost("compute")
	host.Root, _ = filepath.Abs(host.Root)
	dir := t.TempDir()
	t.Chdir(dir)
	// ./.env is read when nothing names a file.
	if err := os.WriteFile(".env", []byte(agenttest.ComputeEnv), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(Sources{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.EnvFile != ".env" || cfg.Role != RoleCompute {
		t.Errorf("env file %q, role %s", cfg.EnvFile, cfg.Role)
	}
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], ".env holds secrets and others can read it (mode 0644): run chmod 600 .env") {
		t.Errorf("warnings %q", cfg.Warnings)
	}
	// ONE_CLICK_ENV_FILE names another; a missing one is an error naming the variable.
	other := filepath.Join(dir, "other.env")
	os.WriteFile(other, []byte("ONE_CLICK_DEPLOY_ROLE=control\nCUBE_SANDBOX_NODE_IP=10.0.0.5\n"), 0o600)
	env := map[string]string{"ONE_CLICK_ENV_FILE": other}
	cfg, err = Load(Sources{Getenv: func(k string) string { return env[k] }, Host: host})
	if err != nil || cfg.Role != RoleControl || cfg.EnvFile != other {
		t.Fatalf("ONE_CLICK_ENV_FILE: %+v, %v", cfg, err)
	}
	env["ONE_CLICK_ENV_FILE"] = filepath.Join(dir, "missing.env")
	if _, err := Load(Sources{Getenv: func(k string) string { return env[k] }, Host: host}); errPath(err) != "ONE_CLICK_ENV_FILE" || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing env file: %v", err)
	}
	// A syntax error names the file and the line.
	os.WriteFile(other, []byte("A=1\nB=$HOME\n"), 0o600)
	env["ONE_CLICK_ENV_FILE"] = other
	if _, err := Load(Sources{Getenv: func(k string) string { return env[k] }, Host: host}); err == nil || !strings.Contains(err.Error(), "line 2: the value of B uses '$'") {
		t.Errorf("bad env file: %v", err)
	}
	// Errors about a value from the file say where it is.
	os.WriteFile(other, []byte("\nONE_CLICK_DEPLOY_ROLE=worker\n"), 0o600)
	if _, err := Load(Sources{Getenv: func(k string) string { return env[k] }, Host: host}); err == nil || !strings.Contains(err.Error(), "(line 2 of "+other+")") {
		t.Errorf("error from the file: %v", err)
	}
}

func TestLoadJoinTokenFile(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "join.token")
	os.WriteFile(tok, []byte("cfj_fromfile\n"), 0o600)
	cfg, err := loadTest(t, "compute", agenttest.ComputeEnv, map[string]string{"CUBEFLEET_JOIN_TOKEN_FILE": tok}, nil)
	if err != nil || cfg.JoinToken.Reveal() != "cfj_fromfile" || cfg.JoinTokenFile != tok {
		t.Fatalf("join token file: %v, %v", cfg, err)
	}
	os.Chmod(tok, 0o644)
	if _, err := loadTest(t, "compute", agenttest.ComputeEnv, nil, map[string]string{"join-token-file": tok}); errPath(err) != "--join-token-file" || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("readable join token file: %v", err)
	}
}

// TestLoadJoinTokenSources: an empty join token file is an error naming the setting and the
// file (it used to register without credentials); a join token value beats a join token file
// at the same level, and a higher level wins.
func TestLoadJoinTokenSources(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, empty, blank := write("good.token", "cfj_fromfile\n"), write("empty.token", ""), write("blank.token", " \n\t\n")
	for _, tc := range []struct {
		name      string
		file      string // appended to agenttest.ComputeEnv
		env       map[string]string
		flags     map[string]string
		path, msg string // the error
		want      string // the join token
		warn      string // part of a warning
	}{
		{name: "empty file", env: map[string]string{"CUBEFLEET_JOIN_TOKEN_FILE": empty}, path: "CUBEFLEET_JOIN_TOKEN_FILE",
			msg: "the join token file " + empty + " is empty; put the token from `cubefleet nodes join-token create` in it"},
		{name: "blank file", flags: map[string]string{"join-token-file": blank}, path: "--join-token-file", msg: "the join token file " + blank + " is empty"},
		{name: "empty file from the env file", file: "CUBEFLEET_JOIN_TOKEN_FILE=" + empty + "\n", path: "CUBEFLEET_JOIN_TOKEN_FILE", msg: "is empty; put the token"},
		{name: "file", env: map[string]string{"CUBEFLEET_JOIN_TOKEN_FILE": good}, want: "cfj_fromfile"},
		{name: "value beats file at the same level", env: map[string]string{"CUBEFLEET_JOIN_TOKEN": "cfj_value", "CUBEFLEET_JOIN_TOKEN_FILE": empty},
			want: "cfj_value", warn: "CUBEFLEET_JOIN_TOKEN_FILE is ignored: CUBEFLEET_JOIN_TOKEN is set"},
		{name: "value beats file in the env file", file: "CUBEFLEET_JOIN_TOKEN=cfj_value\nCUBEFLEET_JOIN_TOKEN_FILE=" + good + "\n", want: "cfj_value"},
		{name: "a file flag beats a value in the env file", file: "CUBEFLEET_JOIN_TOKEN=cfj_old\n", flags: map[string]string{"join-token-file": good}, want: "cfj_fromfile"},
		{name: "a file in the environment beats a value in the env file", file: "CUBEFLEET_JOIN_TOKEN=cfj_old\n", env: map[string]string{"CUBEFLEET_JOIN_TOKEN_FILE": good}, want: "cfj_fromfile"},
		{name: "a value flag beats a file in the environment", env: map[string]string{"CUBEFLEET_JOIN_TOKEN_FILE": good}, flags: map[string]string{"join-token": "cfj_flag"}, want: "cfj_flag"},
		{name: "neither", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadTest(t, "compute", agenttest.ComputeEnv+tc.file, tc.env, tc.flags)
			if got := errPath(err); got != tc.path {
				t.Fatalf("error %v names %q, want %q", err, got, tc.path)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tc.msg) {
					t.Errorf("error %q\nwant it to contain %q", err, tc.msg)
				}
				return
			}
			if cfg.JoinToken.Reveal() != tc.want {
				t.Errorf("join token %q, want %q", cfg.JoinToken.Reveal(), tc.want)
			}
			if tc.warn != "" && !strings.Contains(strings.Join(cfg.Warnings, "\n"), tc.warn) {
				t.Errorf("warnings %q, want one containing %q", cfg.Warnings, tc.warn)
			}
		})
	}
}

// testHost is the fake host tree name of hostinfo's tests (compute, conflicts, isolated or vm).
func testHost(name string) hostinfo.Host {
	return hostinfo.Host{Root: "hostinfo/testdata/host/" + name}
}

func mustAddr(s string) netip.Addr     { return netip.MustParseAddr(s) }
func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// TestEnvFileSecretWarning: an env file others can read draws a warning only when it holds a
// secret's value (the S3 secret, a join token), not when it names the join token file or the
// secrets come from the environment or a flag.
func TestEnvFileSecretWarning(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "join.token")
	os.WriteFile(tok, []byte("cfj_fromfile\n"), 0o600)
	const base = "ONE_CLICK_DEPLOY_ROLE=compute\nCUBE_SANDBOX_NODE_IP=10.0.0.5\nONE_CLICK_CONTROL_PLANE_IP=10.0.0.1\nCUBE_S3_ENDPOINT=http://10.0.0.1:9000\nCUBE_S3_ACCESS_KEY_ID=minio\n"
	for _, tc := range []struct {
		name  string
		file  string
		mode  os.FileMode
		env   map[string]string
		flags map[string]string
		want  string // the warning's tail, "" for no warning
	}{
		{name: "join token file path only", file: base + "CUBEFLEET_JOIN_TOKEN_FILE=" + tok + "\n", mode: 0o644},
		{name: "no secrets at all", file: base, mode: 0o644},
		{name: "secrets from the environment", file: base, mode: 0o644, env: map[string]string{"CUBE_S3_SECRET_ACCESS_KEY": "s3cr3t", "CUBEFLEET_JOIN_TOKEN": "cfj_env"}},
		{name: "join token from a flag", file: base, mode: 0o640, flags: map[string]string{"join-token": "cfj_flag"}},
		{name: "empty secret values", file: base + "CUBE_S3_SECRET_ACCESS_KEY=\nCUBEFLEET_JOIN_TOKEN=\n", mode: 0o644},
		{name: "S3 secret", file: base + "CUBE_S3_SECRET_ACCESS_KEY=s3cr3t\n", mode: 0o644, want: "(mode 0644): run chmod 600 $ENV (it holds CUBE_S3_SECRET_ACCESS_KEY)"},
		{name: "cubefleet S3 secret", file: base + "CUBEFLEET_S3_SECRET_ACCESS_KEY=s3cr3t\n", mode: 0o604, want: "(mode 0604): run chmod 600 $ENV (it holds CUBEFLEET_S3_SECRET_ACCESS_KEY)"},
		{name: "join token value", file: base + "CUBEFLEET_JOIN_TOKEN=cfj_file\n", mode: 0o640, want: "(mode 0640): run chmod 600 $ENV (it holds CUBEFLEET_JOIN_TOKEN)"},
		{name: "join token value beside its file", file: base + "CUBEFLEET_JOIN_TOKEN=cfj_file\nCUBEFLEET_JOIN_TOKEN_FILE=" + tok + "\nCUBE_S3_SECRET_ACCESS_KEY=s3cr3t\n", mode: 0o644, want: "(mode 0644): run chmod 600 $ENV (it holds CUBE_S3_SECRET_ACCESS_KEY, CUBEFLEET_JOIN_TOKEN)"},
		{name: "secret in the file, overridden by the environment", file: base + "CUBE_S3_SECRET_ACCESS_KEY=s3cr3t\n", mode: 0o644, env: map[string]string{"CUBE_S3_SECRET_ACCESS_KEY": "other"}, want: "(mode 0644): run chmod 600 $ENV (it holds CUBE_S3_SECRET_ACCESS_KEY)"},
		{name: "secret in a private file", file: base + "CUBE_S3_SECRET_ACCESS_KEY=s3cr3t\nCUBEFLEET_JOIN_TOKEN=cfj_file\n", mode: 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent.env")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, tc.mode)
			flags := map[string]string{"env-file": path}
			for k, v := range tc.flags {
				flags[k] = v
			}
			cfg, err := Load(Sources{Flags: flags, Getenv: func(k string) string { return tc.env[k] }, Host: testHost("compute")})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range cfg.Warnings {
				if strings.Contains(w, "holds secrets") {
					got = append(got, w)
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("warned %q", got)
			case tc.want != "" && (len(got) != 1 || got[0] != path+" holds secrets and others can read it "+strings.ReplaceAll(tc.want, "$ENV", path)):
				t.Errorf("warnings %q, want one ending %q", got, tc.want)
			}
		})
	}
}
