package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/capool"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/privatefile"
)

// Role is ONE_CLICK_DEPLOY_ROLE: where the agent runs relative to the control plane.
type Role string

// The roles.
const (
	// RoleControl runs the agent beside `cubefleet server` on the control node, which also acts
	// as a compute node; it reports to 127.0.0.1:3010 unless told otherwise. The default.
	RoleControl Role = "control"
	// RoleCompute runs the agent on a compute node reporting to a remote control plane, which
	// ONE_CLICK_CONTROL_PLANE_IP or ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR must name.
	RoleCompute Role = "compute"
)

// Runtime is the sandbox runtime driver the node runs; it decides the install prerequisites.
type Runtime string

// The runtime drivers.
const (
	// RuntimeMicroVM runs sandboxes as KVM microVMs (Cube's CubeShim/VMM): it needs /dev/kvm and
	// a physical host (no nested virtualization). The default.
	RuntimeMicroVM Runtime = "microvm"
	// RuntimeProcess runs sandboxes as confined processes: no KVM needed.
	RuntimeProcess Runtime = "process"
)

// Defaults.
const (
	DefaultControlPlanePort = 3010                       // CubeOps' port: ONE_CLICK_CONTROL_PLANE_IP expands to <ip>:3010
	DefaultListenPort       = 9999                       // Cubelet's port: the agent serves /healthz on <node ip>:9999
	DefaultNetworkCIDR      = "192.168.0.0/18"           // Cube's config.toml default
	DefaultS3Bucket         = "cube-volumes"             // CUBE_S3_BUCKET
	DefaultS3FSExtraOpts    = "-ouse_path_request_style" // CUBE_S3_S3FS_EXTRA_OPTS
	DefaultClusterLabel     = "default-cluster"          // Cubelet's shipped host.scheduler_label
	DefaultStateDir         = "/var/lib/cubefleet/agent" // node credential and state (mode 0700)
	DefaultReportPeriod     = time.Second                // one-click's node_status_update_frequency
	MinReportPeriod         = 100 * time.Millisecond     // the shortest CUBEFLEET_REPORT_PERIOD
	MaxReportPeriod         = time.Minute                // the longest CUBEFLEET_REPORT_PERIOD
	DefaultCheckTimeout     = 120 * time.Second          // CUBE_QUICKCHECK_READY_TIMEOUT
	MaxCheckTimeout         = time.Hour                  // quickcheck's maximum
	DefaultMinMemoryKB      = 7_500_000                  // Cube's memory floor, kB of MemTotal
	DefaultRuntime          = RuntimeMicroVM
	DefaultRole             = RoleControl
	// InstalledEnvFile is where `agent install` writes the env file; the agent reads it when
	// neither --env-file, $CUBEFLEET_AGENT_ENV_FILE, $ONE_CLICK_ENV_FILE nor ./.env names one.
	InstalledEnvFile = "/etc/cubefleet/agent.env"
)

// Setting is one configuration setting of the agent. Its value comes from the flag --Key, else
// the first of the Env variables set (not empty) in the process environment, else the first set
// in the env file, else Default.
type Setting struct {
	Key     string   // the flag name, e.g. "node-ip"
	Env     []string // variable names in order of precedence: CUBEFLEET_* first, then Cube Sandbox's name
	Default string   // "" when unset means "computed" (see Usage) or "none"
	Bool    bool     // a switch: 1/true/yes/on or 0/false/no/off; the flag alone means 1
	NoFlag  bool     // only from the environment or the env file (a flag would show in ps)
	Secret  bool     // its value is a secret: an env file holding it must not be readable by others
	Command string   // which commands have the flag: "" every agent command, "check" check and install, "install" install only
	Usage   string   // one line for --help
}

