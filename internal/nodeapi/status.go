package nodeapi

import (
	"encoding/json"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/cubefleet/cubefleet"
)

// The wire types of a status report (heartbeat), field for field as a stock Cubelet sends them
// (docs/nodes.md, "Node-agent API"). Every field is optional on input; unknown fields are
// accepted and ignored.

// Condition is a Kubernetes-style node condition with camelCase keys (docs/nodes.md, "Node-agent
// API"). The times are RFC 3339 strings, kept as sent. A Cubelet sends one condition of Type
// "Ready" with Status "True" (reason CubeletReady) or "False" (reason cubeletNotReady); `cubefleet
// agent` the same with reason AgentReady or SandboxRuntimeUnavailable.
type Condition struct {
	Type               string `json:"type"`                         // "Ready"
	Status             string `json:"status"`                       // "True" or "False"
	LastHeartbeatTime  string `json:"lastHeartbeatTime,omitempty"`  // RFC 3339
	LastTransitionTime string `json:"lastTransitionTime,omitempty"` // RFC 3339, when Status last changed
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"` // for people
}

// Image is one container image a node holds (docs/nodes.md, "Node-agent API"); SizeBytes in bytes,
// at least 0.
type Image struct {
	Names     []string `json:"names"`
	SizeBytes int64    `json:"size_bytes,omitempty"`
	Namespace string   `json:"namespace,omitempty"`
	MediaType string   `json:"media_type,omitempty"`
}

// LocalTemplate is one sandbox template replica a node holds (docs/nodes.md, "Node-agent API").
// TemplateID is at most MaxTemplateIDRunes runes without control characters (CheckTemplates).
type LocalTemplate struct {
	TemplateID string `json:"template_id"`         // the template's id
	ID         string `json:"id,omitempty"`        // the local copy's id
	Media      string `json:"media,omitempty"`     // its media type
	Path       string `json:"path,omitempty"`      // where it is on the node
	Namespace  string `json:"namespace,omitempty"` // its image namespace
}

// Allocated is what a node has committed to sandboxes in a good state (docs/nodes.md, "Node-agent
// API"): MilliCPU in thousandths of a core, MemoryMB, DataDiskMB and StorageDiskMB in MiB, MVMNum
// the microVMs (cubefleet counts them as the node's running sandboxes), MVMRunningNum those
// running. Every figure is at least 0.
type Allocated struct {
	MilliCPU      int64 `json:"milli_cpu"`
	MemoryMB      int64 `json:"memory_mb"`
	MVMNum        int64 `json:"mvm_num"`
	MVMRunningNum int64 `json:"mvm_running_num"`
	NICQueues     int64 `json:"nic_queues"`
	DataDiskMB    int64 `json:"data_disk_mb"`
	StorageDiskMB int64 `json:"storage_disk_mb"`
}

// DiskUsage is how full a node's disks are, each a percentage from 0 to 100 (docs/nodes.md,
// "Node-agent API").
type DiskUsage struct {
	DataDiskUsagePer    float64 `json:"data_disk_usage_per"`    // the data disk (cubefleet agent: the state directory's file system)
	StorageDiskUsagePer float64 `json:"storage_disk_usage_per"` // the storage disk (cubefleet agent: the same)
	SysDiskUsagePer     float64 `json:"sys_disk_usage_per"`     // the root file system
}

// Quota is the quota block of a status report (the quota branch, docs/nodes.md, "Node-agent API"):
// MilliCPU in thousandths of a core, MemMB in MiB, MaxMVMNum microVMs, CreateConcurrentNum
// concurrent creations (0: the scheduler's limit), PausedReleaseRatio 0 to 1. A block whose fields
// are all zero (AllZero) is ignored, so it never clobbers the registration.
type Quota struct {
	MilliCPU            int64    `json:"milli_cpu"`
	MemMB               int64    `json:"mem_mb"`
	MaxMVMNum           int64    `json:"max_mvm_num"`
	CreateConcurrentNum int64    `json:"create_concurrent_num"`
	PausedReleaseRatio  *float64 `json:"paused_release_ratio,omitempty"`
}

// AllZero reports whether every field of q is zero (such a quota is ignored, docs/nodes.md,
// "Node-agent API").
func (q *Quota) AllZero() bool {
	return q.MilliCPU == 0 && q.MemMB == 0 && q.MaxMVMNum == 0 && q.CreateConcurrentNum == 0 &&
		(q.PausedReleaseRatio == nil || *q.PausedReleaseRatio == 0)
}

