package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/agent/envfile"
	"github.com/cubefleet/cubefleet/internal/agent/hostinfo"
	"github.com/cubefleet/cubefleet/internal/capool"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/privatefile"
)

// Sources says where Load reads settings from. Precedence: Flags, then Getenv, then the env
// file, then each setting's default (see Setting).
type Sources struct {
	Flags  map[string]string   // values of the flags given on the command line, by Setting.Key
	Getenv func(string) string // nil reads nothing from the environment
	Host   hostinfo.Host       // the machine whose addresses, routes and facts are checked
	// NoConflictCheck skips the sandbox network's host conflict check (agent check: the
	// running runtime owns those routes); the format rules still apply.
	NoConflictCheck bool
}

// Load reads the agent's configuration and validates it before anything local is touched, in
// Cube Sandbox's order: the role and the control-plane address; then CUBE_S3_ENDPOINT; then the
// node IP; then the sandbox network (format, mask, alignment, host conflicts); then the rest.
// The first problem is returned as a *cubefleet.Error with code INVALID_INPUT whose
// Details["path"] names the variable (or the flag) and whose message says how to fix it.
//
// It runs in stages: gather reads the sources (and the env file, whose problems come first of
// all); each stage after it resolves its settings by precedence (sources.get), validates them
// and derives what follows from them (the endpoints from the control-plane IP, the health
// endpoint from the node IP, ...), in the order above; the last one warns about an env file
// others can read.
func Load(src Sources) (*Config, error) {
	s, err := gather(src)
	if err != nil {
		return nil, err
	}
	cfg := &Config{Host: src.Host, EnvFile: s.fileName}
	for _, stage := range []func(*Config, *sources) error{
		(*Config).loadRole,         // 1. role and control-plane address
		(*Config).loadControlPlane, //
		(*Config).loadS3,           // 2. CUBE_S3_ENDPOINT
		(*Config).loadNodeIP,       // 3. node IP
		(*Config).loadNetwork,      // 4. sandbox network
		(*Config).loadJoinToken,    // 5. the rest
		(*Config).loadLocal,        //
		(*Config).loadReporting,    //
		(*Config).loadSandboxes,    //
		(*Config).loadInstall,      //
	} {
		if err := stage(cfg, s); err != nil {
			return nil, err
		}
	}
	cfg.warnReadableEnvFile(s)
	return cfg, nil
}

// sources are Load's sources with the env file read: what sources.get resolves settings from.
type sources struct {
	Sources
	getenv   func(string) string    // Sources.Getenv, or one that reads nothing
	settings map[string]Setting     // Settings() by Key
	file     map[string]envfile.Var // the env file's assignments by name; none without one
	fileName string                 // the env file read; "" for none
}

// gather is Load's first stage: it indexes the settings and reads the env file, the one
// --env-file or the environment names, else ./.env, else InstalledEnvFile when it exists (none
// when neither does). A named file that does not exist, cannot be read or does not parse is an
// error naming the setting that named it.
func gather(src Sources) (*sources, error) {
	s := &sources{Sources: src, getenv: src.Getenv, settings: map[string]Setting{}, file: map[string]envfile.Var{}}
	if s.getenv == nil {
		s.getenv = func(string) string { return "" }
	}
	for _, st := range Settings() {
		s.settings[st.Key] = st
	}

	// The env file: named by a flag or the environment, else ./.env, else the installed one.
	envFile := lookup(s.settings["env-file"], src.Flags, s.getenv, nil, "")
	path := envFile.s
	if !envFile.set() {
		for _, p := range []string{".env", InstalledEnvFile} {
			if _, err := os.Stat(p); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		return s, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, envFile.fail("env file %s does not exist; create it (start from examples/agent.env in the cubefleet repository; docs/agent.md lists every setting) or point %s at it", path, envFile.name)
		}
		return nil, envFile.fail("read env file %s: %v", path, err)
	}
	vars, err := envfile.Parse(data)
	if err != nil {
		return nil, envFile.fail("env file %s: %v", path, err)
	}
	s.file = envfile.Map(vars)
	s.fileName = path
	return s, nil
}

// get resolves the setting key by precedence (see lookup). An unknown key is a bug: it panics.
func (s *sources) get(key string) value {
	st, ok := s.settings[key]
	if !ok {
		panic("agent: unknown setting " + key)
	}
	return lookup(st, s.Flags, s.getenv, s.file, s.fileName)
}

