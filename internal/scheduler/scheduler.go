package scheduler

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// DefaultReservationTTL is how long a reservation waits for its sandbox to be listed by the
// node (or released) before it expires: longer than any create (upstream's create timeout is
// 300 s in the shipped configuration).
const DefaultReservationTTL = 10 * time.Minute

// DefaultRetryAfter is the retry hint of a RESOURCE_EXHAUSTED decision: about one report period
// of the nodes, after which room freed by finished sandboxes is known.
const DefaultRetryAfter = 2 * time.Second

// Options configures a Scheduler. Every field has a usable zero value.
type Options struct {
	// Config is the scheduler configuration; the zero Config means Default().
	Config Config
	// ConfigFile is the file Config was loaded from ("" for the built-in defaults), for
	// [Scheduler.ConfigSource].
	ConfigFile string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Seed seeds the random picks; 0 means a random seed. simulate passes its --seed.
	Seed uint64
	// ReservationTTL bounds a reservation's life; 0 means DefaultReservationTTL.
	ReservationTTL time.Duration
	// Metrics receives the decision metrics; nil means none.
	Metrics *Metrics
	// Journal is told of every reservation made and released, so it can persist them; nil
	// means reservations live only in memory.
	Journal Journal
	// MaxPerNode caps every node's microVM limit (max_mvm_num after the reserve percent): a
	// node then runs at most this many sandboxes at once, reservations included. 0 means no
	// cap beyond the node's own. A static membership sets it to its slots per Cube.
	MaxPerNode int64
}

// Journal persists reservations so that another replica taking over the placement lane can
// rebuild them ([Scheduler.Restore]). Its methods are called with the scheduler's lock held,
// in decision order: they must not block (queue the write and return).
type Journal interface {
	Reserved(r Reservation)
	Released(sandboxID string)
}

// Request is one sandbox to place. CPU is in millicores, MemoryMiB and DiskMiB in MiB.
type Request struct {
	// SandboxID names the sandbox; its reservation is released by this id. A second request
	// with an id that holds a reservation returns that decision again.
	SandboxID string `json:"sandboxId"`
	// Pool is the pool id of the sandbox's template; only its nodes are considered.
	Pool string `json:"pool"`
	// PoolName is the pool's fleet name ("" for none), set by the API for messages: a
	// RESOURCE_EXHAUSTED error names the pool by it.
	PoolName string `json:"-"`
	// Template is the template id, for template locality ("" for none).
	Template     string            `json:"template,omitempty"`
	CPU          int64             `json:"cpu"`
	MemoryMiB    int64             `json:"memoryMiB"`
	DiskMiB      int64             `json:"diskMiB,omitempty"`
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Exclude lists node ids not to choose (a node that already failed this create).
	Exclude []string `json:"exclude,omitempty"`
}

// Reservation is the room held on a node for a sandbox placed there and not yet listed in the
// node's report: CPU in millicores, memory and disk in MiB, and one microVM slot.
type Reservation struct {
	SandboxID string    `json:"sandboxId"`
	NodeID    string    `json:"nodeId"`
	Pool      string    `json:"pool"`
	CPU       int64     `json:"cpu"`
	MemoryMiB int64     `json:"memoryMiB"`
	DiskMiB   int64     `json:"diskMiB"`
	At        time.Time `json:"-"`
	// Score is the decision's score, kept so that a retry answered from the reservation
	// returns the decision as it was made.
	Score float64 `json:"-"`
}

// Decision is where a sandbox goes: the chosen node, its score in [0,1], and the reservation
// made for it. A retried request answered from its reservation gets the same decision, score
// included.
type Decision struct {
	NodeID      string      `json:"nodeId"`
	Score       float64     `json:"score"`
	Reservation Reservation `json:"reservation"`
}

