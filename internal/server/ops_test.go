package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/api"
	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/privatefile"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestSecretsNeverLeave stores a secret and looks for its value in every response, the log,
// the audit log and the database row.
func TestSecretsNeverLeave(t *testing.T) {
	eachServer(t, func(t *testing.T, e *testEnv) {
		const value = "s3cr3t-VALUE-4f9a"
		status, body := e.post(e.admin, "secrets.create", map[string]any{"tenantId": "acme", "name": "hetzner", "value": value})
		if status != http.StatusOK || bytes.Contains(body, []byte(value)) {
			t.Fatalf("create: %d %s", status, body)
		}
		var created struct{ ID, Name, TenantID string }
		json.Unmarshal(body, &created)
		if created.Name != "hetzner" || created.TenantID != "acme" || !cubefleet.IsID(created.ID, "sec") {
			t.Errorf("created %s", body)
		}
		status, body = e.post(e.admin, "secrets.create", map[string]any{"tenantId": "acme", "name": "hetzner", "value": value})
		if status != http.StatusConflict || bytes.Contains(body, []byte(value)) {
			t.Errorf("duplicate: %d %s", status, body)
		}
		status, body = e.post(e.admin, "secrets.list", map[string]any{"tenantId": "acme"})
		if status != http.StatusOK || !bytes.Contains(body, []byte(`"hetzner"`)) || bytes.Contains(body, []byte(value)) {
			t.Errorf("list: %d %s", status, body)
		}
		status, body = e.post(e.admin, "audit.list", map[string]any{"tenantId": "acme"})
		if status != http.StatusOK || !bytes.Contains(body, []byte(`"secrets.create"`)) || bytes.Contains(body, []byte(value)) {
			t.Errorf("audit: %d %s", status, body)
		}
		var sealed string
		if err := e.db.QueryRow(`SELECT sealed FROM secrets WHERE name = 'hetzner'`).Scan(&sealed); err != nil || strings.Contains(sealed, value) {
			t.Errorf("stored %q, %v", sealed, err)
		}
		status, body = e.post(e.admin, "secrets.delete", map[string]any{"tenantId": "acme", "name": "hetzner"})
		if status != http.StatusOK || bytes.Contains(body, []byte(value)) {
			t.Errorf("delete: %d %s", status, body)
		}
		e.mustFail(e.admin, "secrets.delete", map[string]any{"tenantId": "acme", "name": "hetzner"}, cubefleet.CodeNotFound)
		if strings.Contains(e.log.String(), value) {
			t.Error("the log holds the secret value")
		}
		if strings.Contains(e.log.String(), e.admin) {
			t.Error("the log holds the admin key")
		}
	})
}

func TestHealthReadyAndClosedDatabase(t *testing.T) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		e := mustStart(t, db, nil)
		if status, body := e.get("/healthz"); status != http.StatusOK {
			t.Errorf("healthz: %d %s", status, body)
		}
		if status, body := e.get("/readyz"); status != http.StatusOK {
			t.Errorf("readyz: %d %s", status, body)
		}
		db.Close()
		if status, body := e.get("/readyz"); status != http.StatusServiceUnavailable {
			t.Errorf("readyz with the database closed: %d %s, want 503", status, body)
		}
		if status, _ := e.get("/healthz"); status != http.StatusOK {
			t.Errorf("healthz with the database closed: %d, want 200 (the process is alive)", status)
		}
		// A call now fails INTERNAL, and says nothing about why.
		status, body := e.post(e.admin, "iam.tenants.list", map[string]any{})
		if status != http.StatusInternalServerError || errCode(t, body) != cubefleet.CodeInternal || bytes.Contains(body, []byte("closed")) {
			t.Errorf("call with the database closed: %d %s", status, body)
		}
	})
}