// lookup resolves s: the flag, else the environment, else the env file, else the default. An
// empty or blank value counts as unset at every level (as `${VAR:-default}` in the installer).
func lookup(s Setting, flags map[string]string, getenv func(string) string, file map[string]envfile.Var, fileName string) value {
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

// loadRole resolves ONE_CLICK_DEPLOY_ROLE (stage 1): control or compute, in any case.
func (cfg *Config) loadRole(s *sources) error {
	role := s.get("role")
	switch Role(strings.ToLower(strings.TrimSpace(role.s))) {
	case RoleControl:
		cfg.Role = RoleControl
	case RoleCompute:
		cfg.Role = RoleCompute
	default:
		return role.fail("%q is not a role; set it to compute (a compute node reporting to a remote control plane) or control (the agent beside the server on the control node, the default)", role.s)
	}
	return nil
}

// loadControlPlane resolves where the agent reports (stage 1, after the role): the TLS switch
// CUBEFLEET_CONTROL_PLANE_TLS; the endpoints (see loadEndpoints); CUBEFLEET_CA_FILE, read into
// RootCAs and made absolute; and last, that no endpoint is plain HTTP once TLS is on.
func (cfg *Config) loadControlPlane(s *sources) error {
	useTLS := s.get("control-plane-tls")
	var err error
	if cfg.ControlPlaneTLS, err = parseBool(useTLS.s); err != nil {
		return useTLS.fail("%v", err)
	}
	from, err := cfg.loadEndpoints(s, useTLS)
	if err != nil {
		return err
	}
	caFile := s.get("ca-file")
	if caFile.set() {
		path, err := filepath.Abs(strings.TrimSpace(caFile.s))
		if err != nil {
			return caFile.fail("%v", err)
		}
		if cfg.RootCAs, err = capool.Load(path); err != nil {
			return caFile.fail("%v", err)
		}
		cfg.CAFile = path
	}
	return cfg.checkEndpointsTLS(useTLS, caFile, from)
}

// loadEndpoints derives ControlPlane with the scheme the TLS switch gives addresses that have
// none. ONE_CLICK_CONTROL_PLANE_IP is checked whenever it is set; ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR
// wins when set at the same or a higher level, else the IP gives <ip>:3010, else a compute node
// is refused and a control node reports to 127.0.0.1:3010. It returns the setting the
// endpoints came from (useTLS for the default), for errors about them.
func (cfg *Config) loadEndpoints(s *sources, useTLS value) (value, error) {
	scheme := "http"
	if cfg.ControlPlaneTLS {
		scheme = "https"
	}
	addr, ip := s.get("control-plane"), s.get("control-plane-ip")
	from := useTLS // the setting the endpoints came from, for errors about them
	if ip.set() {
		a, err := netip.ParseAddr(strings.TrimSpace(ip.s))
		if err != nil || !a.Is4() {
			return from, ip.fail("%q is not an IPv4 address; set it to the control node's address, e.g. 10.0.0.1 (it becomes 10.0.0.1:%d), or set ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR=host:port", ip.s, DefaultControlPlanePort)
		}
		if why := notDialable(a); why != "" {
			return from, ip.fail("%s is %s, not an address the agent can connect to; set it to the control node's address, e.g. 10.0.0.1", a, why)
		}
	}
	switch {
	case addr.set() && addr.rank >= ip.rank:
		eps, err := parseEndpoints(addr.s, scheme)
		if err != nil {
			return from, addr.fail("%v", err)
		}
		cfg.ControlPlane, from = eps, addr
	case ip.set():
		cfg.ControlPlane, from = []string{scheme + "://" + net.JoinHostPort(strings.TrimSpace(ip.s), strconv.Itoa(DefaultControlPlanePort))}, ip
	case cfg.Role == RoleCompute:
		return from, ip.fail("is not set; a compute node reports to a remote control plane: set ONE_CLICK_CONTROL_PLANE_IP=<control node IP> (port %d) or ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR=host:port", DefaultControlPlanePort)
	default:
		cfg.ControlPlane = []string{scheme + "://127.0.0.1:" + strconv.Itoa(DefaultControlPlanePort)}
	}
	return from, nil
}

// checkEndpointsTLS refuses a plain http:// endpoint once TLS is on (the switch, an https://
// endpoint in the list, or a CA file): failing over to it would send the join token and the
// node credential in clear text. The error names the setting the endpoints came from (the CA
// file's when they are the control role's default).
func (cfg *Config) checkEndpointsTLS(useTLS, caFile, from value) error {
	plain := slices.IndexFunc(cfg.ControlPlane, func(ep string) bool { return strings.HasPrefix(ep, "http://") })
	if plain < 0 {
		return nil
	}
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
		return from.fail("%s is plain HTTP but TLS is on (%s): the agent would send its join token and node credential to it in clear text; once TLS is on, every endpoint must be https://: %s", cfg.ControlPlane[plain], why, fix)
	}
	return nil
}

