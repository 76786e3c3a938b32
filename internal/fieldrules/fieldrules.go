// Package fieldrules is the one table of the rules that the compute API and the fleet document
// both enforce: the patterns of names and other strings, the limits (lengths, counts, integer
// ranges) and the enumerations (specs/fleet-config.md, "The document"). Package compute checks
// API input with it; package fleet/document checks documents with it and writes its JSON Schema
// from it. So an object the API accepts is one a document can hold, and the reverse.
//
// Each rule carries its words: the phrase a message quotes to say what a valid value looks like
// ("1-63 lower-case letters, digits, ...") so that both sides name the rule and the fix alike.
// Every pattern is written in the subset of regular expression syntax that every draft 2020-12
// JSON Schema validator compiles (see Portable), and Match checks it without the regexp engine:
// a fleet document at the limits holds thousands of strings.
//
// Rules that only one side has stay with that side: the document's site and pool references
// (a name or an id), the API's idempotency keys and page sizes. Secret reference patterns are
// package secretref's.
//
// Everything here is read-only after package initialisation and safe for concurrent use.
package fieldrules

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits of lists and maps, the same for the API and the document.
const (
	// MaxItems is the most items one list of a document holds (sites, provider accounts, pools,
	// flavors, sandbox templates, a pool's offers). The API holds a tenant to the same counts of
	// live objects of each of those kinds, and a pool to MaxItems offers, so every tenant's
	// fleet exports into a valid document.
	MaxItems = 1000
	// MaxKeys is the most keys one map holds: a provider account's config, a template's env, a
	// quota; and so the most owner quotas (one per resource) one pool has.
	MaxKeys = 256
	// MaxValueLen is the most characters (Unicode code points, not bytes) of one config or env
	// value.
	MaxValueLen = 4096
	// MaxObjects is the most objects one document describes and one tenant holds: every list
	// item, owner quota and offer counts one. Each list holds at most MaxItems, but 1000 pools
	// with 256 quota keys each would be 256,000 objects; this keeps a plan, its response and its
	// apply bounded.
	MaxObjects = 20000
	// MaxExactInteger is 2^53, the largest integer a JSON number carries exactly through every
	// JSON implementation (IEEE 754 doubles); the largest quota.
	MaxExactInteger = 1 << 53
	// DefaultTerminationGraceSeconds is a sandbox's terminationGraceSeconds when neither its
	// create nor its template gives one.
	DefaultTerminationGraceSeconds = 10
)

// Integer ranges.
var (
	// VCPU is a flavor's number of virtual CPUs.
	VCPU = Range{Min: 1, Max: 4096, Unit: "virtual CPUs"}
	// MemoryGiB is a flavor's memory, in GiB.
	MemoryGiB = Range{Min: 1, Max: 65536, Unit: "GiB"}
	// DiskGiB is a flavor's disk size, in GiB.
	DiskGiB = Range{Min: 1, Max: 1 << 20, Unit: "GiB"}
	// GPU is a flavor's number of GPUs.
	GPU = Range{Min: 0, Max: 64, Unit: "GPUs"}
	// Priority orders the offers of a tenant, higher first.
	Priority = Range{Min: 0, Max: 1000, Unit: "higher first"}
	// Warm bounds a template's warm.min and warm.max, counts of sandboxes kept booted; min must
	// not exceed max as well.
	Warm = Range{Min: 0, Max: 1000, Unit: "warm sandboxes"}
	// TerminationGrace bounds a sandbox's terminationGraceSeconds (its own, or its template's):
	// the seconds between SIGTERM and SIGKILL when it is stopped (deleted, timed out, evicted by
	// a drain's deadline, or by agent down). Absent means DefaultTerminationGraceSeconds.
	TerminationGrace = Range{Min: 1, Max: 3600, Unit: "seconds"}
	// DisconnectGrace bounds a template's disconnectGraceSeconds: how long a running sandbox of
	// it stays unknown after its node's last report before it is lost (up to a day). Absent
	// means the server's --disconnect-grace.
	DisconnectGrace = Range{Min: 1, Max: 86400, Unit: "seconds"}
	// Quota bounds an owner quota's max and every value of an offer's quota: up to
	// MaxExactInteger (2^53).
	Quota = Range{Min: 0, Max: MaxExactInteger, Unit: "a count; GiB for memoryGiB and diskGiB"}
)

