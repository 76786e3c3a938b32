package events_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/netguard"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// resolver answers host names from a table the test changes (DNS it controls).
type resolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
}

func (r *resolver) set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var as []netip.Addr
	for _, a := range addrs {
		as = append(as, netip.MustParseAddr(a))
	}
	r.answers[host] = as
}

func (r *resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.answers[host]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time)     { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }
func (c *clock) Add(d time.Duration) { c.Set(c.Now().Add(d)) }

// received is one request a receiver got.
type received struct {
	header http.Header
	body   []byte
	at     time.Time // real time of arrival
	err    error     // the verification's outcome at arrival, with the default tolerance
}

// receiver is a webhook endpoint on 127.0.0.1 that verifies each request with the Standard
// Webhooks library and answers what status says (200 when nil).
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	secret string
	got    []received
	status func(n int) int // n counts requests from 1
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		wh, err := standardwebhooks.NewWebhook(r.secret)
		if err == nil {
			err = wh.Verify(body, req.Header)
		}
		r.got = append(r.got, received{header: req.Header.Clone(), body: body, at: time.Now(), err: err})
		n, status := len(r.got), r.status
		r.mu.Unlock()
		code := http.StatusOK
		if status != nil {
			code = status(n)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func (r *receiver) setStatus(f func(n int) int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = f
}

// url is the receiver's URL under host name host (which the test's resolver answers).
func (r *receiver) url(host string) string {
	u, _ := url.Parse(r.srv.URL)
	return "http://" + host + ":" + u.Port() + "/hook"
}

type hookEnv struct {
	t     *testing.T
	db    *store.DB
	box   *secrets.Box
	clock *clock
	dns   *resolver
	guard *netguard.Guard
	hooks *events.Webhooks
}

func newHookEnv(t *testing.T, db *store.DB) *hookEnv {
	box, err := secrets.NewBox(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	dns := &resolver{answers: map[string][]netip.Addr{}}
	dns.set("hooks.test", "127.0.0.1")
	clk := &clock{t: time.Now()}
	guard := &netguard.Guard{AllowPrivate: true, Resolver: dns}
	return &hookEnv{t: t, db: db, box: box, clock: clk, dns: dns, guard: guard,
		hooks: &events.Webhooks{DB: db, Box: box, Guard: guard, Now: clk.Now,
			Types: map[string]bool{"fleet.drifted": false, "fleet.converged": false, "node.down": true}}}
}

// createSub creates a subscription in a transaction of its own, as the API's webhooks.create does
// in its call's.
func createSub(db *store.DB, hooks *events.Webhooks, in events.NewSubscription) (*events.WithSecret, error) {
	var out *events.WithSecret
	err := db.InTx(context.Background(), func(tx *sql.Tx) error {
		var err error
		out, err = hooks.Create(context.Background(), tx, in)
		return err
	})
	return out, err
}

func (e *hookEnv) dispatcher(holder string) *events.Dispatcher {
	return &events.Dispatcher{DB: e.db, Box: e.box, Guard: e.guard, Holder: holder, Now: e.clock.Now, Timeout: 2 * time.Second}
}

// subscribe subscribes r to fleet.drifted of tenant acme and gives r the secret.
func (e *hookEnv) subscribe(r *receiver, tenant string, types ...string) *events.WithSecret {
	e.t.Helper()
	if len(types) == 0 {
		types = []string{"fleet.drifted"}
	}
	sub, err := createSub(e.db, e.hooks, events.NewSubscription{TenantID: tenant, URL: r.url("hooks.test"), Events: types, CreatedBy: "usr_ops"})
	if err != nil {
		e.t.Fatal(err)
	}
	r.mu.Lock()
	r.secret = sub.Secret
	r.mu.Unlock()
	return sub
}

func (e *hookEnv) publish(tenant, typ string, n int) []events.Event {
	e.t.Helper()
	var evs []events.Event
	for i := range n {
		evs = append(evs, events.Event{At: e.clock.Now().UnixMilli(), TenantID: tenant, Type: typ, Subject: "fleet/" + tenant, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	if err := events.Append(context.Background(), e.db, evs...); err != nil {
		e.t.Fatal(err)
	}
	return evs
}

func (e *hookEnv) deliveries(tenant string) []events.Delivery {
	e.t.Helper()
	ds, _, err := events.ListDeliveries(context.Background(), e.db, events.DeliveryFilter{TenantID: tenant, Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return ds
}

// drive runs d's due deliveries and moves the clock to the next attempt until tenant's
// deliveries are all done or steps runs out; it returns the last state seen.
func (e *hookEnv) drive(d *events.Dispatcher, tenant string, steps int, between func()) []events.Delivery {
	e.t.Helper()
	for range steps {
		if _, err := d.DeliverDue(context.Background()); err != nil {
			e.t.Fatal(err)
		}
		if between != nil {
			between()
		}
		next := int64(0)
		for _, dl := range e.deliveries(tenant) {
			if dl.State == events.StatePending && (next == 0 || dl.NextAttemptAt < next) {
				next = dl.NextAttemptAt
			}
		}
		if next == 0 {
			break
		}
		if t := time.UnixMilli(next); t.After(e.clock.Now()) {
			e.clock.Set(t)
		}
	}
	return e.deliveries(tenant)
}

func TestWebhookRetriedUntilAccepted(t *testing.T) {
	storetest.Each(t, []store.Module{events.Module}, func(t *testing.T, db *store.DB) {
		e := newHookEnv(t, db)
		r := newReceiver(t)
		r.setStatus(func(n int) int {
			if n <= 3 {
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		})
		e.subscribe(r, "acme")
		ev := e.publish("acme", "fleet.drifted", 1)[0]
		e.publish("acme", "fleet.converged", 1) // not subscribed
		e.publish("globex", "fleet.drifted", 1) // another tenant
		ds := e.drive(e.dispatcher("a"), "acme", 20, nil)
		if len(ds) != 1 || ds[0].State != events.StateDelivered || ds[0].Attempts != 4 || ds[0].LastStatus != 204 || ds[0].EventID != ev.ID {
			t.Fatalf("deliveries = %+v", ds)
		}
		got := r.requests()
		if len(got) != 4 {
			t.Fatalf("the receiver got %d requests, want 4 (3 refused, 1 accepted)", len(got))
		}
		sigs := map[string]bool{}
		for i, g := range got {
			if g.err != nil {
				t.Errorf("attempt %d does not verify: %v", i+1, g.err)
			}
			if g.header.Get("webhook-id") != ev.ID || string(g.body) != string(got[0].body) {
				t.Errorf("attempt %d: webhook-id %s, body %s; want %s and the first attempt's bytes", i+1, g.header.Get("webhook-id"), g.body, ev.ID)
			}
			sigs[g.header.Get("webhook-signature")] = true
		}
		if len(sigs) != 4 {
			t.Errorf("%d distinct signatures over 4 attempts: each attempt is signed afresh", len(sigs))
		}
		var p events.Payload
		if err := json.Unmarshal(got[0].body, &p); err != nil || p.ID != ev.ID || p.Type != "fleet.drifted" || p.TenantID != "acme" || string(p.Data) != `{"n":0}` ||
			p.Timestamp != time.UnixMilli(ev.At).UTC().Format("2006-01-02T15:04:05.000Z") {
			t.Errorf("payload = %s (%v)", got[0].body, err)
		}
	})
}

// TestWebhookLateRetryVerifiesReplayDoesNot: a receiver refusing for 30 minutes then accepting
// gets a delivery that verifies at the default 5-minute tolerance, while a replay of the first
// attempt, 30 minutes old, fails it.
func TestWebhookLateRetryVerifiesReplayDoesNot(t *testing.T) {
	storetest.Each(t, []store.Module{events.Module}, func(t *testing.T, db *store.DB) {
		e := newHookEnv(t, db)
		// 30 simulated minutes that end now: a retry is at most 4 minutes after the receiver
		// recovers (the backoff's cap here), so the accepted attempt is signed within 2
		// minutes of the real time the receiver verifies at.
		start := time.Now().Add(-32 * time.Minute)
		e.clock.Set(start)
		r := newReceiver(t)
		// The receiver refuses every attempt made before minute 30 of the simulated clock (the
		// attempt's own time, not when the test looks), so the first attempt at or after minute 30
		// is accepted: at most BackoffMax (plus jitter) past it.
		r.setStatus(func(int) int {
			if e.clock.Now().Sub(start) >= 30*time.Minute {
				return http.StatusOK
			}
			return http.StatusBadGateway
		})
		sub := e.subscribe(r, "acme")
		e.publish("acme", "fleet.drifted", 1)
		d := e.dispatcher("a")
		d.BackoffMax = 4 * time.Minute
		ds := e.drive(d, "acme", 100, nil)
		got := r.requests()
		if len(ds) != 1 || ds[0].State != events.StateDelivered || len(got) < 5 {
			t.Fatalf("after 30 minutes of refusals: %+v, %d requests", ds, len(got))
		}
		last := got[len(got)-1]
		if last.err != nil {
			t.Fatalf("the late delivery does not verify: %v", last.err)
		}
		wh, _ := standardwebhooks.NewWebhook(sub.Secret)
		err := wh.Verify(got[0].body, got[0].header)
		if !errors.Is(err, standardwebhooks.ErrMessageTooOld) {
			t.Fatalf("a replay of the first attempt verifies as %v, want too old", err)
		}
		if err := wh.VerifyIgnoringTimestamp(got[0].body, got[0].header); err != nil {
			t.Fatalf("the first attempt was not signed right: %v", err)
		}
		if ds[0].Attempts != len(got) {
			t.Fatalf("delivery = %+v", ds[0])
		}
	})
}

// TestWebhookHangingReceiverDelaysNoOther: one receiver never answers; another, subscribed to
// the same events, gets them at once.
func TestWebhookHangingReceiverDelaysNoOther(t *testing.T) {
	storetest.Each(t, []store.Module{events.Module}, func(t *testing.T, db *store.DB) {
		e := newHookEnv(t, db)
		e.clock = nil
		hang := make(chan struct{})
		hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		}))
		defer hanging.Close()
		defer close(hang)
		u, _ := url.Parse(hanging.URL)
		e.hooks.Now = time.Now
		for range 2 {
			if _, err := createSub(db, e.hooks, events.NewSubscription{TenantID: "acme", URL: "http://hooks.test:" + u.Port() + "/", Events: []string{"fleet.drifted"}}); err != nil {
				t.Fatal(err)
			}
		}
		healthy := newReceiver(t)
		e.subscribe(healthy, "acme")
		d := &events.Dispatcher{DB: db, Box: e.box, Guard: e.guard, Holder: "a", Timeout: 5 * time.Second, Poll: 20 * time.Millisecond, Concurrency: 2}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { d.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		start := time.Now()
		for i := range 10 {
			evs := []events.Event{{At: time.Now().UnixMilli(), TenantID: "acme", Type: "fleet.drifted", Subject: "fleet/acme", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}}
			if err := events.Append(ctx, db, evs...); err != nil {
				t.Fatal(err)
			}
		}
		for len(healthy.requests()) < 10 {
			if time.Since(start) > 4*time.Second {
				t.Fatalf("the healthy receiver got %d of 10 events while another hung", len(healthy.requests()))
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, g := range healthy.requests() {
			if g.err != nil {
				t.Fatal(g.err)
			}
		}
	})
}

// TestWebhookRestartLosesNothing: a server that stops after a failed attempt, or in the middle
// of one, leaves the delivery to the next server, which delivers it.
func TestWebhookRestartLosesNothing(t *testing.T) {
	run := func(t *testing.T, dsn string) {
		ctx := context.Background()
		open := func() *store.DB {
			db, err := store.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			if err := db.Migrate(ctx, events.Module); err != nil {
				t.Fatal(err)
			}
			return db
		}
		e := newHookEnv(t, open())
		r := newReceiver(t)
		block := make(chan struct{})
		r.setStatus(func(n int) int {
			switch n {
			case 1:
				return http.StatusInternalServerError
			case 2:
				<-block // the server stops during this attempt
				return http.StatusOK
			}
			return http.StatusOK
		})
		e.subscribe(r, "acme")
		e.publish("acme", "fleet.drifted", 1)
		first := e.dispatcher("a")
		if _, err := first.DeliverDue(ctx); err != nil {
			t.Fatal(err)
		}
		// "Restart": a new server process on the same database.
		e.db = open()
		second := e.dispatcher("b")
		e.clock.Add(time.Minute)
		sctx, stop := context.WithCancel(ctx)
		stopped := make(chan struct{})
		go func() { second.DeliverDue(sctx); close(stopped) }()
		for len(r.requests()) < 2 {
			time.Sleep(5 * time.Millisecond)
		}
		stop()
		<-stopped
		close(block)
		e.db = open()
		third := e.dispatcher("c")
		ds := e.drive(third, "acme", 5, nil)
		if len(ds) != 1 || ds[0].State != events.StateDelivered {
			t.Fatalf("after two restarts: %+v", ds)
		}
		if got := r.requests(); len(got) != 3 || got[2].err != nil {
			t.Fatalf("%d requests, last verifies: %v", len(got), got[len(got)-1].err)
		}
	}
	t.Run("sqlite", func(t *testing.T) { run(t, filepath.Join(t.TempDir(), "cubefleet.db")) })
	t.Run("postgres", func(t *testing.T) { run(t, storetest.PostgresURL(t)) })
}

// TestWebhookDeadLetter: a receiver that never accepts is retried for the whole horizon (at
// least 24 h), then the delivery is dead-lettered; redelivering it once the receiver is fixed
// delivers it with the same webhook-id and body.
func TestWebhookDeadLetter(t *testing.T) {
	storetest.Each(t, []store.Module{events.Module}, func(t *testing.T, db *store.DB) {
		e := newHookEnv(t, db)
		e.clock.Set(time.Now().Add(-48 * time.Hour))
		r := newReceiver(t)
		r.setStatus(func(int) int { return http.StatusInternalServerError })
		e.subscribe(r, "acme")
		e.publish("acme", "fleet.drifted", 1)
		queued := e.clock.Now()
		ds := e.drive(e.dispatcher("a"), "acme", 200, nil)
		got := r.requests()
		if len(ds) != 1 || ds[0].State != events.StateFailed || ds[0].LastStatus != 500 || ds[0].LastError != "answered 500" {
			t.Fatalf("after the horizon: %+v", ds)
		}
		if span := got[len(got)-1].header.Get("webhook-timestamp"); span == "" || e.clock.Now().Sub(queued) < 24*time.Hour {
			t.Fatalf("retried for %s, want at least 24 h", e.clock.Now().Sub(queued))
		}
		if len(got) < 20 || len(got) > 60 {
			t.Errorf("%d attempts in 24 h: the backoff should reach its one-hour cap", len(got))
		}
		failed, _, err := events.ListDeliveries(context.Background(), db, events.DeliveryFilter{TenantID: "acme", State: events.StateFailed})
		if err != nil || len(failed) != 1 {
			t.Fatalf("failed deliveries = %+v (%v)", failed, err)
		}
		// The clock now stands near real time; the receiver is fixed; redeliver.
		e.clock.Set(time.Now())
		r.setStatus(nil)
		if _, err := events.Redeliver(context.Background(), db, "acme", failed[0].ID, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := events.Redeliver(context.Background(), db, "globex", failed[0].ID, e.clock.Now()); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
			t.Fatalf("another tenant redelivers: %v", err)
		}
		ds = e.drive(e.dispatcher("a"), "acme", 3, nil)
		last := r.requests()[len(r.requests())-1]
		if ds[0].State != events.StateDelivered || last.err != nil || last.header.Get("webhook-id") != got[0].header.Get("webhook-id") || string(last.body) != string(got[0].body) {
			t.Fatalf("redelivered: %+v, verification %v", ds[0], last.err)
		}
	})
}

func TestWebhookSSRFGuard(t *testing.T) {
	storetest.Each(t, []store.Module{events.Module}, func(t *testing.T, db *store.DB) {
		e := newHookEnv(t, db)
		e.guard.AllowPrivate = false
		e.dns.set("public.test", "93.184.216.34")
		e.dns.set("private.test", "10.0.0.5")
		e.dns.set("mixed.test", "93.184.216.34", "192.168.1.1")
		e.dns.set("metadata.test", "169.254.169.254")
		e.dns.set("mapped.test", "::ffff:127.0.0.1")
		for _, c := range []struct{ url, want string }{
			{"http://127.0.0.1:8080/hook", "127.0.0.1 is a loopback"},
			{"http://[::1]/hook", "::1 is a loopback"},
			{"http://private.test/hook", "private.test resolves to 10.0.0.5"},
			{"http://mixed.test/hook", "resolves to 192.168.1.1"},
			{"http://metadata.test/latest", "169.254.169.254"},
			{"http://169.254.169.254/latest", "169.254.169.254"},
			{"http://mapped.test/", "127.0.0.1"},
			{"http://100.64.1.1/", "100.64.1.1"},
			{"ftp://public.test/", "only http and https"},
			{"http://user:s3cret@public.test/", "user name or password"},
			{"http://user:s3cret@public%zz/", "not a URL"},
			{"https://user:s3cret@private.test/", "user name or password"},
			{"public.test/hook", "only http and https"},
			{"http:///nohost", "no host"},
			{"http://nxdomain.test/", "no such host"},
		} {
			_, err := createSub(db, e.hooks, events.NewSubscription{TenantID: "acme", URL: c.url, Events: []string{"fleet.drifted"}})
			if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("subscribe %s: %v, want INVALID_INPUT with %q", c.url, err, c.want)
			}
		}
		// DNS rebinding: public when subscribed, private at delivery. Nothing is dialled.
		sub, err := createSub(db, e.hooks, events.NewSubscription{TenantID: "acme", URL: "https://public.test/hook", Events: []string{"fleet.drifted"}})
		if err != nil {
			t.Fatal(err)
		}
		e.dns.set("public.test", "10.1.2.3")
		e.publish("acme", "fleet.drifted", 1)
		if _, err := e.dispatcher("a").DeliverDue(context.Background()); err != nil {
			t.Fatal(err)
		}
		ds := e.deliveries("acme")
		if len(ds) != 1 || ds[0].SubscriptionID != sub.ID || ds[0].State != events.StatePending || ds[0].Attempts != 1 ||
			!strings.Contains(ds[0].LastError, "public.test resolves to 10.1.2.3") || strings.Contains(ds[0].LastError, "/hook") {
			t.Fatalf("delivery after rebinding = %+v", ds)
		}
	})
}

func TestWebhookRedirectNotFollowed(t *testing.T) {
	storetest.Each(t, []store.Module{events.Module}, func(t *testing.T, db *store.DB) {
		e := newHookEnv(t, db)
		target := newReceiver(t)
		redirector := httptest.NewServer(http.RedirectHandler(target.url("hooks.test"), http.StatusTemporaryRedirect))
		defer redirector.Close()
		u, _ := url.Parse(redirector.URL)
		if _, err := createSub(db, e.hooks, events.NewSubscription{TenantID: "acme", URL: "http://hooks.test:" + u.Port(), Events: []string{"fleet.drifted"}}); err != nil {
			t.Fatal(err)
		}
		e.publish("acme", "fleet.drifted", 1)
		e.dispatcher("a").DeliverDue(context.Background())
		ds := e.deliveries("acme")
		if len(target.requests()) != 0 || ds[0].LastStatus != 307 || !strings.Contains(ds[0].LastError, "redirect") {
			t.Fatalf("a redirect: target got %d, delivery %+v", len(target.requests()), ds[0])
		}
	})
}

// TestWebhookSecretRotation: after a rotation deliveries carry two signatures, so a receiver
// verifies with the old secret or the new one; after the overlap only the new one signs.
func TestWebhookSecretRotation(t *testing.T) {
	storetest.Each(t, []store.Module{events.Module}, func(t *testing.T, db *store.DB) {
		e := newHookEnv(t, db)
		r := newReceiver(t)
		sub := e.subscribe(r, "acme")
		old := sub.Secret
		rotated, err := e.hooks.RotateSecret(context.Background(), db, "acme", sub.ID, time.Hour)
		if err != nil || rotated.Secret == old || !strings.HasPrefix(rotated.Secret, "whsec_") {
			t.Fatalf("rotate: %+v %v", rotated, err)
		}
		e.publish("acme", "fleet.drifted", 1)
		e.drive(e.dispatcher("a"), "acme", 2, nil)
		got := r.requests()[0]
		for _, s := range []string{old, rotated.Secret} {
			wh, _ := standardwebhooks.NewWebhook(s)
			if err := wh.Verify(got.body, got.header); err != nil {
				t.Errorf("during the overlap, a secret does not verify: %v", err)
			}
		}
		e.clock.Add(2 * time.Hour)
		e.publish("acme", "fleet.drifted", 1)
		e.drive(e.dispatcher("a"), "acme", 2, nil)
		got = r.requests()[1]
		if n := len(strings.Fields(got.header.Get("webhook-signature"))); n != 1 {
			t.Errorf("%d signatures after the overlap, want 1", n)
		}
		wh, _ := standardwebhooks.NewWebhook(old)
		if err := wh.VerifyIgnoringTimestamp(got.body, got.header); err == nil {
			t.Error("the old secret still verifies after the overlap")
		}
		subs, err := events.ListSubscriptions(context.Background(), db, "acme")
		if err != nil || len(subs) != 1 || strings.Join(subs[0].Events, ",") != "fleet.drifted" || strings.Contains(fmt.Sprint(subs), "whsec_") {
			t.Fatalf("list = %+v (%v)", subs, err)
		}
		// Overlap 0: at once; the next delivery is signed under the newest secret alone.
		now, err := e.hooks.RotateSecret(context.Background(), db, "acme", sub.ID, 0)
		if err != nil || now.Secret == rotated.Secret {
			t.Fatalf("rotate at once: %+v %v", now, err)
		}
		e.publish("acme", "fleet.drifted", 1)
		e.drive(e.dispatcher("a"), "acme", 3, nil)
		got = r.requests()[2]
		if n := len(strings.Fields(got.header.Get("webhook-signature"))); n != 1 {
			t.Errorf("%d signatures after a rotation at once, want 1", n)
		}
		if wh, _ := standardwebhooks.NewWebhook(now.Secret); wh.VerifyIgnoringTimestamp(got.body, got.header) != nil {
			t.Error("the new secret does not verify after a rotation at once")
		}
		if wh, _ := standardwebhooks.NewWebhook(rotated.Secret); wh.VerifyIgnoringTimestamp(got.body, got.header) == nil {
			t.Error("the replaced secret still verifies after a rotation at once")
		}
	})
}

func TestWebhookSubscriptionRules(t *testing.T) {
	storetest.Each(t, []store.Module{events.Module}, func(t *testing.T, db *store.DB) {
		e := newHookEnv(t, db)
		r := newReceiver(t)
		for _, c := range []struct {
			tenant string
			events []string
			want   string
		}{
			{"acme", []string{"node.down"}, "belong to the root tenant"},
			{"acme", []string{"fleet.nope"}, "unknown event type"},
			{"acme", nil, "events is required"},
			{"root", []string{"node.down"}, "port 70000 is out of range"},
		} {
			url := r.url("hooks.test")
			if strings.HasPrefix(c.want, "port") {
				url = "http://hooks.test:70000/hook"
			}
			_, err := createSub(db, e.hooks, events.NewSubscription{TenantID: c.tenant, URL: url, Events: c.events})
			if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%v: %v, want %q", c.events, err, c.want)
			}
		}
		sub := e.subscribe(r, "root", "node.down", "fleet.drifted", "node.down")
		if strings.Join(sub.Events, ",") != "fleet.drifted,node.down" {
			t.Fatalf("events = %v", sub.Events)
		}
		e.publish("root", "node.down", 2)
		if n := len(e.deliveries("root")); n != 2 {
			t.Fatalf("%d deliveries queued for 2 node.down events", n)
		}
		if _, err := events.DeleteSubscription(context.Background(), db, "acme", sub.ID); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
			t.Fatalf("another tenant deletes: %v", err)
		}
		if _, err := events.DeleteSubscription(context.Background(), db, "root", sub.ID); err != nil {
			t.Fatal(err)
		}
		e.publish("root", "node.down", 1)
		if n := len(e.deliveries("root")); n != 0 {
			t.Fatalf("%d deliveries after the subscription went", n)
		}
	})
}

// TestWebhookOneReplicaPerDelivery: two dispatchers on one database send each delivery once.
func TestWebhookOneReplicaPerDelivery(t *testing.T) {
	storetest.Each(t, []store.Module{events.Module}, func(t *testing.T, db *store.DB) {
		e := newHookEnv(t, db)
		r := newReceiver(t)
		e.subscribe(r, "acme")
		e.publish("acme", "fleet.drifted", 40)
		a, b := e.dispatcher("a"), e.dispatcher("b")
		a.Concurrency, b.Concurrency = 40, 40
		for range 5 {
			var wg sync.WaitGroup
			wg.Go(func() { a.DeliverDue(context.Background()) })
			wg.Go(func() { b.DeliverDue(context.Background()) })
			wg.Wait()
		}
		seen := map[string]int{}
		for _, g := range r.requests() {
			seen[g.header.Get("webhook-id")]++
		}
		if len(seen) != 40 {
			t.Fatalf("%d distinct events delivered, want 40", len(seen))
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("event %s sent %d times", id, n)
			}
		}
	})
}

// TestDeliveryOutcome: where a delivery stands, in plain words (the CLI and the console).
func TestDeliveryOutcome(t *testing.T) {
	for _, c := range []struct {
		d    events.Delivery
		want string
	}{
		{events.Delivery{State: events.StateDelivered, Attempts: 1, LastStatus: 204}, "delivered (HTTP 204)"},
		{events.Delivery{State: events.StatePending}, "waiting for its first attempt"},
		{events.Delivery{State: events.StatePending, Attempts: 2, LastStatus: 503, LastError: "answered 503"}, "retrying: the receiver answered HTTP 503"},
		{events.Delivery{State: events.StatePending, Attempts: 1, LastError: "no answer within the timeout"}, "retrying: no answer within the timeout"},
		{events.Delivery{State: events.StateFailed, Attempts: 1, LastStatus: 410, LastError: "answered 410"}, "gave up after 1 attempt: the receiver answered HTTP 410"},
		{events.Delivery{State: events.StateFailed, Attempts: 31, LastError: "dial tcp 127.0.0.1:1: connect: connection refused"}, "gave up after 31 attempts: dial tcp 127.0.0.1:1: connect: connection refused"},
	} {
		if got := c.d.Outcome(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.d, got, c.want)
		}
	}
}

// TestWebhookWildcards: a subscription to a family's wildcard receives every type of it, one
// delivery per event also beside a subscription to the type itself; a wildcard of no known
// family is refused, and node.* belongs to the root tenant like every node type.
func TestWebhookWildcards(t *testing.T) {
	storetest.Each(t, []store.Module{events.Module}, func(t *testing.T, db *store.DB) {
		e := newHookEnv(t, db)
		r := newReceiver(t)
		for _, c := range []struct {
			tenant string
			events []string
			want   string
		}{
			{"acme", []string{"node.*"}, "belong to the root tenant"},
			{"acme", []string{"frob.*"}, "a family's wildcard (fleet.*, node.*)"},
			{"acme", []string{"*"}, "unknown event type"},
		} {
			_, err := createSub(db, e.hooks, events.NewSubscription{TenantID: c.tenant, URL: r.url("hooks.test"), Events: c.events})
			if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %v: %v, want %q", c.tenant, c.events, err, c.want)
			}
		}
		sub := e.subscribe(r, "root", "node.*", "node.down", "fleet.*")
		if strings.Join(sub.Events, ",") != "fleet.*,node.*,node.down" {
			t.Fatalf("events = %v", sub.Events)
		}
		e.publish("root", "node.down", 1)
		e.publish("root", "node.lost", 1) // a type the subscription does not name
		e.publish("root", "fleet.converged", 1)
		var got []string
		for _, d := range e.deliveries("root") {
			got = append(got, d.EventType)
		}
		if strings.Join(got, ",") != "fleet.converged,node.lost,node.down" { // newest first
			t.Errorf("deliveries %v, want one per event", got)
		}
	})
}

// TestWebhookOrder: with the default concurrency, a receiver that answers in time gets a
// subscription's deliveries in the order of the log.
func TestWebhookOrder(t *testing.T) {
	storetest.Each(t, []store.Module{events.Module}, func(t *testing.T, db *store.DB) {
		e := newHookEnv(t, db)
		r := newReceiver(t)
		e.subscribe(r, "acme")
		for range 5 {
			e.publish("acme", "fleet.drifted", 4)
			e.clock.Add(time.Millisecond)
		}
		d := e.dispatcher("a")
		d.Timeout = 5 * time.Second
		for range 40 {
			if _, err := d.DeliverDue(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		reqs := r.requests()
		if len(reqs) != 20 {
			t.Fatalf("%d requests, want 20", len(reqs))
		}
		last := ""
		for i, q := range reqs {
			id := q.header.Get("webhook-id")
			if id <= last {
				t.Fatalf("request %d: event %s after %s: out of the log's order", i, id, last)
			}
			last = id
		}
	})
}
