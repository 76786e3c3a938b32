package scheduler

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
)

// A decision: the scan of the request's pool (through the index, or a window of it with
// pre_select_num), the top N, the pick and the reservation, all under the scheduler's lock.

// cand is a candidate of the top N.
type cand struct {
	slot  int32
	score float64
}

// Decide places req: it scans every node of req.Pool, keeps the best priority_select_num,
// picks one as least_select_name says, and reserves the request's room on it before anyone
// else can decide. Errors: INVALID_INPUT naming every field that is wrong (Request.Problems,
// and a missing pool); RESOURCE_EXHAUSTED when no node fits, its message the "why not placed" line
// and its details {pool, nodes, reasons: {reason: count}, retryAfterSeconds} (the retry hint
// only when some node was refused for a reason that passes by itself). A retry (the
// same sandbox id, pool and sizes) of a request that holds a reservation returns that decision
// again; another request under a sandbox id that holds a reservation is CONFLICT.
func (s *Scheduler) Decide(ctx context.Context, req Request) (Decision, error) {
	start := time.Now()
	if err := req.validate(); err != nil {
		s.metrics.decided(outcomeInvalid, start, nil)
		return Decision{}, err
	}
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	var rejected tally
	s.mu.Lock()
	d, err := s.decide(&req, &rejected)
	s.mu.Unlock()
	outcome := outcomePlaced
	switch {
	case cubefleet.IsCode(err, cubefleet.CodeConflict):
		outcome = outcomeInvalid // the sandbox id is taken: the request is refused, not unplaceable
	case err != nil:
		outcome = outcomeExhausted
	}
	s.metrics.decided(outcome, start, &rejected)
	return d, err
}

func (r *Request) validate() error {
	errs := r.Problems()
	if r.Pool == "" {
		errs = append(errs, cubefleet.FieldError{Path: "pool", Message: "required: the pool id of the sandbox's template"})
	}
	if len(errs) > 0 {
		return cubefleet.InvalidAll(errs)
	}
	return nil
}

// Problems returns what is wrong with r's sandbox id and sizes, in field order: sandboxId is
// required and follows fieldrules.CheckID; cpu (millicores) and memoryMiB are 1 to
// 2147483647, diskMiB 0 (none asked) to 2147483647. The pool is the caller's to check (the
// API takes a template's pool when it is left out).
func (r *Request) Problems() []cubefleet.FieldError {
	var errs []cubefleet.FieldError
	add := func(path, msg string) { errs = append(errs, cubefleet.FieldError{Path: path, Message: msg}) }
	if r.SandboxID == "" {
		add("sandboxId", "required: the id the reservation is released by")
	} else if msg := fieldrules.CheckID(r.SandboxID); msg != "" {
		add("sandboxId", msg)
	}
	for _, f := range []struct {
		path string
		v    int64
		min  int64
		unit string
	}{{"cpu", r.CPU, 1, "millicores"}, {"memoryMiB", r.MemoryMiB, 1, "MiB"}, {"diskMiB", r.DiskMiB, 0, "MiB"}} {
		if f.v < f.min || f.v > math.MaxInt32 {
			add(f.path, fmt.Sprintf("must be %d to 2147483647 %s (got %d)", f.min, f.unit, f.v))
		}
	}
	return errs
}