// StatusRequest is the body of POST RouteStatus, Cubelet's UpdateNodeStatusRequest (docs/nodes.md,
// "Node-agent API"). The inventory (Images, LocalTemplates, Versions, HostFacts) travels as Raw
// JSON, so a receiver decodes a list only when its content changed: absent or null means "not
// reported" (for local_templates: keep the previous inventory); `[]` means empty. Allocated,
// DiskUsage and Quota are nil when absent; HeartbeatTime (the server uses its own clock when zero,
// and clamps a time from the future) and MetricTime (HeartbeatTime when zero) are zero when absent.
type StatusRequest struct {
	RequestID           string                  `json:"requestID,omitempty"` // at most 64 runes
	Conditions          []Condition             `json:"conditions,omitempty"`
	Images              Raw[[]Image]            `json:"images,omitzero"`
	LocalTemplates      Raw[[]LocalTemplate]    `json:"local_templates"` // Cubelet always sends it, [] when empty
	HeartbeatTime       WireTime                `json:"heartbeat_time,omitzero"`
	Allocated           *Allocated              `json:"allocated,omitempty"`
	DiskUsage           *DiskUsage              `json:"disk_usage,omitempty"`
	MetricTime          WireTime                `json:"metric_time,omitzero"`
	Quota               *Quota                  `json:"quota,omitempty"`
	Versions            Raw[[]ComponentVersion] `json:"versions,omitzero"`
	InventoryIncomplete bool                    `json:"inventory_incomplete,omitempty"` // Versions is a partial list
	HostFacts           Raw[HostFacts]          `json:"host_facts,omitzero"`
	// Sandboxes lists the ids of the sandboxes `cubefleet agent` runs on the node (started and
	// not ended; docs/sandboxes.md): the control plane marks a sandbox of the node that is not
	// listed lost, and releases its reservation once a report lists it. Only our agent sends
	// it, always (an empty list as []); nil means absent (a stock Cubelet's report).
	Sandboxes []string `json:"sandboxes,omitzero"`
}

// Reset clears r for reuse, keeping the room its slices have (a pool of requests makes the
// status route allocate nothing per report).
func (r *StatusRequest) Reset() {
	*r = StatusRequest{
		Conditions: r.Conditions[:0], Images: r.Images.reset(), LocalTemplates: r.LocalTemplates.reset(),
		Versions: r.Versions.reset(), HostFacts: r.HostFacts.reset(),
	}
}

// DecodeStatus decodes and checks a status body (docs/nodes.md, "Node-agent API"): one JSON object,
// requestID at most 64 runes, no negative figure (allocated, disk_usage, quota, images' size_bytes,
// host facts' counts), disk usage percentages at most 100, the quota's paused_release_ratio 0 to 1,
// every reported inventory (images, local_templates, versions, host_facts) of the right shape, and
// versions and template ids without control characters (CheckVersions, CheckTemplates). Errors are
// INVALID_INPUT (400) naming the field.
func DecodeStatus(body []byte) (*StatusRequest, error) {
	var d Decoder
	d.buf.Write(body)
	req := new(StatusRequest)
	if err := d.Status(req); err != nil {
		return nil, err
	}
	if _, err := req.DecodeImages(); err != nil {
		return nil, err
	}
	if _, err := req.DecodeTemplates(); err != nil {
		return nil, err
	}
	if _, err := req.DecodeVersions(); err != nil {
		return nil, err
	}
	if _, _, err := req.DecodeHostFacts(); err != nil {
		return nil, err
	}
	return req, nil
}

// Status decodes the status body in d into req (which must be reset) and checks what every
// report carries: the requestID and the figures of allocated, disk_usage and quota. It leaves
// the inventory undecoded (the registry decodes it only when it changed; DecodeStatus decodes
// it all). It runs on the hot path, so it only compares.
func (d *Decoder) Status(req *StatusRequest) error {
	if err := d.decode(req); err != nil {
		return err
	}
	if err := checkRequestID(req.RequestID); err != nil {
		return err
	}
	return checkStatusFigures(req)
}

// DecodeImages decodes and checks the reported images (nil when not reported; never nil when
// reported, `[]` giving an empty list). Errors are INVALID_INPUT naming the field.
func (r *StatusRequest) DecodeImages() ([]Image, error) {
	return decodeChecked(&r.Images, "images", func(v []Image) ([]Image, error) {
		if v == nil {
			v = []Image{}
		}
		return v, CheckImages(v)
	})
}