// loadS3 resolves the sandbox volume store, CUBE_S3_* (stage 2): the endpoint is required on
// a compute node (its volume plugin depends on it) and only warned about on the control node;
// the bucket must be a valid S3 bucket name; missing credentials are warned about.
func (cfg *Config) loadS3(s *sources) error {
	s3ep := s.get("s3-endpoint")
	if !s3ep.set() {
		if cfg.Role == RoleCompute {
			return s3ep.fail("is not set; the sandbox volume plugin depends on S3 and compute nodes run no store of their own: copy the CUBE_S3_* lines (CUBE_S3_ENDPOINT, CUBE_S3_ACCESS_KEY_ID, CUBE_S3_SECRET_ACCESS_KEY, CUBE_S3_BUCKET, CUBE_S3_S3FS_EXTRA_OPTS) from the control node's env file (.one-click.env) into this node's")
		}
		cfg.Warnings = append(cfg.Warnings, "CUBE_S3_ENDPOINT is not set: sandbox volumes on S3 are disabled on this node")
	} else {
		ep, err := parseS3Endpoint(strings.TrimSpace(s3ep.s))
		if err != nil {
			return s3ep.fail("%v", err)
		}
		cfg.S3.Endpoint = ep
	}
	cfg.S3.AccessKeyID = s.get("s3-access-key-id").s
	cfg.S3.SecretAccessKey = Secret(s.get("s3-secret-access-key").s)
	bucket := s.get("s3-bucket")
	cfg.S3.Bucket = strings.TrimSpace(bucket.s)
	if err := checkBucketName(cfg.S3.Bucket); err != nil {
		return bucket.fail("%q is not a valid S3 bucket name: %v; it is used as written, never shortened or rewritten: set the bucket the control node's CUBE_S3_BUCKET names", bucket.s, err)
	}
	cfg.S3.S3FSExtraOpts = s.get("s3-s3fs-extra-opts").s
	if cfg.S3.Endpoint != "" && (cfg.S3.AccessKeyID == "" || cfg.S3.SecretAccessKey == "") {
		cfg.Warnings = append(cfg.Warnings, "CUBE_S3_ACCESS_KEY_ID or CUBE_S3_SECRET_ACCESS_KEY is empty: copy them from the control node's env file")
	}
	return nil
}

// loadNodeIP resolves CUBE_SANDBOX_NODE_IP (stage 3), detected from the default route when
// unset (with a warning): an IPv4 address other hosts can route to, or a loopback address
// with CUBEFLEET_ALLOW_LOOPBACK=1.
func (cfg *Config) loadNodeIP(s *sources) error {
	loop := s.get("allow-loopback")
	allowLoopback, err := parseBool(loop.s)
	if err != nil {
		return loop.fail("%v", err)
	}
	cfg.AllowLoopback = allowLoopback
	nodeIP := s.get("node-ip")
	if nodeIP.set() {
		a, err := netip.ParseAddr(strings.TrimSpace(nodeIP.s))
		if err != nil || !a.Is4() {
			return nodeIP.fail("%q is not an IPv4 address; set it to this node's address on the network the control plane reaches (see `ip -4 addr`)", nodeIP.s)
		}
		cfg.NodeIP = a
	} else {
		a, err := s.Host.DetectNodeIP()
		if err != nil {
			return nodeIP.fail("is not set and no address was found on the default route's interface (%v); set CUBE_SANDBOX_NODE_IP=<this node's IPv4 address>", err)
		}
		cfg.NodeIP = a
		cfg.Warnings = append(cfg.Warnings, "CUBE_SANDBOX_NODE_IP is not set: using "+a.String()+" from the default route")
	}
	switch a := cfg.NodeIP; {
	case a.IsLoopback() && !cfg.AllowLoopback:
		return nodeIP.fail("%s is a loopback address, which other hosts cannot reach; set it to this node's address on the network the control plane reaches, or pass --allow-loopback (CUBEFLEET_ALLOW_LOOPBACK=1) for a single-host demo or test", a)
	case !a.IsLoopback() && !hostinfo.GlobalUnicast(a):
		return nodeIP.fail("%s is not a routable unicast address (unspecified, link-local, multicast, broadcast or reserved); set it to this node's address on the network the control plane reaches", a)
	}
	return nil
}

