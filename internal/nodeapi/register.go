package nodeapi

import (
	"net/netip"

	"github.com/cubefleet/cubefleet"
)

// The wire types of a registration, field for field as a stock Cubelet sends them and as
// CubeOps reads them (docs/nodes.md, "Node-agent API"). Every field is optional on input;
// unknown fields are accepted and ignored. The JSON tags are also what `cubefleet agent` sends:
// a field it leaves empty is left out, as Cubelet does.

// Resources is a `capacity` or `allocatable` object: MilliCPU in thousandths of a core,
// MemoryMB in MiB (docs/nodes.md, "Node-agent API").
type Resources struct {
	MilliCPU int64 `json:"milli_cpu"`
	MemoryMB int64 `json:"memory_mb"`
}

// ComponentVersion is one entry of `versions` (docs/nodes.md, "Node-agent API"): a component's
// version and where it was read. Source is manifest, binary, file or component-json; Variant is bm
// or pvm for the guest kernel. Each field is at most MaxVersionFieldRunes runes without control
// characters (CheckVersions).
type ComponentVersion struct {
	Component string `json:"component"`            // e.g. "cubelet", "cubefleet-agent", "guest-image"
	Version   string `json:"version,omitempty"`    // e.g. "v1.2.3", "(devel)"
	Commit    string `json:"commit,omitempty"`     // VCS revision
	BuildTime string `json:"build_time,omitempty"` // RFC 3339
	Source    string `json:"source,omitempty"`     // manifest, binary, file or component-json
	Variant   string `json:"variant,omitempty"`    // bm or pvm for the guest kernel
}

// HostFacts is `host_facts`: the CPU, kernel and KVM identity of a node and its physical size
// (docs/nodes.md, "Node-agent API"; cpu_count and mem_total_mb are the quota branch's).
// KVMModuleScanned is transient: when false the previous KVM module fingerprint and taint are kept,
// and it is never stored.
type HostFacts struct {
	CPUVendor             string `json:"cpu_vendor,omitempty"`              // /proc/cpuinfo vendor_id (x86) or CPU implementer (arm64)
	CPUModel              string `json:"cpu_model,omitempty"`               // /proc/cpuinfo model name (x86) or CPU part (arm64)
	CPUIDHash             string `json:"cpuid_hash,omitempty"`              // a hash of the CPU's identity (cubefleet agent: 16 hex digits)
	HostKernelRelease     string `json:"host_kernel_release,omitempty"`     // /proc/sys/kernel/osrelease
	HostKernelFingerprint string `json:"host_kernel_fingerprint,omitempty"` // a hash of the kernel (cubefleet agent: 16 hex digits)
	KVMAPIVersion         int64  `json:"kvm_api_version,omitempty"`         // KVM_GET_API_VERSION of /dev/kvm; 0 unknown
	KVMModuleFingerprint  string `json:"kvm_module_fingerprint,omitempty"`  // a hash of the kvm module
	KVMModuleTaint        string `json:"kvm_module_taint,omitempty"`        // the kernel's taint flags
	KVMModuleScanned      bool   `json:"kvm_module_scanned,omitempty"`      // false: the two above were not scanned this time
	CPUCount              int64  `json:"cpu_count,omitempty"`               // logical CPUs of the host, before overcommit
	MemTotalMB            int64  `json:"mem_total_mb,omitempty"`            // MemTotal of the host, MiB, before overcommit
}

// RegisterRequest is the body of POST RouteRegister, Cubelet's RegisterNodeRequest (docs/nodes.md,
// "Node-agent API"). NodeID is required: the node's IP address (a Cubelet's CUBE_SANDBOX_NODE_IP);
// HostIP defaults to it; GRPCPort is 0 from every Cubelet. QuotaCPU is in thousandths of a core
// (already overcommitted), QuotaMemMB in MiB; Capacity and Allocatable both equal the quota.
// PausedReleaseRatio is 0 to 1 (the quota branch). InventoryIncomplete means Versions is a partial
// list, laid over the stored one by component.
type RegisterRequest struct {
	RequestID           string             `json:"requestID,omitempty"` // at most 64 runes; cubefleet agent: 32 hex digits, also sent as X-Request-ID
	NodeID              string             `json:"node_id"`
	HostIP              string             `json:"host_ip,omitempty"`
	GRPCPort            int64              `json:"grpc_port,omitempty"`
	Labels              map[string]string  `json:"labels,omitempty"` // CheckLabels' rules; never ReservedLabel
	Capacity            Resources          `json:"capacity"`
	Allocatable         Resources          `json:"allocatable"`
	InstanceType        string             `json:"instance_type,omitempty"` // InstanceType; the rules of a label value
	ClusterLabel        string             `json:"cluster_label,omitempty"` // the pool's fleet name; the rules of a label value
	QuotaCPU            int64              `json:"quota_cpu,omitempty"`
	QuotaMemMB          int64              `json:"quota_mem_mb,omitempty"`
	CreateConcurrentNum int64              `json:"create_concurrent_num,omitempty"` // concurrent creations; 0: the scheduler's limit
	MaxMVMNum           int64              `json:"max_mvm_num,omitempty"`           // microVMs (sandboxes)
	PausedReleaseRatio  *float64           `json:"paused_release_ratio,omitempty"`
	Versions            []ComponentVersion `json:"versions,omitempty"`
	InventoryIncomplete bool               `json:"inventory_incomplete,omitempty"`
	HostFacts           *HostFacts         `json:"host_facts,omitempty"`
}