// DecodeTemplates decodes and checks the reported local templates (nil when not reported;
// never nil when reported). Errors are INVALID_INPUT naming the field.
func (r *StatusRequest) DecodeTemplates() ([]LocalTemplate, error) {
	return decodeChecked(&r.LocalTemplates, "local_templates", func(v []LocalTemplate) ([]LocalTemplate, error) {
		if v == nil {
			v = []LocalTemplate{}
		}
		return v, CheckTemplates(v)
	})
}

// DecodeVersions decodes and checks the reported versions (nil when not reported or null; its
// fields trimmed, see CheckVersions). Errors are INVALID_INPUT naming the field.
func (r *StatusRequest) DecodeVersions() ([]ComponentVersion, error) {
	return decodeChecked(&r.Versions, "versions", func(v []ComponentVersion) ([]ComponentVersion, error) {
		return v, CheckVersions(v)
	})
}

// DecodeHostFacts decodes and checks the reported host facts; ok is false when they were not
// reported. Errors are INVALID_INPUT naming the field.
func (r *StatusRequest) DecodeHostFacts() (h HostFacts, ok bool, err error) {
	if !r.HostFacts.Reported() {
		return HostFacts{}, false, nil
	}
	h, err = decodeChecked(&r.HostFacts, "host_facts", func(v HostFacts) (HostFacts, error) {
		return v, CheckHostFacts(&v)
	})
	return h, err == nil, err
}

// decodeChecked decodes raw (when reported) and passes the value through check.
func decodeChecked[T any](raw *Raw[T], field string, check func(T) (T, error)) (T, error) {
	var v T
	if !raw.Reported() {
		return v, nil
	}
	if err := jsonv2.Unmarshal(raw.v, &v, decodeOptions); err != nil {
		return v, cubefleet.Invalid(field, "invalid body: %s: %s", field, decodeMessage(err))
	}
	v, err := check(v)
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// Raw is a JSON value of Go type T carried undecoded: a receiver hashes it and decodes it only
// when it changed (Decode* of StatusRequest), a sender fills it with RawOf. The zero Raw is
// absent (left out with omitzero, written as null otherwise).
type Raw[T any] struct{ v jsontext.Value }

// RawOf returns v encoded as encoding/json encodes T. The contract's types always encode.
func RawOf[T any](v T) Raw[T] {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen: plain values only
		return Raw[T]{}
	}
	return Raw[T]{v: b}
}

// Reported reports whether the value was sent, and not as null.
func (r Raw[T]) Reported() bool { return len(r.v) > 0 && string(r.v) != "null" }

// JSON returns the value as it was received or encoded (nil when absent). It is shared: do not
// modify it.
func (r Raw[T]) JSON() []byte { return r.v }

// IsZero reports whether the value is absent (encoding/json's omitzero).
func (r Raw[T]) IsZero() bool { return len(r.v) == 0 }

// MarshalJSON writes the value as it is; an absent value is null.
func (r Raw[T]) MarshalJSON() ([]byte, error) {
	if len(r.v) == 0 {
		return []byte("null"), nil
	}
	return r.v, nil
}

// UnmarshalJSON keeps a copy of b.
func (r *Raw[T]) UnmarshalJSON(b []byte) error {
	r.v = append(r.v[:0], b...)
	return nil
}

// UnmarshalJSONFrom keeps a copy of the next value of dec in the room r already has.
func (r *Raw[T]) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	r.v = append(r.v[:0], v...)
	return nil
}

// reset empties r, keeping its room.
func (r Raw[T]) reset() Raw[T] { return Raw[T]{v: r.v[:0]} }

// WireTime is an RFC 3339 time on the wire. null, "" and Go's zero time
// ("0001-01-01T00:00:00Z", what a Cubelet sends for an unset time) all decode to the zero value;
// it encodes as Go encodes a time.Time (RFC 3339 with the fractional seconds it has).
type WireTime struct{ time.Time }

// UnmarshalJSON implements json.Unmarshaler.
func (t *WireTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" || string(b) == `""` {
		t.Time = time.Time{}
		return nil
	}
	var s string
	if err := jsonv2.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a time must be an RFC 3339 string")
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("time %q is not RFC 3339", s)
	}
	t.Time = v
	return nil
}