// loadNetwork resolves CUBE_SANDBOX_NETWORK_CIDR (stage 4): its format, mask and alignment
// (ParseNetworkCIDR), then its conflicts with the host's addresses, routes and nameservers,
// unless CUBE_SANDBOX_NETWORK_CIDR_SKIP_CONFLICT_CHECK=1 or Sources.NoConflictCheck; the error
// suggests a free network.
func (cfg *Config) loadNetwork(s *sources) error {
	cidr := s.get("network-cidr")
	network, err := ParseNetworkCIDR(cidr.s)
	if err != nil {
		return cidr.fail("%v", err)
	}
	cfg.NetworkCIDR = network
	skip := s.get("skip-cidr-conflict-check")
	if cfg.SkipCIDRConflictCheck, err = parseBool(skip.s); err != nil {
		return skip.fail("%v", err)
	}
	if cfg.SkipCIDRConflictCheck || s.NoConflictCheck {
		return nil
	}
	conflicts, err := s.Host.NetworkConflicts(network)
	if err != nil {
		return cidr.fail("cannot check %s against the host's network (%v); fix that or set CUBE_SANDBOX_NETWORK_CIDR_SKIP_CONFLICT_CHECK=1", network, err)
	}
	if len(conflicts) == 0 {
		return nil
	}
	parts := make([]string, len(conflicts))
	for i, c := range conflicts {
		parts[i] = c.String()
	}
	fix := "choose a network that overlaps none of them"
	if sn := s.Host.SuggestNetwork(network); sn.IsValid() {
		fix += ", e.g. " + sn.String()
	}
	for _, c := range conflicts {
		if c.Kind == "cube-dev" {
			fix += "; or remove the leftover device (ip link delete cube-dev) if no sandbox runtime uses it"
			break
		}
	}
	return cidr.fail("%s overlaps the host's %s: %s (or set CUBE_SANDBOX_NETWORK_CIDR_SKIP_CONFLICT_CHECK=1, not recommended)", network, strings.Join(parts, ", "), fix)
}

// loadJoinToken resolves the join token (stage 5): CUBEFLEET_JOIN_TOKEN, or the private file
// CUBEFLEET_JOIN_TOKEN_FILE names. A value beats a file at the same level (flag, environment,
// env file), with a warning; a higher level wins, as for every other setting. A node
// credential (cfn_...) or anything else that is not a join token (cfj_...) is refused.
func (cfg *Config) loadJoinToken(s *sources) error {
	tok, tokFile := s.get("join-token"), s.get("join-token-file")
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
	return nil
}

// loadLocal resolves where the agent lives on the node (stage 5): the health endpoint
// (<node ip>:9999 by default; host:port with a port from 1 to 65535), the state directory
// (DefaultStateDir by default) and the PID file.
func (cfg *Config) loadLocal(s *sources) error {
	listen := s.get("listen")
	cfg.Listen = strings.TrimSpace(listen.s)
	if cfg.Listen == "" {
		cfg.Listen = net.JoinHostPort(cfg.NodeIP.String(), strconv.Itoa(DefaultListenPort))
	} else if _, port, err := net.SplitHostPort(cfg.Listen); err != nil || port == "" {
		return listen.fail("%q is not host:port; e.g. %s:%d", listen.s, cfg.NodeIP, DefaultListenPort)
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return listen.fail("%q: port %q is not a number from 1 to 65535; e.g. %s:%d", listen.s, port, cfg.NodeIP, DefaultListenPort)
	}
	cfg.StateDir = s.get("state-dir").s
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir
	}
	cfg.PIDFile = s.get("pid-file").s
	return nil
}

