package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/api"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

func writeSchedulerConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cubemaster.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSchedulerConfigAtStart: an invalid --scheduler-config stops the start naming the key
// path and line; a valid one is in force and its warnings are logged.
func TestSchedulerConfigAtStart(t *testing.T) {
	bad := writeSchedulerConfig(t, "scheduler:\n  score:\n    enable_scorers: [real_time_weighted_average]\n    resource_weights: {mvm_num: 1}\n")
	_, err := New(context.Background(), Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), DB: storetest.SQLite(t), SchedulerConfig: bad}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "scheduler.score.plugin_conf.real_time_weighted_average") || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err %v", err)
	}
	good := writeSchedulerConfig(t, "common: {a: 1}\nscheduler:\n  priority_select_num: 1\n  overcommit_ratio: {cpu_ratio: 2}\n")
	e := mustStart(t, storetest.SQLite(t), func(c *Config) { c.SchedulerConfig = good })
	var st api.SchedulerStatus
	e.must(e.admin, "scheduler.status", map[string]any{}, &st)
	if st.Config.PrioritySelectNum != 1 || st.Config.Profile != "balanced_spread" {
		t.Errorf("status %+v", st.Config)
	}
	for _, want := range []string{"overcommit_ratio", "first-fit"} {
		if !strings.Contains(e.log.String(), want) {
			t.Errorf("no warning naming %s in the log", want)
		}
	}
}

// TestSchedulerReload: a valid file is put in force; an invalid one keeps the configuration
// in force and is logged once, naming its problem.
func TestSchedulerReload(t *testing.T) {
	path := writeSchedulerConfig(t, "scheduler:\n  profile: balanced_spread\n")
	e := mustStart(t, storetest.SQLite(t), func(c *Config) { c.SchedulerConfig = path })
	os.WriteFile(path, []byte("scheduler:\n  profile: binpack_utilization\n"), 0o600)
	if err := e.srv.ReloadSchedulerConfig(); err != nil {
		t.Fatal(err)
	}
	if got := e.srv.Scheduler().Scheduler().Config().Profile; got != "binpack_utilization" {
		t.Fatalf("profile %s after the reload", got)
	}
	os.WriteFile(path, []byte("scheduler:\n  least_select_name: fastest\n"), 0o600)
	if err := e.srv.ReloadSchedulerConfig(); err == nil {
		t.Fatal("an invalid file was reloaded")
	}
	if got := e.srv.Scheduler().Scheduler().Config().Profile; got != "binpack_utilization" {
		t.Errorf("profile %s after an invalid reload, want the previous one", got)
	}
	if n := strings.Count(e.log.String(), "scheduler configuration not reloaded"); n != 1 {
		t.Errorf("%d log lines about the invalid reload, want 1:\n%s", n, e.log.String())
	}
	if !strings.Contains(e.log.String(), "scheduler.least_select_name") {
		t.Error("the log line does not name the key")
	}
}

// TestSchedulerMethods: placing into a pool without nodes is RESOURCE_EXHAUSTED with the
// reason; release is by id; the metrics are served; the lease is held by the only replica.
func TestSchedulerMethods(t *testing.T) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		e := mustStart(t, db, nil)
		testkit.WaitFor(t, 10*time.Second, "the scheduler lease", e.srv.Scheduler().Holding)
		fail := e.mustFail(e.admin, "scheduler.place", map[string]any{"sandboxId": "sbx_1", "pool": "pool_none", "cpu": 100, "memoryMiB": 64}, cubefleet.CodeResourceExhausted)
		if !strings.Contains(fail.Message, "pool pool_none has no nodes") || fail.Details["retryAfterSeconds"] == nil {
			t.Errorf("%+v", fail)
		}
		e.mustFail(e.admin, "scheduler.place", map[string]any{"pool": "pool_none"}, cubefleet.CodeInvalidInput)
		var rel api.ReleaseOutput
		e.must(e.admin, "scheduler.release", map[string]any{"sandboxId": "sbx_1"}, &rel)
		if rel.Released {
			t.Error("released a reservation nobody held")
		}
		_, body := e.get("/metrics")
		for _, m := range []string{"cubefleet_scheduler_decisions_total", "cubefleet_scheduler_lease_holder 1", "cubefleet_scheduler_reservations 0"} {
			if !strings.Contains(string(body), m) {
				t.Errorf("/metrics lacks %s", m)
			}
		}
	})
}