// DecodeRegister decodes and checks a register body (docs/nodes.md, "Node-agent API"): one JSON
// object, node_id required and a valid path segment (CheckNodeID), host_ip (or, when it is empty,
// node_id) an IP address a node can have (Addr), requestID at most 64 runes, no negative figure
// (capacity, allocatable, quota_cpu, quota_mem_mb, create_concurrent_num, max_mvm_num, host facts'
// counts), grpc_port 0 to 65535, paused_release_ratio 0 to 1, cluster_label and instance_type by
// the label value rules, and versions without control characters, each field at most
// MaxVersionFieldRunes. Errors are INVALID_INPUT (400) naming the field. Label rules need the
// stored labels and are the registry's to check (CheckLabels).
func DecodeRegister(body []byte) (*RegisterRequest, error) {
	var d Decoder
	d.buf.Write(body)
	req := new(RegisterRequest)
	if err := d.Register(req); err != nil {
		return nil, err
	}
	return req, nil
}

// Register decodes the register body in d into req (which must be zero) and checks it as
// DecodeRegister does.
func (d *Decoder) Register(req *RegisterRequest) error {
	if err := d.decode(req); err != nil {
		return err
	}
	if err := checkRequestID(req.RequestID); err != nil {
		return err
	}
	if req.NodeID == "" {
		return cubefleet.Invalid("node_id", "node_id is required")
	}
	if err := CheckNodeID(req.NodeID); err != nil {
		return err
	}
	if _, err := req.Addr(); err != nil {
		return err
	}
	if err := checkRegisterFigures(req); err != nil {
		return err
	}
	return checkRegisterStrings(req)
}

// Addr returns the address a registration names, host_ip or, when that is empty, node_id (spec
// docs/nodes.md, "Node-agent API"), unmapped. It must be an IP address a node can have
// (NodeAddrProblem); otherwise INVALID_INPUT naming host_ip.
func (r *RegisterRequest) Addr() (netip.Addr, error) {
	s, from := r.HostIP, "host_ip"
	if s == "" {
		s, from = r.NodeID, "node_id (host_ip defaults to it)"
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, invalidField("host_ip", "host_ip must be an IP address: %s is %q", from, s)
	}
	if p := NodeAddrProblem(a); p != "" {
		return netip.Addr{}, invalidField("host_ip", "host_ip must be a node's IP address, not %s (%s is %q)", p, from, s)
	}
	return a.Unmap(), nil
}

// maxGRPCPort is the largest TCP port; a Cubelet sends grpc_port 0 or nothing (docs/nodes.md,
// "Node-agent API").
const maxGRPCPort = 65535

// checkRegisterFigures checks a register body's figures: capacity, allocatable and the quota
// (quota_cpu, quota_mem_mb, create_concurrent_num, max_mvm_num) at least 0, grpc_port 0 to
// 65535, paused_release_ratio 0 to 1, and the host facts' counts at least 0.
func checkRegisterFigures(req *RegisterRequest) error {
	for _, f := range [...]struct {
		path string
		v    int64
	}{
		{"capacity.milli_cpu", req.Capacity.MilliCPU}, {"capacity.memory_mb", req.Capacity.MemoryMB},
		{"allocatable.milli_cpu", req.Allocatable.MilliCPU}, {"allocatable.memory_mb", req.Allocatable.MemoryMB},
		{"quota_cpu", req.QuotaCPU}, {"quota_mem_mb", req.QuotaMemMB},
		{"create_concurrent_num", req.CreateConcurrentNum}, {"max_mvm_num", req.MaxMVMNum},
	} {
		if err := nonNegative(f.path, f.v); err != nil {
			return err
		}
	}
	if req.GRPCPort < 0 || req.GRPCPort > maxGRPCPort {
		return invalidField("grpc_port", "grpc_port must be 0 to %d (got %d)", maxGRPCPort, req.GRPCPort)
	}
	if err := checkRatio("paused_release_ratio", req.PausedReleaseRatio); err != nil {
		return err
	}
	if req.HostFacts != nil {
		return CheckHostFacts(req.HostFacts)
	}
	return nil
}

// checkRegisterStrings checks a register body's stored strings: cluster_label and
// instance_type follow the label value rules; versions as CheckVersions.
func checkRegisterStrings(req *RegisterRequest) error {
	if err := checkLabelLike("cluster_label", req.ClusterLabel); err != nil {
		return err
	}
	if err := checkLabelLike("instance_type", req.InstanceType); err != nil {
		return err
	}
	return CheckVersions(req.Versions)
}
