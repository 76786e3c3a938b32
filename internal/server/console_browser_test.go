package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// chromium returns the path of Debian's chromium (scripts/test.sh installs it). Without it the
// browser tests skip, except under CI=true, where they fail.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed: scripts/test.sh installs Debian's chromium with apt-get")
	}
	t.Skip("chromium is not installed (scripts/test.sh installs it); skipping the browser test")
	return ""
}

// outputDir is where a test leaves files for people to look at: $TEST_OUTPUT_DIR/<test> when
// set, else the test's temporary directory.
func outputDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("TEST_OUTPUT_DIR"); d != "" {
		dir := filepath.Join(d, strings.ReplaceAll(t.Name(), "/", "_"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// browser is a headless Chromium on a fresh profile that records the URL of every request its
// pages make.
type browser struct {
	t        *testing.T
	ctx      context.Context
	mu       sync.Mutex
	requests []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			b.mu.Lock()
			b.requests = append(b.requests, e.Request.URL)
			b.mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	b.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.Enable, network.EnableParams{})
		return err
	}))
	return b
}

// do runs actions with a time limit.
func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatal(err)
	}
}

// text returns the text of the page's main element.
func (b *browser) text() string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

// screenshot saves the page at width x height pixels as dir/name.png, after checking that the
// page reflows to that width: nothing is wider than the viewport, so nothing needs a sideways
// scroll.
func (b *browser) screenshot(dir, name string, width, height int64) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height)); err != nil {
		b.t.Fatal(err)
	}
	// The page, and each table's scrolling box, fit the viewport's width.
	wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth ||
		[...document.querySelectorAll(".scroll")].some(e => e.scrollWidth > e.clientWidth)`))
	if err != nil {
		b.t.Fatal(err)
	}
	if wide {
		b.t.Errorf("%s: the page needs a sideways scroll in a %d-pixel viewport", name, width)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// measure checks and saves the page at a laptop's width (1280 pixels) and a phone's (390), as
// dir/<name>-laptop.png and dir/<name>-phone.png: every page of the console is measured at both.
func (b *browser) measure(dir, name string) {
	b.t.Helper()
	b.screenshot(dir, name+"-laptop", 1280, 800)
	b.screenshot(dir, name+"-phone", 390, 844)
}

// signIn signs in with key on the sign-in page and waits for the page it lands on.
func (b *browser) signIn(base, key string) {
	b.t.Helper()
	b.do(chromedp.Navigate(base+"/console/sign-in"),
		chromedp.SendKeys(chromedp.ID("key"), key),
		chromedp.Click(chromedp.CSS(`form[action="/console/sign-in"] button`)),
		chromedp.WaitVisible(chromedp.CSS("header .signout")))
}

// TestConsoleInChromium signs in to the console in headless Chromium with the administrator's
// key, reads the Fleet drift page (a tenant drifted by a hand edit, its change lines by kind,
// applied by the key's name), the Nodes page (two stock Cubelets, one draining, in the CLI's
// words) and the Webhooks page (a receiver that answers and one that fails, the widest
// deliveries table), signs out, and sees a key without compute:fleet:admin refused on Fleet
// drift. Every page is measured and saved at a laptop's width and a phone's (measure), and no
// request left 127.0.0.1.
func TestConsoleInChromium(t *testing.T) {
	chromium(t)
	db := storetest.SQLite(t, controlplane.Modules()...)
	e := mustStart(t, db, func(c *Config) { allowLoopback(c); c.AllowPrivateWebhookTargets = true })
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(receiver.Close)
	e.must(e.admin, "webhooks.create", map[string]any{"tenantId": "root", "url": receiver.URL + "/hooks/cubefleet", "events": []string{"fleet.drifted", "fleet.converged", "node.down"}}, nil)
	// A receiver that fails: its deliveries are retried, with the longest outcome and both times.
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	t.Cleanup(failing.Close)
	e.must(e.admin, "webhooks.create", map[string]any{"tenantId": "root", "url": failing.URL + "/a/much/longer/path/for/the/pager/integration", "events": []string{"fleet.*", "node.*"}}, nil)
	e.driftedFleet()
	e.stockNodes()
	viewer, _ := e.key("root", "viewer", "nodes:list@tenant/root", "webhooks:list@tenant/root")
	dir := outputDir(t)
	b := newBrowser(t)

	b.signIn(e.url, e.admin)
	b.do(chromedp.Navigate(e.url+"/console/fleet"), chromedp.WaitVisible(chromedp.ID("tenant-root")))
	fleetText := b.text()
	for _, want := range []string{"1 in drift", "in drift", "~ pool vps-fra (gpuModel: \"A100\" -> \"L40S\")", "~ flavor vps-fra/g1.small (vcpu: 4 -> 2)", "acme", "matches", "by admin (plan"} {
		if !strings.Contains(fleetText, want) {
			t.Errorf("the Fleet drift page lacks %q:\n%s", want, fleetText)
		}
	}
	b.measure(dir, "fleet")

	b.do(chromedp.Navigate(e.url+"/console/nodes"), chromedp.WaitVisible(chromedp.CSS("table")))
	nodesText := b.text()
	for _, want := range []string{"10.0.0.7", "10.0.0.8", "Ready,Draining", "fra-cubes", "registry-only"} {
		if !strings.Contains(nodesText, want) {
			t.Errorf("the Nodes page lacks %q:\n%s", want, nodesText)
		}
	}
	b.measure(dir, "nodes")

	deadline := time.Now().Add(10 * time.Second)
	for {
		b.do(chromedp.Navigate(e.url+"/console/webhooks"), chromedp.WaitVisible(chromedp.CSS("table")))
		if text := b.text(); strings.Contains(text, "delivered (HTTP 204)") && strings.Contains(text, "retrying: the receiver answered HTTP 503") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Webhooks page shows no delivered fleet.drifted:\n%s", b.text())
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.measure(dir, "webhooks")

	b.do(chromedp.Click(chromedp.CSS("header .signout button")), chromedp.WaitVisible(chromedp.ID("key")))
	b.do(chromedp.Navigate(e.url+"/console/fleet"), chromedp.WaitVisible(chromedp.ID("key")))
	b.measure(dir, "signin")

	b.signIn(e.url, viewer)
	b.do(chromedp.Navigate(e.url+"/console/fleet"), chromedp.WaitVisible(chromedp.CSS("p.error")))
	if text := b.text(); !strings.Contains(text, "lacks compute:fleet:admin") {
		t.Errorf("a key without compute:fleet:admin on Fleet drift: %s", text)
	}
	b.measure(dir, "refused")

	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.requests) < 8 {
		t.Fatalf("only %d requests recorded: %q", len(b.requests), b.requests)
	}
	for _, r := range b.requests {
		u, err := url.Parse(r)
		if err != nil || u.Hostname() != "127.0.0.1" {
			t.Errorf("a request left 127.0.0.1: %s", r)
		}
	}
	t.Logf("screenshots in %s", dir)
}

// driftedFleet applies a document for root and for acme, edits root's pool vps-fra and flavor
// g1.small by hand and checks drift, so root is in drift and acme matches.
func (e *testEnv) driftedFleet() {
	e.t.Helper()
	doc := `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu-central"}],
		"pools":[{"name":"vps-fra","site":"fra","class":"vps-host","gpuModel":"L40S","ownerQuota":{"gpu":8}}],
		"flavors":[{"pool":"vps-fra","name":"g1.small","vcpu":2,"memoryGiB":4,"diskGiB":40}]}`
	for _, tenant := range []string{"root", "acme"} {
		e.must(e.admin, "fleet.apply", map[string]any{"tenantId": tenant, "config": jsonRaw(doc)}, nil)
	}
	var pools struct{ Items []obj }
	e.must(e.admin, "compute.pools.list", map[string]any{"tenantId": "root"}, &pools)
	e.must(e.admin, "compute.pools.update", map[string]any{"tenantId": "root", "id": pools.Items[0].id(), "gpuModel": "A100"}, nil)
	var flavors struct{ Items []obj }
	e.must(e.admin, "compute.flavors.list", map[string]any{"tenantId": "root"}, &flavors)
	e.must(e.admin, "compute.flavors.update", map[string]any{"tenantId": "root", "id": flavors.Items[0].id(), "vcpu": 4}, nil)
	if n, err := e.srv.CheckDrift(context.Background()); err != nil || n != 1 {
		e.t.Fatalf("drift check: %d drifted, %v", n, err)
	}
}

// stockNodes registers two stock Cubelets that report once: 10.0.0.7 in pool fra-cubes,
// draining, and 10.0.0.8 in a cluster no pool has.
func (e *testEnv) stockNodes() {
	e.t.Helper()
	e.makePool("fra-cubes")
	agentURL := e.srv.InternalURL() + "/internal/v1/node-agent/nodes/"
	status, err := os.ReadFile(filepath.Join("..", "nodes", "nodetest", "testdata", "status.json"))
	if err != nil {
		e.t.Fatal(err)
	}
	for id, label := range map[string]string{"10.0.0.7": "fra-cubes", "10.0.0.8": "nowhere"} {
		if code, _, out := nodeCall(e.t, "POST", agentURL+"register", "", registerBody(e.t, id, label)); code != 200 {
			e.t.Fatalf("register %s: %d %s", id, code, out)
		}
		if code, _, out := nodeCall(e.t, "POST", agentURL+id+"/status", "", status); code != 200 {
			e.t.Fatalf("status %s: %d %s", id, code, out)
		}
	}
	e.srv.sys.Nodes.CheckHealth(context.Background())
	e.must(e.admin, "nodes.drain", map[string]any{"nodeId": "10.0.0.7", "reason": "kernel update"}, nil)
}
