// Package cubes plans the Cube fleet of one IONOS data center: it reads the operator's private
// configuration (ordered slots, minimums, protected servers, required security groups),
// checks it against an inventory from internal/ionos, and decides per slot whether to retain,
// create, remove or leave it empty, reporting every rule it breaks at once. The rules are
// those of docs/ionos.md ("The private configuration", "Plan").
// The planning is pure and safe for concurrent use. The fleet workflows (cloud.go: the cloud
// steps; roundtrip_up.go, roundtrip_down.go: roundtrip up and down) do their I/O only through
// the interfaces they are given (Cloud, ControlPlane, Peers) and the journal.
package cubes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/ionos"
)

// Config is the operator's private fleet configuration (ionos-cube-fleet.md, "The private JSON
// configuration"). Ids are UUIDs in lowercase; MinimumRAMMiB is the JSON key minimum_ram_mb
// (IONOS's "MB" is MiB). WorkerSecurityGroupIDs is nil when the key is absent, never empty.
type Config struct {
	DatacenterID           string
	PrivateLANID           int
	MinimumCores           int
	MinimumRAMMiB          int
	MinimumCubes           int
	ProtectedServerIDs     []string
	WorkerSecurityGroupIDs []string
	Slots                  []Slot
}

// Occupied is the number of slots holding a Cube (with a server_id): the fleet's size now.
func (c *Config) Occupied() int {
	n := 0
	for _, s := range c.Slots {
		if s.ServerID != "" {
			n++
		}
	}
	return n
}

// Slot is one ordered fleet slot: Name, PrivateIP (IPv4 on the private LAN) and ServerID, the
// UUID of the Cube that holds it ("" for the JSON null of a genuinely empty slot).
type Slot struct {
	Name      string
	PrivateIP string
	ServerID  string
}

// maxConfigBytes bounds what DecodeConfig reads (4 MiB), maxDepth the JSON nesting it accepts.
const (
	maxConfigBytes = 4 << 20
	maxDepth       = 32
)

var slotNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// DecodeConfig reads the private configuration strictly and reports every problem at once as
// one INVALID_INPUT *cubefleet.Error whose Details["errors"] lists each JSON path (e.g.
// "slots[2].private_ip") with what is wrong: malformed JSON, duplicate or unknown keys, a
// missing key, a wrong type, a bad UUID or IPv4 address, a non-positive integer,
// minimum_cubes below 1 or above the number of slots, an empty worker_security_group_ids, a
// slot without server_id (write null for an empty slot), a repeated id within a list, or more
// than 4 MiB. Duplicate identities across slots are planning rules (see PlanSlots), not
// decoding errors.
func DecodeConfig(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	if len(data) > maxConfigBytes {
		return nil, cubefleet.Invalid("", "the configuration is larger than %d MiB", maxConfigBytes>>20)
	}
	root, err := parseJSON(data)
	if err != nil {
		return nil, err
	}
	v := &validator{}
	cfg := v.config(root)
	if len(v.errs) > 0 {
		return nil, cubefleet.InvalidAll(v.errs)
	}
	return cfg, nil
}

// IsConfig reports whether data looks like a fleet configuration: a JSON object with
// datacenter_id and slots. A quick look for messages (an inventory passed where a configuration
// belongs is told apart), not a check: DecodeConfig checks.
func IsConfig(data []byte) bool {
	var head map[string]json.RawMessage
	if json.Unmarshal(data, &head) != nil {
		return false
	}
	_, dc := head["datacenter_id"]
	_, slots := head["slots"]
	return dc && slots
}

type validator struct{ errs []cubefleet.FieldError }

