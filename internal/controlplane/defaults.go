package controlplane

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/console"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
)

// The control plane's files and modules (docs/server.md, "Flags").
const (
	// DefaultDataDir is --data-dir's default, in the working directory.
	DefaultDataDir = ".cubefleet"
	// DBFile is the SQLite database's file name in the data directory.
	DBFile = "cubefleet.db"
	// AdminTokenFile is the file, in the data directory, where --dev writes the bootstrap
	// administrator's API key.
	AdminTokenFile = "admin.token"
	// SecretsKeyFile is the file, in the data directory, holding the 32-byte key that seals
	// secret values (created with mode 0600 on first start). Replicas sharing one PostgreSQL
	// need the same file.
	SecretsKeyFile = "secrets.key"
	// ModuleCore is IAM, audit, secrets, sites, pools, owner quotas, offers and fleet as code:
	// always on.
	ModuleCore = "core"
	// DefaultModules is the --modules value that runs everything.
	DefaultModules = ModuleCore + "," + compute.ModuleVPS + "," + compute.ModuleTemplates
)

// Defaults are the documented defaults of the control plane's settings: what a zero field of
// Config (and of the server's Config) means, and where `cubefleet server`'s flags start
// (docs/server.md, "Flags"). Each comes from the package that owns the setting.
type Defaults struct {
	// DataDir is --data-dir: DefaultDataDir.
	DataDir string
	// Modules is --modules: DefaultModules.
	Modules string
	// DriftEvery is --drift-every: 15 minutes.
	DriftEvery time.Duration
	// NodeHeartbeatTimeout is --node-heartbeat-timeout: 15 s.
	NodeHeartbeatTimeout time.Duration
	// NodeLostAfter is --node-lost-after: 5 minutes.
	NodeLostAfter time.Duration
	// ConsoleSessionTTL is --console-session-ttl: 8 hours.
	ConsoleSessionTTL time.Duration
	// ResultMaxBytes is --result-max-bytes: 1 MiB per output stream.
	ResultMaxBytes int64
	// MaxResultMaxBytes is the largest --result-max-bytes: 64 MiB.
	MaxResultMaxBytes int64
	// TenantResultMaxBytes is --tenant-result-max-bytes: 1 GiB.
	TenantResultMaxBytes int64
	// ResultRetention is --result-retention: 7 days.
	ResultRetention time.Duration
	// PendingTimeout is --pending-timeout: 5 minutes.
	PendingTimeout time.Duration
	// TenantMaxSandboxes is --tenant-max-sandboxes: 1,000.
	TenantMaxSandboxes int
	// AuditRetention is --audit-retention: 90 days.
	AuditRetention time.Duration
}

// Default returns the control plane's defaults.
func Default() Defaults {
	return Defaults{
		DataDir:              DefaultDataDir,
		Modules:              DefaultModules,
		DriftEvery:           fleet.DefaultDriftEvery,
		NodeHeartbeatTimeout: nodes.DefaultHeartbeatTimeout,
		NodeLostAfter:        nodes.DefaultLostAfter,
		ConsoleSessionTTL:    console.DefaultSessionTTL,
		ResultMaxBytes:       sandboxes.DefaultResultMaxBytes,
		MaxResultMaxBytes:    sandboxes.MaxResultMaxBytes,
		TenantResultMaxBytes: sandboxes.DefaultTenantResultMaxBytes,
		ResultRetention:      sandboxes.DefaultResultRetention,
		PendingTimeout:       sandboxes.DefaultPendingTimeout,
		TenantMaxSandboxes:   sandboxes.DefaultTenantMaxSandboxes,
		AuditRetention:       audit.DefaultRetention,
	}
}

// ParseModules turns a --modules value (a comma-separated list of core, vps, vps-templates;
// core is always on) into Config.Disabled. "" means DefaultModules. vps-templates needs vps.
func ParseModules(s string) (map[string]bool, error) {
	if strings.TrimSpace(s) == "" {
		s = DefaultModules
	}
	on := map[string]bool{}
	for _, m := range strings.Split(s, ",") {
		m = strings.TrimSpace(m)
		switch m {
		case ModuleCore, compute.ModuleVPS, compute.ModuleTemplates:
			on[m] = true
		case "":
		default:
			return nil, fmt.Errorf("unknown module %q: modules are %s", m, DefaultModules)
		}
	}
	if on[compute.ModuleTemplates] && !on[compute.ModuleVPS] {
		return nil, fmt.Errorf("module %s needs module %s", compute.ModuleTemplates, compute.ModuleVPS)
	}
	disabled := map[string]bool{}
	for _, m := range []string{compute.ModuleVPS, compute.ModuleTemplates} {
		if !on[m] {
			disabled[m] = true
		}
	}
	return disabled, nil
}

// ParseDriftIgnore parses --drift-ignore values (KIND.FIELD each) into Config.DriftIgnore,
// dropping repeats (fleet.ParseIgnoreRules). An unknown kind or field is an error that lists
// what is valid.
func ParseDriftIgnore(values []string) ([]fleet.IgnoreRule, error) {
	return fleet.ParseIgnoreRules(values)
}

// ParseCIDRs parses --node-agent-allow-unauthenticated into
// Config.NodeAgentAllowUnauthenticated: comma-separated CIDRs (a bare address is a /32 or
// /128); "" is none (nodehttp.ParseCIDRs).
func ParseCIDRs(s string) ([]netip.Prefix, error) { return nodehttp.ParseCIDRs(s) }

// ParseEnvRefs returns the rule of the --env-ref-allow prefixes (Config.EnvRefs): each is the
// start of an environment variable name. Errors name the flag and the bad prefix
// (fieldrules.ParseEnvRefs).
func ParseEnvRefs(prefixes []string) (fieldrules.EnvRefs, error) {
	return fieldrules.ParseEnvRefs(prefixes)
}
