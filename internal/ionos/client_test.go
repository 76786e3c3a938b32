package ionos_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ionoscloud "github.com/ionos-cloud/sdk-go/v6"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/ionos"
	"github.com/cubefleet/cubefleet/internal/ionos/ionossim"
)

// secret is a token distinctive enough to find anywhere it leaks.
const secret = "tok-3xq9-ZZSECRETZZ-a1b2c3"

type bundle struct {
	sim    *ionossim.Listener
	client *ionos.Client
	logs   *bytes.Buffer
}

// setup starts a simulator on a free loopback port holding world (nil: empty) and a client
// for it with fast backoff; cfg fields set by the caller win.
func setup(tb testing.TB, world *ionossim.State, edit func(*ionos.Config)) bundle {
	tb.Helper()
	sim := ionossim.New(ionossim.Options{Authorize: ionossim.AcceptToken(secret), QueueDelay: time.Millisecond, RunDuration: 20 * time.Millisecond})
	if world != nil {
		if err := sim.Load(world); err != nil {
			tb.Fatal(err)
		}
	}
	l, err := ionossim.Listen(context.Background(), "127.0.0.1:0", sim)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = l.Close() })
	logs := &bytes.Buffer{}
	cfg := ionos.Config{
		APIURL: l.URL, Token: ionos.NewToken(secret),
		BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond, PollInterval: 5 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if edit != nil {
		edit(&cfg)
	}
	c, err := ionos.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return bundle{sim: l, client: c, logs: logs}
}

func testCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

func serversPath() string {
	return "/cloudapi/v6/datacenters/" + ionossim.SampleDatacenterID + "/servers"
}

func TestInventoryRequestCount(t *testing.T) {
	for _, n := range []int{1, 50, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			b := setup(t, ionossim.SampleFleet(n), nil)
			inv, err := b.client.Inventory(testCtx(t), ionossim.SampleDatacenterID)
			if err != nil {
				t.Fatal(err)
			}
			if len(inv.Servers) != n {
				t.Fatalf("%d servers, want %d", len(inv.Servers), n)
			}
			total := b.sim.Sim.Total()
			if total > 10 {
				t.Errorf("the simulator counted %d requests, want at most 10: %v", total, b.sim.Sim.Counts())
			}
			if got := b.sim.Sim.Count("GET", serversPath()); got != 1 {
				t.Errorf("GET servers counted %d times, want 1 (depth, not one call per server)", got)
			}
			if int64(total) != b.client.HTTPRequests() {
				t.Errorf("client reports %d requests, simulator counted %d", b.client.HTTPRequests(), total)
			}
			s := inv.Servers[n-1]
			if s.Type != "CUBE" || s.Cores != 4 || s.RAMMiB != 8192 || s.VMState != "RUNNING" || s.State != "AVAILABLE" ||
				len(s.NICs) != 1 || s.NICs[0].LANID != 2 || s.NICs[0].IPs[0] != ionossim.SampleServerIP(n-1) ||
				len(s.SecurityGroupIDs) != 1 || s.SecurityGroupIDs[0] != ionossim.SampleWorkerGroupID || s.TemplateID == "" {
				t.Errorf("server %d: %+v", n-1, s)
			}
			if !inv.Consistent || inv.Datacenter.Version == 0 || inv.Datacenter.DefaultSecurityGroupID == "" {
				t.Errorf("datacenter %+v consistent %v", inv.Datacenter, inv.Consistent)
			}
			if len(inv.LANs) != 2 || len(inv.SecurityGroups) != 2 || len(inv.NATGateways) != 1 || len(inv.CubeTemplates) != 9 ||
				len(inv.ApplicationLoadBalancers) != 1 || len(inv.ApplicationLoadBalancers[0].ForwardingRules) != 1 ||
				len(inv.TargetGroups) != 1 || len(inv.TargetGroups[0].Targets) != n || len(inv.PendingRequests) != 0 {
				t.Errorf("inventory lists: lans %d sgs %d nats %d templates %d albs %d tgs %d pending %d",
					len(inv.LANs), len(inv.SecurityGroups), len(inv.NATGateways), len(inv.CubeTemplates),
					len(inv.ApplicationLoadBalancers), len(inv.TargetGroups), len(inv.PendingRequests))
			}
			if fr := inv.ApplicationLoadBalancers[0].ForwardingRules[0]; fr.HTTPRules[0].TargetGroupID != ionossim.SampleTargetGroupID {
				t.Errorf("forwarding rule %+v", fr)
			}
		})
	}
}