// Settings returns the agent's settings, in the order docs/agent.md lists them.
func Settings() []Setting {
	return []Setting{
		{Key: "env-file", Env: []string{"CUBEFLEET_AGENT_ENV_FILE", "ONE_CLICK_ENV_FILE"}, Usage: "env file to read (default ./.env, else " + InstalledEnvFile + " when it exists)"},
		{Key: "role", Env: []string{"CUBEFLEET_AGENT_ROLE", "ONE_CLICK_DEPLOY_ROLE"}, Default: string(DefaultRole), Usage: "control (beside the server on the control node) or compute (reporting to a remote control plane)"},
		{Key: "control-plane", Env: []string{"CUBEFLEET_CONTROL_PLANE", "ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR"}, Usage: "control plane [https://]host:port, or several separated by commas (failover); beats --control-plane-ip"},
		{Key: "control-plane-ip", Env: []string{"CUBEFLEET_CONTROL_PLANE_IP", "ONE_CLICK_CONTROL_PLANE_IP"}, Usage: "control plane IPv4 address; expanded to <ip>:3010"},
		{Key: "control-plane-tls", Env: []string{"CUBEFLEET_CONTROL_PLANE_TLS"}, Default: "0", Bool: true, Usage: "use https:// for control-plane addresses without a scheme (and for --control-plane-ip)"},
		{Key: "ca-file", Env: []string{"CUBEFLEET_CA_FILE"}, Usage: "PEM file of CA certificates to trust for an https:// control plane, besides the system's"},
		{Key: "s3-endpoint", Env: []string{"CUBEFLEET_S3_ENDPOINT", "CUBE_S3_ENDPOINT"}, Usage: "S3 endpoint of the sandbox volume store, e.g. http://10.0.0.1:9000 (required on compute nodes)"},
		{Key: "s3-access-key-id", Env: []string{"CUBEFLEET_S3_ACCESS_KEY_ID", "CUBE_S3_ACCESS_KEY_ID"}, Usage: "S3 access key ID"},
		{Key: "s3-secret-access-key", Env: []string{"CUBEFLEET_S3_SECRET_ACCESS_KEY", "CUBE_S3_SECRET_ACCESS_KEY"}, NoFlag: true, Secret: true, Usage: "S3 secret access key (environment or env file only)"},
		{Key: "s3-bucket", Env: []string{"CUBEFLEET_S3_BUCKET", "CUBE_S3_BUCKET"}, Default: DefaultS3Bucket, Usage: "S3 bucket of the sandbox volumes"},
		{Key: "s3-s3fs-extra-opts", Env: []string{"CUBEFLEET_S3_S3FS_EXTRA_OPTS", "CUBE_S3_S3FS_EXTRA_OPTS"}, Default: DefaultS3FSExtraOpts, Usage: "extra s3fs mount options"},
		{Key: "node-ip", Env: []string{"CUBEFLEET_NODE_IP", "CUBE_SANDBOX_NODE_IP"}, Usage: "this node's IPv4 address, also its node ID (default: the default route's interface address)"},
		{Key: "allow-loopback", Env: []string{"CUBEFLEET_ALLOW_LOOPBACK"}, Default: "0", Bool: true, Usage: "accept a 127.x node IP (single-host demos and tests)"},
		{Key: "network-cidr", Env: []string{"CUBEFLEET_NETWORK_CIDR", "CUBE_SANDBOX_NETWORK_CIDR"}, Default: DefaultNetworkCIDR, Usage: "sandbox network, /16 to /24, not overlapping the host's addresses, routes or nameservers"},
		{Key: "skip-cidr-conflict-check", Env: []string{"CUBEFLEET_NETWORK_CIDR_SKIP_CONFLICT_CHECK", "CUBE_SANDBOX_NETWORK_CIDR_SKIP_CONFLICT_CHECK"}, Default: "0", Bool: true, Usage: "skip the sandbox network's host conflict check (not recommended)"},
		{Key: "join-token", Env: []string{"CUBEFLEET_JOIN_TOKEN"}, Secret: true, Usage: "join token (cfj_...) for the first registration; prefer --join-token-file, a flag shows in ps"},
		{Key: "join-token-file", Env: []string{"CUBEFLEET_JOIN_TOKEN_FILE"}, Usage: "file holding the join token (mode 0600, owned by you)"},
		{Key: "listen", Env: []string{"CUBEFLEET_AGENT_LISTEN"}, Usage: "address of the agent's health endpoint (default <node ip>:9999)"},
		{Key: "state-dir", Env: []string{"CUBEFLEET_AGENT_STATE_DIR"}, Default: DefaultStateDir, Usage: "state directory (mode 0700): the node credential"},
		{Key: "pid-file", Env: []string{"CUBEFLEET_AGENT_PID_FILE"}, Usage: "write the agent's process ID here while it runs (agent down --root reads it)"},
		{Key: "report-period", Env: []string{"CUBEFLEET_REPORT_PERIOD"}, Default: DefaultReportPeriod.String(), Usage: "status report period, also the HTTP timeout of each report"},
		{Key: "cluster-label", Env: []string{"CUBEFLEET_CLUSTER_LABEL"}, Default: DefaultClusterLabel, Usage: "cluster_label reported (the pool of a stock Cubelet)"},
		{Key: "runtime", Env: []string{"CUBEFLEET_RUNTIME"}, Default: string(DefaultRuntime), Usage: "sandbox runtime driver: microvm (needs /dev/kvm, no nested virtualization) or process"},
		{Key: "quota-cpu", Env: []string{"CUBEFLEET_QUOTA_CPU"}, Usage: "schedulable CPU in millicores (default 2000 x cores)"},
		{Key: "quota-mem-mb", Env: []string{"CUBEFLEET_QUOTA_MEM_MB"}, Usage: "schedulable memory in MiB (default 1.25 x MemTotal)"},
		{Key: "max-mvm-num", Env: []string{"CUBEFLEET_MAX_MVM_NUM"}, Usage: "maximum sandboxes (default quota memory / 512, at least 1)"},
		{Key: "create-concurrent-num", Env: []string{"CUBEFLEET_CREATE_CONCURRENT_NUM"}, Default: "0", Usage: "concurrent sandbox creations (0: the scheduler's limit)"},
		{Key: "min-memory-kb", Env: []string{"CUBEFLEET_MIN_MEMORY_KB", "CUBE_MIN_MEMORY_KB"}, Usage: "install's memory floor in kB of MemTotal; can only raise the default 7500000"},
		{Key: "run-check", Env: []string{"CUBEFLEET_RUN_CHECK", "ONE_CLICK_RUN_QUICKCHECK"}, Default: "1", Bool: true, Command: "install", Usage: "run agent check after installing"},
		{Key: "timeout", Env: []string{"CUBEFLEET_CHECK_TIMEOUT", "CUBE_QUICKCHECK_READY_TIMEOUT"}, Default: DefaultCheckTimeout.String(), Command: "check", Usage: "how long agent check waits for every check to pass (0: probe once; at most 1h; a bare number is seconds)"},
	}
}

