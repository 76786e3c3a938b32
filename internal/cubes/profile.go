package cubes

import (
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
)

// The fleet-scaling profile (docs/ionos.md, "Fleet scaling profile"): the operator's private
// description of one Cube fleet by the IONOS names of its resources, the control plane it
// joins, and the hosts reached over SSH. Every IONOS object is found by its name (Discover),
// never by an id written down.

// Profile defaults and bounds.
const (
	// DefaultTokenFile is the IONOS token file when the profile names none.
	DefaultTokenFile = ".private/ionos-api-token.txt"
	// DefaultDrainDeadline is how long a Cube's drain may take when the profile says nothing.
	DefaultDrainDeadline = 30 * time.Minute
	maxSlotsPerCube      = 64
	maxDrainDeadline     = 7 * 24 * time.Hour
)

// Profile is a decoded, checked fleet-scaling profile. Names are IONOS resource names; paths
// are local files (never read here). DrainDeadline bounds a Cube's drain; SlotsPerCube is the
// coordinator slots (concurrent workers) of each Cube.
type Profile struct {
	Datacenter              string
	CubeNamePrefix          string
	Template                string
	Image                   string
	PrivateLAN              string
	PrivateLANID            int
	PublicLANID             int
	NATGateway              string
	ApplicationLoadBalancer string
	TargetGroups            []string
	WorkerSecurityGroup     string
	ControlPlane            ProfileControlPlane
	Coordinator             ProfileSSHHost
	SSH                     ProfileSSH
	GPUWireGuard            ProfileWireGuard
	BaselineCubes           []string
	RuntimeSourceCube       string
	SlotsPerCube            int
	DrainDeadline           time.Duration
	TokenFile               string
}

// ProfileControlPlane is the cubefleet control plane new Cubes join: its URL (http or https),
// the pool they join and the file holding the API key the workflows call it with. TargetGroup,
// optional, names the load balancer's target group that routes to the control plane when it
// loads a fixed origin list (`cubefleet server --origins`): scale apply hands it over to a
// ready replacement.
type ProfileControlPlane struct {
	URL         string
	Pool        string
	APIKeyFile  string
	TargetGroup string
}

// ProfileSSHHost is a host reached over SSH: Host (a name or address), Port (default 22) and
// User.
type ProfileSSHHost struct {
	Host string
	Port int
	User string
}

// ProfileSSH is the SSH identity: the private key file, the known_hosts file every host key is
// checked against, and the user and port (default 22) of the Cubes' sshd, reached through the
// coordinator as a jump host at each Cube's private IP.
type ProfileSSH struct {
	KeyFile        string
	KnownHostsFile string
	CubeUser       string
	CubePort       int
}

// ProfileWireGuard is the GPU host that holds a WireGuard peer per Cube: the host over SSH, the
// interface, and ConfigFile, the interface's configuration file that keeps the peers
// (config_file; default /etc/wireguard/<interface>.conf).
type ProfileWireGuard struct {
	ProfileSSHHost
	Interface  string
	ConfigFile string
}

// DecodeProfile reads a profile strictly and reports every problem at once as one
// INVALID_INPUT *cubefleet.Error whose Details["errors"] lists each JSON path (e.g.
// "control_plane.url") with what is wrong: malformed JSON, duplicate or unknown keys, a
// missing key, a wrong type, an empty name, a URL that is not http(s), a LAN id that is not a
// positive integer, a baseline Cube named twice or without the name prefix, a runtime source
// outside the baseline, slots_per_cube outside 1 to 64, a drain_deadline that is not a
// duration from 1s to 168h.
func DecodeProfile(r io.Reader) (*Profile, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read the profile: %w", err)
	}
	if len(data) > maxConfigBytes {
		return nil, cubefleet.Invalid("", "the profile is larger than %d MiB", maxConfigBytes>>20)
	}
	root, err := parseJSON(data)
	if err != nil {
		return nil, err
	}
	v := &validator{}
	p := v.profile(root)
	if len(v.errs) > 0 {
		return nil, cubefleet.InvalidAll(v.errs)
	}
	return p, nil
}