func TestInventoryShowsPendingWork(t *testing.T) {
	b := setup(t, ionossim.SampleFleet(3), nil)
	ctx := testCtx(t)
	b.sim.Sim.StickBusy(ionossim.SampleServerID(1))
	api := b.client.API()
	if _, err := b.client.Do(ctx, "suspend", func(ctx context.Context) (*ionoscloud.APIResponse, error) {
		return api.ServersApi.DatacentersServersSuspendPost(ctx, ionossim.SampleDatacenterID, ionossim.SampleServerID(1)).Execute()
	}); err != nil {
		t.Fatal(err)
	}
	inv, err := b.client.Inventory(ctx, ionossim.SampleDatacenterID)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.PendingRequests) != 1 || inv.PendingRequests[0].Method != "POST" || inv.PendingRequests[0].Targets[0].ID != ionossim.SampleServerID(1) {
		t.Fatalf("pending requests: %+v", inv.PendingRequests)
	}
	if inv.Servers[1].State != "BUSY" || inv.Datacenter.State != "BUSY" {
		t.Errorf("server state %s, data center state %s, want BUSY", inv.Servers[1].State, inv.Datacenter.State)
	}
}

func TestRetryAfterHonouredBeyondSDKCap(t *testing.T) {
	b := setup(t, ionossim.SampleFleet(1), nil)
	b.sim.Sim.InjectFault(ionossim.Fault{Method: "GET", Path: "/datacenters/" + ionossim.SampleDatacenterID + "/servers", Status: 429, RetryAfter: "3", Times: 1})
	start := time.Now()
	inv, err := b.client.Inventory(testCtx(t), ionossim.SampleDatacenterID)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 3*time.Second {
		t.Errorf("finished after %s; Retry-After: 3 was not honoured (the SDK alone caps it at 2 s)", took)
	}
	if len(inv.Servers) != 1 || b.sim.Sim.Count("GET", serversPath()) != 2 {
		t.Errorf("servers %d, GET servers counted %d, want 1 and 2", len(inv.Servers), b.sim.Sim.Count("GET", serversPath()))
	}
}