// Room is what a node has and holds, for `nodes get`: reported use, reserved use and what is
// left (CPU in millicores, memory and disk in MiB; Disk fields 0 when the node reports no disk
// room), with the number of reservations outstanding and the memory the mem filter keeps free
// for the host, which Remaining already leaves out.
type Room struct {
	Reported     Usage `json:"reported"`
	Reserved     Usage `json:"reserved"`
	Remaining    Usage `json:"remaining"`
	Reservations int   `json:"reservations"`
	// MemReserveMiB is the mem filter's host reserve on this node (MiB): node_max_mem_reserved_in_mb,
	// or a tenth of the node's memory when that is not smaller than all of it; 0 when the mem
	// filter is off.
	MemReserveMiB int64 `json:"memReserveMiB"`
}

// Usage is an amount of each resource.
type Usage struct {
	CPU       int64 `json:"cpu"`
	MemoryMiB int64 `json:"memoryMiB"`
	DiskMiB   int64 `json:"diskMiB"`
	MvmNum    int64 `json:"mvmNum"`
}

// rec is the compact per-node record a decision scans: everything the common path reads, in
// 32 bytes (two nodes per cache line). It is recomputed (refresh) whenever the node, its
// reservations or the configuration change. A node that cannot be a candidate at all (not
// Ready, cordoned, ...) has until = MinInt64, so one comparison covers every such reason.
type rec struct {
	until int64   // Unix ms: a candidate while now <= until (Ready and metrics fresh)
	cpu   int32   // millicores left: quota − allocated − reserved (clamped to int32)
	mem   int32   // MiB left, less the host reserve when the mem filter is on
	disk  int32   // MiB left; MaxInt32 when the node reports no disk room
	slots int32   // min(microVM slots left, creates the node may still start)
	base  float64 // the score of the request-independent factors
}

// clamp32 bounds v to the int32 range.
func clamp32(v int64) int32 {
	return int32(max(min(v, math.MaxInt32), math.MinInt32))
}

// nodeInfo is the rest of a node's record, read off the common path.
type nodeInfo struct {
	st          NodeState // Templates and Sandboxes nil: the scheduler keeps its own copies
	tids        []uint32  // interned template ids, sorted
	mvmLimit    int64
	createLimit int64
	memTotal    int64
	window      time.Duration // metric freshness: min(metric_update_timeout, 2 report periods)
	resCPU      int64
	resMem      int64
	resDisk     int64
	resMvm      int64
	inflight    int
	block       reason  // why the node is no candidate whatever the request; fits when none
	roomCPU     int64   // millicores left
	roomMem     int64   // MiB left (less the host reserve with the mem filter)
	roomDisk    int64   // MiB left; MaxInt64 when the node reports no disk room
	roomMvm     int64   // microVM slots left
	roomLive    int64   // creates the node may still start (MaxInt64 without realtime_create_num)
	sw          float64 // smooth weighted round robin state
	live        bool
	pool        *pool // the pool the node is in
	pos         int   // its index in pool.slots
}

// pool is the nodes of one pool: their slots in scan order, and the index over them (one
// block summary per blockSize slots).
type pool struct {
	slots  []int32
	blocks []block
	next   int // pre_select_num's rotating start
}

type held struct {
	Reservation
	slot int32 // -1 while the node is unknown (restored before it reported)
}

// Scheduler decides where sandboxes go and holds their reservations. It is safe for concurrent
// use: decisions, releases and node updates are serialised by one lock, which is what makes a
// decision and its reservation atomic.
type Scheduler struct {
	mu      sync.Mutex
	plan    plan
	now     func() time.Time
	rng     *rand.Rand
	ttl     time.Duration
	metrics *Metrics
	journal Journal
	perNode int64 // Options.MaxPerNode

	recs  []rec
	info  []nodeInfo
	free  []int32
	byID  map[string]int32
	pools map[string]*pool

	tplIDs   map[string]uint32
	tplNodes [][]uint64 // by interned template id: bitset over slots of the nodes holding it

	resv           map[string]*held
	maxCreateLimit int64
	source         ConfigSource

	rrwIndex  int
	rrwWeight int64
	fullScan  bool // tests: scan every node without the index
	top       []cand
	excl      []int32
}