func (v *validator) profile(root *node) *Profile {
	p := &Profile{SlotsPerCube: SlotsPerCube, DrainDeadline: DefaultDrainDeadline, TokenFile: DefaultTokenFile}
	if root.kind != kindObject {
		v.bad("", "the profile must be a JSON object, not %s", root.kindName())
		return p
	}
	names := []struct {
		key string
		dst *string
	}{{"datacenter", &p.Datacenter}, {"cube_name_prefix", &p.CubeNamePrefix}, {"template", &p.Template}, {"image", &p.Image},
		{"private_lan", &p.PrivateLAN}, {"nat_gateway", &p.NATGateway}, {"application_load_balancer", &p.ApplicationLoadBalancer},
		{"worker_security_group", &p.WorkerSecurityGroup}, {"runtime_source_cube", &p.RuntimeSourceCube}}
	required := []string{"private_lan_id", "public_lan_id", "target_groups", "control_plane", "coordinator", "ssh", "gpu_wireguard", "baseline_cubes"}
	for _, n := range names {
		required = append(required, n.key)
	}
	allowed := append(slices.Clone(required), "slots_per_cube", "drain_deadline", "ionos_token_file")
	f := v.object(root, "", allowed, required)
	for _, n := range names {
		*n.dst = v.name(f[n.key], n.key)
	}
	p.PrivateLANID = v.positive(f["private_lan_id"], "private_lan_id", 1<<31-1)
	p.PublicLANID = v.positive(f["public_lan_id"], "public_lan_id", 1<<31-1)
	if p.PrivateLANID != 0 && p.PrivateLANID == p.PublicLANID {
		v.bad("public_lan_id", "must differ from private_lan_id (%d): the Cubes' private LAN is not the public one", p.PrivateLANID)
	}
	p.TargetGroups = v.names(f["target_groups"], "target_groups")
	p.BaselineCubes = v.names(f["baseline_cubes"], "baseline_cubes")
	for i, c := range p.BaselineCubes {
		if p.CubeNamePrefix != "" && !strings.HasPrefix(c, p.CubeNamePrefix) {
			v.bad(fmt.Sprintf("baseline_cubes[%d]", i), "%q does not start with cube_name_prefix %q", c, p.CubeNamePrefix)
		}
	}
	if p.RuntimeSourceCube != "" && len(p.BaselineCubes) > 0 && !slices.Contains(p.BaselineCubes, p.RuntimeSourceCube) {
		v.bad("runtime_source_cube", "%q is not one of baseline_cubes: new Cubes bootstrap from a healthy baseline Cube", p.RuntimeSourceCube)
	}
	if n := f["control_plane"]; n != nil && v.isObject(n, "control_plane") {
		cf := v.object(n, "control_plane", []string{"url", "pool", "api_key_file", "target_group"}, []string{"url", "pool", "api_key_file"})
		p.ControlPlane = ProfileControlPlane{URL: v.httpURL(cf["url"], "control_plane.url"), Pool: v.name(cf["pool"], "control_plane.pool"),
			APIKeyFile: v.name(cf["api_key_file"], "control_plane.api_key_file"), TargetGroup: v.name(cf["target_group"], "control_plane.target_group")}
	}
	if n := f["coordinator"]; n != nil && v.isObject(n, "coordinator") {
		p.Coordinator = v.sshHost(n, "coordinator", nil)
	}
	if n := f["gpu_wireguard"]; n != nil && v.isObject(n, "gpu_wireguard") {
		var iface, conf string
		p.GPUWireGuard.ProfileSSHHost = v.sshHost(n, "gpu_wireguard", func(extra map[string]*node) {
			iface = v.name(extra["interface"], "gpu_wireguard.interface")
			if c := extra["config_file"]; c != nil {
				if conf = v.name(c, "gpu_wireguard.config_file"); conf != "" && !strings.HasPrefix(conf, "/") {
					v.bad("gpu_wireguard.config_file", "%q: want an absolute path on the GPU host", conf)
				}
			}
		})
		p.GPUWireGuard.Interface, p.GPUWireGuard.ConfigFile = iface, conf
	}
	if n := f["ssh"]; n != nil && v.isObject(n, "ssh") {
		sf := v.object(n, "ssh", []string{"key_file", "known_hosts_file", "cube_user", "cube_port"}, []string{"key_file", "known_hosts_file", "cube_user"})
		p.SSH = ProfileSSH{KeyFile: v.name(sf["key_file"], "ssh.key_file"), KnownHostsFile: v.name(sf["known_hosts_file"], "ssh.known_hosts_file"),
			CubeUser: v.name(sf["cube_user"], "ssh.cube_user"), CubePort: 22}
		if pn := sf["cube_port"]; pn != nil {
			p.SSH.CubePort = v.positive(pn, "ssh.cube_port", 65535)
		}
	}
	if n := f["slots_per_cube"]; n != nil {
		p.SlotsPerCube = v.positive(n, "slots_per_cube", maxSlotsPerCube)
	}
	if n := f["drain_deadline"]; n != nil {
		p.DrainDeadline = v.duration(n, "drain_deadline", time.Second, maxDrainDeadline)
	}
	if n := f["ionos_token_file"]; n != nil {
		p.TokenFile = v.name(n, "ionos_token_file")
	}
	return p
}

