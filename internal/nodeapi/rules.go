package nodeapi

import (
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"github.com/cubefleet/cubefleet"
)

// The rules a node's register and status bodies must follow beyond their JSON shape. Upstream
// (docs/nodes.md, "Node-agent API") checks only node_id and requestID; every figure it stores is a
// count, a size or a share, so a negative one is a bug or a lie, and cubefleet refuses it (400
// naming the field) rather than let it reach the scheduler, the drain rule or an operator's screen.

// invalidField is INVALID_INPUT for the field at path whose message is the whole sentence
// (the wire's {"error":...} shows it as it is, `allocated.mvm_num must be >= 0 (got -5)`).
func invalidField(path, format string, args ...any) *cubefleet.Error {
	msg := fmt.Sprintf(format, args...)
	return &cubefleet.Error{Code: cubefleet.CodeInvalidInput, Message: msg,
		Details: map[string]any{"path": path, "errors": []cubefleet.FieldError{{Path: path, Message: msg}}}}
}

// nonNegative refuses a negative figure at path.
func nonNegative(path string, v int64) error {
	if v < 0 {
		return invalidField(path, "%s must be >= 0 (got %d)", path, v)
	}
	return nil
}

// checkRatio refuses a paused_release_ratio outside 0..1 (docs/nodes.md, "Internal nodes API":
// `0..1|null`).
func checkRatio(path string, v *float64) error {
	if v != nil && !(*v >= 0 && *v <= 1) {
		return invalidField(path, "%s must be between 0 and 1 (got %g)", path, *v)
	}
	return nil
}

// checkStatusFigures checks the figures a status report carries on every report (allocated,
// disk_usage, quota): each at least 0, disk usage percentages at most 100 (spec: 0-100), the
// quota's paused_release_ratio 0 to 1. It runs on the hot path, so it only compares.
func checkStatusFigures(req *StatusRequest) error {
	if a := req.Allocated; a != nil {
		if a.MilliCPU < 0 || a.MemoryMB < 0 || a.MVMNum < 0 || a.MVMRunningNum < 0 || a.NICQueues < 0 || a.DataDiskMB < 0 || a.StorageDiskMB < 0 {
			return allocatedError(a)
		}
	}
	if d := req.DiskUsage; d != nil {
		for _, f := range [...]struct {
			path string
			v    float64
		}{
			{"disk_usage.data_disk_usage_per", d.DataDiskUsagePer}, {"disk_usage.storage_disk_usage_per", d.StorageDiskUsagePer},
			{"disk_usage.sys_disk_usage_per", d.SysDiskUsagePer},
		} {
			if !(f.v >= 0 && f.v <= 100) { // also NaN
				return invalidField(f.path, "%s is a percentage: 0 to 100 (got %g)", f.path, f.v)
			}
		}
	}
	if q := req.Quota; q != nil {
		for _, f := range [...]struct {
			path string
			v    int64
		}{
			{"quota.milli_cpu", q.MilliCPU}, {"quota.mem_mb", q.MemMB}, {"quota.max_mvm_num", q.MaxMVMNum},
			{"quota.create_concurrent_num", q.CreateConcurrentNum},
		} {
			if err := nonNegative(f.path, f.v); err != nil {
				return err
			}
		}
		if err := checkRatio("quota.paused_release_ratio", q.PausedReleaseRatio); err != nil {
			return err
		}
	}
	return nil
}

// allocatedError names the first negative field of a.
func allocatedError(a *Allocated) error {
	for _, f := range [...]struct {
		path string
		v    int64
	}{
		{"allocated.milli_cpu", a.MilliCPU}, {"allocated.memory_mb", a.MemoryMB}, {"allocated.mvm_num", a.MVMNum},
		{"allocated.mvm_running_num", a.MVMRunningNum}, {"allocated.nic_queues", a.NICQueues},
		{"allocated.data_disk_mb", a.DataDiskMB}, {"allocated.storage_disk_mb", a.StorageDiskMB},
	} {
		if err := nonNegative(f.path, f.v); err != nil {
			return err
		}
	}
	return nil
}

// CheckHostFacts checks host facts' counts: kvm_api_version, cpu_count and mem_total_mb at
// least 0 (INVALID_INPUT naming the field).
func CheckHostFacts(h *HostFacts) error {
	for _, f := range [...]struct {
		path string
		v    int64
	}{
		{"host_facts.kvm_api_version", h.KVMAPIVersion}, {"host_facts.cpu_count", h.CPUCount}, {"host_facts.mem_total_mb", h.MemTotalMB},
	} {
		if err := nonNegative(f.path, f.v); err != nil {
			return err
		}
	}
	return nil
}

// CheckImages checks an image inventory: every size_bytes at least 0 (INVALID_INPUT naming the
// field).
func CheckImages(images []Image) error {
	for i, img := range images {
		if img.SizeBytes < 0 {
			return invalidField(fmt.Sprintf("images[%d].size_bytes", i), "images[%d].size_bytes must be >= 0 (got %d)", i, img.SizeBytes)
		}
	}
	return nil
}