// loadReporting resolves what and how often the agent reports (stage 5): the report period
// (MinReportPeriod to MaxReportPeriod), the cluster label (a valid label value), the runtime
// driver, and the quotas (whole numbers >= 0; 0 means the default).
func (cfg *Config) loadReporting(s *sources) error {
	period := s.get("report-period")
	d, err := parseDuration(period.s)
	if err != nil {
		return period.fail("%q is not a duration; e.g. 1s, 500ms, or a number of seconds such as 1.5", period.s)
	}
	if d < MinReportPeriod || d > MaxReportPeriod {
		return period.fail("%q is outside the range from 100ms to 60s (the agent reports this often, and each call times out after it); e.g. 1s", period.s)
	}
	cfg.ReportPeriod = d
	cfg.ClusterLabel = s.get("cluster-label").s
	if cfg.ClusterLabel != "" && !validLabelValue(cfg.ClusterLabel) {
		return s.get("cluster-label").fail("%q must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", cfg.ClusterLabel)
	}
	rt := s.get("runtime")
	switch Runtime(strings.TrimSpace(rt.s)) {
	case RuntimeMicroVM, RuntimeProcess:
		cfg.Runtime = Runtime(strings.TrimSpace(rt.s))
	default:
		return rt.fail("%q is not a runtime driver; use microvm (QEMU microVMs, KVM or TCG) or process", rt.s)
	}
	for _, q := range []struct {
		key string
		dst *int64
	}{{"quota-cpu", &cfg.QuotaCPU}, {"quota-mem-mb", &cfg.QuotaMemMB}, {"max-mvm-num", &cfg.MaxMVMNum}, {"create-concurrent-num", &cfg.CreateConcurrentNum}} {
		v := s.get(q.key)
		if strings.TrimSpace(v.s) == "" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v.s), 10, 64)
		if err != nil || n < 0 {
			return v.fail("%q is not a whole number >= 0 (0 means the default)", v.s)
		}
		*q.dst = n
	}
	return nil
}

// loadSandboxes resolves how the process runtime runs sandboxes (stage 5): their directory
// (absolute, neither the state directory nor inside it: the state directory is 0700 and each
// sandbox's user must reach its own directory), the user id range (first-last, unprivileged),
// whether an agent that is not root may run them as its own user, the default output limit
// (bytes, KiB or MiB, 1 byte to 64 MiB), the connections per public sandbox (1 to
// MaxSandboxConnections) and the spare supervisors (0 to MaxSandboxSpares).
func (cfg *Config) loadSandboxes(s *sources) error {
	dir := s.get("sandbox-dir")
	cfg.SandboxDir = strings.TrimSpace(dir.s)
	if !filepath.IsAbs(cfg.SandboxDir) {
		return dir.fail("%q is not an absolute path; e.g. %s", dir.s, DefaultSandboxDir)
	}
	cfg.SandboxDir = filepath.Clean(cfg.SandboxDir)
	if state, err := filepath.Abs(cfg.StateDir); err == nil {
		if rel, err := filepath.Rel(state, cfg.SandboxDir); err == nil && (rel == "." || !strings.HasPrefix(rel, "..")) {
			return dir.fail("%s is inside the state directory %s, which is private to the agent (mode 0700), so a sandbox's user could not reach its directory; use a directory beside it, e.g. %s", cfg.SandboxDir, state, filepath.Join(filepath.Dir(state), "sandboxes"))
		}
	}
	uids := s.get("sandbox-uids")
	first, last, ok := strings.Cut(strings.TrimSpace(uids.s), "-")
	f, err1 := strconv.ParseInt(strings.TrimSpace(first), 10, 64)
	l, err2 := strconv.ParseInt(strings.TrimSpace(last), 10, 64)
	switch {
	case !ok || err1 != nil || err2 != nil:
		return uids.fail("%q is not a range of user ids first-last, e.g. %s", uids.s, DefaultSandboxUIDs)
	case f < 1 || l < f || l >= 0xFFFFFFFE:
		return uids.fail("%q is not a range of unprivileged user ids: first from 1, last at least first and below 4294967294; e.g. %s", uids.s, DefaultSandboxUIDs)
	}
	cfg.SandboxFirstUID, cfg.SandboxUIDCount = int(f), int(l-f+1)
	own := s.get("sandbox-allow-own-user")
	var err error
	if cfg.SandboxAllowOwnUser, err = parseBool(own.s); err != nil {
		return own.fail("%v", err)
	}
	req := s.get("require-isolation")
	if cfg.RequireIsolation, err = parseBool(req.s); err != nil {
		return req.fail("%v", err)
	}
	limit := s.get("sandbox-output-limit")
	if cfg.SandboxOutputLimit, err = parseBytes(limit.s); err != nil || cfg.SandboxOutputLimit < 1 || cfg.SandboxOutputLimit > driver.MaxOutputLimitBytes {
		return limit.fail("%q is not a size from 1 byte to 64MiB: a number of bytes, or of KiB or MiB (1MiB, 512KiB, 65536)", limit.s)
	}
	conns := s.get("sandbox-max-connections")
	if cfg.SandboxMaxConnections, err = strconv.Atoi(strings.TrimSpace(conns.s)); err != nil || cfg.SandboxMaxConnections < 1 || cfg.SandboxMaxConnections > MaxSandboxConnections {
		return conns.fail("%q is not a whole number from 1 to %d", conns.s, MaxSandboxConnections)
	}
	spares := s.get("sandbox-spares")
	n, err := strconv.Atoi(strings.TrimSpace(spares.s))
	if err != nil || n < 0 || n > MaxSandboxSpares {
		return spares.fail("%q is not a whole number from 0 to %d", spares.s, MaxSandboxSpares)
	}
	cfg.SandboxSpares = n
	cfg.GuestKernel = strings.TrimSpace(s.get("guest-kernel").s)
	cfg.GuestInit = strings.TrimSpace(s.get("guest-init").s)
	images := s.get("image-dir")
	if cfg.ImageDir = filepath.Clean(strings.TrimSpace(images.s)); !filepath.IsAbs(cfg.ImageDir) {
		return images.fail("%q is not an absolute path; e.g. %s", images.s, DefaultImageDir)
	}
	accel := s.get("microvm-accel")
	switch cfg.MicroVMAccel = strings.TrimSpace(accel.s); cfg.MicroVMAccel {
	case "auto":
		cfg.MicroVMAccel = ""
	case "kvm", "tcg":
	default:
		return accel.fail("%q is not auto, kvm or tcg", accel.s)
	}
	return nil
}

