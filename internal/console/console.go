// Package console is the server-rendered web console at /console (issue "Drift events", item
// 5): sign in with an API key, exchanged for a session cookie (HttpOnly, Secure when served
// over TLS, SameSite=Strict) that expires and dies with its key; pages for Fleet drift
// (compute:fleet:admin), Nodes (nodes:list; cordon, uncordon and drain after a confirmation,
// as the API's methods: nodeactions.go), Pools (nodes:list: each node's room as stacked bars,
// quota use per offer, warm pools, waiting creates), Webhooks (webhooks:list on the
// signed-in tenant) and Sandboxes (sandboxes:list: the key's tenant's, or every tenant a root
// key may list; a sandbox's page with its result and output needs sandboxes:get). Pages are html/template with embedded assets (no CDN, no build step) and
// work without JavaScript; the one script only refreshes the page's content in place.
package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/api/fleettext"
	"github.com/cubefleet/cubefleet/api/nodetext"
	"github.com/cubefleet/cubefleet/internal/api"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Prefix is the path the console is served under.
const Prefix = "/console"

// CookieName is the session cookie's name.
const CookieName = "cubefleet_session"

// DefaultSessionTTL is how long a console session lasts.
const DefaultSessionTTL = 8 * time.Hour

// Node is one row of the Nodes page, in the CLI's words: State is the health state with the
// drain beside it (`Ready`, `Ready,Draining`), LastReport its age (`3s ago`), MicroVMs, CPU
// (cores) and Memory (GiB) as used/capacity, Reserved what the scheduler holds on it for
// sandboxes placed and not yet reported (`2 sandboxes: 1.5 cores, 3.0Gi`, or `-`), Notes as
// `nodes list` shows them, and NotReady why the node says it is not ready (`nodes get`'s "Not
// ready", "" when it does not say so).
type Node struct {
	ID, State, Pool, LastReport, MicroVMs, CPU, Memory, Reserved, Cordon, Drain, Notes, NotReady string
}

// NodeSource lists the registry's nodes for the Nodes page.
type NodeSource interface {
	ConsoleNodes(ctx context.Context) ([]Node, error)
}

// Config configures the console.
type Config struct {
	DB *store.DB
	// Nodes lists nodes; nil shows the page empty.
	Nodes NodeSource
	// Sandboxes reads sandboxes; nil shows the Sandboxes page empty.
	Sandboxes SandboxSource
	// Pools reads the pools' room, quota use and warm pools; nil shows the Pools page empty.
	Pools PoolSource
	// Actions carries out cordon, uncordon and drain from the Nodes page as the signed-in
	// principal; nil offers none.
	Actions Actions
	// TLS is true when the server serves HTTPS: the cookie is then Secure.
	TLS bool
	// SessionTTL is how long a session lasts (DefaultSessionTTL when zero).
	SessionTTL time.Duration
	// DriftIgnore are the drift ignore rules in force (KIND.FIELD), shown on the Fleet page.
	DriftIgnore []string
	// Authenticate checks the API key a sign-in gives (UNAUTHENTICATED for an unknown, revoked
	// or expired one); nil means iam.Authenticate on DB. The server passes its own, which
	// counts refused keys and traces revoked and expired ones.
	Authenticate func(ctx context.Context, token string) (*iam.Principal, error)
	Now          func() time.Time
	Log          *slog.Logger
}

// Console serves the pages.
type Console struct {
	cfg   Config
	pages map[string]*template.Template
	mux   *http.ServeMux
}

// New returns the console; mount it at Prefix + "/".
func New(cfg Config) (*Console, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Authenticate == nil {
		cfg.Authenticate = func(ctx context.Context, token string) (*iam.Principal, error) {
			return iam.Authenticate(ctx, cfg.DB, token, cfg.Now())
		}
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	c := &Console{cfg: cfg, pages: map[string]*template.Template{}, mux: http.NewServeMux()}
	funcs := template.FuncMap{"time": func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05Z") },
		"count":  cubefleet.Count,
		"ago":    nodetext.Ago,
		"memory": nodetext.MemoryBytes,
		"exit":   exitText,
		"string": func(b []byte) string { return string(b) },
		"byKind": func(cs []fleet.Change) []fleettext.KindChanges { return fleettext.ByKind(api.FleetChangesOf(cs)) }, "deref": func(p *int64) int64 { return *p }, "short": func(s string) string {
			if len(s) > 12 {
				return s[:12] + "…"
			}
			return s
		}}
	for _, page := range []string{"signin", "fleet", "nodes", "nodeaction", "pools", "webhooks", "sandboxes", "sandbox", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, err
		}
		c.pages[page] = t
	}
	assets, _ := fs.Sub(assetFS, "assets")
	c.mux.Handle("GET "+Prefix+"/assets/", http.StripPrefix(Prefix+"/assets/", http.FileServerFS(assets)))
	c.mux.HandleFunc("GET "+Prefix+"/{$}", func(w http.ResponseWriter, r *http.Request) {
		p, _, err := c.session(r)
		if err != nil {
			http.Redirect(w, r, Prefix+"/sign-in", http.StatusSeeOther)
			return
		}
		http.Redirect(w, r, home(p), http.StatusSeeOther)
	})
	c.mux.HandleFunc("GET "+Prefix+"/sign-in", c.signInForm)
	c.mux.HandleFunc("POST "+Prefix+"/sign-in", c.signIn)
	c.mux.HandleFunc("POST "+Prefix+"/sign-out", c.signOut)
	data := map[string]func(r *http.Request, p *iam.Principal) (any, error){"fleet": c.fleetData, "nodes": c.nodesData, "webhooks": c.webhooksData,
		"sandboxes": c.sandboxesData, "pools": c.poolsData}
	for _, a := range pageAccess {
		c.mux.HandleFunc("GET "+Prefix+"/"+a.name, c.page(a.name, a.permission, a.scope, data[a.name]))
	}
	c.mux.HandleFunc("GET "+Prefix+"/sandboxes/{id}", c.sandbox)
	c.mux.HandleFunc("GET "+Prefix+"/nodes/{id}/{action}", c.nodeAction)
	c.mux.HandleFunc("POST "+Prefix+"/nodes/{id}/{action}", c.nodeAction)
	return c, nil
}

