package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
)

func TestDecideSpreadsAndReserves(t *testing.T) {
	c := newClock()
	s := newScheduler(t, c, Config{})
	for _, id := range []string{"n1", "n2", "n3"} {
		s.Update(node(c, id, 4000, 16384, 10))
	}
	counts := map[string]int{}
	for i := range 30 {
		d := mustDecide(t, s, req(sbx(i), 100, 256))
		counts[d.NodeID]++
	}
	for id, n := range counts {
		if n != 10 {
			t.Errorf("node %s got %d of 30 sandboxes, want 10 each: %v", id, n, counts)
		}
	}
	// Every microVM slot is reserved now: the next decision is refused with the reason.
	_, err := s.Decide(context.Background(), req("sbx_x", 100, 256))
	if !cubefleet.IsCode(err, cubefleet.CodeResourceExhausted) {
		t.Fatalf("31st decision: %v, want RESOURCE_EXHAUSTED", err)
	}
	if want := "no node can take the sandbox: 3 nodes: 3 microVM limit reached"; err.(*cubefleet.Error).Message != want {
		t.Errorf("message %q, want %q", err.(*cubefleet.Error).Message, want)
	}
}

// TestSelectionDistributions draws many picks among three candidates of fixed scores and
// checks the counts with a chi-square test at a fixed seed: uniform for random, proportional
// to score for the weighted kinds.
func TestSelectionDistributions(t *testing.T) {
	scores := []float64{0.5, 0.3, 0.2}
	const draws = 30000
	for _, kind := range Selections {
		t.Run(kind, func(t *testing.T) {
			c := newClock()
			cfg := Default()
			cfg.LeastSelectName = kind
			s := newScheduler(t, c, cfg)
			for i := range scores {
				s.Update(node(c, fmt.Sprintf("n%d", i), 1000, 1000, 10))
			}
			top := make([]cand, len(scores))
			for i, sc := range scores {
				top[i] = cand{slot: int32(i), score: sc}
			}
			counts := make([]float64, len(scores))
			for range draws {
				counts[s.pick(top)]++
			}
			chi := 0.0
			for i, sc := range scores {
				want := draws / float64(len(scores))
				if kind != SelectRandom {
					want = draws * sc
				}
				chi += (counts[i] - want) * (counts[i] - want) / want
			}
			// df = 2: the 0.999 quantile is 13.82.
			if chi > 13.82 {
				t.Errorf("%s: counts %v for scores %v: chi-square %.2f > 13.82", kind, counts, scores, chi)
			}
			t.Logf("%s: counts %v, chi-square %.3f", kind, counts, chi)
		})
	}
}

