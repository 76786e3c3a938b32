package nodes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/cubefleet/cubefleet"
)

// The wire types of the node-agent API, field for field as a stock Cubelet sends them and as
// CubeOps answers (specs/cubesandbox-node-agent.md §1.3, §1.4, §2.3). Every field is optional
// on input; unknown fields are accepted and ignored.

// Resources is a `capacity` or `allocatable` object: MilliCPU in thousandths of a core,
// MemoryMB in MiB (spec §1.3).
type Resources struct {
	MilliCPU int64 `json:"milli_cpu"`
	MemoryMB int64 `json:"memory_mb"`
}

// Version is one component version a node reports (spec §1.3): Source is manifest, binary,
// file or component-json; Variant is bm or pvm for the kernel.
type Version struct {
	Component string `json:"component"`
	Version   string `json:"version,omitempty"`
	Commit    string `json:"commit,omitempty"`
	BuildTime string `json:"build_time,omitempty"`
	Source    string `json:"source,omitempty"`
	Variant   string `json:"variant,omitempty"`
}

// HostFacts is the CPU, kernel and KVM identity of a node (spec §1.3). CPUCount and MemTotalMB
// are the physical host size (the quota branch). KVMModuleScanned is transient: when false the
// previous KVM module fingerprint and taint are kept, and it is never stored.
type HostFacts struct {
	CPUVendor             string `json:"cpu_vendor,omitempty"`
	CPUModel              string `json:"cpu_model,omitempty"`
	CPUIDHash             string `json:"cpuid_hash,omitempty"`
	HostKernelRelease     string `json:"host_kernel_release,omitempty"`
	HostKernelFingerprint string `json:"host_kernel_fingerprint,omitempty"`
	KVMAPIVersion         int64  `json:"kvm_api_version,omitempty"`
	KVMModuleFingerprint  string `json:"kvm_module_fingerprint,omitempty"`
	KVMModuleTaint        string `json:"kvm_module_taint,omitempty"`
	KVMModuleScanned      bool   `json:"kvm_module_scanned,omitempty"`
	CPUCount              int64  `json:"cpu_count,omitempty"`
	MemTotalMB            int64  `json:"mem_total_mb,omitempty"`
}

// Condition is a Kubernetes-style node condition with camelCase keys (spec §1.4). The times
// are RFC 3339 strings, kept as sent. A Cubelet sends one condition of Type "Ready" with
// Status "True" (reason CubeletReady) or "False" (reason cubeletNotReady).
type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastHeartbeatTime  string `json:"lastHeartbeatTime,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

// Image is one container image a node holds (spec §1.4); SizeBytes in bytes.
type Image struct {
	Names     []string `json:"names"`
	SizeBytes int64    `json:"size_bytes,omitempty"`
	Namespace string   `json:"namespace,omitempty"`
	MediaType string   `json:"media_type,omitempty"`
}

// LocalTemplate is one sandbox template replica a node holds (spec §1.4).
type LocalTemplate struct {
	TemplateID string `json:"template_id"`
	ID         string `json:"id,omitempty"`
	Media      string `json:"media,omitempty"`
	Path       string `json:"path,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
}

// Allocated is what a node has committed to sandboxes in a good state (spec §1.4): MilliCPU in
// thousandths of a core, MemoryMB, DataDiskMB and StorageDiskMB in MiB, MvmNum the microVMs
// (cubefleet counts them as the node's running sandboxes), MvmRunningNum those running.
type Allocated struct {
	MilliCPU      int64 `json:"milli_cpu"`
	MemoryMB      int64 `json:"memory_mb"`
	MvmNum        int64 `json:"mvm_num"`
	MvmRunningNum int64 `json:"mvm_running_num"`
	NICQueues     int64 `json:"nic_queues"`
	DataDiskMB    int64 `json:"data_disk_mb"`
	StorageDiskMB int64 `json:"storage_disk_mb"`
}