// decide is Decide under s.mu.
func (s *Scheduler) decide(req *Request, rejected *tally) (Decision, error) {
	if h, ok := s.resv[req.SandboxID]; ok {
		if err := sameRequest(h, req); err != nil {
			return Decision{}, err
		}
		return Decision{NodeID: h.NodeID, Score: h.Score, Reservation: h.Reservation}, nil
	}
	nowT := s.now()
	now := nowT.UnixMilli()
	p := s.pools[req.Pool]
	if p == nil {
		return Decision{}, s.exhausted(req, 0, rejected)
	}
	var bits []uint64
	hasTpl := req.Template != ""
	if hasTpl {
		if id, ok := s.tplIDs[req.Template]; ok {
			bits = s.tplNodes[id]
		}
	}
	s.excl = s.excl[:0]
	for _, id := range req.Exclude {
		if slot, ok := s.byID[id]; ok {
			s.excl = append(s.excl, slot)
		}
	}
	q := query{
		req: req, now: now, bits: bits, hasTpl: hasTpl, tplFilter: s.plan.tplFilter && hasTpl,
		n: s.plan.cfg.PrioritySelectNum, limit: len(p.slots), rejected: rejected, top: s.top[:0],
	}
	if ps := s.plan.cfg.PreSelectNum; ps > 0 && ps < q.limit {
		q.limit = ps
	}
	if q.limit < len(p.slots) {
		// pre_select_num: a window of the pool from a rotating start.
		start := p.next % len(p.slots)
		if i, full := s.scan(&q, p.slots[start:]); full {
			p.next = start + i + 1
		} else if i, full := s.scan(&q, p.slots[:start]); full {
			p.next = i + 1
		}
	} else if s.fullScan {
		s.scan(&q, p.slots)
	} else {
		s.scanIndexed(&q, p)
	}
	top := q.top
	s.top = top
	if len(top) == 0 {
		// Count every node of the pool under the first check it fails (the index skipped
		// whole blocks without looking at their nodes).
		for _, slot := range p.slots {
			rejected[s.classify(slot, req, q.now, q.bits)]++
		}
		return Decision{}, s.exhausted(req, len(p.slots), rejected)
	}
	c := top[s.pick(top)]
	h := &held{slot: c.slot, Reservation: Reservation{
		SandboxID: req.SandboxID, NodeID: s.info[c.slot].st.ID, Pool: req.Pool,
		CPU: req.CPU, MemoryMiB: req.MemoryMiB, DiskMiB: req.DiskMiB, At: nowT, Score: c.score,
	}}
	s.hold(h)
	return Decision{NodeID: h.NodeID, Score: c.score, Reservation: h.Reservation}, nil
}

// query is one decision's scan state.
type query struct {
	req       *Request
	now       int64
	bits      []uint64
	hasTpl    bool
	tplFilter bool
	n, limit  int
	seen      int
	rejected  *tally // filled only when no node fits
	top       []cand
}

// scan considers slots in order, adding each node that fits to q.top, until q.limit nodes
// fit; it returns the index it stopped at and true when the limit stopped it.
func (s *Scheduler) scan(q *query, slots []int32) (int, bool) {
	// Everything the loop reads is a local, so it stays in registers.
	req, now := q.req, q.now
	cpu, mem, disk := clamp32(req.CPU), clamp32(req.MemoryMiB), clamp32(req.DiskMiB)
	dynamic, bits, hasTpl, tplFilter, tplCoef := s.plan.dynamic, q.bits, q.hasTpl, q.tplFilter, s.plan.tplCoef
	slow := len(s.excl) > 0 || len(req.NodeSelector) > 0
	n, limit, seen, top := q.n, q.limit, q.seen, q.top
	bar := math.Inf(-1) // the score to beat: the last of a full top N
	if n >= 0 && len(top) == n {
		bar = top[n-1].score
	}
	recs := s.recs
	defer func() { q.seen, q.top = seen, top }()
	for i, slot := range slots {
		r := &recs[slot]
		if now > r.until || r.cpu < cpu || r.mem < mem || r.disk < disk || r.slots < 1 {
			continue
		}
		tplHit := true
		if hasTpl {
			w := int(slot >> 6)
			tplHit = w < len(bits) && bits[w]&(1<<(slot&63)) != 0
			if tplFilter && !tplHit {
				continue
			}
		}
		if slow && s.slowChecks(slot, req) != fits {
			continue
		}
		score := r.base
		if tplHit {
			score += tplCoef
		}
		if dynamic {
			score += s.dynamicScore(&s.info[slot], req, now)
		}
		seen++
		if score > bar {
			top = insertTop(top, cand{slot, score}, n)
			if n >= 0 && len(top) == n {
				bar = top[n-1].score
			}
		}
		if seen >= limit {
			return i, true
		}
	}
	return len(slots), false
}