// TestConcurrentDecisionsNeverOverbook: 1,000 decisions from many goroutines on 3 small nodes,
// while the nodes keep reporting the sandboxes placed so far, never exceed any node's quota or
// max_mvm_num.
func TestConcurrentDecisionsNeverOverbook(t *testing.T) {
	c := &lockedClock{clock: newClock()}
	s, err := New(Options{Now: c.Now, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	base := newClock()
	nodes := []NodeState{
		node(base, "cpu-bound", 1000, 65536, 100), // 10 × 100 millicores
		node(base, "mem-bound", 64000, 4552, 100), // 16 × 256 MiB after the 10% host reserve (456)
		node(base, "mvm-bound", 64000, 65536, 7),  // 7 microVMs
	}
	for i := range nodes {
		nodes[i].ReadyUntil = base.t.Add(time.Hour)
		nodes[i].MetricsReceivedAt = base.t.Add(time.Hour)
		s.Update(nodes[i])
	}
	var (
		mu      sync.Mutex
		placed  = map[string][]string{}
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		reports sync.WaitGroup
	)
	reports.Add(1)
	go func() { // the nodes report what they run: reservations turn into allocated figures
		defer reports.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, st := range nodes {
				mu.Lock()
				ids := slices.Clone(placed[st.ID])
				mu.Unlock()
				st.AllocatedCPU, st.AllocatedMemMiB, st.MvmNum = int64(len(ids))*100, int64(len(ids))*256, int64(len(ids))
				st.Sandboxes = ids
				s.Update(st)
			}
		}
	}()
	for w := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				id := sbx(w*50 + i)
				d, err := s.Decide(context.Background(), Request{SandboxID: id, Pool: "pool_a", CPU: 100, MemoryMiB: 256})
				if err != nil {
					if !cubefleet.IsCode(err, cubefleet.CodeResourceExhausted) {
						t.Error(err)
					}
					continue
				}
				mu.Lock()
				placed[d.NodeID] = append(placed[d.NodeID], id)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	reports.Wait()
	want := map[string]int{"cpu-bound": 10, "mem-bound": 16, "mvm-bound": 7}
	for id, n := range want {
		if got := len(placed[id]); got != n {
			t.Errorf("node %s took %d sandboxes, want exactly %d (its room)", id, got, n)
		}
	}
}

type lockedClock struct {
	mu sync.Mutex
	*clock
}

func (c *lockedClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.clock.t }

// TestReleaseByID: a report listing one sandbox frees exactly that sandbox's reservation (its
// room moves into the reported figures), and Release frees another by id.
func TestReleaseByID(t *testing.T) {
	c := newClock()
	s := newScheduler(t, c, Config{})
	st := node(c, "n1", 8000, 65536, 10)
	s.Update(st)
	sizes := []Request{req("a", 100, 256), req("b", 200, 512), req("c", 400, 1024)}
	for _, r := range sizes {
		mustDecide(t, s, r)
	}
	room, _ := s.Room("n1")
	if room.Reserved != (Usage{CPU: 700, MemoryMiB: 1792, MvmNum: 3}) || room.Reservations != 3 {
		t.Fatalf("reserved %+v", room)
	}
	st.AllocatedCPU, st.AllocatedMemMiB, st.MvmNum, st.Sandboxes = 200, 512, 1, []string{"b"}
	s.Update(st)
	room, _ = s.Room("n1")
	if room.Reserved != (Usage{CPU: 500, MemoryMiB: 1280, MvmNum: 2}) || room.Reported != (Usage{CPU: 200, MemoryMiB: 512, MvmNum: 1}) {
		t.Fatalf("after the report: %+v", room)
	}
	if room.Remaining.CPU != 8000-700 || room.Remaining.MvmNum != 7 {
		t.Errorf("remaining %+v", room.Remaining)
	}
	if s.Release("b") {
		t.Error("b was released twice")
	}
	if !s.Release("a") {
		t.Error("a had no reservation")
	}
	room, _ = s.Room("n1")
	if room.Reserved != (Usage{CPU: 400, MemoryMiB: 1024, MvmNum: 1}) {
		t.Errorf("after releasing a: %+v", room.Reserved)
	}
	if got := s.Reservations(); len(got) != 1 || got[0].SandboxID != "c" {
		t.Errorf("reservations %+v", got)
	}
}

// TestSuspectBetweenDecisions: a node whose reports stop gets nothing once its health says
// it is no longer Ready, even though nothing told the scheduler.
func TestSuspectBetweenDecisions(t *testing.T) {
	c := newClock()
	s := newScheduler(t, c, Config{})
	s.Update(node(c, "quiet", 64000, 65536, 100))
	s.Update(node(c, "chatty", 64000, 65536, 100))
	got := map[string]int{}
	for i := range 10 {
		got[mustDecide(t, s, req(sbx(i), 100, 256)).NodeID]++
	}
	if got["quiet"] == 0 {
		t.Fatalf("both nodes are Ready, quiet got nothing: %v", got)
	}
	c.Add(16 * time.Second) // past quiet's heartbeat timeout: Suspect
	s.Update(node(c, "chatty", 64000, 65536, 100))
	for i := 10; i < 30; i++ {
		if d := mustDecide(t, s, req(sbx(i), 100, 256)); d.NodeID != "chatty" {
			t.Fatalf("decision %d went to %s, a Suspect node", i, d.NodeID)
		}
	}
	c.Add(16 * time.Second)
	_, err := s.Decide(context.Background(), req("late", 100, 256))
	if e, ok := err.(*cubefleet.Error); !ok || e.Message != "no node can take the sandbox: 2 nodes: 2 not ready" {
		t.Errorf("err %v", err)
	}
}

// TestStaleMetrics: metrics older than two report periods make a node no candidate, even
// while its health is Ready.
func TestStaleMetrics(t *testing.T) {
	c := newClock()
	s := newScheduler(t, c, Config{})
	st := node(c, "n1", 64000, 65536, 100)
	st.MetricsReceivedAt = c.t.Add(-2500 * time.Millisecond)
	s.Update(st)
	_, err := s.Decide(context.Background(), req("x", 100, 256))
	if e, ok := err.(*cubefleet.Error); !ok || e.Message != "no node can take the sandbox: 1 node: 1 stale metrics" {
		t.Errorf("err %v", err)
	}
}

// TestRestartAndRestore: after a restart, a node known only from the database is never chosen
// until it reports; reservations restored from the database take their room at once, or when
// their node first appears.
func TestRestartAndRestore(t *testing.T) {
	c := newClock()
	s := newScheduler(t, c, Config{})
	s.Restore([]Reservation{{SandboxID: "old1", NodeID: "n1", Pool: "pool_a", CPU: 500, MemoryMiB: 1024}})
	st := node(c, "n1", 1000, 65536, 100)
	st.ReportedSinceStart = false
	s.Update(st)
	_, err := s.Decide(context.Background(), req("x", 100, 256))
	if e, ok := err.(*cubefleet.Error); !ok || e.Message != "no node can take the sandbox: 1 node: 1 no report since restart" {
		t.Fatalf("err %v", err)
	}
	st.ReportedSinceStart = true
	s.Update(st)
	mustDecide(t, s, req("x", 500, 256))
	if _, err := s.Decide(context.Background(), req("y", 100, 256)); !cubefleet.IsCode(err, cubefleet.CodeResourceExhausted) {
		t.Errorf("the restored reservation's room was given away: %v", err)
	}
	room, _ := s.Room("n1")
	if room.Reserved.CPU != 1000 || room.Reservations != 2 {
		t.Errorf("room %+v", room)
	}
}

func TestCandidates(t *testing.T) {
	c := newClock()
	s := newScheduler(t, c, Config{})
	mk := func(id string, f func(*NodeState)) {
		st := node(c, id, 64000, 65536, 100)
		f(&st)
		s.Update(st)
	}
	mk("cubelet", func(st *NodeState) { st.Cubefleet = false })
	mk("cordoned", func(st *NodeState) { st.Cordoned = true })
	mk("draining", func(st *NodeState) { st.Draining = true })
	mk("notready", func(st *NodeState) { st.Ready = false })
	mk("other-pool", func(st *NodeState) { st.Pool = "pool_b" })
	mk("full-disk", func(st *NodeState) { st.SysDiskUsage = 95 })
	mk("hot", func(st *NodeState) { st.CPUUtil = 85 })
	mk("no-tpl", func(st *NodeState) {})
	mk("good", func(st *NodeState) { st.Templates = []string{"tpl_x"}; st.Labels = map[string]string{"zone": "a"} })
	r := req("a", 100, 256)
	r.Template = "tpl_x"
	for i := range 5 {
		r.SandboxID = sbx(i)
		if d := mustDecide(t, s, r); d.NodeID != "good" {
			t.Fatalf("placed on %s", d.NodeID)
		}
	}
	r.SandboxID, r.Exclude = "ex", []string{"good"}
	_, err := s.Decide(context.Background(), r)
	want := "no node can take the sandbox: 8 nodes: 1 registry-only (stock Cubelet), 1 not ready, 1 cordoned, 1 draining, 1 excluded by the request, 1 cpu utilisation too high, 1 disk usage too high, 1 template not local"
	if e, ok := err.(*cubefleet.Error); !ok || e.Message != want {
		t.Errorf("err %v\nwant %s", err, want)
	} else if e.Details["reasons"].(map[string]int)["cordoned"] != 1 || e.Details["nodes"] != 8 {
		t.Errorf("details %v", e.Details)
	}
	r.Exclude, r.NodeSelector = nil, map[string]string{"zone": "b"}
	if _, err := s.Decide(context.Background(), r); err == nil || !strings.Contains(err.Error(), "2 node selector mismatch") {
		t.Errorf("selector: %v", err)
	}
	r.NodeSelector = map[string]string{"zone": "a"}
	mustDecide(t, s, r)
}

func TestDecideIdempotentAndInvalid(t *testing.T) {
	c := newClock()
	s := newScheduler(t, c, Config{})
	s.Update(node(c, "n1", 64000, 65536, 100))
	s.Update(node(c, "n2", 64000, 65536, 100))
	d1 := mustDecide(t, s, req("same", 100, 256))
	d2 := mustDecide(t, s, req("same", 100, 256))
	if d1.NodeID != d2.NodeID || len(s.Reservations()) != 1 {
		t.Errorf("a retried decision moved or reserved twice: %v %v %v", d1, d2, s.Reservations())
	}
	if _, err := s.Decide(context.Background(), Request{SandboxID: "x", Pool: "pool_nowhere", CPU: 1, MemoryMiB: 1}); err == nil || !strings.Contains(err.Error(), "pool pool_nowhere has no nodes") {
		t.Errorf("err %v", err)
	}
}

// TestRequestRules: every field that is wrong is named, each once.
func TestRequestRules(t *testing.T) {
	ok := Request{SandboxID: "sbx-1", Pool: "pool_a", CPU: 100, MemoryMiB: 256}
	with := func(f func(r *Request)) Request { r := ok; f(&r); return r }
	for _, c := range []struct {
		name string
		req  Request
		want []string // "path: part of the message"
	}{
		{"valid", ok, nil},
		{"no disk asked", with(func(r *Request) { r.DiskMiB = 0 }), nil},
		{"nothing", Request{}, []string{"sandboxId: required", "cpu: must be 1 to 2147483647 millicores (got 0)", "memoryMiB: must be 1 to", "pool: required"}},
		{"cpu 0", with(func(r *Request) { r.CPU = 0 }), []string{"cpu: must be 1 to 2147483647 millicores (got 0)"}},
		{"memory 0", with(func(r *Request) { r.MemoryMiB = 0 }), []string{"memoryMiB: must be 1 to 2147483647 MiB (got 0)"}},
		{"negative", with(func(r *Request) { r.CPU, r.MemoryMiB, r.DiskMiB = -1, -1, -1 }), []string{"cpu: (got -1)", "memoryMiB: (got -1)", "diskMiB: must be 0 to"}},
		{"too large", with(func(r *Request) { r.CPU = math.MaxInt32 + 1 }), []string{"cpu: (got 2147483648)"}},
		{"sandbox id with a slash", with(func(r *Request) { r.SandboxID = "../etc" }), []string{"sandboxId: must not contain '..'"}},
		{"sandbox id with a bidi override", with(func(r *Request) { r.SandboxID = "a\u202eb" }), []string{"sandboxId: holds the character U+202E"}},
		{"sandbox id too long", with(func(r *Request) { r.SandboxID = strings.Repeat("x", 129) }), []string{"sandboxId: is 129 characters long"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.req.validate()
			var got []cubefleet.FieldError
			if err != nil {
				got = err.(*cubefleet.Error).Details["errors"].([]cubefleet.FieldError)
			}
			if len(got) != len(c.want) {
				t.Fatalf("%v, want %d problems %v", err, len(c.want), c.want)
			}
			for i, w := range c.want {
				path, part, _ := strings.Cut(w, ": ")
				if got[i].Path != path || !strings.Contains(got[i].Message, strings.TrimPrefix(part, ": ")) {
					t.Errorf("problem %d: %s: %s, want %s", i, got[i].Path, got[i].Message, w)
				}
			}
		})
	}
}

// TestRetryHintOnlyWhenItHelps: RESOURCE_EXHAUSTED carries retryAfterSeconds only when some
// node was refused for a reason that passes by itself (room, readiness, creates in flight),
// never when every node waits for an operator or the request itself.
func TestRetryHintOnlyWhenItHelps(t *testing.T) {
	for _, c := range []struct {
		name  string
		node  func(st *NodeState)
		req   func(r *Request)
		retry bool
	}{
		{"insufficient cpu", nil, func(r *Request) { r.CPU = 8000 }, true},
		{"not ready", func(st *NodeState) { st.Ready = false }, nil, true},
		{"no report since restart", func(st *NodeState) { st.ReportedSinceStart = false }, nil, true},
		{"cordoned", func(st *NodeState) { st.Cordoned = true }, nil, false},
		{"draining", func(st *NodeState) { st.Draining = true }, nil, false},
		{"stock Cubelet", func(st *NodeState) { st.Cubefleet = false }, nil, false},
		{"excluded", nil, func(r *Request) { r.Exclude = []string{"n1"} }, false},
		{"node selector", nil, func(r *Request) { r.NodeSelector = map[string]string{"gpu": "l40s"} }, false},
		{"empty pool", nil, func(r *Request) { r.Pool = "pool_empty" }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := newClock()
			s := newScheduler(t, clk, Config{})
			st := node(clk, "n1", 4000, 16384, 10)
			if c.node != nil {
				c.node(&st)
			}
			s.Update(st)
			r := req("sbx_hint", 100, 256)
			if c.req != nil {
				c.req(&r)
			}
			_, err := s.Decide(context.Background(), r)
			var ce *cubefleet.Error
			if !errors.As(err, &ce) || ce.Code != cubefleet.CodeResourceExhausted {
				t.Fatalf("%v, want RESOURCE_EXHAUSTED", err)
			}
			if _, hint := ce.Details["retryAfterSeconds"]; hint != c.retry {
				t.Errorf("retry hint %v, want %v: %s", hint, c.retry, ce.Message)
			}
		})
	}
}

