package nodetext_test

import (
	"testing"

	"github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/api/nodetext"
)

func TestHeartbeat(t *testing.T) {
	for _, c := range []struct {
		interval, window int64
		want             string
	}{
		{10100, 20200, "heartbeat window 20.2s (observed interval 10.1s)"},
		{1000, 15000, "heartbeat window 15s (observed interval 1s)"},
		{9573, 19146, "heartbeat window 19.1s (observed interval 9.6s)"},
		{0, 15000, "heartbeat window 15s (interval not observed yet)"},
	} {
		if got := nodetext.Heartbeat(api.Node{ReportIntervalMs: c.interval, HeartbeatWindowMs: c.window}); got != c.want {
			t.Errorf("Heartbeat(interval %d ms, window %d ms) = %q, want %q", c.interval, c.window, got, c.want)
		}
	}
}

// TestUnknown: a node that has not reported since the server started is shown as Unknown, with
// the reason in its notes, in the CLI and the console alike.
func TestUnknown(t *testing.T) {
	v := api.Node{State: api.NodeUnknown, Cordoned: true, Drain: &api.NodeDrain{State: api.DrainDraining}}
	if got := nodetext.State(v); got != "Unknown,Draining" {
		t.Errorf("State = %q", got)
	}
	if got := nodetext.Notes(v); got != "no report since start,cordoned" {
		t.Errorf("Notes = %q", got)
	}
	if got := nodetext.Notes(api.Node{State: api.NodeLost}); got != "-" {
		t.Errorf("Notes of a Lost node = %q", got)
	}
}

// TestNotReady: why a node says it is not ready, from its Ready condition's reason and message.
func TestNotReady(t *testing.T) {
	for _, c := range []struct {
		reason, message, want string
	}{
		{"SandboxRuntimeUnavailable", "sandbox directory /srv/sbx in use by process 24288", "SandboxRuntimeUnavailable: sandbox directory /srv/sbx in use by process 24288"},
		{"KubeletNotReady", "", "KubeletNotReady"},
		{"", "disk full", "disk full"},
		{"", "", ""},
	} {
		if got := nodetext.NotReady(api.Node{NotReadyReason: c.reason, NotReadyMessage: c.message}); got != c.want {
			t.Errorf("NotReady(%q, %q) = %q, want %q", c.reason, c.message, got, c.want)
		}
	}
}

// TestHostReserve: the line that says why the room left is less than capacity minus use.
func TestHostReserve(t *testing.T) {
	v := func(capCPU, quotaCPU int64) api.Node {
		return api.Node{Capacity: api.NodeResources{MilliCPU: capCPU}, Quota: api.NodeQuota{MilliCPU: quotaCPU}}
	}
	for _, c := range []struct {
		view api.Node
		room *api.Room
		want string
	}{
		{v(64000, 56000), &api.Room{MemReserveMiB: 10240}, "8 cores (capacity 64, quota_cpu 56), 10.0Gi memory (node_max_mem_reserved_in_mb)"},
		{v(64000, 64000), &api.Room{MemReserveMiB: 820}, "0 cores, 0.8Gi memory (node_max_mem_reserved_in_mb)"},
		{v(4000, 8000), &api.Room{}, "0 cores, no memory reserve (the mem filter is off)"}, // quota_cpu overcommits
		{v(4000, 4000), nil, "-"},
	} {
		if got := nodetext.HostReserve(c.view, c.room); got != c.want {
			t.Errorf("HostReserve(%+v, %+v) = %q, want %q", c.view.Quota, c.room, got, c.want)
		}
	}
}

// TestMemoryBytes: bytes in MiB below 1 GiB, else in GiB, one decimal, as the node's memory.
func TestMemoryBytes(t *testing.T) {
	for _, c := range []struct {
		bytes int64
		want  string
	}{
		{0, "0.0Mi"}, {300 << 10, "0.3Mi"}, {39321600, "37.5Mi"}, {1<<30 - 1, "1.0Gi"}, {1023 << 20, "1023.0Mi"},
		{1 << 30, "1.0Gi"}, {3 << 29, "1.5Gi"}, {160 << 30, "160.0Gi"},
	} {
		if got := nodetext.MemoryBytes(c.bytes); got != c.want {
			t.Errorf("MemoryBytes(%d) = %q, want %q", c.bytes, got, c.want)
		}
	}
}