// ServeHTTP serves the console's routes, with headers that keep its pages out of frames and
// caches and allow only its own scripts and styles.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if !strings.HasPrefix(r.URL.Path, Prefix+"/assets/") {
		h.Set("Cache-Control", "no-store")
	}
	c.mux.ServeHTTP(w, r)
}

// view is what every page template gets; Allowed lists the pages the signed-in key may open
// (for the refusal page's "open instead").
type view struct {
	Title     string
	Principal *iam.Principal
	CSRF      string
	Error     string
	Active    string
	Allowed   []Link
	Data      any
	// Refresh is how often (seconds) the page refreshes its content in place; 0 means 15.
	Refresh int
}

// Link is a page of the console: its path and title.
type Link struct{ Path, Title string }

func (c *Console) render(w http.ResponseWriter, status int, page string, v view) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := c.pages[page].Execute(w, v); err != nil {
		c.cfg.Log.Error("console: render", "page", page, "err", err)
	}
}

// session returns the signed-in principal and the session token, or an error.
func (c *Console) session(r *http.Request) (*iam.Principal, string, error) {
	ck, err := r.Cookie(CookieName)
	if err != nil {
		return nil, "", cubefleet.Errorf(cubefleet.CodeUnauthenticated, "not signed in")
	}
	p, err := iam.AuthenticateSession(r.Context(), c.cfg.DB, ck.Value, c.cfg.Now())
	return p, ck.Value, err
}