// Node-supplied strings that are stored and shown (nodes get, nodes list, events) are checked
// too: a control character in them could rewrite an operator's terminal or forge a line of a
// log, so none may hold one, and each is bounded.
const (
	// MaxVersionFieldRunes bounds each field of a reported version (component, version,
	// commit, build_time, source, variant): a commit hash is 40 or 64, a build time about 30.
	MaxVersionFieldRunes = 128
	// MaxTemplateIDRunes bounds a reported local template's template_id (as a template's
	// imageId: 255).
	MaxTemplateIDRunes = 255
)

// ControlChar returns the first control character in s: C0 (U+0000 to U+001F, tab and newline
// included), DEL (U+007F) or C1 (U+0080 to U+009F, encoded 0xC2 0x80-0x9F); ok is false when
// there is none. s is valid UTF-8 (the decoder refuses anything else).
func ControlChar(s string) (r rune, ok bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == 0x7f:
			return rune(c), true
		case c == 0xc2 && i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] <= 0x9f:
			return rune(s[i+1]), true
		}
	}
	return 0, false
}

// checkNodeString refuses a node-supplied string at path that holds a control character or
// is longer than max runes.
func checkNodeString(path, s string, max int) error {
	if r, ok := ControlChar(s); ok {
		return invalidField(path, "%s must not hold control characters (it holds %U)", path, r)
	}
	if n := utf8.RuneCountInString(s); n > max {
		return invalidField(path, "%s is too long: %d characters, at most %d", path, n, max)
	}
	return nil
}

// checkLabelLike refuses a cluster_label or instance_type that breaks the rules of a label
// value: empty, or at most 63 of letters, digits, '-', '_' and '.', starting and ending with a
// letter or digit. A stock Cubelet sends its instance_type as a label value too, and its
// cluster_label ("default-cluster") is matched to a pool's fleet name, which is stricter still.
func checkLabelLike(path, s string) error {
	if s == "" || len(s) <= maxLabelName && labelName.MatchString(s) {
		return nil
	}
	return invalidField(path, "%s %q must be empty or 1-%d of letters, digits, '-', '_' and '.', starting and ending with a letter or digit (the rules of a label value)",
		path, s, maxLabelName)
}

// CheckVersions checks reported versions: each field is trimmed of surrounding white space (a
// version read from a file often ends in a newline, and refusing it would drop the node's
// reports), then must hold no control character and be at most MaxVersionFieldRunes long
// (INVALID_INPUT naming the field, e.g. versions[1].version).
func CheckVersions(vs []ComponentVersion) error {
	for i := range vs {
		v := &vs[i]
		for _, f := range [...]struct {
			name string
			s    *string
		}{
			{"component", &v.Component}, {"version", &v.Version}, {"commit", &v.Commit}, {"build_time", &v.BuildTime},
			{"source", &v.Source}, {"variant", &v.Variant},
		} {
			if *f.s == "" {
				continue
			}
			*f.s = strings.TrimSpace(*f.s)
			if err := checkNodeString(fmt.Sprintf("versions[%d].%s", i, f.name), *f.s, MaxVersionFieldRunes); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckTemplates checks reported local templates: no template_id holds a control character or
// is longer than MaxTemplateIDRunes (INVALID_INPUT naming the field).
func CheckTemplates(ts []LocalTemplate) error {
	for i := range ts {
		if err := checkNodeString(fmt.Sprintf("local_templates[%d].template_id", i), ts[i].TemplateID, MaxTemplateIDRunes); err != nil {
			return err
		}
	}
	return nil
}

// NodeAddrProblem says why a cannot be a node's address ("" when it can): it must not be the
// unspecified address (0.0.0.0, ::), a multicast address or the IPv4 broadcast address, nor
// carry an IPv6 zone. The phrase reads after "not": "a multicast address".
func NodeAddrProblem(a netip.Addr) string {
	switch {
	case a.Zone() != "":
		return "an address with a zone"
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsMulticast():
		return "a multicast address"
	case a.Unmap() == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the broadcast address"
	}
	return ""
}

// MaxDetailRunes bounds free text an operator or a node attaches to a node: an isolation's
// detail and a drain's reason (200 runes, docs/nodes.md, "Internal nodes API").
const MaxDetailRunes = 200

// CheckText checks a free text field (an isolation detail, a drain reason) at path: valid UTF-8
// of at most MaxDetailRunes runes, without control characters (C0 with tab and newline, DEL,
// C1): it is shown in nodes get and events. Errors are INVALID_INPUT naming path.
func CheckText(path, text string) error {
	if !utf8.ValidString(text) {
		return cubefleet.Invalid(path, "%s is not valid UTF-8", path)
	}
	if r, ok := ControlChar(text); ok {
		return invalidField(path, "%s must not hold control characters (it holds %U)", path, r)
	}
	if n := utf8.RuneCountInString(text); n > MaxDetailRunes {
		return cubefleet.Invalid(path, "%s too long: %d characters, at most %d", path, n, MaxDetailRunes)
	}
	return nil
}

// ParseJoinTokenIP parses the address a join token is bound to (--ip): an IP address a node
// can have, so not the unspecified address (0.0.0.0, ::), a multicast address, the IPv4
// broadcast address or an address with a zone; an IPv4-mapped IPv6 address is unmapped. The
// error reads after the flag or field name: `"224.0.0.1" is a multicast address, not a node's`.
func ParseJoinTokenIP(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	if p := NodeAddrProblem(a); p != "" {
		return netip.Addr{}, fmt.Errorf("%q is %s, not a node's", s, p)
	}
	return a.Unmap(), nil
}