// slowChecks applies the request's exclusions and node selector to the node in slot.
func (s *Scheduler) slowChecks(slot int32, req *Request) reason {
	if slices.Contains(s.excl, slot) {
		return reasonExcluded
	}
	if len(req.NodeSelector) > 0 && !matches(s.info[slot].st.Labels, req.NodeSelector) {
		return reasonSelector
	}
	return fits
}

// insertTop keeps top sorted by score, best first, holding at most n (n < 0: no bound); a
// later candidate with an equal score ranks after the earlier one.
func insertTop(top []cand, c cand, n int) []cand {
	if n < 0 {
		return append(top, c)
	}
	if len(top) == n {
		if c.score <= top[n-1].score {
			return top
		}
		top = top[:n-1]
	}
	i := len(top)
	top = append(top, c)
	for i > 0 && top[i-1].score < c.score {
		top[i] = top[i-1]
		i--
	}
	top[i] = c
	return top
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// classify returns the first reason the node in slot cannot take req at now.
func (s *Scheduler) classify(slot int32, req *Request, now int64, bits []uint64) reason {
	in := &s.info[slot]
	switch {
	case in.block != fits:
		return in.block
	case now > in.st.ReadyUntil.UnixMilli():
		return reasonNotReady
	case now > s.recs[slot].until:
		return reasonStaleMetrics
	case slices.Contains(s.excl, slot):
		return reasonExcluded
	case len(req.NodeSelector) > 0 && !matches(in.st.Labels, req.NodeSelector):
		return reasonSelector
	case in.roomMvm < 1:
		return reasonMvm
	case in.roomCPU < req.CPU:
		return reasonCPU
	case in.roomMem < req.MemoryMiB:
		return reasonMem
	case in.roomDisk < req.DiskMiB:
		return reasonDisk
	case s.plan.tplFilter && req.Template != "" && !holds(bits, slot):
		return reasonTemplate
	}
	return reasonCreates
}

// sameRequest tells a retry of the request that made h (the same pool, CPU, memory and disk,
// and h's node not excluded: answered with h's decision) from another request reusing its
// sandbox id: CONFLICT, since answering it with h would place the sandbox where the caller did
// not ask, and replacing h would lose the room it holds.
func sameRequest(h *held, req *Request) error {
	if h.Pool == req.Pool && h.CPU == req.CPU && h.MemoryMiB == req.MemoryMiB && h.DiskMiB == req.DiskMiB && !slices.Contains(req.Exclude, h.NodeID) {
		return nil
	}
	return &cubefleet.Error{Code: cubefleet.CodeConflict, Message: fmt.Sprintf(
		"sandbox %s already holds a reservation on node %s (pool %s, %d millicores, %d MiB memory, %d MiB disk): "+
			"a retry must ask for the same; release it first (scheduler.release) or place under a new sandbox id",
		h.SandboxID, h.NodeID, h.Pool, h.CPU, h.MemoryMiB, h.DiskMiB),
		Details: map[string]any{"sandboxId": h.SandboxID, "nodeId": h.NodeID, "pool": h.Pool}}
}

// exhausted builds the RESOURCE_EXHAUSTED error of a request no node fits.
// The pool is named by its fleet name when the request carries it (PoolName).
func (s *Scheduler) exhausted(req *Request, nodes int, t *tally) error {
	var msg string
	switch {
	case nodes == 0 && req.PoolName != "":
		msg = "no node can take the sandbox: pool " + req.PoolName + " (" + req.Pool + ") has no nodes"
	case nodes == 0:
		msg = "no node can take the sandbox: pool " + req.Pool + " has no nodes"
	case req.PoolName != "":
		msg = "no node of pool " + req.PoolName + " can take the sandbox: " + t.line(nodes)
	default:
		msg = "no node can take the sandbox: " + t.line(nodes)
	}
	details := map[string]any{"pool": req.Pool, "nodes": nodes, "reasons": t.counts()}
	if req.PoolName != "" {
		details["poolName"] = req.PoolName
	}
	if t.retryCanHelp() {
		details["retryAfterSeconds"] = int(DefaultRetryAfter / time.Second)
	}
	return &cubefleet.Error{Code: cubefleet.CodeResourceExhausted, Message: msg, Details: details}
}
