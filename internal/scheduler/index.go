package scheduler

import "math"

// blockSize is how many nodes one block of the index summarises.
const blockSize = 64

// block is the index's summary of up to blockSize consecutive nodes of a pool: the largest
// value of each field of their records. A decision skips a whole block when no node in it can
// fit the request (its largest room is too small, or every node stopped being a candidate) or
// when even its best score cannot beat the top N found so far. Every bound is an upper bound,
// so the index never changes the answer: a decision gives what a full scan gives
// (TestIndexMatchesFullScan).
type block struct {
	until int64
	cpu   int32
	mem   int32
	disk  int32
	slots int32
	base  float64
}

// join appends slot to p's scan order.
func (s *Scheduler) join(p *pool, slot int32) {
	in := &s.info[slot]
	in.pool, in.pos = p, len(p.slots)
	p.slots = append(p.slots, slot)
	s.summarize(p, in.pos/blockSize)
}

// leave removes slot from p: the last node of the pool takes its place.
func (s *Scheduler) leave(p *pool, slot int32) {
	in := &s.info[slot]
	i, last := in.pos, len(p.slots)-1
	if i < 0 || i > last || p.slots[i] != slot {
		return
	}
	moved := p.slots[last]
	p.slots[i] = moved
	s.info[moved].pos = i
	p.slots = p.slots[:last]
	in.pool, in.pos = nil, -1
	p.blocks = p.blocks[:(len(p.slots)+blockSize-1)/blockSize]
	if i < len(p.slots) {
		s.summarize(p, i/blockSize)
	}
}

// summarize recomputes block b of p from its nodes' records.
func (s *Scheduler) summarize(p *pool, b int) {
	for len(p.blocks) <= b {
		p.blocks = append(p.blocks, block{})
	}
	lo, hi := b*blockSize, min((b+1)*blockSize, len(p.slots))
	sum := block{until: math.MinInt64, cpu: math.MinInt32, mem: math.MinInt32, disk: math.MinInt32, slots: math.MinInt32, base: math.Inf(-1)}
	for _, slot := range p.slots[lo:hi] {
		r := &s.recs[slot]
		sum.until = max(sum.until, r.until)
		sum.cpu = max(sum.cpu, r.cpu)
		sum.mem = max(sum.mem, r.mem)
		sum.disk = max(sum.disk, r.disk)
		sum.slots = max(sum.slots, r.slots)
		sum.base = max(sum.base, r.base)
	}
	p.blocks[b] = sum
}

// scanIndexed is the full scan of p through its index: blocks no node of which can fit the
// request, or beat the N-th best score found so far, are skipped whole.
func (s *Scheduler) scanIndexed(q *query, p *pool) {
	req := q.req
	cpu, mem, disk := clamp32(req.CPU), clamp32(req.MemoryMiB), clamp32(req.DiskMiB)
	// The most the request-dependent factors can add to a node's base score (each is <= 1),
	// with a margin for the order of floating-point additions.
	upper := s.plan.dynUpper + 1e-9
	for b := range p.blocks {
		blk := &p.blocks[b]
		if q.now > blk.until || blk.cpu < cpu || blk.mem < mem || blk.disk < disk || blk.slots < 1 {
			continue
		}
		if q.n > 0 && len(q.top) == q.n && blk.base+upper <= q.top[q.n-1].score {
			continue
		}
		s.scan(q, p.slots[b*blockSize:min((b+1)*blockSize, len(p.slots))])
	}
}