// Secret is a string that is never printed: String, GoString, LogValue and MarshalText show
// "[redacted]" (or "" when empty). Reveal returns the value.
type Secret string

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// String implements fmt.Stringer without revealing the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString implements fmt.GoStringer without revealing the value.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// LogValue implements slog.LogValuer without revealing the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText implements encoding.TextMarshaler without revealing the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// S3 is the sandbox volume store (CUBE_S3_*): the node's runtime mounts it; the agent validates
// it, reports it to the control plane and `agent check` tests that Endpoint answers on TCP.
type S3 struct {
	Endpoint        string // URL, http or https, e.g. http://10.0.0.1:9000; "" when not configured
	AccessKeyID     string // CUBE_S3_ACCESS_KEY_ID
	SecretAccessKey Secret // CUBE_S3_SECRET_ACCESS_KEY
	Bucket          string // CUBE_S3_BUCKET, default DefaultS3Bucket
	S3FSExtraOpts   string // CUBE_S3_S3FS_EXTRA_OPTS, default DefaultS3FSExtraOpts
}

// HostPort returns the endpoint's host:port (port 80 or 443 from the scheme when absent).
func (s S3) HostPort() string {
	u, err := url.Parse(s.Endpoint)
	if err != nil || u.Host == "" {
		return ""
	}
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// Config is the agent's validated configuration. Load builds it; tests may build one directly.
type Config struct {
	Role          Role         // ONE_CLICK_DEPLOY_ROLE
	ControlPlane  []string     // base URLs, "http://10.0.0.1:3010" or "https://..."; the first is tried first
	NodeIP        netip.Addr   // IPv4; also the node ID
	AllowLoopback bool         // a 127.x NodeIP is accepted
	S3            S3           // the sandbox volume store
	NetworkCIDR   netip.Prefix // the sandbox network, /16 to /24
	// ControlPlaneTLS records CUBEFLEET_CONTROL_PLANE_TLS=1: addresses without a scheme (and
	// ONE_CLICK_CONTROL_PLANE_IP's <ip>:3010) became https:// in ControlPlane.
	ControlPlaneTLS bool
	// CAFile is the absolute path of the PEM bundle of CA certificates trusted for an https://
	// control plane besides the system's (CUBEFLEET_CA_FILE); "" for none.
	CAFile string
	// RootCAs are the CAs trusted for an https:// control plane: the system's plus CAFile's;
	// nil means the system's only.
	RootCAs *x509.CertPool
	// SkipCIDRConflictCheck records CUBE_SANDBOX_NETWORK_CIDR_SKIP_CONFLICT_CHECK=1.
	SkipCIDRConflictCheck bool
	JoinToken             Secret        // cfj_...; "" registers without one (stock-Cubelet mode)
	JoinTokenFile         string        // where JoinToken came from, when from a file
	Listen                string        // host:port of the health endpoint
	StateDir              string        // holds StateFile; created with mode 0700
	PIDFile               string        // "" for none
	ReportPeriod          time.Duration // > 0; also the HTTP timeout of every call
	ClusterLabel          string        // cluster_label, a valid label value
	Runtime               Runtime       // the sandbox runtime driver
	QuotaCPU              int64         // millicores; 0 = 2000 x cores
	QuotaMemMB            int64         // MiB; 0 = ceil(1.25 x MemTotal MiB)
	MaxMVMNum             int64         // 0 = QuotaMemMB/512, at least 1
	CreateConcurrentNum   int64         // 0 = the scheduler's limit
	MinMemoryKB           int64         // install's memory floor, kB; >= DefaultMinMemoryKB
	RunCheck              bool          // install runs the check afterwards
	// RunCheckFrom says where RunCheck came from, for install's output: "--run-check=0",
	// "ONE_CLICK_RUN_QUICKCHECK=0 in the environment", "... in the env file <path>", or "the
	// default"; "" when the Config was not loaded.
	RunCheckFrom string
	CheckTimeout time.Duration // 0 = probe once
	EnvFile      string        // the env file read; "" for none
	Host         Host          // where host facts and network state are read
	Warnings     []string      // things an operator should fix that do not stop the agent
}

// NodeID returns the node's ID: its IPv4 address in dotted form.
func (c *Config) NodeID() string { return c.NodeIP.String() }

// TLSClientConfig returns the TLS settings of every call to the control plane (the agent's and
// agent check's): TLS 1.2 or later, trusting RootCAs (the system's CAs when nil).
func (c *Config) TLSClientConfig() *tls.Config { return capool.ClientConfig(c.RootCAs) }

// DialContext returns the function every connection to the control plane is made with (the
// agent's calls and agent check's): base's, except that when the node IP and the destination
// are both loopback addresses the connection comes from the node IP, so that a control plane
// on the same host sees the node's own address (a join token bound to 127.0.0.11 is accepted
// from the agent of node 127.0.0.11, whose connections would otherwise come from 127.0.0.1).
// For any other node IP or destination, the kernel chooses the source address.
func (c *Config) DialContext(base *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := *base
		if local := localAddrFor(c.NodeIP, addr); local != nil {
			d.LocalAddr = local
		}
		return d.DialContext(ctx, network, addr)
	}
}

