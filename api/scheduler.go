package api

import (
	"fmt"
	"strconv"
	"time"
)

// Room is what a node has and holds, for `nodes get`: reported use, reserved use and what is
// left (CPU in millicores, memory and disk in MiB; Disk fields 0 when the node reports no disk
// room), with the number of reservations outstanding.
type Room struct {
	Reported     Usage `json:"reported"`
	Reserved     Usage `json:"reserved"`
	Remaining    Usage `json:"remaining"`
	Reservations int   `json:"reservations"`
	// MemReserveMiB is the memory the node keeps from its sandboxes (MiB): the mem filter's
	// node_max_mem_reserved_in_mb, or a tenth of the node's memory when that is not smaller
	// than all of it; 0 when the mem filter is off.
	MemReserveMiB int64 `json:"memReserveMiB"`
}

// Usage is an amount of each resource.
type Usage struct {
	CPU       int64 `json:"cpu"`
	MemoryMiB int64 `json:"memoryMiB"`
	DiskMiB   int64 `json:"diskMiB"`
	MvmNum    int64 `json:"mvmNum"`
}

// PlaceInput is one sandbox to place. CPU is in millicores, MemoryMiB and DiskMiB in MiB.
type PlaceInput struct {
	// SandboxID names the sandbox; its reservation is released by this id. A second request
	// with an id that holds a reservation returns that decision again.
	SandboxID string `json:"sandboxId"`
	// Pool is the pool id of the sandbox's template; only its nodes are considered.
	Pool string `json:"pool"`
	// Template is the template id, for template locality ("" for none).
	Template     string            `json:"template,omitempty"`
	CPU          int64             `json:"cpu"`
	MemoryMiB    int64             `json:"memoryMiB"`
	DiskMiB      int64             `json:"diskMiB,omitempty"`
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Exclude lists node ids not to choose (a node that already failed this create).
	Exclude []string `json:"exclude,omitempty"`
}

// PlaceOutput is the output of scheduler.place: where the sandbox goes and the room reserved
// for it there (docs/scheduler.md), with the pool's fleet name (PoolName, "" when it has none).
type PlaceOutput struct {
	Placement
	PoolName string `json:"poolName,omitempty"`
}

// Placement is where a sandbox goes: the chosen node, its score in [0,1], and the reservation
// made for it. A retried request answered from its reservation gets the same decision, score
// included.
type Placement struct {
	NodeID      string      `json:"nodeId"`
	Score       float64     `json:"score"`
	Reservation Reservation `json:"reservation"`
}

// Reservation is the room held on a node for a sandbox placed there and not yet listed in the
// node's report: CPU in millicores, memory and disk in MiB, and one microVM slot.
type Reservation struct {
	SandboxID string `json:"sandboxId"`
	NodeID    string `json:"nodeId"`
	Pool      string `json:"pool"`
	CPU       int64  `json:"cpu"`
	MemoryMiB int64  `json:"memoryMiB"`
	DiskMiB   int64  `json:"diskMiB"`
}

// SandboxRef names one sandbox by its id.
type SandboxRef struct {
	SandboxID string `json:"sandboxId"`
}

// ReleaseOutput is the output of scheduler.release: whether the sandbox held a reservation.
type ReleaseOutput struct {
	SandboxID string `json:"sandboxId"`
	Released  bool   `json:"released"`
}

// SchedulerStatus is the output of scheduler.status: the configuration in force, the file it
// came from (ConfigFile, "" for the built-in defaults) and when it was loaded (ConfigLoadedAt),
// the last reload's failure while it lasts (ReloadError, ReloadFailedAt: the file on disk is
// then not the configuration in force), whether this replica holds the scheduler lease (it
// decides), and the reservations outstanding, oldest first. Times are Unix ms; Now is the
// server's clock when it answered.
type SchedulerStatus struct {
	Config         SchedulerConfig   `json:"config"`
	ConfigFile     string            `json:"configFile,omitempty"`
	ConfigLoadedAt int64             `json:"configLoadedAt"`
	ReloadError    string            `json:"reloadError,omitempty"`
	ReloadFailedAt int64             `json:"reloadFailedAt,omitempty"`
	LeaseHolder    bool              `json:"leaseHolder"`
	Now            int64             `json:"now"`
	Reservations   []ReservationView `json:"reservations"`
}