// TestDecideSandboxIDTaken: a request under a sandbox id that holds a reservation is CONFLICT
// unless it is a retry of the request that made it; the reservation stays as it was.
func TestDecideSandboxIDTaken(t *testing.T) {
	c := newClock()
	s := newScheduler(t, c, Config{})
	s.Update(node(c, "n1", 64000, 65536, 100))
	s.Update(node(c, "n2", 64000, 65536, 100))
	first := req("taken", 100, 256)
	d := mustDecide(t, s, first)
	other := func(f func(r *Request)) Request { r := first; f(&r); return r }
	for name, r := range map[string]Request{
		"more cpu":          other(func(r *Request) { r.CPU = 200 }),
		"more memory":       other(func(r *Request) { r.MemoryMiB = 512 }),
		"disk":              other(func(r *Request) { r.DiskMiB = 1024 }),
		"another pool":      other(func(r *Request) { r.Pool = "pool_other" }),
		"its node excluded": other(func(r *Request) { r.Exclude = []string{d.NodeID} }),
	} {
		_, err := s.Decide(context.Background(), r)
		if !cubefleet.IsCode(err, cubefleet.CodeConflict) || !strings.Contains(err.Error(), "scheduler.release") {
			t.Errorf("%s: %v, want CONFLICT", name, err)
		}
	}
	if rs := s.Reservations(); len(rs) != 1 || rs[0] != d.Reservation {
		t.Errorf("the reservation changed: %+v, want %+v", rs, d.Reservation)
	}
	if again := mustDecide(t, s, other(func(r *Request) { r.Template = "tpl-any" })); again != d || d.Score <= 0 {
		t.Errorf("a retry answered %+v, want the first decision %+v, score included", again, d)
	}
}