// localAddrFor returns the address to connect to addr (host:port) from: the node IP when it
// and addr's host (an IPv4 address, or localhost) are loopback; nil otherwise.
func localAddrFor(nodeIP netip.Addr, addr string) net.Addr {
	if !nodeIP.Is4() || !nodeIP.IsLoopback() {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	if a, err := netip.ParseAddr(host); (err != nil || !a.Unmap().Is4() || !a.IsLoopback()) && !strings.EqualFold(host, "localhost") {
		return nil
	}
	return &net.TCPAddr{IP: nodeIP.AsSlice()}
}

// Sources says where Load reads settings from. Precedence: Flags, then Getenv, then the env
// file, then each setting's default (see Setting).
type Sources struct {
	Flags  map[string]string   // values of the flags given on the command line, by Setting.Key
	Getenv func(string) string // nil reads nothing from the environment
	Host   Host                // the machine whose addresses, routes and facts are checked
	// NoConflictCheck skips the sandbox network's host conflict check (agent check: the
	// running runtime owns those routes); the format rules still apply.
	NoConflictCheck bool
}

// value is a setting's resolved raw value.
type value struct {
	s     string
	name  string // the flag or variable it came from, or the setting's main name when unset
	where string // " (line 3 of ./.env)" for the env file, else ""
	rank  int    // 3 flag, 2 environment, 1 env file, 0 default
}

func (v value) set() bool { return v.rank > 0 }

// fail returns the INVALID_INPUT error for v: Details["path"] is the variable (or flag) name.
func (v value) fail(format string, args ...any) error {
	return cubefleet.Invalid(v.name, "%s%s", fmt.Sprintf(format, args...), v.where)
}

// Load reads the agent's configuration and validates it before anything local is touched, in
// Cube Sandbox's order: the role and the control-plane address; then CUBE_S3_ENDPOINT; then the
// node IP; then the sandbox network (format, mask, alignment, host conflicts); then the rest.
// The first problem is returned as a *cubefleet.Error with code INVALID_INPUT whose
// Details["path"] names the variable (or the flag) and whose message says how to fix it.
func Load(src Sources) (*Config, error) {
	getenv := src.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	settings := map[string]Setting{}
	for _, s := range Settings() {
		settings[s.Key] = s
	}
	cfg := &Config{Host: src.Host}

	// The env file: named by a flag or the environment, else ./.env, else the installed one.
	file := map[string]EnvVar{}
	envFile := lookup(settings["env-file"], src.Flags, getenv, nil, "")
	path := envFile.s
	if !envFile.set() {
		for _, p := range []string{".env", InstalledEnvFile} {
			if _, err := os.Stat(p); err == nil {
				path = p
				break
			}
		}
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, envFile.fail("env file %s does not exist; create it (start from examples/agent.env in the cubefleet repository; docs/agent.md lists every setting) or point %s at it", path, envFile.name)
			}
			return nil, envFile.fail("read env file %s: %v", path, err)
		}
		vars, err := ParseEnv(data)
		if err != nil {
			return nil, envFile.fail("env file %s: %v", path, err)
		}
		file = EnvMap(vars)
		cfg.EnvFile = path
	}
	get := func(key string) value {
		s, ok := settings[key]
		if !ok {
			panic("agent: unknown setting " + key)
		}
		return lookup(s, src.Flags, getenv, file, cfg.EnvFile)
	}

	// 1. Role and control-plane address.
	role := get("role")
	switch Role(strings.ToLower(strings.TrimSpace(role.s))) {
	case RoleControl:
		cfg.Role = RoleControl
	case RoleCompute:
		cfg.Role = RoleCompute
	default:
		return nil, role.fail("%q is not a role; set it to compute (a compute node reporting to a remote control plane) or control (the agent beside the server on the control node, the default)", role.s)
	}
	useTLS := get("control-plane-tls")
	var err error
	if cfg.ControlPlaneTLS, err = parseBool(useTLS.s); err != nil {
		return nil, useTLS.fail("%v", err)
	}
	scheme := "http"
	if cfg.ControlPlaneTLS {
		scheme = "https"
	}
	addr, ip := get("control-plane"), get("control-plane-ip")
	from := useTLS // the setting the endpoints came from, for errors about them
	if ip.set() {
		a, err := netip.ParseAddr(strings.TrimSpace(ip.s))
		if err != nil || !a.Is4() {
			return nil, ip.fail("%q is not an IPv4 address; set it to the control node's address, e.g. 10.0.0.1 (it becomes 10.0.0.1:%d), or set ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR=host:port", ip.s, DefaultControlPlanePort)
		}
		if why := notDialable(a); why != "" {
			return nil, ip.fail("%s is %s, not an address the agent can connect to; set it to the control node's address, e.g. 10.0.0.1", a, why)
		}
	}
	switch {
	case addr.set() && addr.rank >= ip.rank:
		eps, err := parseEndpoints(addr.s, scheme)
		if err != nil {
			return nil, addr.fail("%v", err)
		}
		cfg.ControlPlane, from = eps, addr
	case ip.set():
		cfg.ControlPlane, from = []string{scheme + "://" + net.JoinHostPort(strings.TrimSpace(ip.s), strconv.Itoa(DefaultControlPlanePort))}, ip
	case cfg.Role == RoleCompute:
		return nil, ip.fail("is not set; a compute node reports to a remote control plane: set ONE_CLICK_CONTROL_PLANE_IP=<control node IP> (port %d) or ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR=host:port", DefaultControlPlanePort)
	default:
		cfg.ControlPlane = []string{scheme + "://127.0.0.1:" + strconv.Itoa(DefaultControlPlanePort)}
	}
	caFile := get("ca-file")
	if caFile.set() {
		path, err := filepath.Abs(strings.TrimSpace(caFile.s))
		if err != nil {
			return nil, caFile.fail("%v", err)
		}
		if cfg.RootCAs, err = capool.Load(path); err != nil {
			return nil, caFile.fail("%v", err)
		}
		cfg.CAFile = path
	}
	// Once TLS is on, every endpoint must be https://: failing over to a plain one would send
	// the join token and the node credential in clear text.
	if plain := slices.IndexFunc(cfg.ControlPlane, func(ep string) bool { return strings.HasPrefix(ep, "http://") }); plain >= 0 {
		var why, fix string
		secure := slices.IndexFunc(cfg.ControlPlane, func(ep string) bool { return strings.HasPrefix(ep, "https://") })
		switch {
		case cfg.ControlPlaneTLS:
			why, fix = useTLS.name+"=1", "write https:// or no scheme for every endpoint"
		case secure >= 0:
			why, fix = cfg.ControlPlane[secure]+" is in the list", "write https:// for every endpoint (or set CUBEFLEET_CONTROL_PLANE_TLS=1 and write no scheme)"
		case cfg.CAFile != "":
			why, fix = caFile.name+" is set", "write https:// addresses or set CUBEFLEET_CONTROL_PLANE_TLS=1, or unset "+caFile.name+" for a plain-HTTP control plane"
			if !from.set() {
				from = caFile
			}
		}
		if why != "" {
			return nil, from.fail("%s is plain HTTP but TLS is on (%s): the agent would send its join token and node credential to it in clear text; once TLS is on, every endpoint must be https://: %s", cfg.ControlPlane[plain], why, fix)
		}
	}

	// 2. S3: a compute node's volume plugin depends on it.
	s3ep := get("s3-endpoint")
	if !s3ep.set() {
		if cfg.Role == RoleCompute {
			return nil, s3ep.fail("is not set; the sandbox volume plugin depends on S3 and compute nodes run no store of their own: copy the CUBE_S3_* lines (CUBE_S3_ENDPOINT, CUBE_S3_ACCESS_KEY_ID, CUBE_S3_SECRET_ACCESS_KEY, CUBE_S3_BUCKET, CUBE_S3_S3FS_EXTRA_OPTS) from the control node's env file (.one-click.env) into this node's")
		}
		cfg.Warnings = append(cfg.Warnings, "CUBE_S3_ENDPOINT is not set: sandbox volumes on S3 are disabled on this node")
	} else {
		ep, err := parseS3Endpoint(strings.TrimSpace(s3ep.s))
		if err != nil {
			return nil, s3ep.fail("%v", err)
		}
		cfg.S3.Endpoint = ep
	}
	cfg.S3.AccessKeyID = get("s3-access-key-id").s
	cfg.S3.SecretAccessKey = Secret(get("s3-secret-access-key").s)
	bucket := get("s3-bucket")
	cfg.S3.Bucket = strings.TrimSpace(bucket.s)
	if err := checkBucketName(cfg.S3.Bucket); err != nil {
		return nil, bucket.fail("%q is not a valid S3 bucket name: %v; it is used as written, never shortened or rewritten: set the bucket the control node's CUBE_S3_BUCKET names", bucket.s, err)
	}
	cfg.S3.S3FSExtraOpts = get("s3-s3fs-extra-opts").s
	if cfg.S3.Endpoint != "" && (cfg.S3.AccessKeyID == "" || cfg.S3.SecretAccessKey == "") {
		cfg.Warnings = append(cfg.Warnings, "CUBE_S3_ACCESS_KEY_ID or CUBE_S3_SECRET_ACCESS_KEY is empty: copy them from the control node's env file")
	}

	// 3. Node IP.
	loop := get("allow-loopback")
	allowLoopback, err := parseBool(loop.s)
	if err != nil {
		return nil, loop.fail("%v", err)
	}
	cfg.AllowLoopback = allowLoopback
	nodeIP := get("node-ip")
	if nodeIP.set() {
		a, err := netip.ParseAddr(strings.TrimSpace(nodeIP.s))
		if err != nil || !a.Is4() {
			return nil, nodeIP.fail("%q is not an IPv4 address; set it to this node's address on the network the control plane reaches (see `ip -4 addr`)", nodeIP.s)
		}
		cfg.NodeIP = a
	} else {
		a, err := src.Host.DetectNodeIP()
		if err != nil {
			return nil, nodeIP.fail("is not set and no address was found on the default route's interface (%v); set CUBE_SANDBOX_NODE_IP=<this node's IPv4 address>", err)
		}
		cfg.NodeIP = a
		cfg.Warnings = append(cfg.Warnings, "CUBE_SANDBOX_NODE_IP is not set: using "+a.String()+" from the default route")
	}
	switch a := cfg.NodeIP; {
	case a.IsLoopback() && !cfg.AllowLoopback:
		return nil, nodeIP.fail("%s is a loopback address, which other hosts cannot reach; set it to this node's address on the network the control plane reaches, or pass --allow-loopback (CUBEFLEET_ALLOW_LOOPBACK=1) for a single-host demo or test", a)
	case !a.IsLoopback() && !globalUnicast(a):
		return nil, nodeIP.fail("%s is not a routable unicast address (unspecified, link-local, multicast, broadcast or reserved); set it to this node's address on the network the control plane reaches", a)
	}

	// 4. Sandbox network.
	cidr := get("network-cidr")
	network, err := ParseNetworkCIDR(cidr.s)
	if err != nil {
		return nil, cidr.fail("%v", err)
	}
	cfg.NetworkCIDR = network
	skip := get("skip-cidr-conflict-check")
	if cfg.SkipCIDRConflictCheck, err = parseBool(skip.s); err != nil {
		return nil, skip.fail("%v", err)
	}
	if !cfg.SkipCIDRConflictCheck && !src.NoConflictCheck {
		conflicts, err := src.Host.NetworkConflicts(network)
		if err != nil {
			return nil, cidr.fail("cannot check %s against the host's network (%v); fix that or set CUBE_SANDBOX_NETWORK_CIDR_SKIP_CONFLICT_CHECK=1", network, err)
		}
		if len(conflicts) > 0 {
			parts := make([]string, len(conflicts))
			for i, c := range conflicts {
				parts[i] = c.String()
			}
			fix := "choose a network that overlaps none of them"
			if s := src.Host.SuggestNetwork(network); s.IsValid() {
				fix += ", e.g. " + s.String()
			}
			for _, c := range conflicts {
				if c.Kind == "cube-dev" {
					fix += "; or remove the leftover device (ip link delete cube-dev) if no sandbox runtime uses it"
					break
				}
			}
			return nil, cidr.fail("%s overlaps the host's %s: %s (or set CUBE_SANDBOX_NETWORK_CIDR_SKIP_CONFLICT_CHECK=1, not recommended)", network, strings.Join(parts, ", "), fix)
		}
	}

	// 5. The rest.
	if err := cfg.loadRest(get); err != nil {
		return nil, err
	}
	// Warn about an env file others can read only when it holds a secret's value: a file that
	// names the join token file (CUBEFLEET_JOIN_TOKEN_FILE=<path>) or gets its secrets from the
	// environment holds none.
	if secrets := secretsIn(file); cfg.EnvFile != "" && len(secrets) > 0 {
		if fi, err := os.Stat(cfg.EnvFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("%s holds secrets and others can read it (mode %04o): run chmod 600 %s (it holds %s)", cfg.EnvFile, fi.Mode().Perm(), cfg.EnvFile, strings.Join(secrets, ", ")))
		}
	}
	return cfg, nil
}

