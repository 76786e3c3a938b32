package console_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/api"
	"github.com/cubefleet/cubefleet/internal/console"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var modules = []store.Module{iam.Module, fleet.Module, events.Module}

// nodeRows is the Nodes page's fixture: what the server's adapter of the registry returns.
type nodeRows []console.Node

func (n nodeRows) ConsoleNodes(context.Context) ([]console.Node, error) { return n, nil }

type env struct {
	srv                  *httptest.Server
	admin, viewer, hooks string // API keys: an administrator, a key with audit:read only, one with webhooks:list on root
	db                   *store.DB
}

const drift = `{"changes":[{"kind":"pool","name":"vps-fra","action":"update","fields":["policy"],"diffs":[{"field":"policy","from":{"disruptionBudget":0.5},"to":{"disruptionBudget":0.1}}]},
	{"kind":"offer","name":"vps-fra -> globex","action":"create"},{"kind":"flavor","name":"vps-fra/g1.small","action":"delete"}],
	"summary":{"create":1,"update":1,"delete":1,"unchanged":5,"blocked":false},"blocked":false,"planHash":"9ab0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0"}`

func newEnv(t *testing.T, db *store.DB) *env {
	ctx := context.Background()
	now := time.Now()
	_, admin, err := iam.Bootstrap(ctx, db, api.Catalogue(), now)
	if err != nil {
		t.Fatal(err)
	}
	_, viewer, err := iam.CreateServiceKey(ctx, db, api.Catalogue(), nil, iam.NewServiceKey{TenantID: "root", Name: "auditor", Grants: []iam.Grant{{Permission: "audit:read", Scope: "tenant/root"}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	_, hooks, err := iam.CreateServiceKey(ctx, db, api.Catalogue(), nil, iam.NewServiceKey{TenantID: "root", Name: "hooks", Grants: []iam.Grant{{Permission: "webhooks:list", Scope: "tenant/root"}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []struct {
		tenant string
		drift  any
	}{{"acme", drift}, {"root", nil}} {
		if _, err := db.Exec(`INSERT INTO fleet_applied (tenant_id, document, plan_hash, applied_by, applied_at, prune, checked_at, drift) VALUES ($1, '{}', $2, 'svc_ci', $3, 0, $4, $5)`,
			row.tenant, strings.Repeat("3f1c", 16), now.Add(-time.Hour).UnixMilli(), now.Add(-time.Minute).UnixMilli(), row.drift); err != nil {
			t.Fatal(err)
		}
	}
	c, err := console.New(console.Config{DB: db, DriftIgnore: []string{"pool.gpuModel"}, Nodes: nodeRows{
		{ID: "10.0.0.11", State: "Ready", Pool: "vps-fra", LastReport: "1s ago", MicroVMs: "3/64", CPU: "6/32", Memory: "12.0/128.0Gi", Reserved: "2 sandboxes: 1.5 cores, 3.0Gi", Cordon: "-", Drain: "-", Notes: "-"},
		{ID: "10.0.0.12", State: "Suspect,Draining", Pool: "vps-fra", LastReport: "21s ago", MicroVMs: "0/64", CPU: "0/32", Memory: "0.0/128.0Gi", Reserved: "-", Cordon: "yes", Drain: "2m10s", Notes: "cordoned"},
		{ID: "10.0.0.13", State: "NotReady", Pool: "vps-fra", LastReport: "2s ago", MicroVMs: "0/64", CPU: "0/32", Memory: "0.0/128.0Gi", Reserved: "-", Cordon: "-", Drain: "-", Notes: "-",
			NotReady: "SandboxRuntimeUnavailable: sandbox directory /var/lib/cubefleet/sandboxes in use by process 24288 <x>"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(console.Prefix+"/", c)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{srv: srv, admin: admin, viewer: viewer, hooks: hooks, db: db}
}

func client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar}
}

func (e *env) signIn(t *testing.T, c *http.Client, key string) *http.Response {
	t.Helper()
	resp, err := c.PostForm(e.srv.URL+"/console/sign-in", url.Values{"key": {key}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

func TestConsoleSessions(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		// The cookie's attributes.
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noFollow.PostForm(e.srv.URL+"/console/sign-in", url.Values{"key": {e.admin}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ck := resp.Cookies()
		if resp.StatusCode != http.StatusSeeOther || len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Path != "/console" ||
			ck[0].Secure || strings.Contains(ck[0].Value, e.admin) {
			t.Fatalf("sign-in: %d, cookies %+v", resp.StatusCode, ck)
		}
		c := client()
		e.signIn(t, c, e.admin)
		if code, body := get(t, c, e.srv.URL+"/console/fleet"); code != 200 || !strings.Contains(body, "~ pool vps-fra (policy: {&#34;disruptionBudget&#34;:0.5} -&gt; {&#34;disruptionBudget&#34;:0.1})") ||
			!strings.Contains(body, "&#43; offer vps-fra -&gt; globex") || !strings.Contains(body, "1 in drift") || !strings.Contains(body, "pool.gpuModel") {
			t.Fatalf("fleet page: %d\n%s", code, body)
		}
		if code, body := get(t, c, e.srv.URL+"/console/nodes"); code != 200 || !strings.Contains(body, "Suspect,Draining") ||
			!strings.Contains(body, "3 nodes, as the registry") || !strings.Contains(body, `<td data-label="Reserved">2 sandboxes: 1.5 cores, 3.0Gi</td>`) ||
			!strings.Contains(body, "Not ready: SandboxRuntimeUnavailable: sandbox directory /var/lib/cubefleet/sandboxes in use by process 24288 &lt;x&gt;") {
			t.Fatalf("nodes page: %d\n%s", code, body)
		}
		if code, body := get(t, c, e.srv.URL+"/console/fleet"); code != 200 || !strings.Contains(body, "2 tenants with an applied document") {
			t.Fatalf("fleet page counts: %d\n%s", code, body)
		}
		if code, body := get(t, c, e.srv.URL+"/console/webhooks"); code != 200 || !strings.Contains(body, "<th>Subscription</th>") || !strings.Contains(body, "<th>Next attempt</th>") {
			t.Fatalf("webhooks page: %d\n%s", code, body)
		}
		// The landing page is the first page the key may open; signed out, the sign-in page,
		// which says where a key comes from.
		if code, body := get(t, c, e.srv.URL+"/console/"); code != 200 || !strings.Contains(body, "<h1>Fleet drift</h1>") {
			t.Fatalf("landing page of an administrator: %d", code)
		}
		if code, body := get(t, client(), e.srv.URL+"/console/"); code != 200 || !strings.Contains(body, "keys create") || !strings.Contains(body, "admin.token") {
			t.Fatalf("landing page signed out: %d\n%s", code, body)
		}
		// A form without the session's token is refused; sign-out with it ends the session.
		if resp, _ := c.PostForm(e.srv.URL+"/console/sign-out", url.Values{"csrf": {"forged"}}); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("sign-out without the form token: %d", resp.StatusCode)
		}
		// A wrong key, and a non-admin key on the admin page.
		if resp := e.signIn(t, client(), "cfk_wrong"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a wrong key signs in: %d", resp.StatusCode)
		}
		v := client()
		e.signIn(t, v, e.viewer)
		if code, body := get(t, v, e.srv.URL+"/console/fleet"); code != http.StatusForbidden || !strings.Contains(body, "Ask an administrator") {
			t.Fatalf("a non-admin key on Fleet drift: %d, want 403\n%s", code, body)
		}
		w := client()
		e.signIn(t, w, e.hooks)
		if code, body := get(t, w, e.srv.URL+"/console/"); code != 200 || !strings.Contains(body, "<h1>Webhooks</h1>") {
			t.Fatalf("landing page of a webhooks-only key: %d", code)
		}
		if code, body := get(t, w, e.srv.URL+"/console/fleet"); code != http.StatusForbidden || !strings.Contains(body, `Pages your key can open: <a href="/console/webhooks">Webhooks</a>.`) {
			t.Fatalf("a webhooks-only key on Fleet drift: %d\n%s", code, body)
		}
		// Revoking the key kills its session.
		if _, err := db.Exec(`UPDATE iam_keys SET revoked_at = 1 WHERE principal_id IN (SELECT id FROM iam_principals WHERE name = 'admin')`); err != nil {
			t.Fatal(err)
		}
		if code, body := get(t, c, e.srv.URL+"/console/fleet"); code != 200 || !strings.Contains(body, "Sign in") {
			t.Fatalf("a revoked key's session still opens Fleet drift: %d", code)
		}
	})
}
