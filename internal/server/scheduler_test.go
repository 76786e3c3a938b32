package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
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
	var st contract.SchedulerStatus
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
	if got := e.srv.sys.Lane.Scheduler().Config().Profile; got != "binpack_utilization" {
		t.Fatalf("profile %s after the reload", got)
	}
	os.WriteFile(path, []byte("scheduler:\n  least_select_name: fastest\n"), 0o600)
	if err := e.srv.ReloadSchedulerConfig(); err == nil {
		t.Fatal("an invalid file was reloaded")
	}
	if got := e.srv.sys.Lane.Scheduler().Config().Profile; got != "binpack_utilization" {
		t.Errorf("profile %s after an invalid reload, want the previous one", got)
	}
	if n := strings.Count(e.log.String(), "scheduler configuration not reloaded"); n != 1 {
		t.Errorf("%d log lines about the invalid reload, want 1:\n%s", n, e.log.String())
	}
	if !strings.Contains(e.log.String(), "scheduler.least_select_name") {
		t.Error("the log line does not name the key")
	}
	// scheduler.status and the metrics tell the failed reload, until a reload succeeds.
	var st contract.SchedulerStatus
	e.must(e.admin, "scheduler.status", map[string]any{}, &st)
	if st.ConfigFile != path || st.ConfigLoadedAt == 0 || st.ReloadFailedAt < st.ConfigLoadedAt || !strings.Contains(st.ReloadError, "scheduler.least_select_name") {
		t.Errorf("status after a failed reload: %+v", st)
	}
	_, body := e.get("/metrics")
	for _, m := range []string{`cubefleet_scheduler_config_reloads_total{result="failed"} 1`, `cubefleet_scheduler_config_reloads_total{result="ok"} 1`, "cubefleet_scheduler_config_reload_failing 1"} {
		if !strings.Contains(string(body), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	os.WriteFile(path, []byte("scheduler:\n  profile: balanced_spread\n"), 0o600)
	if err := e.srv.ReloadSchedulerConfig(); err != nil {
		t.Fatal(err)
	}
	st = contract.SchedulerStatus{}
	e.must(e.admin, "scheduler.status", map[string]any{}, &st)
	if st.ReloadError != "" || st.ReloadFailedAt != 0 || st.Config.Profile != "balanced_spread" {
		t.Errorf("status after a good reload: %+v", st)
	}
	if _, body := e.get("/metrics"); !strings.Contains(string(body), "cubefleet_scheduler_config_reload_failing 0") {
		t.Error("the reload failure gauge stays set after a good reload")
	}
}

// TestSchedulerMethods: placing into a pool without nodes is RESOURCE_EXHAUSTED with the
// reason; release is by id; the metrics are served; the lease is held by the only replica.
func TestSchedulerMethods(t *testing.T) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		e := mustStart(t, db, nil)
		testkit.WaitFor(t, 10*time.Second, "the scheduler lease", e.srv.sys.Lane.Holding)
		pool := e.makePool("fra-cubes")
		fail := e.mustFail(e.admin, "scheduler.place", map[string]any{"sandboxId": "sbx_1", "pool": "fra-cubes", "cpu": 100, "memoryMiB": 64}, cubefleet.CodeResourceExhausted)
		if !strings.Contains(fail.Message, "pool fra-cubes ("+pool+") has no nodes") || fail.Details["poolName"] != "fra-cubes" || fail.Details["retryAfterSeconds"] != nil {
			t.Errorf("%+v", fail)
		}
		// An empty pool gets no retry hint (nothing there will free up); the pool by id or fleet
		// name; what does not exist is NOT_FOUND, without a retry hint.
		for _, c := range []struct {
			name string
			in   map[string]any
			code cubefleet.Code
			text string
		}{
			{"unknown pool id", map[string]any{"pool": "pool_none"}, cubefleet.CodeNotFound, `no pool has the id or fleet name "pool_none"`},
			{"unknown fleet name", map[string]any{"pool": "nowhere"}, cubefleet.CodeNotFound, `"nowhere"`},
			{"unknown template id", map[string]any{"pool": "fra-cubes", "template": cubefleet.NewID("tpl")}, cubefleet.CodeNotFound, "no sandbox template"},
			{"template no node holds", map[string]any{"pool": "fra-cubes", "template": "ubuntu-22"}, cubefleet.CodeNotFound, "no node holds"},
			{"no pool", map[string]any{}, cubefleet.CodeInvalidInput, "pool is required"},
			{"no sandbox id", map[string]any{"pool": "fra-cubes", "sandboxId": ""}, cubefleet.CodeInvalidInput, "sandboxId"},
			{"cpu 0", map[string]any{"pool": "fra-cubes", "cpu": 0}, cubefleet.CodeInvalidInput, "cpu: must be 1 to 2147483647 millicores (got 0)"},
			{"memory 0", map[string]any{"pool": "fra-cubes", "memoryMiB": 0}, cubefleet.CodeInvalidInput, "memoryMiB: must be 1 to 2147483647 MiB (got 0)"},
			{"sandbox id climbing out", map[string]any{"pool": "fra-cubes", "sandboxId": "../../etc"}, cubefleet.CodeInvalidInput, "sandboxId: must not contain '..'"},
			{"sandbox id with a slash", map[string]any{"pool": "fra-cubes", "sandboxId": "a/b"}, cubefleet.CodeInvalidInput, "sandboxId: must not contain '/'"},
			{"sandbox id with a bidi override", map[string]any{"pool": "fra-cubes", "sandboxId": "a\u202eb"}, cubefleet.CodeInvalidInput, "U+202E"},
			{"unknown template name", map[string]any{"pool": "fra-cubes", "template": "nope"}, cubefleet.CodeNotFound, `no sandbox template has the id or name "nope"`},
		} {
			in := map[string]any{"sandboxId": "sbx_2", "cpu": 100, "memoryMiB": 64}
			for k, v := range c.in {
				in[k] = v
			}
			fail := e.mustFail(e.admin, "scheduler.place", in, c.code)
			if !strings.Contains(fail.Message, c.text) || fail.Details["retryAfterSeconds"] != nil {
				t.Errorf("%s: %+v", c.name, fail)
			}
		}
		// Every field problem at once: a missing sandbox id, a cpu of the wrong type, a memory of 0.
		fail = e.mustFail(e.admin, "scheduler.place", map[string]any{"pool": "fra-cubes", "cpu": "100m", "memoryMiB": 0}, cubefleet.CodeInvalidInput)
		var paths []string
		for _, fe := range fail.Details["errors"].([]cubefleet.FieldError) {
			paths = append(paths, fe.Path)
		}
		slices.Sort(paths)
		if strings.Join(paths, ",") != "cpu,memoryMiB,sandboxId" {
			t.Errorf("field errors %v, want cpu, memoryMiB and sandboxId: %+v", paths, fail)
		}
		// A template by its name lends its pool: RESOURCE_EXHAUSTED then names the pool by its
		// fleet name.
		var flavor, tpl obj
		e.must(e.admin, "compute.flavors.create", map[string]any{"tenantId": "root", "poolId": pool, "name": "small", "vcpu": 1, "memoryGiB": 1, "diskGiB": 10}, &flavor)
		e.must(e.admin, "compute.sandboxTemplates.create", map[string]any{"tenantId": "root", "name": "py-3", "poolId": pool, "flavorId": flavor.id(), "imageId": "ubuntu-24.04", "network": "private"}, &tpl)
		fail = e.mustFail(e.admin, "scheduler.place", map[string]any{"sandboxId": "sbx_3", "template": "py-3", "cpu": 100, "memoryMiB": 64}, cubefleet.CodeResourceExhausted)
		if !strings.Contains(fail.Message, "pool fra-cubes ("+pool+")") {
			t.Errorf("template by name: %+v", fail)
		}
		if err := e.call(e.admin, "scheduler.release", map[string]any{"sandboxId": "a/b"}, nil); !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) {
			t.Errorf("release of a sandbox id with a slash: %v", err)
		}
		var rel contract.ReleaseOutput
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