// SchedulerConfig is the effective scheduler configuration: the `scheduler:` section of a
// cubemaster.yaml-shaped file (docs/scheduler.md) with every default filled
// in.
// The yaml tags are the file's keys, so `cubefleet scheduler check` prints a Config as a file
// that loads to the same Config.
type SchedulerConfig struct {
	// Profile is the built-in profile the filter and score defaults come from: ProfileBalancedSpread
	// (default), ProfileTemplateLocalityFirst or ProfileBinpackUtilization. Keys given in the
	// file (filter, score, priority_select_num, least_select_name) override the profile's.
	Profile string `json:"profile"`
	// PrioritySelectNum is N of the final pick among the N best-scored nodes; -1 means every
	// feasible node. Never 0.
	PrioritySelectNum int `json:"priority_select_num"`
	// LeastSelectName is how the pick among the top N is made: SelectRandom (uniform),
	// SelectSW (smooth weighted round robin), SelectRW (random weighted by score) or SelectRRW
	// (weighted round robin).
	LeastSelectName string `json:"least_select_name"`
	// PreSelectNum caps how many candidate nodes a decision looks at (from a rotating start);
	// -1 (default) looks at every node of the pool. Any other value gives up the full scan.
	PreSelectNum int `json:"pre_select_num"`
	// MetricUpdateTimeout bounds the age of a node's metrics: a node is a candidate only while
	// its last metrics are no older than min(MetricUpdateTimeout, 2 of its report periods).
	MetricUpdateTimeout Duration `json:"metric_update_timeout"`
	// NodeMaxMvmNum is the microVM limit of a node that reports no max_mvm_num.
	NodeMaxMvmNum int64 `json:"node_max_mvm_num"`
	// NodeMaxMvmNumReserveNumPercent scales the microVM limit: ceil(limit × percent), in (0,1].
	NodeMaxMvmNumReserveNumPercent float64 `json:"node_max_mvm_num_reserve_num_percent"`
	// NodeMaxCPUUtil is the cpu filter's threshold: a node whose reported CPU utilisation
	// (percent, 0-100) is at or above it is filtered out.
	NodeMaxCPUUtil float64 `json:"node_max_cpu_util"`
	// NodeMaxMemReservedInMB is the mem filter's host reserve (MiB) kept free of sandboxes; a
	// reserve at or above a node's memory becomes ceil(10% of it) on that node.
	NodeMaxMemReservedInMB int64 `json:"node_max_mem_reserved_in_mb"`
	// DiskUsageMaxPercent is the disk filter's threshold: a node with any of its data, storage
	// or system disk usage (percent) at or above it is filtered out.
	DiskUsageMaxPercent float64 `json:"disk_usage_max_percent"`
	// Filter lists the enabled filters.
	Filter SchedulerFilters `json:"filter"`
	// Score is the weighted scoring.
	Score SchedulerScore `json:"score"`
}

// Duration is a time.Duration written in JSON as Go's duration string ("300s", "1m30s").
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Duration(d).String())), nil
}

// UnmarshalJSON reads a duration string ("300s"); anything else is an error.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return fmt.Errorf("a duration must be a string such as \"300s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// SchedulerFilters is `scheduler.filter`.
type SchedulerFilters struct {
	// EnableFilters names the filters that run, from Filters.
	EnableFilters []string `json:"enable_filters"`
}

// SchedulerScore is `scheduler.score`.
type SchedulerScore struct {
	// EnableScorers names the scorers that run, from Scorers; each has a PluginConf entry.
	EnableScorers []string `json:"enable_scorers"`
	// ResourceWeights is each factor's weight (>= 0), by factor name (Factors).
	ResourceWeights map[string]float64 `json:"resource_weights"`
	// PluginConf is each scorer's settings, by scorer name.
	PluginConf map[string]SchedulerPlugin `json:"plugin_conf"`
}

// SchedulerPlugin is `scheduler.score.plugin_conf.<scorer>`.
type SchedulerPlugin struct {
	// Weight is the scorer's share of the blend Σ weight·S / Σ weight (> 0; 1 when omitted).
	Weight float64 `json:"weight"`
	// EnableWeightFactors lists the factors of a weighted-average scorer (Factors).
	EnableWeightFactors []string `json:"enable_weight_factors,omitempty"`
	// Disable turns the scorer off while keeping its settings.
	Disable bool `json:"disable,omitempty"`
}

// ReservationView is a reservation as scheduler.status shows it: with its pool's fleet name
// (PoolName, "" when the pool has none) and when it was made (ReservedAt, Unix ms).
type ReservationView struct {
	Reservation
	PoolName   string `json:"poolName,omitempty"`
	ReservedAt int64  `json:"reservedAt"`
}
