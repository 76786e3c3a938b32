// Package nodetext is the words a node is shown with, in the CLI (`cubefleet nodes list`,
// `nodes get`) and in the web console's Nodes page alike: its state with the drain beside it,
// its pool, the age of its last report and its heartbeat window, microVMs, CPU and memory as
// used/quota, notes, why the node says it is not ready, cordon and drain. Every function reads an api.Node, with the server's
// clock where an age is shown; Cores, GiB and MemoryBytes render the amounts the node's
// sandboxes use too (a sandbox's peak memory in `sandboxes get` and the console).
package nodetext

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet/api"
)

// State is the health state with the drain beside it, as kubectl shows SchedulingDisabled:
// "Ready", "Ready,Draining", "Lost,Drained".
func State(v api.Node) string {
	if v.Drain != nil {
		return string(v.State) + "," + string(v.Drain.State)
	}
	return string(v.State)
}

// Pool is the pool's fleet name, else its id, else the stock Cubelet's cluster label with a
// "?" (no pool has it), else "-".
func Pool(v api.Node) string {
	switch {
	case v.Pool != "":
		return v.Pool
	case v.PoolID != "":
		return v.PoolID
	case v.ClusterLabel != "":
		return v.ClusterLabel + "?"
	}
	return "-"
}

// Ago renders the age at now of a time at (both Unix ms): "3s ago", "2m05s ago", "1h30m ago",
// "3d ago"; "-" when at is 0 (never).
func Ago(now, at int64) string {
	if at == 0 {
		return "-"
	}
	d := time.Duration(max(now-at, 0)) * time.Millisecond
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds ago", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm ago", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// used is what the node last reported as committed: millicores, MiB and microVMs.
func used(v api.Node) (cpu, mem, mvm int64) {
	if v.Allocated != nil {
		return v.Allocated.MilliCPU, v.Allocated.MemoryMiB, v.Allocated.Mvm
	}
	return 0, 0, 0
}

// MicroVMs is microVMs used/max: "3/64".
func MicroVMs(v api.Node) string {
	_, _, mvm := used(v)
	return fmt.Sprintf("%d/%d", mvm, v.Quota.MaxMvm)
}

// CPU is cores used/quota: "6/32", "0.5/7.5".
func CPU(v api.Node) string {
	cpu, _, _ := used(v)
	return Cores(cpu) + "/" + Cores(v.Quota.MilliCPU)
}

// Memory is GiB used/quota: "12.0/128.0Gi".
func Memory(v api.Node) string {
	_, mem, _ := used(v)
	return GiB(mem) + "/" + GiB(v.Quota.MemoryMiB) + "Gi"
}

// Cores renders thousandths of a core as cores, without trailing zeros.
func Cores(milli int64) string {
	return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64)
}

// Reserved is what the scheduler holds on a node for sandboxes placed there and not yet in its
// report: "2 sandboxes: 1.5 cores, 3.0Gi"; "-" when nothing (or room is nil: the scheduler does
// not know the node).
func Reserved(room *api.Room) string {
	if room == nil || room.Reservations == 0 {
		return "-"
	}
	return fmt.Sprintf("%s: %s cores, %sGi", sandboxes(int64(room.Reservations)), Cores(room.Reserved.CPU), GiB(room.Reserved.MemoryMiB))
}

// HostReserve is what a node keeps from its sandboxes, which is why the room left is less
// than capacity minus use: the CPU its quota_cpu leaves out of its capacity and the mem
// filter's memory reserve: "8 cores (capacity 64, quota_cpu 56), 10.0Gi memory
// (node_max_mem_reserved_in_mb)"; "-" when room is nil (the scheduler does not know the node).
func HostReserve(v api.Node, room *api.Room) string {
	if room == nil {
		return "-"
	}
	cpu := "0 cores"
	if kept := v.Capacity.MilliCPU - v.Quota.MilliCPU; kept > 0 {
		cpu = fmt.Sprintf("%s cores (capacity %s, quota_cpu %s)", Cores(kept), Cores(v.Capacity.MilliCPU), Cores(v.Quota.MilliCPU))
	}
	mem := "no memory reserve (the mem filter is off)"
	if room.MemReserveMiB > 0 {
		mem = GiB(room.MemReserveMiB) + "Gi memory (node_max_mem_reserved_in_mb)"
	}
	return cpu + ", " + mem
}