// New returns a Scheduler with opts. A Config that is not valid is an error (*ConfigError).
func New(opts Options) (*Scheduler, error) {
	cfg := opts.Config
	if cfg.Profile == "" {
		cfg = Default()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{
		plan:    compile(cfg),
		now:     opts.Now,
		ttl:     opts.ReservationTTL,
		metrics: opts.Metrics,
		journal: opts.Journal,
		perNode: opts.MaxPerNode,
		byID:    map[string]int32{},
		pools:   map[string]*pool{},
		tplIDs:  map[string]uint32{},
		resv:    map[string]*held{},
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.source = ConfigSource{File: opts.ConfigFile, LoadedAt: s.now()}
	if s.ttl <= 0 {
		s.ttl = DefaultReservationTTL
	}
	seed := opts.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	s.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return s, nil
}

// ConfigSource says where the configuration in force came from: File ("" for the built-in
// defaults) and when it was loaded (LoadedAt); when the last reload of the file failed
// (SIGHUP), ReloadFailedAt and ReloadError (every problem) say when and why, until a reload
// succeeds.
type ConfigSource struct {
	File           string    `json:"file,omitempty"`
	LoadedAt       time.Time `json:"loadedAt"`
	ReloadFailedAt time.Time `json:"reloadFailedAt,omitzero"`
	ReloadError    string    `json:"reloadError,omitempty"`
}

// ConfigSource returns where the configuration in force came from and how its last reload went.
func (s *Scheduler) ConfigSource() ConfigSource {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.source
}

// Config returns the configuration in force.
func (s *Scheduler) Config() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.plan.cfg
}

// SetConfig replaces the configuration (a reload): every node is re-evaluated under it, and
// the reservations are kept. An invalid cfg is an error and changes nothing.
func (s *Scheduler) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plan = compile(cfg)
	s.rrwIndex, s.rrwWeight = 0, 0
	for slot := range s.info {
		if s.info[slot].live {
			s.info[slot].sw = 0
			s.refresh(int32(slot))
		}
	}
	return nil
}

// Update applies a node's new state (a report, a cordon, a pool change): the reservations of
// the sandboxes it lists are released (its allocated figures now hold them), and its record is
// recomputed.
func (s *Scheduler) Update(st NodeState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.byID[st.ID]
	if !ok {
		slot = s.alloc(st.ID)
	}
	in := &s.info[slot]
	if !ok || in.st.Pool != st.Pool {
		if ok {
			s.leavePool(in.st.Pool, slot)
		}
		p := s.pools[st.Pool]
		if p == nil {
			p = &pool{}
			s.pools[st.Pool] = p
		}
		s.join(p, slot)
	}
	s.setTemplates(slot, st.Templates)
	released := 0
	if st.SandboxesReported && in.inflight > 0 {
		for _, id := range st.Sandboxes {
			if h, ok := s.resv[id]; ok {
				s.drop(h)
				released++
			}
		}
	}
	if st.Labels != nil {
		st.Labels = maps.Clone(st.Labels)
	}
	st.Templates, st.Sandboxes = nil, nil
	in.st = st
	if !ok {
		s.attachRestored(slot)
	}
	s.refreshLimits(slot)
	s.refresh(slot)
	if released > 0 {
		s.metrics.release("reported", released, len(s.resv))
	}
}

// Remove forgets a node (deleted from the registry) and drops its reservations.
func (s *Scheduler) Remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.byID[id]
	if !ok {
		return
	}
	n := 0
	for _, h := range s.resv {
		if h.slot == slot {
			s.drop(h)
			n++
		}
	}
	s.setTemplates(slot, nil)
	s.leavePool(s.info[slot].st.Pool, slot)
	delete(s.byID, id)
	s.info[slot] = nodeInfo{}
	s.recs[slot] = rec{until: math.MinInt64}
	s.free = append(s.free, slot)
	s.recomputeMaxCreateLimit()
	s.metrics.release("removed", n, len(s.resv))
}