func TestExpireAndRemove(t *testing.T) {
	c := newClock()
	s := newScheduler(t, c, Config{})
	s.Update(node(c, "n1", 64000, 65536, 100))
	mustDecide(t, s, req("a", 100, 256))
	c.Add(5 * time.Minute)
	s.Update(node(c, "n1", 64000, 65536, 100))
	mustDecide(t, s, req("b", 100, 256))
	c.Add(6 * time.Minute)
	if n := s.Expire(); n != 1 || len(s.Reservations()) != 1 {
		t.Errorf("expired %d, left %v", n, s.Reservations())
	}
	s.Remove("n1")
	if len(s.Reservations()) != 0 {
		t.Errorf("a removed node's reservations stay: %v", s.Reservations())
	}
	if _, ok := s.Room("n1"); ok {
		t.Error("removed node still known")
	}
}

// TestFileWithoutScoreSpreads: the shipped configuration (no score block, priority_select_num
// 1), where CubeMaster places every sandbox on the first node, spreads.
func TestFileWithoutScoreSpreads(t *testing.T) {
	cfg, _, err := LoadFile("testdata/shipped.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := newClock()
	s := newScheduler(t, c, cfg)
	for _, id := range []string{"n1", "n2", "n3"} {
		s.Update(node(c, id, 64000, 65536, 100))
	}
	got := map[string]int{}
	for i := range 30 {
		got[mustDecide(t, s, req(sbx(i), 100, 256)).NodeID]++
	}
	if got["n1"] != 10 || got["n2"] != 10 || got["n3"] != 10 {
		t.Errorf("placements %v, want 10 each", got)
	}
}

func TestSetConfigKeepsReservations(t *testing.T) {
	c := newClock()
	s := newScheduler(t, c, Config{})
	s.Update(node(c, "n1", 1000, 65536, 100))
	mustDecide(t, s, req("a", 600, 256))
	if err := s.SetConfig(Config{Profile: ProfileBinpackUtilization}.filled()); err != nil {
		t.Fatal(err)
	}
	if s.Config().Profile != ProfileBinpackUtilization {
		t.Error("config not replaced")
	}
	if _, err := s.Decide(context.Background(), req("b", 600, 256)); !cubefleet.IsCode(err, cubefleet.CodeResourceExhausted) {
		t.Errorf("the reservation was lost in the reload: %v", err)
	}
	if err := s.SetConfig(Config{Profile: "nope"}); err == nil {
		t.Error("an invalid config was taken")
	}
}

// TestRoomHostReserve: Room says how much memory the mem filter keeps free for the host (what
// Remaining leaves out): node_max_mem_reserved_in_mb, a tenth of a node smaller than it, none
// with the mem filter off.
func TestRoomHostReserve(t *testing.T) {
	for _, c := range []struct {
		name         string
		cfg          Config
		memMiB, want int64
	}{
		{"default reserve", Config{}, 65536, DefaultNodeMaxMemReserved},
		{"a node smaller than the reserve", Config{}, 8192, 820},
		{"configured", Config{NodeMaxMemReservedInMB: 2048}, 65536, 2048},
		{"mem filter off", Config{Filter: FilterConfig{EnableFilters: []string{FilterCPU}}}, 65536, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := newClock()
			cfg := c.cfg
			cfg.Profile = ProfileBalancedSpread
			s := newScheduler(t, clk, cfg.filled())
			s.Update(node(clk, "n1", 8000, c.memMiB, 10))
			room, _ := s.Room("n1")
			if room.MemReserveMiB != c.want || room.Remaining.MemoryMiB != c.memMiB-c.want {
				t.Errorf("memory reserve %d MiB, remaining %d MiB; want %d and %d", room.MemReserveMiB, room.Remaining.MemoryMiB, c.want, c.memMiB-c.want)
			}
		})
	}
}
