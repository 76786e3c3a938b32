package console

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/iam"
)

// Actions carries out the Nodes page's actions as the signed-in principal through the API's
// method table (*api.Registry is one): the same permission checks, refusals and audit rows as
// the API gives.
type Actions interface {
	Call(ctx context.Context, p *iam.Principal, requestID, name string, in json.RawMessage) (any, error)
}

// nodeAction is one of the Nodes page's actions: the API method it calls, the permission the
// method decides (to say on the confirmation page what a key lacks), and its words.
type nodeAction struct {
	Name, Method, Permission, Verb, Done, Explain string
	// ReasonField is the method's input field for why ("" : the form asks none).
	ReasonField string
}

// nodeActions are the only writes of the console.
var nodeActions = []nodeAction{
	{Name: "cordon", Method: "nodes.cordon", Permission: "nodes:cordon", Verb: "Cordon", Done: "Cordoned", ReasonField: "detail",
		Explain: "It keeps running its sandboxes but gets no new ones until it is uncordoned."},
	{Name: "uncordon", Method: "nodes.uncordon", Permission: "nodes:uncordon", Verb: "Uncordon", Done: "Uncordoned",
		Explain: "It gets new sandboxes again; a drain in progress ends."},
	{Name: "drain", Method: "nodes.drain", Permission: "nodes:drain", Verb: "Drain", Done: "Draining", ReasonField: "reason",
		Explain: "It is cordoned and drains: it gets no new sandboxes and is drained once its running sandboxes have ended (a drain past the pool's disruption budget is refused)."},
}

// nodeActionPage is the confirmation page of an action on a node, and after it, its outcome.
type nodeActionPage struct {
	Action  nodeAction
	Node    Node
	Running []string // the ids of the sandboxes the node runs (at most 50 listed)
	Count   int      // how many it runs
	Done    string   // after the action: what happened
}

// nodeAction serves GET (the confirmation, naming the node and its running sandboxes) and POST
// (the action, through Actions as the signed-in principal) of /console/nodes/{id}/{action}.
func (c *Console) nodeAction(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	p, token, err := c.session(r)
	if err != nil {
		http.Redirect(w, r, Prefix+"/sign-in", http.StatusSeeOther)
		return
	}
	v := view{Title: "Nodes", Principal: p, CSRF: csrfToken(token), Active: "nodes"}
	i := slices.IndexFunc(nodeActions, func(a nodeAction) bool { return a.Name == r.PathValue("action") })
	if i < 0 || c.cfg.Nodes == nil || c.cfg.Actions == nil {
		v.Error = "There is no such action on nodes."
		c.render(w, http.StatusNotFound, "error", v)
		return
	}
	a := nodeActions[i]
	if r.Method == http.MethodPost && (!sameOrigin(r) || !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(csrfToken(token)))) {
		v.Error = "This form was not posted from this console."
		c.render(w, http.StatusForbidden, "error", v)
		return
	}
	if err := iam.Decide(p, "nodes:list", iam.TenantScope(iam.RootTenant)); err != nil && r.Method == http.MethodGet {
		v.Error = "Your key lacks nodes:list on tenant/root."
		c.render(w, http.StatusForbidden, "error", v)
		return
	}
	page := nodeActionPage{Action: a}
	if r.Method == http.MethodPost {
		fields := map[string]string{"nodeId": r.PathValue("id")}
		if why := strings.TrimSpace(r.PostFormValue("reason")); a.ReasonField != "" && why != "" {
			fields[a.ReasonField] = why
		}
		in, _ := json.Marshal(fields)
		if _, err := c.cfg.Actions.Call(r.Context(), p, w.Header().Get("X-Request-Id"), a.Method, in); err != nil {
			var ce *cubefleet.Error
			if !errors.As(err, &ce) || ce.Code == cubefleet.CodeInternal {
				c.cfg.Log.Error("console: node action", "action", a.Name, "err", err)
				v.Error = a.Verb + " failed; try again."
				c.render(w, http.StatusInternalServerError, "error", v)
				return
			}
			v.Error = a.Verb + " was refused: " + ce.Message
			c.render(w, cubefleet.HTTPStatus(ce.Code), "error", v)
			return
		}
		page.Done = a.Done + " node " + r.PathValue("id") + "."
	}
	nodes, err := c.cfg.Nodes.ConsoleNodes(r.Context())
	if err != nil {
		c.cfg.Log.Error("console: node action", "err", err)
		v.Error = "This page could not be read; try again."
		c.render(w, http.StatusInternalServerError, "error", v)
		return
	}
	j := slices.IndexFunc(nodes, func(n Node) bool { return n.ID == r.PathValue("id") })
	if j < 0 {
		v.Error = "There is no node " + r.PathValue("id") + "."
		c.render(w, http.StatusNotFound, "error", v)
		return
	}
	page.Node = nodes[j]
	if c.cfg.Sandboxes != nil {
		on, err := c.cfg.Sandboxes.OnNode(r.Context(), page.Node.ID)
		if err != nil {
			c.cfg.Log.Error("console: node action", "err", err)
			v.Error = "This page could not be read; try again."
			c.render(w, http.StatusInternalServerError, "error", v)
			return
		}
		page.Running, page.Count = on.RunningIDs, on.Running
	}
	if page.Done == "" {
		if err := iam.Decide(p, a.Permission, iam.TenantScope(iam.RootTenant)); err != nil {
			v.Error = "Your key lacks " + a.Permission + " on tenant/root, which " + a.Method + " needs."
		}
	}
	v.Title, v.Data = a.Verb+" "+page.Node.ID, page
	c.render(w, http.StatusOK, "nodeaction", v)
}