func (s *Scheduler) alloc(id string) int32 {
	var slot int32
	if n := len(s.free); n > 0 {
		slot, s.free = s.free[n-1], s.free[:n-1]
	} else {
		slot = int32(len(s.recs))
		s.recs = append(s.recs, rec{})
		s.info = append(s.info, nodeInfo{})
	}
	s.byID[id] = slot
	s.info[slot] = nodeInfo{live: true}
	return slot
}

func (s *Scheduler) leavePool(name string, slot int32) {
	p := s.pools[name]
	if p == nil {
		return
	}
	s.leave(p, slot)
	if len(p.slots) == 0 {
		delete(s.pools, name)
	}
}

// setTemplates records the templates a node holds in the per-template bitsets.
func (s *Scheduler) setTemplates(slot int32, templates []string) {
	in := &s.info[slot]
	tids := make([]uint32, 0, len(templates))
	for _, t := range templates {
		id, ok := s.tplIDs[t]
		if !ok {
			id = uint32(len(s.tplNodes))
			s.tplIDs[t] = id
			s.tplNodes = append(s.tplNodes, nil)
		}
		tids = append(tids, id)
	}
	slices.Sort(tids)
	tids = slices.Compact(tids)
	if slices.Equal(tids, in.tids) {
		return
	}
	word, bit := slot/64, uint64(1)<<(slot%64)
	for _, id := range in.tids {
		if b := s.tplNodes[id]; int(word) < len(b) {
			b[word] &^= bit
		}
	}
	for _, id := range tids {
		b := s.tplNodes[id]
		if int(word) >= len(b) {
			b = append(b, make([]uint64, int(word)+1-len(b))...)
			s.tplNodes[id] = b
		}
		b[word] |= bit
	}
	in.tids = tids
}

// HoldsTemplate reports whether some node known to the scheduler holds template (lists it in
// its local_templates).
func (s *Scheduler) HoldsTemplate(template string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.tplIDs[template]
	if !ok {
		return false
	}
	for _, w := range s.tplNodes[id] {
		if w != 0 {
			return true
		}
	}
	return false
}

// holds reports whether the node in slot holds the template whose bitset is bits.
func holds(bits []uint64, slot int32) bool {
	w := int(slot / 64)
	return w < len(bits) && bits[w]&(1<<(slot%64)) != 0
}

// refreshLimits recomputes a node's limits from its state and the configuration.
func (s *Scheduler) refreshLimits(slot int32) {
	in := &s.info[slot]
	c := &s.plan.cfg
	limit := in.st.MaxMvmNum
	if limit <= 0 {
		limit = c.NodeMaxMvmNum
	}
	in.mvmLimit = int64(math.Ceil(float64(limit) * c.NodeMaxMvmNumReserveNumPercent))
	if s.perNode > 0 {
		in.mvmLimit = min(in.mvmLimit, s.perNode)
	}
	old := in.createLimit
	in.createLimit = in.st.CreateConcurrentNum
	if in.createLimit <= 0 {
		in.createLimit = DefaultCreateConcurrentLimit
	}
	in.memTotal = in.st.MemTotalMiB
	if in.memTotal <= 0 {
		in.memTotal = in.st.QuotaMemMiB
	}
	in.window = time.Duration(c.MetricUpdateTimeout)
	if p := 2 * in.st.ReportPeriod; p > 0 && p < in.window {
		in.window = p
	}
	switch {
	case in.createLimit > s.maxCreateLimit:
		s.maxCreateLimit = in.createLimit
		s.refreshAllIf(s.plan.coef[fCreateLimit] != 0, slot)
	case old == s.maxCreateLimit && in.createLimit < old:
		s.recomputeMaxCreateLimit()
	}
}