func TestMetricsCountCalls(t *testing.T) {
	e := mustStart(t, nil, nil)
	e.must(e.admin, "iam.tenants.list", nil, nil)
	e.must(e.admin, "iam.tenants.list", nil, nil)
	e.post("", "iam.tenants.list", map[string]any{})
	e.post(e.admin, "no.such.method", map[string]any{})
	status, body := e.get("/metrics")
	if status != http.StatusOK {
		t.Fatalf("metrics: %d", status)
	}
	for _, want := range []string{
		`cubefleet_api_requests_total{code="OK",method="iam.tenants.list"} 2`,
		`cubefleet_api_requests_total{code="UNAUTHENTICATED",method="iam.tenants.list"} 1`,
		`cubefleet_api_requests_total{code="NOT_FOUND",method="unknown"} 1`,
		`cubefleet_api_request_duration_seconds_count{code="OK",method="iam.tenants.list"} 2`,
		`go_goroutines`,
		`go_sql_open_connections`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// A second server in the same process counts on its own.
	e2 := mustStart(t, nil, nil)
	_, body = e2.get("/metrics")
	if bytes.Contains(body, []byte(`method="iam.tenants.list"`)) {
		t.Error("a fresh server shows another server's counts")
	}
}

func TestOpenAPIListsEveryMethod(t *testing.T) {
	e := mustStart(t, nil, nil)
	status, body := e.get("/api/v1/openapi.json")
	if status != http.StatusOK {
		t.Fatalf("openapi: %d", status)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]struct {
			Post struct {
				OperationID string `json:"operationId"`
				Permission  string `json:"x-permission"`
				Scope       string `json:"x-scope"`
				RequestBody struct {
					Content map[string]struct {
						Schema struct {
							Properties map[string]json.RawMessage `json:"properties"`
						} `json:"schema"`
					} `json:"content"`
				} `json:"requestBody"`
			} `json:"post"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q", doc.OpenAPI)
	}
	methods := e.srv.api.Methods()
	if len(doc.Paths) != len(methods) {
		t.Errorf("%d paths for %d methods", len(doc.Paths), len(methods))
	}
	for _, m := range methods {
		p, ok := doc.Paths["/api/v1/"+m.Name]
		if !ok {
			t.Errorf("no path for %s", m.Name)
			continue
		}
		if p.Post.OperationID != m.Name || p.Post.Permission == "" || p.Post.Scope == "" {
			t.Errorf("%s: operation %+v", m.Name, p.Post)
		}
	}
	pools := doc.Paths["/api/v1/compute.pools.create"].Post
	if pools.Permission != "compute:pools:create" || pools.Scope != "tenant/{tenantId}" {
		t.Errorf("compute.pools.create decides %s on %s", pools.Permission, pools.Scope)
	}
	props := pools.RequestBody.Content["application/json"].Schema.Properties
	for _, f := range []string{"tenantId", "idempotencyKey", "siteId", "class", "gpuModel", "policy"} {
		if _, ok := props[f]; !ok {
			t.Errorf("compute.pools.create input lacks %s: %v", f, props)
		}
	}
	keys := doc.Paths["/api/v1/iam.keys.create"].Post.RequestBody.Content["application/json"].Schema.Properties
	for _, f := range []string{"tenantId", "name", "grants", "ttlSeconds"} {
		if _, ok := keys[f]; !ok {
			t.Errorf("iam.keys.create input lacks %s", f)
		}
	}
}

// TestRequestIDsErrorsAndLimits checks the request id round trip and its presence in the log,
// the error body's shape, INTERNAL hiding its cause, and the body limit.
func TestRequestIDsErrorsAndLimits(t *testing.T) {
	e := mustStart(t, nil, nil)
	// A method that fails with an internal cause (registered before any request reaches it).
	e.srv.api.Register(api.Method{
		Name: "test.boom", Permission: "events:read", Scope: api.OnRoot,
		Handle: func(ctx context.Context, c *api.Call, in json.RawMessage) (any, error) {
			return nil, errors.New("disk on fire at /var/lib/db")
		},
	})
	req, _ := http.NewRequest(http.MethodPost, e.url+"/api/v1/test.boom", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set(RequestIDHeader, "ci-run-42")
	resp, err := new(http.Client).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Error struct {
			Code    cubefleet.Code
			Message string
			Details map[string]any
		}
	}
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 500 || body.Error.Code != cubefleet.CodeInternal || strings.Contains(body.Error.Message, "fire") ||
		!strings.Contains(body.Error.Message, "ci-run-42") || body.Error.Details != nil {
		t.Errorf("internal error: %d %+v", resp.StatusCode, body)
	}
	if got := resp.Header.Get(RequestIDHeader); got != "ci-run-42" {
		t.Errorf("X-Request-Id = %q, want the caller's", got)
	}
	var causeLogged, callLogged bool
	for _, line := range strings.Split(strings.TrimSpace(e.log.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == "internal error" && strings.Contains(rec["err"].(string), "fire") && rec["request_id"] == "ci-run-42" {
			causeLogged = true
		}
		if rec["msg"] == "api" && rec["method"] == "test.boom" && rec["request_id"] == "ci-run-42" {
			callLogged = true
		}
		if rec["msg"] == "api" && rec["request_id"] == nil {
			t.Errorf("request log line without request_id: %s", line)
		}
	}
	if !causeLogged || !callLogged {
		t.Errorf("log (cause %v, call %v):\n%s", causeLogged, callLogged, e.log.String())
	}

	// Without X-Request-Id, the server makes one.
	resp, err = new(http.Client).Get(e.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if id := resp.Header.Get(RequestIDHeader); !cubefleet.IsID(id, "req") {
		t.Errorf("generated request id %q", id)
	}

	// INVALID_INPUT carries details.path and details.errors.
	status, raw := e.post(e.admin, "compute.sites.create", map[string]any{"tenantId": "root", "kind": "x", "region": "X"})
	var inv struct {
		Error struct {
			Code    cubefleet.Code
			Details struct {
				Path   string                 `json:"path"`
				Errors []cubefleet.FieldError `json:"errors"`
			}
		}
	}
	json.Unmarshal(raw, &inv)
	if status != 400 || inv.Error.Code != cubefleet.CodeInvalidInput || inv.Error.Details.Path != "kind" || len(inv.Error.Details.Errors) != 2 {
		t.Errorf("invalid input: %d %s", status, raw)
	}
	// Not a JSON object.
	for _, b := range []string{`[1]`, `{"tenantId":`, `"x"`} {
		if status, raw := e.post(e.admin, "iam.tenants.list", b); status != 400 || errCode(t, raw) != cubefleet.CodeInvalidInput {
			t.Errorf("body %s: %d %s", b, status, raw)
		}
	}
	// Unknown fields are refused.
	if status, raw := e.post(e.admin, "iam.tenants.create", `{"id":"x1","color":"red"}`); status != 400 || !bytes.Contains(raw, []byte("color")) {
		t.Errorf("unknown field: %d %s", status, raw)
	}
	// Over 8 MiB.
	big := append([]byte(`{"tenantId":"root","pad":"`), bytes.Repeat([]byte("a"), api.MaxDocumentBody)...)
	big = append(big, `"}`...)
	if status, raw := e.post(e.admin, "iam.tenants.list", big); status != http.StatusRequestEntityTooLarge || errCode(t, raw) != cubefleet.CodePayloadTooLarge {
		t.Errorf("8 MiB body: %d %s", status, raw)
	}
	// Unknown method.
	if status, raw := e.post(e.admin, "compute.pools.explode", `{}`); status != 404 || errCode(t, raw) != cubefleet.CodeNotFound {
		t.Errorf("unknown method: %d %s", status, raw)
	}
	// A revoked key is refused.
	var k contract.KeyCreated
	e.must(e.admin, "iam.keys.create", map[string]any{"tenantId": "root", "name": "short", "grants": []string{"iam:tenants:list@tenant/root"}}, &k)
	e.must(k.Token, "iam.tenants.list", nil, nil)
	e.must(e.admin, "iam.keys.revoke", map[string]any{"tenantId": "root", "id": k.Key.ID}, nil)
	ce := e.mustFail(k.Token, "iam.tenants.list", nil, cubefleet.CodeUnauthenticated)
	if strings.Contains(ce.Message, k.Token) {
		t.Error("the refusal repeats the key")
	}
}

func TestKeyExpiry(t *testing.T) {
	now := fixedNow()
	var offset atomic.Int64 // nanoseconds past now
	e := mustStart(t, nil, func(c *Config) { c.Now = func() time.Time { return now.Add(time.Duration(offset.Load())) } })
	var k contract.KeyCreated
	e.must(e.admin, "iam.keys.create", map[string]any{"tenantId": "root", "name": "ci", "grants": []string{"iam:tenants:list@tenant/root"}, "ttlSeconds": 3600}, &k)
	if k.Key.ExpiresAt == nil || *k.Key.ExpiresAt != now.Add(time.Hour).UnixMilli() {
		t.Errorf("expiresAt = %v", k.Key.ExpiresAt)
	}
	e.must(k.Token, "iam.tenants.list", nil, nil)
	offset.Store(int64(time.Hour))
	e.mustFail(k.Token, "iam.tenants.list", nil, cubefleet.CodeUnauthenticated)
	e.mustFail(e.admin, "iam.keys.create", map[string]any{"tenantId": "root", "name": "ci", "grants": []string{"iam:tenants:list@tenant/root"}, "ttlSeconds": -1}, cubefleet.CodeInvalidInput)
}

// TestDevBootstrap starts --dev twice on one data dir: the first start writes admin.token
// (0600) and never logs the key; the second leaves it alone.
func TestDevBootstrap(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			dir := t.TempDir()
			database := ""
			if dialect == "postgres" {
				database = storetest.PostgresURL(t)
			}
			logBuf := &testkit.SyncBuffer{}
			log := slog.New(slog.NewTextHandler(logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			cfg := Config{Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"), Database: database, Dev: true}
			srv, err := New(context.Background(), cfg, log)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(cfg.DataDir, controlplane.AdminTokenFile)
			if srv.AdminTokenPath() != path {
				t.Errorf("AdminTokenPath = %q, want %q", srv.AdminTokenPath(), path)
			}
			srv.Close()
			if err := privatefile.Check(path); err != nil {
				t.Fatalf("admin.token: %v", err)
			}
			for _, p := range []string{cfg.DataDir} {
				if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o700 {
					t.Errorf("%s: mode %v, %v; want 0700", p, fi.Mode().Perm(), err)
				}
			}
			token, _ := os.ReadFile(path)
			tok := strings.TrimSpace(string(token))
			if !strings.HasPrefix(tok, "cfk_") || strings.Contains(logBuf.String(), tok) || strings.Contains(logBuf.String(), tok[4:20]) {
				t.Errorf("token %q appears in the log:\n%s", tok[:8], logBuf.String())
			}
			if !strings.Contains(logBuf.String(), path) {
				t.Errorf("the log does not name %s", path)
			}
			// Second start: no new key, the old one works, the example tenants are there.
			srv, err = New(context.Background(), cfg, log)
			if err != nil {
				t.Fatal(err)
			}
			if srv.AdminTokenPath() != "" {
				t.Error("second start bootstrapped again")
			}
			p, err := iam.Authenticate(context.Background(), srv.db, tok, time.Now())
			if err != nil || p.TenantID != "root" {
				t.Errorf("admin key after restart: %v, %v", p, err)
			}
			ts, _ := iam.ListTenants(context.Background(), srv.db)
			if len(ts) != 3 {
				t.Errorf("tenants %v, want acme, globex, root", ts)
			}
			srv.Close()
		})
	}
}

func TestInitOnce(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			dir := t.TempDir()
			database := ""
			if dialect == "postgres" {
				database = storetest.PostgresURL(t)
			}
			cfg := controlplane.InitConfig{DataDir: filepath.Join(dir, "data"), Database: database, TokenOut: filepath.Join(dir, "admin.key")}
			key, err := controlplane.Init(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := privatefile.Check(cfg.TokenOut); err != nil {
				t.Fatalf("token file: %v", err)
			}
			if !cubefleet.IsID(key.ID, "key") || len(key.Grants) != len(api.Catalogue().AdminGrants()) {
				t.Errorf("key %+v", key)
			}
			// Refuses to overwrite the token file.
			if _, err := controlplane.Init(context.Background(), cfg); !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) {
				t.Errorf("second Init to the same file: %v", err)
			}
			// Refuses a second initialization, and leaves no file behind.
			cfg.TokenOut = filepath.Join(dir, "again.key")
			_, err = controlplane.Init(context.Background(), cfg)
			if !cubefleet.IsCode(err, cubefleet.CodeConflict) || !strings.Contains(err.Error(), "already initialized") {
				t.Errorf("second Init: %v, want CONFLICT already initialized", err)
			}
			if _, err := os.Stat(cfg.TokenOut); !os.IsNotExist(err) {
				t.Errorf("second Init left %s: %v", cfg.TokenOut, err)
			}
			// The server then starts without --dev and accepts the key.
			token, _ := os.ReadFile(filepath.Join(dir, "admin.key"))
			srv, err := New(context.Background(), Config{Listen: "127.0.0.1:0", DataDir: cfg.DataDir, Database: database}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			if _, err := iam.Authenticate(context.Background(), srv.db, strings.TrimSpace(string(token)), time.Now()); err != nil {
				t.Errorf("init key: %v", err)
			}
		})
	}
}