// isObject reports whether n is an object, saying so at path when it is not.
func (v *validator) isObject(n *node, path string) bool {
	if n.kind != kindObject {
		v.bad(path, "must be an object, not %s", n.kindName())
		return false
	}
	return true
}

// name checks a required non-empty string without control characters (nil: reported missing
// by object).
func (v *validator) name(n *node, path string) string {
	if n == nil {
		return ""
	}
	if n.kind != kindString {
		v.bad(path, "must be a string, not %s", n.kindName())
		return ""
	}
	s := n.str
	switch {
	case strings.TrimSpace(s) == "":
		v.bad(path, "must not be empty")
		return ""
	case len(s) > 1024 || strings.IndexFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0:
		v.bad(path, "must be at most 1024 characters without control characters")
		return ""
	}
	return s
}

// names checks a non-empty list of distinct names.
func (v *validator) names(n *node, path string) []string {
	if n == nil {
		return nil
	}
	if n.kind != kindArray || len(n.arr) == 0 {
		v.bad(path, "must be a non-empty list of names")
		return nil
	}
	var out []string
	for i, e := range n.arr {
		p := fmt.Sprintf("%s[%d]", path, i)
		s := v.name(e, p)
		if s != "" && slices.Contains(out, s) {
			v.bad(p, "%q is listed twice", s)
			continue
		}
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// httpURL checks an http(s) URL with a host.
func (v *validator) httpURL(n *node, path string) string {
	s := v.name(n, path)
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		v.bad(path, "%q: want an http(s) URL such as https://cubefleet.example:3010", s)
		return ""
	}
	return strings.TrimRight(s, "/")
}

// sshHost checks an object with host, user and an optional port (1-65535, default 22); more,
// when set, also requires an "interface" key, allows "config_file", and reads them.
func (v *validator) sshHost(n *node, path string, more func(map[string]*node)) ProfileSSHHost {
	allowed, required := []string{"host", "port", "user"}, []string{"host", "user"}
	if more != nil {
		allowed, required = append(allowed, "interface", "config_file"), append(required, "interface")
	}
	f := v.object(n, path, allowed, required)
	h := ProfileSSHHost{Host: v.name(f["host"], path+".host"), User: v.name(f["user"], path+".user"), Port: 22}
	if pn := f["port"]; pn != nil {
		h.Port = v.positive(pn, path+".port", 65535)
	}
	if more != nil {
		more(f)
	}
	return h
}

// duration checks a Go duration string within [lo, hi].
func (v *validator) duration(n *node, path string, lo, hi time.Duration) time.Duration {
	if n.kind != kindString {
		v.bad(path, "must be a duration string such as \"30m\", not %s", n.kindName())
		return 0
	}
	d, err := time.ParseDuration(n.str)
	if err != nil || d < lo || d > hi {
		v.bad(path, "%q: want a duration from %s to %s, such as \"30m\"", n.str, lo, hi)
		return 0
	}
	return d
}