// secretsIn returns the variables of the env file that hold a secret setting's value (see
// Setting.Secret), in the order of Settings; empty values do not count.
func secretsIn(file map[string]EnvVar) []string {
	var names []string
	for _, s := range Settings() {
		if !s.Secret {
			continue
		}
		for _, e := range s.Env {
			if v, ok := file[e]; ok && strings.TrimSpace(v.Value) != "" {
				names = append(names, e)
			}
		}
	}
	return names
}

func (cfg *Config) loadRest(get func(string) value) error {
	// The join token: a value beats a file at the same level (flag, environment, env file);
	// a higher level wins, as for every other setting.
	tok, tokFile := get("join-token"), get("join-token-file")
	switch {
	case tok.set() && tok.rank >= tokFile.rank:
		cfg.JoinToken = Secret(strings.TrimSpace(tok.s))
		if tokFile.set() {
			cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("%s is ignored: %s is set at the same or a higher level and wins", tokFile.name, tok.name))
		}
	case tokFile.set():
		path := strings.TrimSpace(tokFile.s)
		data, err := privatefile.Read(path)
		if err != nil {
			return tokFile.fail("%v", err)
		}
		if strings.TrimSpace(string(data)) == "" {
			return tokFile.fail("the join token file %s is empty; put the token from `cubefleet nodes join-token create` in it", path)
		}
		cfg.JoinToken = Secret(strings.TrimSpace(string(data)))
		cfg.JoinTokenFile = path
		tok = tokFile
	}
	if t := cfg.JoinToken.Reveal(); t != "" {
		switch {
		case strings.HasPrefix(t, nodeapi.CredentialPrefix):
			return tok.fail("holds a node credential (cfn_...), not a join token; create a join token on the control plane: cubefleet nodes join-token create --pool <pool>")
		case !strings.HasPrefix(t, nodeapi.JoinTokenPrefix) || strings.ContainsAny(t, " \t\r\n"):
			return tok.fail("is not a join token (cfj_...); create one on the control plane: cubefleet nodes join-token create --pool <pool>")
		}
	}

	listen := get("listen")
	cfg.Listen = strings.TrimSpace(listen.s)
	if cfg.Listen == "" {
		cfg.Listen = net.JoinHostPort(cfg.NodeIP.String(), strconv.Itoa(DefaultListenPort))
	} else if _, port, err := net.SplitHostPort(cfg.Listen); err != nil || port == "" {
		return listen.fail("%q is not host:port; e.g. %s:%d", listen.s, cfg.NodeIP, DefaultListenPort)
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return listen.fail("%q: port %q is not a number from 1 to 65535; e.g. %s:%d", listen.s, port, cfg.NodeIP, DefaultListenPort)
	}
	cfg.StateDir = get("state-dir").s
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir
	}
	cfg.PIDFile = get("pid-file").s

	period := get("report-period")
	d, err := parseDuration(period.s)
	if err != nil {
		return period.fail("%q is not a duration; e.g. 1s, 500ms, or a number of seconds such as 1.5", period.s)
	}
	if d < MinReportPeriod || d > MaxReportPeriod {
		return period.fail("%q is outside the range from 100ms to 60s (the agent reports this often, and each call times out after it); e.g. 1s", period.s)
	}
	cfg.ReportPeriod = d
	cfg.ClusterLabel = get("cluster-label").s
	if cfg.ClusterLabel != "" && !validLabelValue(cfg.ClusterLabel) {
		return get("cluster-label").fail("%q must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", cfg.ClusterLabel)
	}
	rt := get("runtime")
	switch Runtime(strings.TrimSpace(rt.s)) {
	case RuntimeMicroVM, RuntimeProcess:
		cfg.Runtime = Runtime(strings.TrimSpace(rt.s))
	default:
		return rt.fail("%q is not a runtime driver; use microvm (KVM microVMs, needs /dev/kvm) or process", rt.s)
	}
	for _, q := range []struct {
		key string
		dst *int64
	}{{"quota-cpu", &cfg.QuotaCPU}, {"quota-mem-mb", &cfg.QuotaMemMB}, {"max-mvm-num", &cfg.MaxMVMNum}, {"create-concurrent-num", &cfg.CreateConcurrentNum}} {
		v := get(q.key)
		if strings.TrimSpace(v.s) == "" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v.s), 10, 64)
		if err != nil || n < 0 {
			return v.fail("%q is not a whole number >= 0 (0 means the default)", v.s)
		}
		*q.dst = n
	}
	cfg.MinMemoryKB = DefaultMinMemoryKB
	if v := get("min-memory-kb"); strings.TrimSpace(v.s) != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v.s), 10, 64)
		if err != nil || n < 0 {
			return v.fail("%q is not a whole number of kB", v.s)
		}
		if n < DefaultMinMemoryKB {
			cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("%s=%d is below the floor of %d kB, which stays", v.name, n, DefaultMinMemoryKB))
		} else {
			cfg.MinMemoryKB = n
		}
	}
	rc := get("run-check")
	if cfg.RunCheck, err = parseBool(rc.s); err != nil {
		return rc.fail("%v", err)
	}
	switch rc.rank {
	case 3:
		cfg.RunCheckFrom = rc.name + "=" + strings.TrimSpace(rc.s)
	case 2:
		cfg.RunCheckFrom = rc.name + "=" + strings.TrimSpace(rc.s) + " in the environment"
	case 1:
		cfg.RunCheckFrom = rc.name + "=" + strings.TrimSpace(rc.s) + " in the env file " + cfg.EnvFile
	default:
		cfg.RunCheckFrom = "the default"
	}
	to := get("timeout")
	if cfg.CheckTimeout, err = parseDuration(to.s); err != nil || cfg.CheckTimeout < 0 || cfg.CheckTimeout > MaxCheckTimeout {
		return to.fail("%q is not a duration from 0 to 1h (a bare number is seconds)", to.s)
	}
	return nil
}