func (s *Scheduler) recomputeMaxCreateLimit() {
	var m int64
	for i := range s.info {
		if s.info[i].live {
			m = max(m, s.info[i].createLimit)
		}
	}
	if m != s.maxCreateLimit {
		s.maxCreateLimit = m
		s.refreshAllIf(s.plan.coef[fCreateLimit] != 0, -1)
	}
}

func (s *Scheduler) refreshAllIf(cond bool, except int32) {
	if !cond {
		return
	}
	for i := range s.info {
		if s.info[i].live && int32(i) != except {
			s.refresh(int32(i))
		}
	}
}

// memReserve is the mem filter's host reserve on a node (MiB): node_max_mem_reserved_in_mb,
// or a tenth of the node's memory (rounded up) when the configured reserve is not smaller than
// all of it; 0 when the mem filter is off.
func (s *Scheduler) memReserve(in *nodeInfo) int64 {
	if !s.plan.memFilter {
		return 0
	}
	reserve := s.plan.cfg.NodeMaxMemReservedInMB
	if reserve >= in.memTotal {
		reserve = int64(math.Ceil(float64(in.memTotal) * 0.1))
	}
	return reserve
}

// refresh recomputes the record a decision scans from the node's state, its reservations and
// the configuration: the one place a node's room is computed (overcommit is the node's own, in
// its quota; nothing here multiplies it).
func (s *Scheduler) refresh(slot int32) {
	in := &s.info[slot]
	st := &in.st
	p := &s.plan
	in.roomCPU = st.QuotaCPU - st.AllocatedCPU - in.resCPU
	in.roomMem = st.QuotaMemMiB - st.AllocatedMemMiB - in.resMem
	in.roomDisk = math.MaxInt64
	if st.DiskMiB > 0 {
		in.roomDisk = st.DiskMiB - st.AllocatedDiskMiB - in.resDisk
	}
	in.roomMvm = in.mvmLimit - st.MvmNum - in.resMvm
	in.roomLive = math.MaxInt64
	if p.createFilter {
		in.roomLive = in.createLimit - int64(in.inflight)
	}
	if p.memFilter {
		used := max(st.MemUsageMiB, st.AllocatedMemMiB+in.resMem)
		in.roomMem = min(in.roomMem, in.memTotal-used-s.memReserve(in))
	}
	switch {
	case !st.Cubefleet:
		in.block = reasonStockCubelet
	case !st.ReportedSinceStart:
		in.block = reasonNoReport
	case !st.Ready || st.ReadyUntil.IsZero():
		in.block = reasonNotReady
	case st.Cordoned:
		in.block = reasonCordoned
	case st.Draining:
		in.block = reasonDraining
	case !st.HasMetrics:
		in.block = reasonStaleMetrics
	case p.cpuFilter && st.CPUUtil >= p.cfg.NodeMaxCPUUtil:
		in.block = reasonCPUUtil
	case p.diskFilter && max(st.DataDiskUsage, st.StorageDiskUsage, st.SysDiskUsage) >= p.cfg.DiskUsageMaxPercent:
		in.block = reasonDiskUsage
	default:
		in.block = fits
	}
	r := rec{
		until: math.MinInt64,
		cpu:   clamp32(in.roomCPU),
		mem:   clamp32(in.roomMem),
		disk:  clamp32(in.roomDisk),
		slots: clamp32(min(in.roomMvm, in.roomLive)),
		base:  s.baseScore(in),
	}
	if in.block == fits {
		r.until = min(st.ReadyUntil.UnixMilli(), st.MetricsReceivedAt.Add(in.window).UnixMilli())
	}
	s.recs[slot] = r
	if in.pool != nil {
		s.summarize(in.pool, in.pos/blockSize)
	}
}
