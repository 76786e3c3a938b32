package scheduler

import (
	"fmt"
	"strings"
)

// reason is why a node cannot take a request: the first check it fails, in the order of the
// table below (health, schedulability, then resources). fits is no reason.
type reason uint8

const (
	fits reason = iota
	reasonStockCubelet
	reasonNoReport
	reasonNotReady
	reasonCordoned
	reasonDraining
	reasonStaleMetrics
	reasonExcluded
	reasonSelector
	reasonMvm
	reasonCPU
	reasonCPUUtil
	reasonMem
	reasonDisk
	reasonDiskUsage
	reasonTemplate
	reasonCreates
	numReasons
)

// reasons is the one table of reasons: the words of the "why not placed" line and of the
// RESOURCE_EXHAUSTED details, the metric label of cubefleet_scheduler_rejections_total, and
// whether the reason passes by itself within seconds (a report arrives, reservations are
// released, creates finish), so that a retry can help: only then does the answer carry a retry
// hint. The others wait for an operator (cordon, drain, a stock Cubelet) or the request itself
// (exclusions, selector, template).
var reasons = [numReasons]struct {
	text, label string
	transient   bool
}{
	fits:               {"fits", "fits", false},
	reasonStockCubelet: {"registry-only (stock Cubelet)", "stock_cubelet", false},
	reasonNoReport:     {"no report since restart", "no_report_since_start", true},
	reasonNotReady:     {"not ready", "not_ready", true},
	reasonCordoned:     {"cordoned", "cordoned", false},
	reasonDraining:     {"draining", "draining", false},
	reasonStaleMetrics: {"stale metrics", "stale_metrics", true},
	reasonExcluded:     {"excluded by the request", "excluded", false},
	reasonSelector:     {"node selector mismatch", "node_selector", false},
	reasonMvm:          {"microVM limit reached", "mvm_limit", true},
	reasonCPU:          {"insufficient cpu", "cpu", true},
	reasonCPUUtil:      {"cpu utilisation too high", "cpu_util", true},
	reasonMem:          {"insufficient memory", "mem", true},
	reasonDisk:         {"insufficient disk", "disk", true},
	reasonDiskUsage:    {"disk usage too high", "disk_usage", true},
	reasonTemplate:     {"template not local", "template_locality", false},
	reasonCreates:      {"too many creates in flight", "realtime_create_num", true},
}

// retryCanHelp reports whether some node was refused for a reason that passes by itself.
func (t *tally) retryCanHelp() bool {
	for r := reasonStockCubelet; r < numReasons; r++ {
		if t[r] > 0 && reasons[r].transient {
			return true
		}
	}
	return false
}

// String returns the reason's words.
func (r reason) String() string { return reasons[r].text }

// tally counts nodes per reason for one decision.
type tally [numReasons]int

// line formats t as the "why not placed" line: `12 nodes: 2 not ready, 1 cordoned, 5
// insufficient cpu, 4 insufficient memory`, reasons in table order.
func (t *tally) line(nodes int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d node", nodes)
	if nodes != 1 {
		b.WriteByte('s')
	}
	sep := ": "
	for r := reasonStockCubelet; r < numReasons; r++ {
		if t[r] > 0 {
			fmt.Fprintf(&b, "%s%d %s", sep, t[r], reasons[r].text)
			sep = ", "
		}
	}
	return b.String()
}

// counts returns t as a map from reason words to counts (reasons with 0 nodes left out).
func (t *tally) counts() map[string]int {
	m := map[string]int{}
	for r := reasonStockCubelet; r < numReasons; r++ {
		if t[r] > 0 {
			m[reasons[r].text] = t[r]
		}
	}
	return m
}