// lookup resolves s: the flag, else the environment, else the env file, else the default. An
// empty or blank value counts as unset at every level (as `${VAR:-default}` in the installer).
func lookup(s Setting, flags map[string]string, getenv func(string) string, file map[string]EnvVar, fileName string) value {
	if f := flags[s.Key]; strings.TrimSpace(f) != "" {
		return value{s: f, name: "--" + s.Key, rank: 3}
	}
	for _, e := range s.Env {
		if x := getenv(e); strings.TrimSpace(x) != "" {
			return value{s: x, name: e, rank: 2}
		}
	}
	for _, e := range s.Env {
		if x, ok := file[e]; ok && strings.TrimSpace(x.Value) != "" {
			return value{s: x.Value, name: e, where: fmt.Sprintf(" (line %d of %s)", x.Line, fileName), rank: 1}
		}
	}
	return value{s: s.Default, name: s.Env[len(s.Env)-1]}
}

// parseEndpoints parses ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR: host:port entries separated by
// commas, each optionally with http:// or https://; entries without a scheme get scheme://
// (http, or https with CUBEFLEET_CONTROL_PLANE_TLS=1).
func parseEndpoints(s, defaultScheme string) ([]string, error) {
	var out []string
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("%q has an empty entry; list host:port entries separated by commas, e.g. 10.0.0.1:%d,10.0.0.2:%d", s, DefaultControlPlanePort, DefaultControlPlanePort)
		}
		scheme := defaultScheme
		rest := item
		if i := strings.Index(item, "://"); i >= 0 {
			scheme, rest = strings.ToLower(item[:i]), item[i+3:]
			if scheme != "http" && scheme != "https" {
				return nil, fmt.Errorf("%q: scheme %s is not http or https", item, scheme)
			}
		}
		rest = strings.TrimSuffix(rest, "/")
		host, port, err := net.SplitHostPort(rest)
		if err != nil || host == "" || strings.ContainsAny(rest, "/?#@") {
			return nil, fmt.Errorf("%q is not host:port; e.g. 10.0.0.1:%d", item, DefaultControlPlanePort)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q: port %q is not a number from 1 to 65535", item, port)
		}
		if a, err := netip.ParseAddr(host); err == nil {
			if why := notDialable(a); why != "" {
				return nil, fmt.Errorf("%q: %s is %s, not an address the agent can connect to; write the control node's address", item, host, why)
			}
		}
		out = append(out, scheme+"://"+net.JoinHostPort(host, port))
	}
	return out, nil
}

