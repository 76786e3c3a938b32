package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/hostinfo"
	"github.com/cubefleet/cubefleet/internal/agent/sandboxnet"
	"github.com/cubefleet/cubefleet/internal/capool"
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
	// RuntimeMicroVM runs sandboxes as microVMs under QEMU (package microvm): under KVM where a
	// probe guest boots, else under TCG (no /dev/kvm, or a nested host), so it needs no
	// physical host. The default.
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
	// DefaultSandboxDir holds the process runtime's sandboxes, one directory each (mode 0711):
	// beside the state directory, not in it (sandboxes' users must reach their directories).
	DefaultSandboxDir = "/var/lib/cubefleet/sandboxes"
	// DefaultImageDir holds the microvm runtime's template images (`agent image import`).
	DefaultImageDir = "/var/lib/cubefleet/images"
	// DefaultSandboxUIDs is the range of user ids sandboxes run as (process.DefaultFirstUID and
	// process.DefaultUIDCount), first-last.
	DefaultSandboxUIDs = "2000000-2065535"
	// DefaultSandboxSpares is how many sandbox supervisors are kept started ahead of need.
	DefaultSandboxSpares = 1
	// MaxSandboxConnections bounds CUBEFLEET_SANDBOX_MAX_CONNECTIONS.
	MaxSandboxConnections = 1 << 20
	// MaxSandboxSpares bounds CUBEFLEET_SANDBOX_SPARES.
	MaxSandboxSpares = 64
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
		{Key: "runtime", Env: []string{"CUBEFLEET_RUNTIME"}, Default: string(DefaultRuntime), Usage: "sandbox runtime driver: microvm (QEMU microVMs, under KVM where a guest boots, else TCG) or process"},
		{Key: "sandbox-dir", Env: []string{"CUBEFLEET_SANDBOX_DIR"}, Default: DefaultSandboxDir, Usage: "directory of the process runtime's sandboxes, one directory each (mode 0711); not inside the state directory"},
		{Key: "sandbox-uids", Env: []string{"CUBEFLEET_SANDBOX_UIDS"}, Default: DefaultSandboxUIDs, Usage: "user ids the process runtime's sandboxes run as, first-last (one each; no account of /etc/passwd in it)"},
		{Key: "sandbox-allow-own-user", Env: []string{"CUBEFLEET_SANDBOX_ALLOW_OWN_USER"}, Default: "0", Bool: true, Usage: "development only: an agent that is not root runs sandboxes as its own user (they can read its files)"},
		{Key: "require-isolation", Env: []string{"CUBEFLEET_REQUIRE_ISOLATION"}, Default: "0", Bool: true, Usage: "run no sandbox unless the process runtime limits memory and processes with cgroups and isolates the network with a namespace (agent check's isolation line says what is missing)"},
		{Key: "sandbox-output-limit", Env: []string{"CUBEFLEET_SANDBOX_OUTPUT_LIMIT"}, Default: "1MiB", Usage: "output kept of each sandbox stream (stdout, stderr) when the control plane sets no limit: bytes, KiB or MiB, at most 64MiB"},
		{Key: "sandbox-max-connections", Env: []string{"CUBEFLEET_SANDBOX_MAX_CONNECTIONS"}, Default: strconv.Itoa(sandboxnet.DefaultMaxConnections), Usage: "connections a public sandbox may have open at once in the host's connection tracking, 1 to 1048576; new ones past it are rejected"},
		{Key: "sandbox-spares", Env: []string{"CUBEFLEET_SANDBOX_SPARES"}, Default: strconv.Itoa(DefaultSandboxSpares), Usage: "sandbox supervisors kept started ahead of need (0: none; each start then starts its own)"},
		{Key: "guest-kernel", Env: []string{"CUBEFLEET_GUEST_KERNEL"}, Usage: "microvm runtime: the guest kernel image (bzImage) with its module tree beside it (…/boot/vmlinuz-X, …/lib/modules/X), e.g. Debian's cloud kernel"},
		{Key: "guest-init", Env: []string{"CUBEFLEET_GUEST_INIT"}, Usage: "microvm runtime: the static cubefleet binary the guests run as init (default: this executable, which must be built with CGO_ENABLED=0)"},
		{Key: "image-dir", Env: []string{"CUBEFLEET_IMAGE_DIR"}, Default: DefaultImageDir, Usage: "microvm runtime: directory of the templates' root file system images, <imageId>.ext4"},
		{Key: "microvm-accel", Env: []string{"CUBEFLEET_MICROVM_ACCEL"}, Default: "auto", Usage: "microvm runtime: accelerator, auto (KVM when a probe guest boots under it, else TCG), kvm or tcg"},
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
	// SandboxDir holds the process runtime's sandboxes (absolute, not inside StateDir).
	SandboxDir string
	// SandboxFirstUID and SandboxUIDCount are the user ids sandboxes run as: SandboxFirstUID to
	// SandboxFirstUID+SandboxUIDCount-1.
	SandboxFirstUID, SandboxUIDCount int
	// SandboxAllowOwnUser lets an agent that is not root run sandboxes as its own user
	// (development only).
	SandboxAllowOwnUser bool
	// RequireIsolation makes the process runtime refuse to run sandboxes when the host does
	// not let it limit memory and processes (cgroup controllers) and isolate the network (a
	// network namespace): the node then reports itself not Ready, saying what is missing.
	RequireIsolation bool

	// GuestKernel, GuestInit, ImageDir and MicroVMAccel are the microvm runtime's settings: the
	// guest kernel image, the static init binary ("" for this executable), the directory of
	// the templates' images, and the accelerator ("" for auto, "kvm", "tcg").
	GuestKernel, GuestInit, ImageDir, MicroVMAccel string

	// SandboxOutputLimit is the bytes kept of each output stream of a sandbox whose spec sets no
	// limit, 1 to driver.MaxOutputLimitBytes.
	SandboxOutputLimit int64
	// SandboxMaxConnections is the connections a public sandbox may have open at once, 1 to
	// MaxSandboxConnections (new ones past it are rejected).
	SandboxMaxConnections int
	// SandboxSpares is how many supervisors are started ahead of need, 0 to MaxSandboxSpares.
	SandboxSpares       int
	QuotaCPU            int64 // millicores; 0 = 2000 x cores
	QuotaMemMB          int64 // MiB; 0 = ceil(1.25 x MemTotal MiB)
	MaxMVMNum           int64 // 0 = QuotaMemMB/512, at least 1
	CreateConcurrentNum int64 // 0 = the scheduler's limit
	MinMemoryKB         int64 // install's memory floor, kB; >= DefaultMinMemoryKB
	RunCheck            bool  // install runs the check afterwards
	// RunCheckFrom says where RunCheck came from, for install's output: "--run-check=0",
	// "ONE_CLICK_RUN_QUICKCHECK=0 in the environment", "... in the env file <path>", or "the
	// default"; "" when the Config was not loaded.
	RunCheckFrom string
	CheckTimeout time.Duration // 0 = probe once
	EnvFile      string        // the env file read; "" for none
	Host         hostinfo.Host // where host facts and network state are read
	Warnings     []string      // things an operator should fix that do not stop the agent
}

// NodeID returns the node's ID: its IPv4 address in dotted form.
func (cfg *Config) NodeID() string { return cfg.NodeIP.String() }

// HealthURL returns the URL of the agent's health endpoint; an unspecified listen host means
// the node IP.
func (cfg *Config) HealthURL() string {
	host, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return "http://" + cfg.Listen + "/healthz"
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = cfg.NodeID()
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz"
}

// TLSClientConfig returns the TLS settings of every call to the control plane (the agent's and
// agent check's): TLS 1.2 or later, trusting RootCAs (the system's CAs when nil).
func (cfg *Config) TLSClientConfig() *tls.Config { return capool.ClientConfig(cfg.RootCAs) }

// DialContext returns the function every connection to the control plane is made with (the
// agent's calls and agent check's): base's, except that when the node IP and the destination
// are both loopback addresses the connection comes from the node IP, so that a control plane
// on the same host sees the node's own address (a join token bound to 127.0.0.11 is accepted
// from the agent of node 127.0.0.11, whose connections would otherwise come from 127.0.0.1).
// For any other node IP or destination, the kernel chooses the source address.
func (cfg *Config) DialContext(base *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := *base
		if local := localAddrFor(cfg.NodeIP, addr); local != nil {
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
