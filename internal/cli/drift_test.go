package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/server"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestFleetStatusDriftGolden: a hand edit shows in fleet status grouped by kind in the plan
// notation, with the ignore rules in force; --fail-on-drift exits FLEET_DRIFTED; applying a
// document that matches the edit with --plan-hash makes it the new baseline.
func TestFleetStatusDriftGolden(t *testing.T) {
	rules, err := fleet.ParseIgnoreRules([]string{"pool.gpuModel"})
	if err != nil {
		t.Fatal(err)
	}
	c := mustServe(t, "", func(cfg *server.Config) { cfg.DriftIgnore = rules })
	for _, s := range []string{"hetzner", "pip-index"} {
		if code, out, errOut := c.run("value-of-"+s, "secrets", "create", s, "--tenant", "root", "--token-file", c.tokenFile); code != 0 {
			t.Fatalf("secrets create: %d %s %s", code, out, errOut)
		}
	}
	example, err := os.ReadFile(filepath.Join(testkit.PackageDir(), "..", "..", "examples", "fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, "fleet.json", string(example))
	c.admin("fleet", "apply", "fleet.json", "--tenant", "root", "--yes")
	var pools struct {
		Items []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(c.admin("api", "compute.pools.list", `{"tenantId":"root"}`)), &pools); err != nil {
		t.Fatal(err)
	}
	var poolID string
	for _, p := range pools.Items {
		if p.Name == "vps-fra" {
			poolID = p.ID
		}
	}
	c.admin("api", "compute.pools.update", `{"tenantId":"root","id":"`+poolID+`","gpuModel":"A100","policy":{"disruptionBudget":0.5}}`)
	c.admin("api", "compute.flavors.create", `{"tenantId":"root","poolId":"`+poolID+`","name":"g9.huge","vcpu":64,"memoryGiB":512,"diskGiB":2000}`)
	edited := strings.Replace(strings.Replace(string(example), `"disruptionBudget": 0.1`, `"disruptionBudget": 0.5`, 1), `"L40S"`, `"A100"`, 1)
	edited = strings.Replace(edited, `"flavors": [`, `"flavors": [{ "pool": "vps-fra", "name": "g9.huge", "vcpu": 64, "memoryGiB": 512, "diskGiB": 2000 }, `, 1)
	writeFile(t, "edited.json", edited)
	var pl fleet.Plan
	if err := json.Unmarshal([]byte(c.admin("fleet", "plan", "edited.json", "--tenant", "root", "--output", "json")), &pl); err != nil {
		t.Fatal(err)
	}
	if len(pl.Calls) != 0 {
		t.Fatalf("the edited document does not match the hand edits: %+v", pl.Calls)
	}
	hash := regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	testkit.Golden(t, "fleet_status_drift.golden", []byte(hash.ReplaceAllString(c.transcript(
		"fleet status --tenant root",
		"fleet status --tenant root --check --fail-on-drift",
		"fleet status --tenant root --output json",
		"fleet apply edited.json --tenant root --plan-hash "+pl.PlanHash,
		"fleet status --tenant root --fail-on-drift",
	), "<hash>")))
}

// TestWebhooksCommandsGolden drives webhooks create, list, deliveries (with --failed),
// redeliver, rotate-secret and delete against a receiver on 127.0.0.1 that refuses every
// delivery (a create with a bad URL, bad event types and a long description names them all);
// the server's clock stands still, so a refused delivery waits for its retry.
func TestWebhooksCommandsGolden(t *testing.T) {
	var hits atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(receiver.Close)
	c := mustServe(t, "", func(cfg *server.Config) { cfg.AllowPrivateWebhookTargets = true })
	out := c.admin("webhooks", "create", receiver.URL+"/hook", "--tenant", "root", "--events", "node.down,fleet.drifted", "--events", "fleet.converged",
		"--description", "pager", "--output", "json")
	var sub struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal([]byte(out), &sub); err != nil || !strings.HasPrefix(sub.Secret, "whsec_") {
		t.Fatalf("webhooks create: %s (%v)", out, err)
	}
	// An event for the subscription: a check that finds drift publishes fleet.drifted.
	writeFile(t, "fleet.json", `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu"}],"pools":[{"name":"p","site":"fra","class":"vps-host","gpuModel":"L40S"}]}`)
	c.admin("fleet", "apply", "fleet.json", "--tenant", "root", "--yes")
	var pools struct {
		Items []struct{ ID string } `json:"items"`
	}
	json.Unmarshal([]byte(c.admin("api", "compute.pools.list", `{"tenantId":"root"}`)), &pools)
	c.admin("api", "compute.pools.update", `{"tenantId":"root","id":"`+pools.Items[0].ID+`","gpuModel":"A100"}`)
	c.admin("fleet", "status", "--tenant", "root", "--check")
	deadline := time.Now().Add(10 * time.Second)
	for hits.Load() == 0 || !strings.Contains(c.admin("webhooks", "deliveries", "--tenant", "root"), "answered HTTP 503") {
		if time.Now().After(deadline) {
			t.Fatal("no delivery attempt within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	next := regexp.MustCompile(`2026-01-02T03:04:(0[7-9]|10)Z\n`)
	transcript := c.transcript(
		"webhooks create "+receiver.URL+" --tenant acme --events node.down",
		"webhooks create ftp://example.com --tenant root --events fleet.drifted",
		"webhooks create "+receiver.URL+" --tenant root --events fleet.exploded",
		"webhooks create ftp://example.com --tenant acme --events fleet.exploded,node.down --description "+strings.Repeat("d", 201),
		"webhooks list --tenant root",
		"webhooks deliveries --tenant root",
		"webhooks deliveries --tenant root --failed",
		"webhooks deliveries --tenant root --state retrying",
		"webhooks deliveries --tenant root --state pending",
	)
	deliveries := regexp.MustCompile(`whd_[0-9A-HJKMNP-TV-Z]{26}`).FindString(c.admin("webhooks", "deliveries", "--tenant", "root"))
	transcript += c.transcript(
		"webhooks redeliver "+deliveries+" --tenant root",
		"webhooks rotate-secret "+sub.ID+" --tenant root --overlap 1h --output json",
		"webhooks rotate-secret "+sub.ID+" --tenant root --overlap 0",
		"webhooks rotate-secret "+sub.ID+" --tenant root --overlap 1.5s",
		"webhooks rotate-secret "+sub.ID+" --tenant root --overlap 7d",
		"webhooks rotate-secret "+sub.ID+" --tenant root --overlap 8d",
		"webhooks delete "+sub.ID+" --tenant root",
		"webhooks list --tenant root",
	)
	transcript = regexp.MustCompile(`whsec_[A-Za-z0-9+/=]+`).ReplaceAllString(transcript, "whsec_<secret>")
	transcript = strings.ReplaceAll(transcript, receiver.URL, "$RECEIVER")
	testkit.Golden(t, "webhooks.golden", []byte(next.ReplaceAllString(transcript, "<next attempt>\n")))
}

// TestWebhooksDeliveriesPages: deliveries pages with --limit and --cursor; the table names the
// next page's cursor and --output json carries it as nextCursor; a bad --state or --limit is
// a usage error.
func TestWebhooksDeliveriesPages(t *testing.T) {
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	t.Cleanup(receiver.Close)
	c := mustServe(t, "", func(cfg *server.Config) { cfg.AllowPrivateWebhookTargets = true })
	for range 3 {
		c.admin("webhooks", "create", receiver.URL+"/hook", "--tenant", "root", "--events", "fleet.drifted")
	}
	writeFile(t, "fleet.json", `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu"}],"pools":[{"name":"p","site":"fra","class":"vps-host","gpuModel":"L40S"}]}`)
	c.admin("fleet", "apply", "fleet.json", "--tenant", "root", "--yes")
	var pools struct {
		Items []struct{ ID string } `json:"items"`
	}
	json.Unmarshal([]byte(c.admin("api", "compute.pools.list", `{"tenantId":"root"}`)), &pools)
	c.admin("api", "compute.pools.update", `{"tenantId":"root","id":"`+pools.Items[0].ID+`","gpuModel":"A100"}`)
	c.admin("fleet", "status", "--tenant", "root", "--check")
	ids := regexp.MustCompile(`whd_[0-9A-HJKMNP-TV-Z]{26}`)
	testkit.WaitFor(t, 10*time.Second, "three deliveries", func() bool {
		return len(ids.FindAllString(c.admin("webhooks", "deliveries", "--tenant", "root"), -1)) == 3
	})
	all := ids.FindAllString(c.admin("webhooks", "deliveries", "--tenant", "root"), -1)

	first := c.admin("webhooks", "deliveries", "--tenant", "root", "--limit", "2")
	notice := "(first 2 deliveries; more exist: --cursor " + all[1] + " shows the next ones"
	if got := ids.FindAllString(first, -1); len(got) != 3 || got[0] != all[0] || got[1] != all[1] || !strings.Contains(first, notice) {
		t.Errorf("first page:\n%s", first)
	}
	rest := c.admin("webhooks", "deliveries", "--tenant", "root", "--limit", "2", "--cursor", all[1])
	if got := ids.FindAllString(rest, -1); len(got) != 1 || got[0] != all[2] || strings.Contains(rest, "more exist") {
		t.Errorf("second page:\n%s", rest)
	}
	var page struct {
		Items      []struct{ ID string } `json:"items"`
		NextCursor string                `json:"nextCursor"`
	}
	if err := json.Unmarshal([]byte(c.admin("webhooks", "deliveries", "--tenant", "root", "--limit", "2", "-o", "json")), &page); err != nil ||
		len(page.Items) != 2 || page.NextCursor != all[1] {
		t.Errorf("json page: %+v %v", page, err)
	}
	for _, bad := range [][]string{{"--state", "lost"}, {"--limit", "0"}} {
		if code, _, errOut := c.run("", append([]string{"webhooks", "deliveries", "--tenant", "root", "--token-file", c.tokenFile}, bad...)...); code != ExitUsage {
			t.Errorf("%v: exit %d %s, want 2", bad, code, errOut)
		}
	}
}

// TestFleetStatusSaysWhenDriftWasCheckedGolden: fleet status shows when drift was last checked
// and how long ago that was by the server's clock, and that --check checks now.
func TestFleetStatusSaysWhenDriftWasCheckedGolden(t *testing.T) {
	var clock atomic.Int64
	clock.Store(testNow().UnixMilli())
	c := mustServe(t, "", func(cfg *server.Config) {
		cfg.Now = func() time.Time { return time.UnixMilli(clock.Load()).UTC() }
		cfg.DriftEvery = -1 // no reconciler: only --check checks
	})
	writeFile(t, "fleet.json", `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu"}]}`)
	c.admin("fleet", "apply", "fleet.json", "--tenant", "root", "--yes")
	clock.Add((2*time.Hour + 5*time.Minute).Milliseconds())
	out := c.transcript("fleet status --tenant root")
	out += c.transcript("fleet status --tenant root --check")
	clock.Add((3 * time.Minute).Milliseconds())
	out += c.transcript("fleet status --tenant root")
	hash := regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	testkit.Golden(t, "fleet_status_checked.golden", []byte(hash.ReplaceAllString(out, "<hash>")))
}
