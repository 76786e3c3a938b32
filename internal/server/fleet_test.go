package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/api"
	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// fleetEnv is a running server on a real database with the root administrator's key, the
// tenants acme and globex, and root's secrets hetzner and pip-index.
type fleetEnv struct {
	t     testing.TB
	srv   *Server
	db    *store.DB
	url   string
	admin string
}

func newFleetEnv(t testing.TB, db *store.DB) *fleetEnv {
	t.Helper()
	return newFleetEnvConfig(t, Config{DB: db})
}

// newFleetEnvConfig is newFleetEnv with more configuration (cfg.DB must be set). Unless cfg
// says otherwise, env:// references may name IONOS_ variables (the documents here read
// env://IONOS_TOKEN).
func newFleetEnvConfig(t testing.TB, cfg Config) *fleetEnv {
	t.Helper()
	db := cfg.DB
	if cfg.EnvRefAllow == nil {
		cfg.EnvRefAllow = []string{"IONOS_"}
	}
	cfg.DataDir, cfg.Listen = t.TempDir(), "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	_, token, err := iam.Bootstrap(ctx, db, api.Catalogue(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e := &fleetEnv{t: t, srv: srv, db: db, url: srv.URL(), admin: token}
	for _, tenant := range []string{"acme", "globex"} {
		e.mustCall(e.admin, "iam.tenants.create", map[string]any{"id": tenant}, nil)
	}
	for _, name := range []string{"hetzner", "pip-index"} {
		e.mustCall(e.admin, "secrets.create", map[string]any{"tenantId": "root", "name": name, "value": "v-" + name}, nil)
	}
	return e
}

// call posts in to method as token and decodes the result into out; it returns the API error.
func (e *fleetEnv) call(token, method string, in, out any) error {
	e.t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		e.t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/api/v1/"+method, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		var eb struct {
			Error struct {
				Code    cubefleet.Code `json:"code"`
				Message string         `json:"message"`
				Details map[string]any `json:"details"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &eb); err != nil {
			e.t.Fatalf("%s: status %d, body %s", method, resp.StatusCode, data)
		}
		return &cubefleet.Error{Code: eb.Error.Code, Message: eb.Error.Message, Details: eb.Error.Details}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s: decode %s: %v", method, data, err)
		}
	}
	return nil
}

func (e *fleetEnv) mustCall(token, method string, in, out any) {
	e.t.Helper()
	if err := e.call(token, method, in, out); err != nil {
		e.t.Fatalf("%s: %v", method, err)
	}
}

type planOut struct {
	Changes []struct {
		Kind, Name, Action, Note string
		Fields                   []string
		Blocked                  bool
	} `json:"changes"`
	Calls   []struct{ Method, Kind, Name string } `json:"calls"`
	Summary struct {
		Create, Update, Delete, Unchanged int
		Blocked                           bool
	} `json:"summary"`
	PlanHash string `json:"planHash"`
}

// lines renders the changes that do something as the CLI does: "+ kind name", "~ kind name
// (fields)", "- kind name", with a "!" for blocked ones.
func (p planOut) lines() []string {
	var out []string
	for _, c := range p.Changes {
		sign := map[string]string{"create": "+", "update": "~", "delete": "-"}[c.Action]
		if sign == "" && !c.Blocked {
			continue
		}
		if c.Blocked {
			sign = "!"
		}
		l := sign + " " + c.Kind + " " + c.Name
		if len(c.Fields) > 0 {
			l += " (" + strings.Join(c.Fields, ", ") + ")"
		}
		out = append(out, l)
	}
	return out
}

func (e *fleetEnv) plan(token string, doc any, prune bool) planOut {
	e.t.Helper()
	var p planOut
	e.mustCall(token, "fleet.plan", map[string]any{"tenantId": "root", "config": doc, "prune": prune}, &p)
	return p
}

func (e *fleetEnv) apply(token string, doc any, prune bool, hash string) (int, error) {
	e.t.Helper()
	var res struct {
		Applied int `json:"applied"`
	}
	err := e.call(token, "fleet.apply", map[string]any{"tenantId": "root", "config": doc, "prune": prune, "planHash": hash}, &res)
	return res.Applied, err
}

// dump returns every row of every table, sorted, so two dumps are equal only when the database
// holds exactly the same data.
func dump(t testing.TB, db *store.DB) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{"iam_tenants", "iam_principals", "iam_grants", "iam_keys", "audit_log", "compute_objects", "secrets", "fleet_names", "fleet_applied"} {
		rows, err := db.Query(`SELECT * FROM ` + table)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		var lines []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, fmt.Sprint(vals...))
		}
		rows.Close()
		sort.Strings(lines)
		fmt.Fprintf(&b, "%s:\n%s\n", table, strings.Join(lines, "\n"))
	}
	return b.String()
}

func exampleDocument(t testing.TB) map[string]any {
	t.Helper()
	data, err := os.ReadFile("../../examples/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestFleetApplyConvergesAndExportRoundTrips(t *testing.T) {
	storetest.Each(t, controlplane.Modules(), func(t *testing.T, db *store.DB) {
		e := newFleetEnv(t, db)
		doc := exampleDocument(t)
		first := e.plan(e.admin, doc, false)
		n, err := e.apply(e.admin, doc, false, first.PlanHash)
		if err != nil || n != 8 {
			t.Fatalf("apply = %d, %v; want 8 calls", n, err)
		}
		again := e.plan(e.admin, doc, false)
		if len(again.Calls) != 0 || again.Summary.Unchanged != 8 {
			t.Fatalf("plan after apply: %v, summary %+v", again.lines(), again.Summary)
		}
		var exp struct {
			Config  map[string]any `json:"config"`
			Missing []any          `json:"missing"`
		}
		e.mustCall(e.admin, "fleet.export", map[string]any{"tenantId": "root"}, &exp)
		if len(exp.Missing) != 0 {
			t.Errorf("missing = %v", exp.Missing)
		}
		if p := e.plan(e.admin, exp.Config, true); len(p.Calls) != 0 {
			t.Fatalf("plan of the export with prune: %v", p.lines())
		}
		// The apply audited every call and itself.
		var audits int
		db.QueryRow(`SELECT count(*) FROM audit_log WHERE outcome = 'ok' AND (method = 'fleet.apply' OR request_id <> '')`).Scan(&audits)
		var rows int
		db.QueryRow(`SELECT count(*) FROM audit_log WHERE method LIKE 'compute.%'`).Scan(&rows)
		if rows != 8 {
			t.Errorf("compute audit rows = %d, want 8", rows)
		}
		db.QueryRow(`SELECT count(*) FROM audit_log WHERE method = 'fleet.apply'`).Scan(&rows)
		if rows != 1 {
			t.Errorf("fleet.apply audit rows = %d, want 1", rows)
		}
		// A stale plan hash is refused and changes nothing.
		before := dump(t, db)
		if _, err := e.apply(e.admin, doc, false, first.PlanHash); !cubefleet.IsCode(err, cubefleet.CodeConfigDrift) {
			t.Fatalf("apply with a stale planHash = %v, want CONFIG_DRIFT", err)
		}
		if dump(t, db) != before {
			t.Fatal("a refused apply changed the database")
		}
	})
}