// GiB renders MiB as GiB with one decimal.
func GiB(mib int64) string {
	return strconv.FormatFloat(float64(mib)/1024, 'f', 1, 64)
}

// MemoryBytes renders an amount of memory given in bytes as the node's memory is shown, with
// one decimal: in MiB below 1 GiB ("37.5Mi"), else in GiB ("1.5Gi").
func MemoryBytes(b int64) string {
	if mib := float64(b) / (1 << 20); math.Round(mib*10) < 1024*10 { // 1023.96 MiB is 1.0Gi
		return strconv.FormatFloat(mib, 'f', 1, 64) + "Mi"
	}
	return strconv.FormatFloat(float64(b)/(1<<30), 'f', 1, 64) + "Gi"
}

// Heartbeat is the window a node's reports are judged by and the report interval it comes
// from: "heartbeat window 20.2s (observed interval 10.1s)", or "heartbeat window 15s (interval
// not observed yet)" before the node's second report.
func Heartbeat(v api.Node) string {
	if v.ReportIntervalMs == 0 {
		return "heartbeat window " + seconds(v.HeartbeatWindowMs) + " (interval not observed yet)"
	}
	return "heartbeat window " + seconds(v.HeartbeatWindowMs) + " (observed interval " + seconds(v.ReportIntervalMs) + ")"
}

// seconds renders milliseconds as seconds with at most one decimal: "20s", "10.1s".
func seconds(ms int64) string {
	return strconv.FormatFloat(math.Round(float64(ms)/100)/10, 'f', -1, 64) + "s"
}

// Notes are what keeps a node from work besides its state, and why an Unknown node is,
// comma-separated: "no report since start" (Unknown: it has not reported since the server
// started), "cordoned", "registry-only" (a stock Cubelet), "no pool"; "-" when none.
func Notes(v api.Node) string {
	var notes []string
	if v.State == api.NodeUnknown {
		notes = append(notes, "no report since start")
	}
	if v.Cordoned {
		notes = append(notes, "cordoned")
	}
	if v.RegistryOnly {
		notes = append(notes, "registry-only")
	}
	for _, r := range v.UnschedulableReasons {
		if strings.HasPrefix(r, "unknown pool") || strings.Contains(r, "archived") || strings.Contains(r, "no longer exists") {
			notes = append(notes, "no pool")
			break
		}
	}
	if len(notes) == 0 {
		return "-"
	}
	return strings.Join(notes, ",")
}

// NotReady is why the node says it is not ready, from the Ready condition of its last report:
// "SandboxRuntimeUnavailable: sandbox directory /var/lib/cubefleet/sandboxes in use by process
// 24288", the reason or the message alone when it sent one, "" when its Ready condition is True
// or says nothing.
func NotReady(v api.Node) string {
	switch {
	case v.NotReadyReason != "" && v.NotReadyMessage != "":
		return v.NotReadyReason + ": " + v.NotReadyMessage
	case v.NotReadyReason != "":
		return v.NotReadyReason
	}
	return v.NotReadyMessage
}

// Cordon is "no", "yes", or "yes: <detail>".
func Cordon(v api.Node) string {
	if !v.Cordoned {
		return "no"
	}
	if v.CordonDetail != "" {
		return "yes: " + v.CordonDetail
	}
	return "yes"
}

// Drain describes the node's drain at now (Unix ms): "no", or where it stands, when and by whom
// it was asked, and why: "draining, 2 sandboxes left (asked 1m10s ago by usr_ops; reason:
// kernel update)".
func Drain(now int64, v api.Node) string {
	d := v.Drain
	if d == nil {
		return "no"
	}
	state := "draining, " + sandboxes(d.SandboxesLeft) + " left"
	if d.State == api.DrainDrained {
		state = "drained, no sandboxes left"
		if d.DrainedAt != 0 {
			state = "drained " + time.UnixMilli(d.DrainedAt).UTC().Format(time.RFC3339) + ", no sandboxes left"
		}
	}
	asked := "asked " + Ago(now, d.RequestedAt)
	if d.RequestedBy != "" {
		asked += " by " + d.RequestedBy
	}
	if d.Reason != "" {
		asked += "; reason: " + d.Reason
	}
	return state + " (" + asked + ")"
}

// sandboxes renders a count of sandboxes: "1 sandbox", "3 sandboxes".
func sandboxes(n int64) string {
	if n == 1 {
		return "1 sandbox"
	}
	return fmt.Sprintf("%d sandboxes", n)
}