func TestRetries(t *testing.T) {
	t.Run("429 then success, HTTP-date Retry-After", func(t *testing.T) {
		b := setup(t, ionossim.SampleFleet(1), nil)
		b.sim.Sim.InjectFault(ionossim.Fault{Method: "GET", Path: "/templates", Status: 429,
			RetryAfter: time.Now().Add(time.Second).UTC().Format(http.TimeFormat), Times: 1})
		if _, err := b.client.Inventory(testCtx(t), ionossim.SampleDatacenterID); err != nil {
			t.Fatal(err)
		}
		if n := b.sim.Sim.Count("GET", "/cloudapi/v6/templates"); n != 2 {
			t.Errorf("GET templates counted %d, want 2", n)
		}
	})
	t.Run("503 retried on GET", func(t *testing.T) {
		b := setup(t, ionossim.SampleFleet(1), nil)
		b.sim.Sim.InjectFault(ionossim.Fault{Method: "GET", Path: "/datacenters/" + ionossim.SampleDatacenterID + "/lans", Status: 503, Times: 2})
		if _, err := b.client.Inventory(testCtx(t), ionossim.SampleDatacenterID); err != nil {
			t.Fatal(err)
		}
		if n := b.sim.Sim.Count("GET", "/cloudapi/v6/datacenters/"+ionossim.SampleDatacenterID+"/lans"); n != 3 {
			t.Errorf("GET lans counted %d, want 3", n)
		}
		if !strings.Contains(b.logs.String(), `"status":503`) {
			t.Errorf("retries not logged: %s", b.logs.String())
		}
	})
	t.Run("500 retried on DELETE and 404 then counts as done", func(t *testing.T) {
		b := setup(t, ionossim.SampleFleet(2), nil)
		api := b.client.API()
		path := "/datacenters/" + ionossim.SampleDatacenterID + "/natgateways/nope"
		b.sim.Sim.InjectFault(ionossim.Fault{Method: "DELETE", Path: path, Status: 500, Times: 1})
		err := b.client.Write(testCtx(t), "delete NAT gateway", func(ctx context.Context) (*ionoscloud.APIResponse, error) {
			return api.NATGatewaysApi.DatacentersNatgatewaysDelete(ctx, ionossim.SampleDatacenterID, "nope").Execute()
		})
		if err != nil {
			t.Errorf("DELETE answered 500 then 404: %v, want done", err)
		}
		if n := b.sim.Sim.Count("DELETE", "/cloudapi/v6"+path); n != 2 {
			t.Errorf("DELETE counted %d, want 2", n)
		}
	})
	t.Run("429 on POST is retried", func(t *testing.T) {
		b := setup(t, ionossim.SampleFleet(1), nil)
		api := b.client.API()
		b.sim.Sim.InjectFault(ionossim.Fault{Method: "POST", Status: 429, RetryAfter: "0", Times: 1})
		err := b.client.Write(testCtx(t), "create LAN", func(ctx context.Context) (*ionoscloud.APIResponse, error) {
			_, r, err := api.LANsApi.DatacentersLansPost(ctx, ionossim.SampleDatacenterID).Lan(ionoscloud.Lan{Properties: &ionoscloud.LanProperties{}}).Execute()
			return r, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := b.sim.Sim.Count("POST", "/cloudapi/v6/datacenters/"+ionossim.SampleDatacenterID+"/lans"); n != 2 {
			t.Errorf("POST counted %d, want 2", n)
		}
	})
	t.Run("POST answered 503 is not repeated", func(t *testing.T) {
		b := setup(t, ionossim.SampleFleet(1), nil)
		api := b.client.API()
		b.sim.Sim.InjectFault(ionossim.Fault{Method: "POST", Status: 503, Applied: true, Times: 1})
		_, err := b.client.Do(testCtx(t), "create LAN", func(ctx context.Context) (*ionoscloud.APIResponse, error) {
			_, r, err := api.LANsApi.DatacentersLansPost(ctx, ionossim.SampleDatacenterID).Lan(ionoscloud.Lan{Properties: &ionoscloud.LanProperties{}}).Execute()
			return r, err
		})
		if !errors.Is(err, ionos.ErrOutcomeUnknown) {
			t.Fatalf("got %v, want ErrOutcomeUnknown", err)
		}
		if n := b.sim.Sim.Count("POST", "/cloudapi/v6/datacenters/"+ionossim.SampleDatacenterID+"/lans"); n != 1 {
			t.Errorf("POST counted %d, want 1", n)
		}
		// The write did happen: looking it up is the caller's way forward.
		if lans := b.sim.Sim.Snapshot().Datacenters[0].LANs; len(lans) != 3 {
			t.Errorf("LANs after an applied POST: %d, want 3", len(lans))
		}
	})
	t.Run("a refused connection is retried even for POST", func(t *testing.T) {
		c, err := ionos.New(ionos.Config{APIURL: "http://127.0.0.1:1", Token: ionos.NewToken(secret), MaxAttempts: 2, BaseDelay: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Do(testCtx(t), "create LAN", func(ctx context.Context) (*ionoscloud.APIResponse, error) {
			_, r, err := c.API().LANsApi.DatacentersLansPost(ctx, "x").Lan(ionoscloud.Lan{Properties: &ionoscloud.LanProperties{}}).Execute()
			return r, err
		})
		if err == nil || errors.Is(err, ionos.ErrOutcomeUnknown) || c.HTTPRequests() != 2 {
			t.Errorf("got %v after %d requests; want a plain failure after 2 attempts", err, c.HTTPRequests())
		}
	})
}

func TestRedirectRefused(t *testing.T) {
	b := setup(t, ionossim.SampleFleet(1), nil)
	b.sim.Sim.InjectFault(ionossim.Fault{Path: "/datacenters", Status: http.StatusFound})
	_, err := b.client.Inventory(testCtx(t), ionossim.SampleDatacenterID)
	if !errors.Is(err, ionos.ErrRedirectRefused) {
		t.Fatalf("got %v, want ErrRedirectRefused", err)
	}
	if n := b.sim.Sim.Count("GET", "/cloudapi/v6/redirected"); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
	if n := b.sim.Sim.Total(); n != 1 {
		t.Errorf("%d requests; a redirect must not be retried either", n)
	}
}

func TestWriteFollowsRequests(t *testing.T) {
	b := setup(t, ionossim.SampleFleet(1), nil)
	ctx := testCtx(t)
	api := b.client.API()
	suspend := func(ctx context.Context) (*ionoscloud.APIResponse, error) {
		return api.ServersApi.DatacentersServersSuspendPost(ctx, ionossim.SampleDatacenterID, ionossim.SampleServerID(0)).Execute()
	}
	if err := b.client.Write(ctx, "suspend", suspend); err != nil {
		t.Fatal(err)
	}
	if st := b.sim.Sim.Snapshot().Datacenters[0].Servers[0].VMState; st != "SUSPENDED" {
		t.Errorf("vmState after Write returned: %s, want SUSPENDED", st)
	}
	b.sim.Sim.InjectFault(ionossim.Fault{Method: "POST", FailRequest: true, Times: 1})
	err := b.client.Write(ctx, "resume", func(ctx context.Context) (*ionoscloud.APIResponse, error) {
		return api.ServersApi.DatacentersServersResumePost(ctx, ionossim.SampleDatacenterID, ionossim.SampleServerID(0)).Execute()
	})
	if !errors.Is(err, ionos.ErrRequestFailed) {
		t.Errorf("failed request: %v, want ErrRequestFailed", err)
	}
	// A CUBE refuses stop: the 422 comes back as INVALID_INPUT with IONOS's message.
	err = b.client.Write(ctx, "stop", func(ctx context.Context) (*ionoscloud.APIResponse, error) {
		return api.ServersApi.DatacentersServersStopPost(ctx, ionossim.SampleDatacenterID, ionossim.SampleServerID(0)).Execute()
	})
	if cubefleet.ErrorCode(err) != cubefleet.CodeInvalidInput || !strings.Contains(err.Error(), "suspend or resume") {
		t.Errorf("stop on a CUBE: %v", err)
	}
}

// TestPerCallTimeout: a call the API does not answer ends at the per-call timeout (100 ms) with
// a deadline error, while the caller's own context (a minute) is still live: the API would
// answer only after an hour.
func TestPerCallTimeout(t *testing.T) {
	b := setup(t, ionossim.SampleFleet(1), func(c *ionos.Config) { c.Timeout = 100 * time.Millisecond })
	b.sim.Sim.InjectFault(ionossim.Fault{Path: "/templates", Latency: time.Hour})
	ctx := testCtx(t)
	_, err := b.client.Inventory(ctx, ionossim.SampleDatacenterID)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want a deadline error", err)
	}
	if ctx.Err() != nil {
		t.Errorf("the call ended with the caller's context (%v), not at its own timeout", ctx.Err())
	}
}

func TestNormalizeAPIURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                                   "https://api.ionos.com",
		"https://api.ionos.com/":             "https://api.ionos.com",
		"https://api.ionos.com/cloudapi/v6":  "https://api.ionos.com",
		"https://api.ionos.com/cloudapi/v6/": "https://api.ionos.com",
		"http://127.0.0.1:8443":              "http://127.0.0.1:8443",
		"http://[::1]:8443/":                 "http://[::1]:8443",
		"http://localhost:9":                 "http://localhost:9",
		"http://api.ionos.com":               "",
		"api.ionos.com":                      "",
		"localhost:8080":                     "",
		"https://user:pw@api.ionos.com":      "",
		"https://api.ionos.com/other":        "",
		"https://api.ionos.com?x=1":          "",
	} {
		got, err := ionos.NormalizeAPIURL(in)
		if want == "" {
			if err == nil || cubefleet.ErrorCode(err) != cubefleet.CodeInvalidInput {
				t.Errorf("NormalizeAPIURL(%q) = %q, %v; want INVALID_INPUT", in, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("NormalizeAPIURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestTokenNeverLeaks drives every path a token could escape by: the client's logs on
// retries, API errors (401 from a wrong token, a redirect, a 422), the inventory document,
// formatting the client and the token with every verb, JSON, slog and a panic value.
func TestTokenNeverLeaks(t *testing.T) {
	b := setup(t, ionossim.SampleFleet(2), nil)
	ctx := testCtx(t)
	var out bytes.Buffer
	b.sim.Sim.InjectFault(ionossim.Fault{Method: "GET", Status: 503, Times: 2})
	inv, err := b.client.Inventory(ctx, ionossim.SampleDatacenterID)
	if err != nil {
		t.Fatal(err)
	}
	if err := ionos.EncodeInventory(&out, inv); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "inv.json")
	if err := ionos.WriteInventoryFile(path, inv); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	out.Write(data)

	b.sim.Sim.InjectFault(ionossim.Fault{Path: "/datacenters", Status: http.StatusFound, Times: 1})
	_, err = b.client.Inventory(ctx, ionossim.SampleDatacenterID)
	fmt.Fprintf(&out, "%v %+v %#v\n", err, err, err)
	api := b.client.API()
	err = b.client.Write(ctx, "stop", func(ctx context.Context) (*ionoscloud.APIResponse, error) {
		return api.ServersApi.DatacentersServersStopPost(ctx, ionossim.SampleDatacenterID, ionossim.SampleServerID(0)).Execute()
	})
	fmt.Fprintf(&out, "%v %+v %#v\n", err, err, err)

	wrong, err := ionos.New(ionos.Config{APIURL: b.client.APIURL(), Token: ionos.NewToken(secret + "-wrong")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrong.Inventory(ctx, ionossim.SampleDatacenterID)
	if cubefleet.ErrorCode(err) != cubefleet.CodeUnauthenticated {
		t.Errorf("wrong token: %v, want UNAUTHENTICATED", err)
	}
	fmt.Fprintf(&out, "%v %+v %#v\n", err, err, err)

	tok := ionos.NewToken(secret)
	cfg := ionos.Config{Token: tok}
	fmt.Fprintf(&out, "%v %+v %#v %s %q %x %X %d\n", tok, tok, tok, tok, tok, tok, tok, tok)
	fmt.Fprintf(&out, "%v %+v %#v\n", cfg, cfg, cfg)
	fmt.Fprintf(&out, "%v %+v %#v\n", b.client, *b.client, b.client)
	slog.New(slog.NewJSONHandler(&out, nil)).Info("token", "token", tok, "config", cfg)
	slog.New(slog.NewTextHandler(&out, nil)).Info("token", "token", tok)
	func() {
		defer func() { fmt.Fprintf(&out, "%v\n", recover()) }()
		panic(tok)
	}()
	out.Write(b.logs.Bytes())

	if strings.Contains(out.String(), secret) || strings.Contains(out.String(), "ZZSECRETZZ") {
		t.Fatalf("the token leaked:\n%s", out.String())
	}
	if !strings.Contains(b.logs.String(), "retrying") {
		t.Errorf("expected retry logs to have been produced")
	}
}

func TestInventoryPagesLongLists(t *testing.T) {
	world := ionossim.SampleFleet(1)
	for i := range 1500 {
		world.TargetGroups = append(world.TargetGroups, &ionossim.TargetGroup{ID: fmt.Sprintf("7a000000-0000-4000-8000-%012d", i),
			Name: fmt.Sprintf("tg-%d", i), Algorithm: "ROUND_ROBIN", Protocol: "HTTP"})
	}
	b := setup(t, world, nil)
	inv, err := b.client.Inventory(testCtx(t), ionossim.SampleDatacenterID)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.TargetGroups) != 1501 {
		t.Errorf("%d target groups, want 1501", len(inv.TargetGroups))
	}
	if n := b.sim.Sim.Count("GET", "/cloudapi/v6/targetgroups"); n != 2 {
		t.Errorf("GET targetgroups counted %d, want 2 pages", n)
	}
}