// parseBytes reads a size: a whole number of bytes, or of KiB or MiB ("1MiB", "512KiB").
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	unit := int64(1)
	for suffix, u := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20} {
		if v, ok := strings.CutSuffix(s, suffix); ok {
			s, unit = strings.TrimSpace(v), u
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<40)/unit {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	return n * unit, nil
}

// loadInstall resolves the settings of agent install and agent check (stage 5, last): the
// memory floor (it can only be raised above DefaultMinMemoryKB; a lower value is warned about
// and ignored), whether install runs the check (and where that came from, for install's
// output), and the check's timeout (0 to MaxCheckTimeout).
func (cfg *Config) loadInstall(s *sources) error {
	cfg.MinMemoryKB = DefaultMinMemoryKB
	if v := s.get("min-memory-kb"); strings.TrimSpace(v.s) != "" {
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
	rc := s.get("run-check")
	var err error
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
	to := s.get("timeout")
	if cfg.CheckTimeout, err = parseDuration(to.s); err != nil || cfg.CheckTimeout < 0 || cfg.CheckTimeout > MaxCheckTimeout {
		return to.fail("%q is not a duration from 0 to 1h (a bare number is seconds)", to.s)
	}
	return nil
}

// warnReadableEnvFile warns about an env file others can read only when it holds a secret's
// value: a file that names the join token file (CUBEFLEET_JOIN_TOKEN_FILE=<path>) or gets its
// secrets from the environment holds none.
func (cfg *Config) warnReadableEnvFile(s *sources) {
	if secrets := secretsIn(s.file); cfg.EnvFile != "" && len(secrets) > 0 {
		if fi, err := os.Stat(cfg.EnvFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("%s holds secrets and others can read it (mode %04o): run chmod 600 %s (it holds %s)", cfg.EnvFile, fi.Mode().Perm(), cfg.EnvFile, strings.Join(secrets, ", ")))
		}
	}
}

// secretsIn returns the variables of the env file that hold a secret setting's value (see
// Setting.Secret), in the order of Settings; empty values do not count.
func secretsIn(file map[string]envfile.Var) []string {
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
