package lane

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/scheduler"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var modules = []store.Module{store.LeaseModule, Module}

// nodeState is a Ready node of pool_a with room for cpu millicores and mvm microVMs.
func nodeState(id string, cpu, mvm int64) scheduler.NodeState {
	now := time.Now()
	return scheduler.NodeState{
		ID: id, Pool: "pool_a", Cubefleet: true, ReportedSinceStart: true, Ready: true,
		ReadyUntil: now.Add(time.Hour), QuotaCPU: cpu, QuotaMemMiB: 1 << 20, MaxMvmNum: mvm,
		HasMetrics: true, MetricsReceivedAt: now.Add(time.Hour), SandboxesReported: true,
	}
}

func newLane(t *testing.T, db *store.DB, name string) *Lane {
	t.Helper()
	l, err := New(Config{DB: db, Holder: name, LeaseTTL: 1500 * time.Millisecond, ForwardTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"n1", "n2"} {
		l.Scheduler().Update(nodeState(id, 1000, 100))
	}
	return l
}

func run(t *testing.T, l *Lane) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return func() { cancel(); <-done }
}

func rows(t *testing.T, db *store.DB) map[string]string {
	t.Helper()
	rs, err := db.QueryContext(context.Background(), `SELECT sandbox_id, node_id FROM scheduler_reservations`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	out := map[string]string{}
	for rs.Next() {
		var id, node string
		rs.Scan(&id, &node)
		out[id] = node
	}
	return out
}

func place(t *testing.T, l *Lane, id string, cpu int64) (scheduler.Decision, error) {
	t.Helper()
	return l.Place(context.Background(), scheduler.Request{SandboxID: id, Pool: "pool_a", CPU: cpu, MemoryMiB: 1})
}

// TestReservationsAreDurable: a placement answers once its reservation is written; a release
// and a report listing the sandbox remove the row.
func TestReservationsAreDurable(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		l := newLane(t, db, "a")
		run(t, l)
		testkit.WaitFor(t, 5*time.Second, "the lease", l.Holding)
		d1, err := place(t, l, "s1", 100)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := place(t, l, "s2", 100); err != nil {
			t.Fatal(err)
		}
		if got := rows(t, db); got["s1"] != d1.NodeID || len(got) != 2 {
			t.Fatalf("rows %v", got)
		}
		// A retry gets the decision as it was made, score included, here and from the rows a
		// replica taking over reads back.
		if again, err := place(t, l, "s1", 100); err != nil || again != d1 || d1.Score <= 0 {
			t.Fatalf("retry: %+v %v, want %+v", again, err, d1)
		}
		back, err := l.load(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range back {
			if r.SandboxID == "s1" && r.Score != d1.Score {
				t.Errorf("the row of s1 keeps score %g, want %g", r.Score, d1.Score)
			}
		}
		if ok, err := l.Release(context.Background(), "s2"); !ok || err != nil {
			t.Fatalf("release: %v %v", ok, err)
		}
		st := nodeState(d1.NodeID, 1000, 100)
		st.AllocatedCPU, st.MvmNum, st.Sandboxes = 100, 1, []string{"s1"}
		l.Scheduler().Update(st)
		testkit.WaitFor(t, 5*time.Second, "the rows to go", func() bool { return len(rows(t, db)) == 0 })
	})
}

// TestForwardAndFailover: two replicas on one PostgreSQL. The follower's placements go through
// the holder; when the holder dies (its lease runs out, nothing handed over), the other takes
// over, rebuilds every reservation and never overbooks a node.
func TestForwardAndFailover(t *testing.T) {
	db := storetest.Postgres(t, modules...)
	a, b := newLane(t, db, "replica-a"), newLane(t, db, "replica-b")
	// a takes the lease by hand and renews it (however long the placements below take: under
	// the race detector they may take longer than the lease), then "dies": nothing renews it
	// any more and nothing retires it.
	actx, acancel := context.WithCancel(context.Background())
	var awg sync.WaitGroup
	awg.Add(3)
	go func() { defer awg.Done(); a.runJournal(actx) }()
	go func() { defer awg.Done(); a.serveForwarded(actx) }()
	a.lease.Try(actx)
	if !a.Holding() {
		t.Fatal("a did not take the lease")
	}
	go func() {
		defer awg.Done()
		tick := time.NewTicker(500 * time.Millisecond) // a third of newLane's lease
		defer tick.Stop()
		for {
			select {
			case <-actx.Done():
				return
			case <-tick.C:
				a.lease.Try(actx)
			}
		}
	}()
	run(t, b)
	// 2 nodes × 1000 millicores: 20 sandboxes of 100 fit; a decides 12 of them, 6 forwarded by b.
	placed := map[string]string{}
	for i := range 12 {
		l := a
		if i%2 == 1 {
			l = b
		}
		d, err := place(t, l, fmt.Sprintf("s%02d", i), 100)
		if err != nil {
			t.Fatalf("s%02d through %s: %v", i, l.holder, err)
		}
		placed[d.Reservation.SandboxID] = d.NodeID
	}
	if b.Holding() {
		t.Fatal("b took the lease while a held it")
	}
	acancel()
	awg.Wait()
	testkit.WaitFor(t, 10*time.Second, "b to take the lease over", b.Holding)
	if got := len(b.Scheduler().Reservations()); got != 12 {
		t.Fatalf("b rebuilt %d reservations, want 12", got)
	}
	for i := 12; i < 20; i++ {
		if _, err := place(t, b, fmt.Sprintf("s%02d", i), 100); err != nil {
			t.Fatalf("s%02d after the failover: %v", i, err)
		}
	}
	if _, err := place(t, b, "one-too-many", 100); !cubefleet.IsCode(err, cubefleet.CodeResourceExhausted) {
		t.Fatalf("the 21st sandbox: %v, want RESOURCE_EXHAUSTED (the failover overbooked)", err)
	}
	if got := rows(t, db); len(got) != 20 {
		t.Errorf("%d rows, want 20", len(got))
	}
}

// TestGracefulHandover: a replica that stops writes what it decided and gives the lease up, so
// the other takes over at once.
func TestGracefulHandover(t *testing.T) {
	db := storetest.Postgres(t, modules...)
	a, b := newLane(t, db, "replica-a"), newLane(t, db, "replica-b")
	stopA := run(t, a)
	testkit.WaitFor(t, 5*time.Second, "a to lead", a.Holding)
	run(t, b)
	for i := range 5 {
		if _, err := place(t, b, fmt.Sprintf("s%d", i), 100); err != nil {
			t.Fatal(err)
		}
	}
	stopA()
	testkit.WaitFor(t, 5*time.Second, "b to lead", b.Holding)
	if got := len(b.Scheduler().Reservations()); got != 5 {
		t.Errorf("b holds %d reservations, want 5", got)
	}
	if ok, err := b.Release(context.Background(), "s3"); !ok || err != nil {
		t.Errorf("release after the handover: %v %v", ok, err)
	}
}

// TestNoHolder: without a holder a forwarded placement gives up at the timeout.
func TestNoHolder(t *testing.T) {
	db := storetest.SQLite(t, modules...)
	l, err := New(Config{DB: db, Holder: "lonely", ForwardTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := place(t, l, "s", 1); err == nil || cubefleet.IsCode(err, cubefleet.CodeResourceExhausted) {
		t.Errorf("err %v", err)
	}
}
