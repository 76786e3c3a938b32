package scheduler

import "math"

// rrwLevels is the number of integer weight levels the weighted round robin uses: a score s in
// [0,1] weighs max(1, round(s·rrwLevels)).
const rrwLevels = 1000

// pick returns the index in top (best first) of the candidate to place on, as
// least_select_name says. Scores are the weights of the weighted kinds; when every weight is 0
// they pick uniformly. The round-robin kinds keep their state across decisions, so that over
// many decisions each candidate is picked in proportion to its score (upstream builds a fresh
// selector per request, so its sw and rrw always return the top node).
func (s *Scheduler) pick(top []cand) int {
	if len(top) == 1 {
		return 0
	}
	switch s.plan.cfg.LeastSelectName {
	case SelectRW:
		var total float64
		for _, c := range top {
			total += c.score
		}
		if total > 0 {
			x := s.rng.Float64() * total
			for i, c := range top {
				if x < c.score {
					return i
				}
				x -= c.score
			}
			return len(top) - 1
		}
	case SelectSW:
		var total float64
		best := 0
		for i, c := range top {
			in := &s.info[c.slot]
			in.sw += c.score
			total += c.score
			if in.sw > s.info[top[best].slot].sw {
				best = i
			}
		}
		if total > 0 {
			s.info[top[best].slot].sw -= total
			return best
		}
	case SelectRRW:
		return s.pickRRW(top)
	}
	return s.rng.IntN(len(top))
}

// pickRRW is LVS weighted round robin over integer weights: the cursor walks the list, and
// each wrap lowers the current weight by the weights' greatest common divisor; a candidate is
// picked when its weight reaches the current weight.
func (s *Scheduler) pickRRW(top []cand) int {
	w := func(c cand) int64 { return max(1, int64(math.Round(c.score*rrwLevels))) }
	var g, hi int64
	for _, c := range top {
		g, hi = gcd(g, w(c)), max(hi, w(c))
	}
	for {
		s.rrwIndex = (s.rrwIndex + 1) % len(top)
		if s.rrwIndex == 0 {
			s.rrwWeight -= g
			if s.rrwWeight <= 0 {
				s.rrwWeight = hi
			}
		}
		if s.rrwWeight > hi {
			s.rrwWeight = hi
		}
		if w(top[s.rrwIndex]) >= s.rrwWeight {
			return s.rrwIndex
		}
	}
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