// parseS3Endpoint checks CUBE_S3_ENDPOINT: an http or https URL with a host (an IPv6 address
// in brackets), an optional port from 1 to 65535, no credentials, no query or fragment.
func parseS3Endpoint(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http or https URL; copy CUBE_S3_ENDPOINT from the control node's env file, e.g. http://10.0.0.1:9000", s)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("%q has no host; write http(s)://host[:port], e.g. http://10.0.0.1:9000 (an IPv6 address in brackets: http://[fd00::1]:9000)", s)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", fmt.Errorf("%q has a query or a fragment; write http(s)://host[:port]", s)
	}
	if u.User != nil {
		return "", fmt.Errorf("%q holds credentials; put them in CUBE_S3_ACCESS_KEY_ID and CUBE_S3_SECRET_ACCESS_KEY instead", u.Redacted())
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%q: port %q is not a number from 1 to 65535", s, p)
		}
	}
	return s, nil
}

// notDialable says why a is no address to connect to ("unspecified", "multicast",
// "broadcast" or "reserved"), or returns "" when it is one. Loopback and private addresses are
// fine (the control role reports to 127.0.0.1).
func notDialable(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsUnspecified() || a.Is4() && a.As4()[0] == 0:
		return "unspecified (to a listener it means any address; there is no host to connect to)"
	case a.IsMulticast():
		return "a multicast address"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the broadcast address"
	case a.Is4() && a.As4()[0] >= 240:
		return "a reserved address (240.0.0.0/4)"
	}
	return ""
}