// DiskUsage is how full a node's disks are, each a percentage 0-100 (spec §1.4).
type DiskUsage struct {
	DataDiskUsagePer    float64 `json:"data_disk_usage_per"`
	StorageDiskUsagePer float64 `json:"storage_disk_usage_per"`
	SysDiskUsagePer     float64 `json:"sys_disk_usage_per"`
}

// Quota is the quota block of a status report (quota branch, spec §1.4): MilliCPU in
// thousandths of a core, MemMB in MiB. A report whose fields are all zero is ignored, so it
// never clobbers the registration.
type Quota struct {
	MilliCPU            int64    `json:"milli_cpu"`
	MemMB               int64    `json:"mem_mb"`
	MaxMvmNum           int64    `json:"max_mvm_num"`
	CreateConcurrentNum int64    `json:"create_concurrent_num"`
	PausedReleaseRatio  *float64 `json:"paused_release_ratio,omitempty"`
}

// zero reports whether every field of q is zero (an all-zero quota is ignored, spec §1.4).
func (q *Quota) zero() bool {
	return q.MilliCPU == 0 && q.MemMB == 0 && q.MaxMvmNum == 0 && q.CreateConcurrentNum == 0 &&
		(q.PausedReleaseRatio == nil || *q.PausedReleaseRatio == 0)
}

// RegisterRequest is the body of POST .../nodes/register (RegisterNodeRequest, spec §1.3).
// NodeID is required; HostIP defaults to NodeID; GRPCPort is 0 from every Cubelet. QuotaCPU is
// in thousandths of a core, QuotaMemMB in MiB.
type RegisterRequest struct {
	RequestID           string            `json:"requestID"`
	NodeID              string            `json:"node_id"`
	HostIP              string            `json:"host_ip"`
	GRPCPort            int64             `json:"grpc_port"`
	Labels              map[string]string `json:"labels"`
	Capacity            Resources         `json:"capacity"`
	Allocatable         Resources         `json:"allocatable"`
	InstanceType        string            `json:"instance_type"`
	ClusterLabel        string            `json:"cluster_label"`
	QuotaCPU            int64             `json:"quota_cpu"`
	QuotaMemMB          int64             `json:"quota_mem_mb"`
	CreateConcurrentNum int64             `json:"create_concurrent_num"`
	MaxMvmNum           int64             `json:"max_mvm_num"`
	PausedReleaseRatio  *float64          `json:"paused_release_ratio"`
	Versions            []Version         `json:"versions"`
	InventoryIncomplete bool              `json:"inventory_incomplete"`
	HostFacts           *HostFacts        `json:"host_facts"`
}

// StatusRequest is the body of POST .../nodes/{node_id}/status (UpdateNodeStatusRequest, spec
// §1.4). Images, LocalTemplates, Versions and HostFacts are kept as raw JSON so an unchanged
// inventory costs a hash and no decoding: absent (nil) or null means "not reported" (for
// local_templates: keep the previous inventory); `[]` means empty. Allocated, DiskUsage and
// Quota are nil when absent. HeartbeatTime and MetricTime are zero when absent or zero.
type StatusRequest struct {
	RequestID           string         `json:"requestID"`
	Conditions          []Condition    `json:"conditions"`
	Images              jsontext.Value `json:"images"`
	LocalTemplates      jsontext.Value `json:"local_templates"`
	HeartbeatTime       WireTime       `json:"heartbeat_time"`
	Allocated           *Allocated     `json:"allocated"`
	DiskUsage           *DiskUsage     `json:"disk_usage"`
	MetricTime          WireTime       `json:"metric_time"`
	Quota               *Quota         `json:"quota"`
	Versions            jsontext.Value `json:"versions"`
	InventoryIncomplete bool           `json:"inventory_incomplete"`
	HostFacts           jsontext.Value `json:"host_facts"`
}

// WireTime is an RFC 3339 time on the wire. null, "" and Go's zero time
// ("0001-01-01T00:00:00Z", what a Cubelet sends for an unset time) all decode to the zero
// value.
type WireTime struct{ time.Time }

