package simulate

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/scheduler"
)

func run(t *testing.T, o Options) *Report {
	t.Helper()
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func profile(t *testing.T, name string) scheduler.Config {
	t.Helper()
	cfg, _, err := scheduler.Load("p", []byte("scheduler:\n  profile: "+name+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestBurstQuality is the placement-quality target: 10,000 requests in a burst on
// 1,000 nodes whose reports lag 1 s: imbalance <= 0.10 and the busiest node <= 1.3× the mean
// with balanced_spread; binpack_utilization leaves more nodes empty on the same seed.
func TestBurstQuality(t *testing.T) {
	o := Options{Nodes: 1000, Requests: 10000, Workload: WorkloadBurst, ReportLag: time.Second}
	spread := run(t, o)
	if spread.Placed != 10000 || spread.Imbalance > 0.10 || spread.BusiestRatio > 1.3 {
		t.Errorf("balanced_spread: placed %d, imbalance %.4f, busiest %.4f", spread.Placed, spread.Imbalance, spread.BusiestRatio)
	}
	o.Config = profile(t, scheduler.ProfileBinpackUtilization)
	pack := run(t, o)
	if pack.Placed != 10000 || pack.EmptyNodes <= spread.EmptyNodes {
		t.Errorf("binpack: placed %d, %d empty nodes against balanced_spread's %d", pack.Placed, pack.EmptyNodes, spread.EmptyNodes)
	}
	t.Logf("balanced_spread: imbalance %.4f busiest %.4f empty %d; binpack: empty %d", spread.Imbalance, spread.BusiestRatio, spread.EmptyNodes, pack.EmptyNodes)
}

// TestShippedConfigHerdsUpstreamNotHere: the shipped cubemaster.yaml (no score block,
// priority_select_num 1) spreads here.
func TestShippedConfigSpreads(t *testing.T) {
	cfg, _, err := scheduler.Load("shipped", []byte("scheduler:\n  priority_select_num: 1\n  metric_update_timeout: 300s\n  filter:\n    enable_filters: [cpu, mem, template_locality, realtime_create_num]\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, Options{Nodes: 100, Requests: 2000, Config: cfg, ReportLag: time.Second})
	if r.HerdingTop1 > 0.02 || r.EmptyNodes != 0 {
		t.Errorf("herding %.4f, %d empty nodes", r.HerdingTop1, r.EmptyNodes)
	}
}

func TestTemplateReuse(t *testing.T) {
	o := Options{Nodes: 200, Requests: 4000, Workload: WorkloadTemplateReuse, ReportLag: time.Second}
	hard := run(t, o) // balanced_spread: template_locality is a filter
	o.Config = profile(t, scheduler.ProfileTemplateLocalityFirst)
	first := run(t, o)
	if hard.TemplateHits != 1 || first.TemplateHits < 0.95 {
		t.Errorf("template hits: balanced_spread %.4f, template_locality_first %.4f", hard.TemplateHits, first.TemplateHits)
	}
}

// TestSameSeedSameReport: byte-identical reports for one seed; another seed differs.
func TestSameSeedSameReport(t *testing.T) {
	o := Options{Nodes: 300, Requests: 3000, Workload: WorkloadMixed, ReportLag: time.Second, Seed: 42}
	a, _ := json.Marshal(run(t, o))
	b, _ := json.Marshal(run(t, o))
	if string(a) != string(b) {
		t.Fatal("one seed, two reports")
	}
	o.Seed = 43
	c, _ := json.Marshal(run(t, o))
	if string(a) == string(c) {
		t.Error("another seed gave the same report")
	}
	o.Timing = true
	if r := run(t, o); r.Latency == nil || r.Latency.P99 <= 0 {
		t.Errorf("timing: %+v", r.Latency)
	}
}

func TestOptionsRefused(t *testing.T) {
	_, err := Run(context.Background(), Options{Nodes: 0, Requests: 1, Workload: "storm", ReportLag: -1})
	e, ok := err.(*cubefleet.Error)
	if !ok || e.Code != cubefleet.CodeInvalidInput || len(e.Details["errors"].([]cubefleet.FieldError)) != 3 {
		t.Errorf("err %v", err)
	}
}

// TestOverloadReportsReasons: more work than room: the refusals are counted by reason.
func TestOverloadReportsReasons(t *testing.T) {
	r := run(t, Options{Nodes: 2, Requests: 3000, ReportLag: time.Second})
	if r.Unplaced == 0 || r.Placed+r.Unplaced != 3000 || len(r.UnplacedReasons) == 0 {
		t.Errorf("placed %d unplaced %d reasons %v", r.Placed, r.Unplaced, r.UnplacedReasons)
	}
}
