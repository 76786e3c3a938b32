package server

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestConsoleNodeActionsInChromium: from the Nodes page an administrator cordons, uncordons and
// drains a node, each after a confirmation that names the node and the sandboxes it runs; each
// is the API's method as the signed-in key (its audit row, with the reason); a key without
// nodes:cordon is refused and audited as the API refuses; a form without the session's token
// is refused and changes nothing.
func TestConsoleNodeActionsInChromium(t *testing.T) {
	chromium(t)
	db := storetest.SQLite(t, controlplane.Modules()...)
	e := mustStart(t, db, nil)
	_, agents := sandboxFleet(t, e, 0, nil, 4, "127.0.0.2")
	agents[0].Behave = func(nodeapi.SandboxSpec) sandboxtest.Run { return sandboxtest.Run{} }
	var sbx struct{ ID string }
	e.must(e.admin, "sandboxes.create", map[string]any{"tenantId": "root", "template": "py", "command": []string{"sleep"}}, &sbx)
	testkit.WaitFor(t, 15*time.Second, "the sandbox running", func() bool {
		var s struct{ State string }
		return e.call(e.admin, "sandboxes.get", map[string]any{"tenantId": "root", "id": sbx.ID}, &s) == nil && s.State == "running"
	})
	viewer, _ := e.key("root", "viewer", "nodes:list@tenant/root", "nodes:get@tenant/root")
	dir := outputDir(t)
	b := newBrowser(t)
	b.signIn(e.url, e.admin)

	node := func() (cordoned bool, detail string, draining bool) {
		var n struct {
			Cordoned     bool
			CordonDetail string
			Drain        *struct{ State string }
		}
		e.must(e.admin, "nodes.get", map[string]any{"nodeId": "127.0.0.2"}, &n)
		return n.Cordoned, n.CordonDetail, n.Drain != nil && n.Drain.State != ""
	}
	confirm := func(action, reason string) string {
		t.Helper()
		c0, d0, dr0 := node()
		b.do(chromedp.Navigate(e.url+"/console/nodes"), chromedp.WaitVisible(chromedp.CSS(".actions")))
		b.do(chromedp.Click(chromedp.CSS(`a[href="/console/nodes/127.0.0.2/`+action+`"]`)), chromedp.WaitVisible(chromedp.CSS("form.confirm")))
		text := b.text()
		for _, want := range []string{"127.0.0.2, which runs 1 sandbox?", sbx.ID} {
			if !strings.Contains(text, want) {
				t.Errorf("the %s confirmation lacks %q:\n%s", action, want, text)
			}
		}
		if c, d, dr := node(); c != c0 || d != d0 || dr != dr0 {
			t.Fatalf("the confirmation page of %s changed the node", action)
		}
		b.measure(dir, "node-"+action)
		if reason != "" {
			b.do(chromedp.SendKeys(chromedp.ID("reason"), reason))
		}
		b.do(chromedp.Click(chromedp.CSS("form.confirm button")), chromedp.WaitVisible(chromedp.CSS("p.done")))
		return b.text()
	}
	b.do(chromedp.Navigate(e.url+"/console/nodes"), chromedp.WaitVisible(chromedp.CSS(".actions")))
	b.measure(dir, "nodes-actions")

	if text := confirm("cordon", "kernel <update>"); !strings.Contains(text, "Cordoned node 127.0.0.2.") {
		t.Errorf("after cordon:\n%s", text)
	}
	if c, detail, _ := node(); !c || detail != "kernel <update>" {
		t.Errorf("after the console's cordon: cordoned %v, detail %q", c, detail)
	}
	if text := confirm("uncordon", ""); !strings.Contains(text, "Uncordoned node 127.0.0.2.") {
		t.Errorf("after uncordon:\n%s", text)
	}
	if c, _, _ := node(); c {
		t.Error("still cordoned after the console's uncordon")
	}
	confirm("drain", "retire")
	if c, _, draining := node(); !c || !draining {
		t.Errorf("after the console's drain: cordoned %v, draining %v", c, draining)
	}
	var rows struct{ Items []audit.Entry }
	e.must(e.admin, "audit.list", map[string]any{"tenantId": "root", "limit": 1000}, &rows)
	seen := map[string]bool{}
	for _, r := range rows.Items {
		if r.Target == "127.0.0.2" && r.Outcome == "ok" {
			seen[r.Method] = true
		}
	}
	for _, m := range []string{"nodes.cordon", "nodes.uncordon", "nodes.drain"} {
		if !seen[m] {
			t.Errorf("no audit row of %s on 127.0.0.2 (%v)", m, seen)
		}
	}

	// A key without nodes:cordon: told on the confirmation page, and refused (audited) if it posts.
	b.do(chromedp.Click(chromedp.CSS("header .signout button")), chromedp.WaitVisible(chromedp.ID("key")))
	b.signIn(e.url, viewer)
	b.do(chromedp.Navigate(e.url+"/console/nodes/127.0.0.2/uncordon"), chromedp.WaitVisible(chromedp.CSS("form.confirm")))
	if text := b.text(); !strings.Contains(text, "lacks nodes:uncordon on tenant/root") {
		t.Errorf("the viewer's confirmation page:\n%s", text)
	}
	b.do(chromedp.Click(chromedp.CSS("form.confirm button")), chromedp.WaitNotPresent(chromedp.CSS("form.confirm")), chromedp.WaitVisible(chromedp.CSS("p.error")))
	if text := b.text(); !strings.Contains(text, "Uncordon was refused") || !strings.Contains(text, "lacks nodes:uncordon") {
		t.Errorf("the viewer's uncordon:\n%s", text)
	}
	b.measure(dir, "node-refused")
	if c, _, _ := node(); !c {
		t.Error("the viewer's refused uncordon uncordoned the node")
	}
	e.must(e.admin, "audit.list", map[string]any{"tenantId": "root", "limit": 1000}, &rows)
	refused := false
	for _, r := range rows.Items {
		refused = refused || (r.Method == "nodes.uncordon" && r.Outcome != "ok")
	}
	if !refused {
		t.Error("the viewer's refused uncordon left no audit row")
	}

	// A form posted without the session's token changes nothing.
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	if resp, err := hc.PostForm(e.url+"/console/sign-in", url.Values{"key": {e.admin}}); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	resp, err := hc.PostForm(e.url+"/console/nodes/127.0.0.2/uncordon", url.Values{"reason": {"no token"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a form without the token: HTTP %d, want 403", resp.StatusCode)
	}
	if c, _, _ := node(); !c {
		t.Error("a form without the token uncordoned the node")
	}
	t.Logf("screenshots in %s", dir)
}