// UnmarshalJSON implements json.Unmarshaler.
func (t *WireTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" || string(b) == `""` {
		t.Time = time.Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a time must be an RFC 3339 string")
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("time %q is not RFC 3339", s)
	}
	t.Time = v
	return nil
}

// decodeOptions are the decoding rules of the node-agent API, those of CubeOps' Go decoder:
// unknown members ignored, names matched case-insensitively, a repeated name's last value wins.
// Invalid UTF-8 is refused (400).
var decodeOptions = json.JoinOptions(
	json.MatchCaseInsensitiveNames(true),
	jsontext.AllowDuplicateNames(true),
	json.RejectUnknownMembers(false),
)

// decoder is one pooled JSON decoder with the buffer it reads from.
type decoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

// decoders pools decoders across requests, so the hot path allocates no decoder state.
type decoders struct{ pool sync.Pool }

func (d *decoders) get() *decoder {
	if v, ok := d.pool.Get().(*decoder); ok {
		return v
	}
	return &decoder{}
}

func (d *decoders) put(v *decoder) {
	if v.buf.Cap() > 1<<20 {
		return // do not keep a huge body's buffer
	}
	v.buf.Reset()
	d.pool.Put(v)
}

// decode decodes one JSON object from dc.buf into v (which must be reset by the caller).
// Errors are INVALID_INPUT "invalid body: ..." (spec §1.3: 400 invalid JSON).
func (dc *decoder) decode(v any) error {
	data := bytes.TrimSpace(dc.buf.Bytes())
	if len(data) == 0 {
		return cubefleet.Invalid("", "invalid body: empty")
	}
	if data[0] != '{' {
		return cubefleet.Invalid("", "invalid body: the body must be a JSON object")
	}
	dc.dec.Reset(&dc.buf, decodeOptions)
	if err := json.UnmarshalDecode(&dc.dec, v); err != nil {
		return cubefleet.Invalid("", "invalid body: %s", decodeMessage(err))
	}
	if _, err := dc.dec.ReadToken(); err == nil || !isEOF(err) {
		return cubefleet.Invalid("", "invalid body: more than one JSON value")
	}
	return nil
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// decodeMessage shortens a decoder error to what a caller can act on.
func decodeMessage(err error) string {
	var se *json.SemanticError
	if errors.As(err, &se) && se.JSONPointer != "" {
		return fmt.Sprintf("%s: %v", se.JSONPointer, errors.Unwrap(err))
	}
	return err.Error()
}

// maxRequestIDRunes bounds the body's requestID (variant @4765fcd, spec §1.4).
const maxRequestIDRunes = 64

// checkRequestID refuses a body requestID that is not valid UTF-8 or longer than 64 runes.
func checkRequestID(id string) error {
	if !utf8.ValidString(id) {
		return cubefleet.Invalid("requestID", "invalid requestID: not valid UTF-8")
	}
	if utf8.RuneCountInString(id) > maxRequestIDRunes {
		return cubefleet.Invalid("requestID", "invalid requestID: longer than %d characters", maxRequestIDRunes)
	}
	return nil
}

// DecodeRegister decodes and checks a register body (spec §1.3): one JSON object, node_id
// required, host_ip (or, when it is empty, node_id) an IP address a node can have (not
// unspecified, multicast or broadcast), requestID at most 64 runes, no negative figure (capacity, allocatable, quota_cpu,
// quota_mem_mb, create_concurrent_num, max_mvm_num, host facts' counts), grpc_port 0 to 65535,
// paused_release_ratio 0 to 1, cluster_label and instance_type by the label value rules, and
// versions without control characters, each field at most MaxVersionFieldRunes. Errors are
// INVALID_INPUT (400) naming the field.
func DecodeRegister(body []byte) (*RegisterRequest, error) {
	var dc decoder
	dc.buf.Write(body)
	req := new(RegisterRequest)
	if err := decodeRegister(&dc, req); err != nil {
		return nil, err
	}
	return req, nil
}

func decodeRegister(dc *decoder, req *RegisterRequest) error {
	if err := dc.decode(req); err != nil {
		return err
	}
	if err := checkRequestID(req.RequestID); err != nil {
		return err
	}
	if req.NodeID == "" {
		return cubefleet.Invalid("node_id", "node_id is required")
	}
	if err := checkNodeID(req.NodeID); err != nil {
		return err
	}
	if _, err := registerAddr(req); err != nil {
		return err
	}
	if err := checkRegisterFigures(req); err != nil {
		return err
	}
	return checkRegisterStrings(req)
}

// DecodeStatus decodes and checks a status body (spec §1.4): one JSON object, requestID at
// most 64 runes, no negative figure (allocated, disk_usage, quota, images' size_bytes, host
// facts' counts), the quota's paused_release_ratio 0 to 1, every reported inventory (images,
// local_templates, versions, host_facts) of the right shape, and versions and template ids
// without control characters (checkVersions, checkTemplates). Errors are INVALID_INPUT (400)
// naming the field.
func DecodeStatus(body []byte) (*StatusRequest, error) {
	var dc decoder
	dc.buf.Write(body)
	req := new(StatusRequest)
	if err := decodeStatus(&dc, req); err != nil {
		return nil, err
	}
	var inv inventory
	if err := inv.decode(req); err != nil {
		return nil, err
	}
	return req, nil
}

func decodeStatus(dc *decoder, req *StatusRequest) error {
	if err := dc.decode(req); err != nil {
		return err
	}
	if err := checkRequestID(req.RequestID); err != nil {
		return err
	}
	return checkStatusFigures(req)
}

// inventory is the decoded form of a status report's raw inventory fields.
type inventory struct {
	images    []Image
	templates []LocalTemplate
	versions  []Version
	hostFacts HostFacts
}

// reported reports whether a raw field was sent with a value other than null.
func reported(v jsontext.Value) bool {
	return len(v) > 0 && string(v) != "null"
}

// decode decodes every reported raw field of req (tests and fuzzing; the registry decodes only
// the fields whose content changed).
func (inv *inventory) decode(req *StatusRequest) error {
	if reported(req.Images) {
		if err := decodeRaw(req.Images, &inv.images, "images"); err != nil {
			return err
		}
		if err := checkImages(inv.images); err != nil {
			return err
		}
	}
	if reported(req.LocalTemplates) {
		if err := decodeRaw(req.LocalTemplates, &inv.templates, "local_templates"); err != nil {
			return err
		}
		if err := checkTemplates(inv.templates); err != nil {
			return err
		}
	}
	if reported(req.Versions) {
		if err := decodeRaw(req.Versions, &inv.versions, "versions"); err != nil {
			return err
		}
		if err := checkVersions(inv.versions); err != nil {
			return err
		}
	}
	if reported(req.HostFacts) {
		if err := decodeRaw(req.HostFacts, &inv.hostFacts, "host_facts"); err != nil {
			return err
		}
		if err := checkHostFacts(&inv.hostFacts); err != nil {
			return err
		}
	}
	return nil
}

// decodeRaw decodes one raw inventory field into v; errors are INVALID_INPUT naming field.
func decodeRaw(raw jsontext.Value, v any, field string) error {
	if err := json.Unmarshal(raw, v, decodeOptions); err != nil {
		return cubefleet.Invalid(field, "invalid body: %s: %s", field, decodeMessage(err))
	}
	return nil
}

// maxNodeIDLen bounds node ids: a Cubelet's is its IPv4 address, ours the same; hostnames and
// IPv6 addresses fit too.
const maxNodeIDLen = 253

// checkNodeID refuses node ids that cannot be a path segment of the status route.
func checkNodeID(id string) error {
	if len(id) > maxNodeIDLen {
		return cubefleet.Invalid("node_id", "node_id is longer than %d characters", maxNodeIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == ':') {
			return cubefleet.Invalid("node_id", "node_id %q may hold only letters, digits, '.', '-', '_' and ':'", id)
		}
	}
	return nil
}