// csrfToken is the form token of a session: an HMAC of the session token, so it needs no
// storage and a page of another session cannot forge it.
func csrfToken(session string) string {
	m := hmac.New(sha256.New, []byte(session))
	m.Write([]byte("cubefleet console form"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sameOrigin refuses a form posted from another site: an Origin header, when sent, must name
// this host.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" && r.Header.Get("Sec-Fetch-Site") == "same-origin" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (c *Console) signInForm(w http.ResponseWriter, r *http.Request) {
	if _, _, err := c.session(r); err == nil {
		http.Redirect(w, r, Prefix+"/fleet", http.StatusSeeOther)
		return
	}
	c.render(w, http.StatusOK, "signin", view{Title: "Sign in"})
}

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if !sameOrigin(r) {
		c.render(w, http.StatusForbidden, "signin", view{Title: "Sign in", Error: "This form was posted from another site."})
		return
	}
	key := strings.TrimSpace(r.PostFormValue("key"))
	now := c.cfg.Now()
	p, err := c.cfg.Authenticate(r.Context(), key)
	if err != nil {
		msg := "That API key is not valid."
		var ce *cubefleet.Error
		if errors.As(err, &ce) && ce.Code == cubefleet.CodeUnauthenticated {
			msg = "That API key is not valid (unknown, revoked or expired)."
		} else {
			c.cfg.Log.Error("console: sign in", "err", err)
		}
		c.render(w, http.StatusUnauthorized, "signin", view{Title: "Sign in", Error: msg})
		return
	}
	token, expires, err := iam.CreateSession(r.Context(), c.cfg.DB, p, c.cfg.SessionTTL, now)
	if err != nil {
		c.cfg.Log.Error("console: session", "err", err)
		c.render(w, http.StatusInternalServerError, "signin", view{Title: "Sign in", Error: "Could not start a session; try again."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: Prefix, HttpOnly: true, Secure: c.cfg.TLS,
		SameSite: http.SameSiteStrictMode, Expires: time.UnixMilli(expires)})
	http.Redirect(w, r, home(p), http.StatusSeeOther)
}

// pageAccess is each signed-in page with the permission and scope it needs, in the order the
// console prefers them as a landing page.
var pageAccess = []struct {
	name, permission string
	scope            func(*iam.Principal) string
}{
	{"fleet", iam.PermFleetAdmin, func(*iam.Principal) string { return iam.ScopeFleet }},
	{"nodes", "nodes:list", func(*iam.Principal) string { return iam.TenantScope(iam.RootTenant) }},
	{"pools", "nodes:list", func(*iam.Principal) string { return iam.TenantScope(iam.RootTenant) }},
	{"webhooks", "webhooks:list", func(p *iam.Principal) string { return iam.TenantScope(p.TenantID) }},
	{"sandboxes", "sandboxes:list", func(p *iam.Principal) string { return iam.TenantScope(p.TenantID) }},
}

// allowed returns the pages p may open, in pageAccess's order.
func allowed(p *iam.Principal) []string {
	var out []string
	for _, a := range pageAccess {
		if iam.Decide(p, a.permission, a.scope(p)) == nil {
			out = append(out, a.name)
		}
	}
	return out
}

// home is where p lands after signing in (and at /console/): the first page it may open, or
// the page that tells it what it lacks.
func home(p *iam.Principal) string {
	if pages := allowed(p); len(pages) > 0 {
		return Prefix + "/" + pages[0]
	}
	return Prefix + "/webhooks"
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	_, token, err := c.session(r)
	if err == nil && (!sameOrigin(r) || !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(csrfToken(token)))) {
		c.render(w, http.StatusForbidden, "error", view{Title: "Refused", Error: "This form was not posted from this console."})
		return
	}
	if token != "" {
		if err := iam.DeleteSession(r.Context(), c.cfg.DB, token); err != nil {
			c.cfg.Log.Error("console: sign out", "err", err)
		}
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, HttpOnly: true, Secure: c.cfg.TLS, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, Prefix+"/sign-in", http.StatusSeeOther)
}

// page serves a signed-in page that needs permission on scope: 303 to sign in without a
// session, 403 without the permission.
func (c *Console) page(name, permission string, scope func(*iam.Principal) string, data func(r *http.Request, p *iam.Principal) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, token, err := c.session(r)
		if err != nil {
			http.Redirect(w, r, Prefix+"/sign-in", http.StatusSeeOther)
			return
		}
		v := view{Title: titles[name], Principal: p, CSRF: csrfToken(token), Active: name}
		if err := iam.Decide(p, permission, scope(p)); err != nil {
			v.Error = "Your key lacks " + permission + " on " + scope(p) + ". Ask an administrator for a key that has it (cubefleet keys create --grant " + permission + "@" + scope(p) + " ...)."
			for _, name := range allowed(p) {
				v.Allowed = append(v.Allowed, Link{Path: Prefix + "/" + name, Title: titles[name]})
			}
			c.render(w, http.StatusForbidden, "error", v)
			return
		}
		if v.Data, err = data(r, p); err != nil {
			c.cfg.Log.Error("console: page", "page", name, "err", err)
			v.Error = "This page could not be read; try again."
			c.render(w, http.StatusInternalServerError, "error", v)
			return
		}
		c.render(w, http.StatusOK, name, v)
	}
}

// titles are the signed-in pages' titles.
var titles = map[string]string{"fleet": "Fleet drift", "nodes": "Nodes", "webhooks": "Webhooks", "sandboxes": "Sandboxes", "pools": "Pools"}

type fleetPage struct {
	Tenants     []fleet.Status
	Drifted     int
	DriftIgnore []string
	// AppliedBy is the name of each principal that applied a document (its key's name), by
	// principal id; a principal that no longer exists is shown by its id.
	AppliedBy map[string]string
}

func (c *Console) fleetData(r *http.Request, _ *iam.Principal) (any, error) {
	ctx := r.Context()
	st, err := fleet.ListStatus(ctx, c.cfg.DB)
	if err != nil {
		return nil, err
	}
	page := fleetPage{Tenants: st, DriftIgnore: c.cfg.DriftIgnore}
	var by []string
	for _, s := range st {
		if s.Drift != nil {
			page.Drifted++
		}
		if s.Applied != nil {
			by = append(by, s.Applied.AppliedBy)
		}
	}
	if page.AppliedBy, err = iam.PrincipalNames(ctx, c.cfg.DB, by); err != nil {
		return nil, err
	}
	return page, nil
}

// nodesPage is the Nodes page: the nodes, and whether the console offers their actions.
type nodesPage struct {
	Nodes   []Node
	Actions bool
}

func (c *Console) nodesData(r *http.Request, _ *iam.Principal) (any, error) {
	page := nodesPage{Nodes: []Node{}, Actions: c.cfg.Actions != nil}
	if c.cfg.Nodes == nil {
		return page, nil
	}
	var err error
	page.Nodes, err = c.cfg.Nodes.ConsoleNodes(r.Context())
	return page, err
}

type webhooksPage struct {
	Subscriptions []events.Subscription
	Deliveries    []events.Delivery
}

func (c *Console) webhooksData(r *http.Request, p *iam.Principal) (any, error) {
	ctx := r.Context()
	subs, err := events.ListSubscriptions(ctx, c.cfg.DB, p.TenantID)
	if err != nil {
		return nil, err
	}
	ds, _, err := events.ListDeliveries(ctx, c.cfg.DB, events.DeliveryFilter{TenantID: p.TenantID, Limit: 50})
	if err != nil {
		return nil, err
	}
	return webhooksPage{Subscriptions: subs, Deliveries: ds}, nil
}
