package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestConsoleSandboxesInChromium: the Sandboxes page lists every tenant's sandboxes for the
// root's administrator and only its own tenant's for a tenant's key, with state, template,
// node, age and exit, filtered by state; a sandbox's page shows its result and, with
// sandboxes:logs, its output as text (markup in it is escaped, never run) and its peak memory as
// the CLI shows it, and refuses another
// tenant's sandbox; the Pools page draws each node's room as labelled stacked bars, with the
// offer's quota use and the creates waiting for room. Every page is measured at a laptop's and
// a phone's width.
func TestConsoleSandboxesInChromium(t *testing.T) {
	chromium(t)
	db := storetest.SQLite(t, controlplane.Modules()...)
	e := mustStart(t, db, nil)
	_, agents := sandboxFleet(t, e, 0, map[string]map[string]any{"acme": {"quota": map[string]int64{"sandboxes": 5}, "priority": 1}}, 4, "127.0.0.2")
	agents[0].Behave = func(sp nodeapi.SandboxSpec) sandboxtest.Run {
		if sp.Argv[0] == "sleep" {
			return sandboxtest.Run{}
		}
		return sandboxtest.Run{Stdout: []byte("<script>document.title='owned'</script><b>bold</b>\n"), Stderr: []byte("a warning\n"), Exit: 3, For: time.Millisecond,
			CPUMillis: 120, PeakMemoryBytes: 39321600}
	}
	create := func(tenant string, command ...string) string {
		var out struct{ ID string }
		e.must(e.admin, "sandboxes.create", map[string]any{"tenantId": tenant, "template": "py", "command": command}, &out)
		return out.ID
	}
	rootEcho, acmeEcho, acmeSleep := create("root", "echo"), create("acme", "echo"), create("acme", "sleep")
	testkit.WaitFor(t, 15*time.Second, "the sandboxes ended or running", func() bool {
		var s struct{ State string }
		for id, tenant := range map[string]string{rootEcho: "root", acmeEcho: "acme"} {
			if e.call(e.admin, "sandboxes.get", map[string]any{"tenantId": tenant, "id": id}, &s) != nil || s.State != "exited" {
				return false
			}
		}
		return e.call(e.admin, "sandboxes.get", map[string]any{"tenantId": "acme", "id": acmeSleep}, &s) == nil && s.State == "running"
	})
	acmeKey, _ := e.key("acme", "acme-viewer", "sandboxes:list@tenant/acme", "sandboxes:get@tenant/acme") // no sandboxes:logs
	dir := outputDir(t)
	b := newBrowser(t)

	b.signIn(e.url, e.admin)
	b.do(chromedp.Navigate(e.url+"/console/sandboxes"), chromedp.WaitVisible(chromedp.CSS("table")))
	text := b.text()
	for _, want := range []string{rootEcho, acmeEcho, acmeSleep, "exited", "running", "py", "127.0.0.2", "3"} {
		if !strings.Contains(text, want) {
			t.Errorf("the Sandboxes page of the administrator lacks %q:\n%s", want, text)
		}
	}
	b.measure(dir, "sandboxes")
	b.do(chromedp.Navigate(e.url+"/console/sandboxes?tenant=acme&state=running"), chromedp.WaitVisible(chromedp.CSS("table")))
	if text := b.text(); !strings.Contains(text, acmeSleep) || strings.Contains(text, acmeEcho) || strings.Contains(text, rootEcho) {
		t.Errorf("acme's running sandboxes:\n%s", text)
	}

	b.do(chromedp.Navigate(e.url+"/console/sandboxes/"+acmeEcho+"?tenant=acme"), chromedp.WaitVisible(chromedp.CSS("pre.output")))
	text = b.text()
	for _, want := range []string{"<script>document.title='owned'</script><b>bold</b>", "a warning", "exited", "echo", "peak memory 37.5Mi"} {
		if !strings.Contains(text, want) {
			t.Errorf("the sandbox's page lacks %q:\n%s", want, text)
		}
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	elements, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("main script, main b").length`))
	if err != nil {
		t.Fatal(err)
	}
	if title == "owned" || elements != 0 {
		t.Errorf("the output's markup ran or rendered: title %q, %d elements", title, elements)
	}
	b.measure(dir, "sandbox")
	b.do(chromedp.Navigate(e.url+"/console/sandboxes/"+acmeSleep+"?tenant=acme"), chromedp.WaitVisible(chromedp.CSS("pre.output")))
	if text := b.text(); !strings.Contains(text, "refreshes while it runs") {
		t.Errorf("a running sandbox's page:\n%s", text)
	}
	b.measure(dir, "sandbox-running")

	// Pools: fill the node's 4 slots and make one create wait; the picture says it, in words too.
	for range 4 {
		create("root", "sleep")
	}
	testkit.WaitFor(t, 15*time.Second, "the node full", func() bool {
		var n struct{ Sandboxes struct{ Running int } }
		return e.call(e.admin, "nodes.get", map[string]any{"nodeId": "127.0.0.2"}, &n) == nil && n.Sandboxes.Running == 4
	})
	b.do(chromedp.Navigate(e.url+"/console/pools"), chromedp.WaitVisible(chromedp.CSS("table.room")))
	text = b.text()
	for _, want := range []string{"1 create waiting for room", "127.0.0.2", "MicroVM slots: 4 of 4 slots reported, 0 reserved, 0 free · full",
		"CPU: 4 of", "Memory: 4 of", "kept for the host", "acme: sandboxes 1/5"} {
		if !strings.Contains(text, want) {
			t.Errorf("the Pools page lacks %q:\n%s", want, text)
		}
	}
	ctx, cancel = context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	labelled, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll("td.meter svg[role=img]")].filter(s => s.getAttribute("aria-label") && s.querySelector("title") && s.querySelectorAll("rect").length > 0).length`))
	if err != nil || labelled != 3 {
		t.Errorf("%d labelled bars with their parts (%v), want 3: CPU, memory, slots", labelled, err)
	}
	b.measure(dir, "pools")

	b.do(chromedp.Click(chromedp.CSS("header .signout button")), chromedp.WaitVisible(chromedp.ID("key")))
	b.signIn(e.url, acmeKey)
	b.do(chromedp.Navigate(e.url+"/console/sandboxes"), chromedp.WaitVisible(chromedp.CSS("table")))
	if text := b.text(); !strings.Contains(text, acmeEcho) || !strings.Contains(text, acmeSleep) || strings.Contains(text, rootEcho) {
		t.Errorf("acme's key sees:\n%s", text)
	}
	b.measure(dir, "sandboxes-tenant")
	b.do(chromedp.Navigate(e.url+"/console/sandboxes/"+acmeEcho), chromedp.WaitVisible(chromedp.CSS("section.card")))
	if text := b.text(); !strings.Contains(text, "lacks sandboxes:logs on tenant/acme") || strings.Contains(text, "a warning") {
		t.Errorf("a key without sandboxes:logs on the sandbox's page:\n%s", text)
	}
	b.measure(dir, "sandbox-nologs")
	b.do(chromedp.Navigate(e.url+"/console/sandboxes/"+rootEcho+"?tenant=root"), chromedp.WaitVisible(chromedp.CSS("p.error")))
	if text := b.text(); !strings.Contains(text, "lacks sandboxes:get on tenant/root") {
		t.Errorf("acme's key on root's sandbox: %s", text)
	}
	b.do(chromedp.Navigate(e.url+"/console/sandboxes?tenant=root"), chromedp.WaitVisible(chromedp.CSS("p.error")))
	if text := b.text(); !strings.Contains(text, "lacks sandboxes:list on tenant/root") || strings.Contains(text, rootEcho) {
		t.Errorf("acme's key listing root's sandboxes: %s", text)
	}
	t.Logf("screenshots in %s", dir)
}