// checkBucketName checks an S3 bucket name against the S3 naming rules, returning the rule
// broken: 3 to 63 characters; lowercase letters, digits, dots and hyphens; a letter or digit
// first and last; no two dots in a row, nor a dot beside a hyphen; not an IPv4 address.
func checkBucketName(name string) error {
	if n := len(name); n < 3 || n > 63 {
		return fmt.Errorf("it has %d characters, and a bucket name has 3 to 63", n)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return fmt.Errorf("it holds %q, and a bucket name holds only lowercase letters, digits, dots and hyphens", c)
		}
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return errors.New("a bucket name starts and ends with a lowercase letter or a digit")
	}
	for _, bad := range []string{"..", ".-", "-."} {
		if strings.Contains(name, bad) {
			return fmt.Errorf("it holds %q, and a bucket name has no two dots in a row and no dot beside a hyphen", bad)
		}
	}
	if a, err := netip.ParseAddr(name); err == nil && a.Is4() {
		return errors.New("a bucket name is not an IP address")
	}
	return nil
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "0", "false", "no", "off":
		return false, nil
	case "1", "true", "yes", "on":
		return true, nil
	}
	return false, fmt.Errorf("%q is not 0 or 1", s)
}

// bareSeconds is a number of seconds without a unit: "120", "1.5".
var bareSeconds = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// parseDuration reads a Go duration ("1s", "500ms", "2m") or a bare decimal number of seconds
// ("120", "1.5").
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if bareSeconds.MatchString(s) {
		n, err := strconv.ParseFloat(s, 64)
		if err != nil || n > 1_000_000_000 {
			return 0, fmt.Errorf("%s seconds is out of range", s)
		}
		return time.Duration(n * float64(time.Second)).Round(time.Microsecond), nil
	}
	return time.ParseDuration(s)
}
