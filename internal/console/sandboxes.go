package console

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
)

// SandboxSource reads sandboxes for the console: a page of a tenant's sandboxes, newest first;
// one sandbox with its output; what a node runs (for the Nodes page's confirmations).
// *sandboxes.Service is one.
type SandboxSource interface {
	List(ctx context.Context, in sandboxes.ListInput) ([]sandboxes.Sandbox, string, error)
	Logs(ctx context.Context, tenant, id string) (sandboxes.Sandbox, sandboxes.Output, error)
	OnNode(ctx context.Context, node string) (sandboxes.NodeSandboxes, error)
}

// sandboxPageSize is how many sandboxes the Sandboxes page shows at a time.
const sandboxPageSize = 50

// sandboxesPage is the Sandboxes page: the filters as given, the tenants the key may choose
// from, the rows, and the next page's cursor (only for one tenant: pages follow one tenant's
// order).
type sandboxesPage struct {
	Tenant, State, Template, Node string
	Tenants                       []string
	States                        []sandboxes.State
	Items                         []sandboxes.Sandbox
	Next                          string
	Now                           int64
	Error                         string
}

// listableTenants returns the tenants whose sandboxes p may list (sandboxes:list on
// tenant/<id>): its own for a tenant's key, every tenant it holds the grant on for a root key.
func (c *Console) listableTenants(ctx context.Context, p *iam.Principal) ([]string, error) {
	if p.TenantID != iam.RootTenant {
		return []string{p.TenantID}, nil
	}
	all, err := iam.ListTenants(ctx, c.cfg.DB)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range all {
		if iam.Decide(p, "sandboxes:list", iam.TenantScope(t.ID)) == nil {
			out = append(out, t.ID)
		}
	}
	return out, nil
}

// sandboxesData is the Sandboxes page for r's filters: tenant (one the key may list; empty: all
// of them, newest first across tenants, one page), state, template and node, and cursor.
func (c *Console) sandboxesData(r *http.Request, p *iam.Principal) (any, error) {
	q := r.URL.Query()
	page := sandboxesPage{Tenant: q.Get("tenant"), State: q.Get("state"), Template: strings.TrimSpace(q.Get("template")),
		Node: strings.TrimSpace(q.Get("node")), States: sandboxes.States, Now: c.cfg.Now().UnixMilli()}
	if c.cfg.Sandboxes == nil {
		return page, nil
	}
	tenants, err := c.listableTenants(r.Context(), p)
	if err != nil {
		return nil, err
	}
	page.Tenants = tenants
	list := tenants
	if page.Tenant != "" {
		if !slices.Contains(tenants, page.Tenant) {
			page.Error = "Your key lacks sandboxes:list on tenant/" + page.Tenant + "."
			return page, nil
		}
		list = []string{page.Tenant}
	}
	for _, t := range list {
		items, next, err := c.cfg.Sandboxes.List(r.Context(), sandboxes.ListInput{TenantID: t, State: sandboxes.State(page.State), Template: page.Template,
			Node: page.Node, Limit: sandboxPageSize, Cursor: q.Get("cursor")})
		if err != nil {
			if msg, ok := publicMessage(err); ok {
				page.Error = msg
				return page, nil
			}
			return nil, err
		}
		page.Items = append(page.Items, items...)
		if len(list) == 1 {
			page.Next = next
		}
	}
	if len(list) > 1 {
		// Newest first across tenants, as each tenant's list is.
		slices.SortStableFunc(page.Items, func(a, b sandboxes.Sandbox) int {
			if a.CreatedAt != b.CreatedAt {
				return int(b.CreatedAt - a.CreatedAt)
			}
			return strings.Compare(b.ID, a.ID)
		})
		page.Items = page.Items[:min(len(page.Items), sandboxPageSize)]
	}
	return page, nil
}

// sandboxPage is a sandbox's detail page: the sandbox and its output (the page refreshes
// itself every 5 s while the sandbox has not ended).
type sandboxPage struct {
	Sandbox sandboxes.Sandbox
	Output  sandboxes.Output
	// Logs says whether the key may read the output (sandboxes:logs); without it Output is
	// empty and the page says what the key lacks.
	Logs bool
	Now  int64
}

// sandbox serves /console/sandboxes/{id}?tenant=T: tenant T's sandbox id with its result, for
// a key with sandboxes:get on tenant/T (T defaults to the key's own tenant), and its output
// (escaped like every value) when the key also holds sandboxes:logs there.
func (c *Console) sandbox(w http.ResponseWriter, r *http.Request) {
	p, token, err := c.session(r)
	if err != nil {
		http.Redirect(w, r, Prefix+"/sign-in", http.StatusSeeOther)
		return
	}
	tenant := r.URL.Query().Get("tenant")
	if tenant == "" {
		tenant = p.TenantID
	}
	v := view{Title: "Sandbox", Principal: p, CSRF: csrfToken(token), Active: "sandboxes"}
	if err := iam.Decide(p, "sandboxes:get", iam.TenantScope(tenant)); err != nil {
		v.Error = "Your key lacks sandboxes:get on tenant/" + tenant + "."
		c.render(w, http.StatusForbidden, "error", v)
		return
	}
	if c.cfg.Sandboxes == nil {
		v.Error = "This control plane runs no sandboxes."
		c.render(w, http.StatusNotFound, "error", v)
		return
	}
	sbx, out, err := c.cfg.Sandboxes.Logs(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		if msg, ok := publicMessage(err); ok {
			v.Error = msg
			c.render(w, http.StatusNotFound, "error", v)
			return
		}
		c.cfg.Log.Error("console: sandbox", "err", err)
		v.Error = "This page could not be read; try again."
		c.render(w, http.StatusInternalServerError, "error", v)
		return
	}
	page := sandboxPage{Sandbox: sbx, Now: c.cfg.Now().UnixMilli(), Logs: iam.Decide(p, "sandboxes:logs", iam.TenantScope(tenant)) == nil}
	if page.Logs {
		page.Output = out
	}
	page.Output.Final = out.Final
	v.Title, v.Data = "Sandbox "+sbx.ID, page
	if !out.Final {
		v.Refresh = 5 // live while it runs
	}
	c.render(w, http.StatusOK, "sandbox", v)
}

// publicMessage returns the message of an error the caller caused (INVALID_INPUT, NOT_FOUND),
// which a page may show; other errors are logged, never shown.
func publicMessage(err error) (string, bool) {
	var ce *cubefleet.Error
	if errors.As(err, &ce) && (ce.Code == cubefleet.CodeInvalidInput || ce.Code == cubefleet.CodeNotFound) {
		return ce.Message, true
	}
	return "", false
}

// exitText is how a sandbox ended, for its row: "0", "137 (SIGKILL)", "SIGTERM", or "-" while it
// has not ended.
func exitText(r *sandboxes.Result) string {
	switch {
	case r == nil:
		return "-"
	case r.ExitCode != nil && r.Signal != "":
		return strconv.Itoa(*r.ExitCode) + " (" + r.Signal + ")"
	case r.ExitCode != nil:
		return strconv.Itoa(*r.ExitCode)
	case r.Signal != "":
		return r.Signal
	}
	return "-"
}