// Range is an inclusive range of whole numbers, in Unit.
type Range struct {
	Min, Max int64
	// Unit says what the number counts ("GiB", "virtual CPUs"), for messages.
	Unit string
}

// Contains reports whether Min <= v <= Max.
func (r Range) Contains(v int64) bool { return v >= r.Min && v <= r.Max }

// Rule returns the range in words: "a whole number from 1 to 4096 (virtual CPUs)".
func (r Range) Rule() string {
	return fmt.Sprintf("a whole number from %d to %d (%s)", r.Min, r.Max, r.Unit)
}

// Span returns the bounds in words: "1 to 4096".
func (r Range) Span() string {
	return strconv.FormatInt(r.Min, 10) + " to " + strconv.FormatInt(r.Max, 10)
}

// DisruptionBudgetRule says what a pool's policy.disruptionBudget is.
const DisruptionBudgetRule = "a number from 0 to 1: the fraction of the pool's hosts that may be disrupted at once, e.g. 0.1"

// ValidDisruptionBudget reports whether b is a fraction from 0 to 1 (NaN is not).
func ValidDisruptionBudget(b float64) bool { return b >= 0 && b <= 1 }

// Enum is a closed set of strings, in the order messages list them.
type Enum struct{ values []string }

// Has reports whether s is one of the values.
func (e Enum) Has(s string) bool {
	for _, v := range e.values {
		if s == v {
			return true
		}
	}
	return false
}

// Values returns a copy of the values.
func (e Enum) Values() []string { return append([]string(nil), e.values...) }

// Rule returns the values in words: "shared or dedicated".
func (e Enum) Rule() string { return strings.Join(e.values, " or ") }

// Pool classes: a "vps-host" pool runs on hosts the platform owns and has no provider account;
// a "provider" pool buys servers through one.
const (
	PoolClassVPSHost  = "vps-host"
	PoolClassProvider = "provider"
)

// Sandbox networks: a private sandbox reaches nothing outside itself, a public one the internet.
const (
	NetworkPrivate = "private"
	NetworkPublic  = "public"
)

// Sandbox runtimes: "process" runs a sandbox as confined processes on the host's kernel,
// "microvm" as a virtual machine with its own guest kernel. They are also the values of the
// runtime label a node reports (nodeapi.LabelRuntime).
const (
	RuntimeProcess = "process"
	RuntimeMicroVM = "microvm"
)

// The enumerations.
var (
	// SiteKinds: a shared site's pools are sold to many tenants, a dedicated site's to one.
	SiteKinds = Enum{[]string{"shared", "dedicated"}}
	// Providers are the cloud providers a provider account can name.
	Providers = Enum{[]string{"hetzner-cloud", "ionos-cloud"}}
	// PoolClasses are PoolClassVPSHost and PoolClassProvider.
	PoolClasses = Enum{[]string{PoolClassVPSHost, PoolClassProvider}}
	// Networks: a private sandbox has no inbound access from the internet, a public one has.
	Networks = Enum{[]string{NetworkPrivate, NetworkPublic}}
	// Runtimes are the sandbox runtimes a template can name (RuntimeProcess, RuntimeMicroVM);
	// a template that names none runs on its node's default runtime.
	Runtimes = Enum{[]string{RuntimeProcess, RuntimeMicroVM}}
	// EnforcedResources are the quota resources admission enforces; other valid resource names
	// are stored and shown only (docs/fleet-document.md, "Fields").
	EnforcedResources = Enum{[]string{"vcpu", "memoryGiB", "diskGiB", "gpu", "sandboxes"}}
)