func (v *validator) bad(path, format string, args ...any) {
	v.errs = append(v.errs, cubefleet.FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

// topKeys returns the configuration's keys, slotKeys a slot's (all required).
func topKeys() []string {
	return []string{"datacenter_id", "private_lan_id", "minimum_cores", "minimum_ram_mb", "minimum_cubes",
		"protected_server_ids", "worker_security_group_ids", "slots"}
}

func slotKeys() []string { return []string{"name", "private_ip", "server_id"} }

func (v *validator) config(root *node) *Config {
	cfg := &Config{}
	if root.kind != kindObject {
		v.bad("", "the configuration must be a JSON object, not %s", root.kindName())
		return cfg
	}
	fields := v.object(root, "", topKeys(), []string{"datacenter_id", "private_lan_id", "minimum_cores",
		"minimum_ram_mb", "minimum_cubes", "protected_server_ids", "slots"})
	if n := fields["datacenter_id"]; n != nil {
		cfg.DatacenterID = v.uuid(n, "datacenter_id")
	}
	cfg.PrivateLANID = v.positive(fields["private_lan_id"], "private_lan_id", math.MaxInt32)
	cfg.MinimumCores = v.positive(fields["minimum_cores"], "minimum_cores", 1<<20)
	cfg.MinimumRAMMiB = v.positive(fields["minimum_ram_mb"], "minimum_ram_mb", 1<<30)
	cfg.MinimumCubes = v.positive(fields["minimum_cubes"], "minimum_cubes", 1<<20)
	if n := fields["protected_server_ids"]; n != nil {
		cfg.ProtectedServerIDs = v.uuidList(n, "protected_server_ids", false)
	}
	if n := fields["worker_security_group_ids"]; n != nil {
		cfg.WorkerSecurityGroupIDs = v.uuidList(n, "worker_security_group_ids", true)
	}
	if n := fields["slots"]; n != nil {
		if n.kind != kindArray {
			v.bad("slots", "must be a list of slots, not %s", n.kindName())
		} else if len(n.arr) == 0 {
			v.bad("slots", "must list at least one slot")
		}
		for i, sn := range n.arr {
			cfg.Slots = append(cfg.Slots, v.slot(sn, fmt.Sprintf("slots[%d]", i)))
		}
		if cfg.MinimumCubes > len(n.arr) && len(n.arr) > 0 {
			v.bad("minimum_cubes", "is %d, more than the slots configured (%d)", cfg.MinimumCubes, len(n.arr))
		}
	}
	return cfg
}

// object checks n's keys against allowed and required and returns its members by key.
func (v *validator) object(n *node, path string, allowed, required []string) map[string]*node {
	out := map[string]*node{}
	for _, m := range n.obj {
		p := join(path, m.key)
		if !slices.Contains(allowed, m.key) {
			v.bad(p, "unknown key; allowed keys are %s", strings.Join(allowed, ", "))
			continue
		}
		out[m.key] = m.val
	}
	for _, k := range required {
		if _, ok := out[k]; !ok {
			v.bad(join(path, k), "is required")
		}
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (v *validator) uuid(n *node, path string) string {
	if n.kind != kindString {
		v.bad(path, "must be a UUID string, not %s", n.kindName())
		return ""
	}
	if !ionos.IsUUID(n.str) {
		v.bad(path, "%q is not a UUID (8-4-4-4-12 hexadecimal digits)", n.str)
		return ""
	}
	return strings.ToLower(n.str)
}

func (v *validator) uuidList(n *node, path string, nonEmpty bool) []string {
	if n.kind != kindArray {
		if nonEmpty {
			v.bad(path, "must be a non-empty list of UUIDs (or left out), not %s", n.kindName())
		} else {
			v.bad(path, "must be a list of UUIDs, not %s", n.kindName())
		}
		return nil
	}
	if nonEmpty && len(n.arr) == 0 {
		v.bad(path, "must not be empty; leave the key out when no security group is required")
	}
	out := []string{}
	for i, e := range n.arr {
		p := fmt.Sprintf("%s[%d]", path, i)
		id := v.uuid(e, p)
		if id == "" {
			continue
		}
		if slices.Contains(out, id) {
			v.bad(p, "%s is listed twice", id)
			continue
		}
		out = append(out, id)
	}
	return out
}

// positive reads a positive JSON integer no larger than max; 0 when absent or invalid.
func (v *validator) positive(n *node, path string, max int64) int {
	if n == nil {
		return 0
	}
	if n.kind != kindNumber {
		v.bad(path, "must be a positive integer, not %s", n.kindName())
		return 0
	}
	i, err := strconv.ParseInt(string(n.num), 10, 64)
	if err != nil {
		v.bad(path, "must be a positive integer, not %s", n.num)
		return 0
	}
	if i < 1 || i > max {
		v.bad(path, "must be a positive integer no larger than %d, not %d", max, i)
		return 0
	}
	return int(i)
}

func (v *validator) slot(n *node, path string) Slot {
	var s Slot
	if n.kind != kindObject {
		v.bad(path, "must be an object with name, private_ip and server_id, not %s", n.kindName())
		return s
	}
	f := v.object(n, path, slotKeys(), slotKeys())
	if nn := f["name"]; nn != nil {
		switch {
		case nn.kind != kindString:
			v.bad(path+".name", "must be a string, not %s", nn.kindName())
		case !slotNamePattern.MatchString(nn.str):
			v.bad(path+".name", "%q must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", nn.str)
		default:
			s.Name = nn.str
		}
	}
	if ip := f["private_ip"]; ip != nil {
		if ip.kind != kindString {
			v.bad(path+".private_ip", "must be an IPv4 address string, not %s", ip.kindName())
		} else if a, err := netip.ParseAddr(ip.str); err != nil || !a.Is4() || a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			v.bad(path+".private_ip", "%q is not a usable IPv4 address (dotted quad, e.g. 10.7.0.11)", ip.str)
		} else {
			s.PrivateIP = a.String()
		}
	}
	if id := f["server_id"]; id != nil && id.kind != kindNull {
		s.ServerID = v.uuid(id, path+".server_id")
	}
	return s
}

// ---- a strict JSON tree: duplicate keys are errors, numbers keep their text ----

type nodeKind byte

const (
	kindNull nodeKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

type node struct {
	kind nodeKind
	obj  []member
	arr  []*node
	str  string
	num  json.Number
}

type member struct {
	key string
	val *node
}

func (n *node) kindName() string {
	return [...]string{"null", "a boolean", "a number", "a string", "a list", "an object"}[n.kind]
}

// parseJSON parses one JSON document with no trailing data, refusing duplicate keys and
// nesting deeper than maxDepth. Errors are INVALID_INPUT naming the path or byte offset.
func parseJSON(data []byte) (*node, error) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	root, err := parseValue(dec, "", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, cubefleet.Invalid("", "trailing data after the JSON document (byte %d)", dec.InputOffset())
	}
	return root, nil
}

func syntaxError(dec *json.Decoder, path string, err error) error {
	if errors.Is(err, io.EOF) {
		return cubefleet.Invalid(path, "the JSON document ends too early")
	}
	return cubefleet.Invalid(path, "not valid JSON near byte %d: %v", dec.InputOffset(), err)
}

func parseValue(dec *json.Decoder, path string, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, cubefleet.Invalid(path, "nested deeper than %d levels", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxError(dec, path, err)
	}
	switch t := tok.(type) {
	case nil:
		return &node{kind: kindNull}, nil
	case bool:
		return &node{kind: kindBool}, nil
	case json.Number:
		return &node{kind: kindNumber, num: t}, nil
	case string:
		return &node{kind: kindString, str: t}, nil
	case json.Delim:
		if t == '[' {
			n := &node{kind: kindArray}
			for i := 0; dec.More(); i++ {
				e, err := parseValue(dec, fmt.Sprintf("%s[%d]", path, i), depth+1)
				if err != nil {
					return nil, err
				}
				n.arr = append(n.arr, e)
			}
			if _, err := dec.Token(); err != nil {
				return nil, syntaxError(dec, path, err)
			}
			return n, nil
		}
		n := &node{kind: kindObject}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, syntaxError(dec, path, err)
			}
			key, _ := kt.(string) // the decoder only returns strings in key position
			p := join(path, key)
			if seen[key] {
				return nil, cubefleet.Invalid(p, "the key appears twice in one object")
			}
			seen[key] = true
			val, err := parseValue(dec, p, depth+1)
			if err != nil {
				return nil, err
			}
			n.obj = append(n.obj, member{key: key, val: val})
		}
		if _, err := dec.Token(); err != nil {
			return nil, syntaxError(dec, path, err)
		}
		return n, nil
	}
	return nil, cubefleet.Invalid(path, "unexpected JSON token")
}

// configJSON is the configuration's JSON form, for MarshalJSON.
type configJSON struct {
	DatacenterID           string     `json:"datacenter_id"`
	PrivateLANID           int        `json:"private_lan_id"`
	MinimumCores           int        `json:"minimum_cores"`
	MinimumRAMMiB          int        `json:"minimum_ram_mb"`
	MinimumCubes           int        `json:"minimum_cubes"`
	ProtectedServerIDs     []string   `json:"protected_server_ids"`
	WorkerSecurityGroupIDs []string   `json:"worker_security_group_ids,omitempty"`
	Slots                  []slotJSON `json:"slots"`
}

type slotJSON struct {
	Name      string  `json:"name"`
	PrivateIP string  `json:"private_ip"`
	ServerID  *string `json:"server_id"`
}

// MarshalJSON writes the configuration in the form DecodeConfig reads (an empty ServerID as
// null).
func (c *Config) MarshalJSON() ([]byte, error) {
	out := configJSON{DatacenterID: c.DatacenterID, PrivateLANID: c.PrivateLANID, MinimumCores: c.MinimumCores,
		MinimumRAMMiB: c.MinimumRAMMiB, MinimumCubes: c.MinimumCubes, ProtectedServerIDs: c.ProtectedServerIDs,
		WorkerSecurityGroupIDs: c.WorkerSecurityGroupIDs, Slots: make([]slotJSON, len(c.Slots))}
	if out.ProtectedServerIDs == nil {
		out.ProtectedServerIDs = []string{}
	}
	for i, s := range c.Slots {
		out.Slots[i] = slotJSON{Name: s.Name, PrivateIP: s.PrivateIP}
		if s.ServerID != "" {
			id := s.ServerID
			out.Slots[i].ServerID = &id
		}
	}
	return json.Marshal(out)
}
