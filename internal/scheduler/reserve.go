package scheduler

import (
	"slices"
)

// Reservations: the room a decision takes on its node (hold), given back by sandbox id (drop):
// when the node's report lists the sandbox (Update), when the create fails (Release), when it
// outlives the reservation TTL (Expire), or when the node goes (Remove). A replica taking over
// the placement lane puts the database's back (Restore).

// hold records h and takes its room on its node.
func (s *Scheduler) hold(h *held) {
	s.resv[h.SandboxID] = h
	if h.slot >= 0 {
		s.charge(h, 1)
	}
	if s.journal != nil {
		s.journal.Reserved(h.Reservation)
	}
	s.metrics.outstanding(len(s.resv))
}

// drop removes h and gives its room back.
func (s *Scheduler) drop(h *held) {
	delete(s.resv, h.SandboxID)
	if h.slot >= 0 {
		s.charge(h, -1)
	}
	if s.journal != nil {
		s.journal.Released(h.SandboxID)
	}
}

// charge adds (sign 1) or removes (sign -1) h's room on its node.
func (s *Scheduler) charge(h *held, sign int64) {
	in := &s.info[h.slot]
	in.resCPU += sign * h.CPU
	in.resMem += sign * h.MemoryMiB
	in.resDisk += sign * h.DiskMiB
	in.resMvm += sign
	in.inflight += int(sign)
	s.refresh(h.slot)
}

// Release frees the reservation of a sandbox (its create failed or timed out) and reports
// whether there was one. Room is released by sandbox id only, never by count.
func (s *Scheduler) Release(sandboxID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.resv[sandboxID]
	if ok {
		s.drop(h)
		s.metrics.release("released", 1, len(s.resv))
	}
	return ok
}

// Expire drops the reservations older than the reservation TTL (a sandbox whose create never
// finished and was never released) and returns how many it dropped. The server calls it
// every few seconds.
func (s *Scheduler) Expire() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	cut := s.now().Add(-s.ttl)
	n := 0
	for _, h := range s.resv {
		if h.At.Before(cut) {
			s.drop(h)
			n++
		}
	}
	if n > 0 {
		s.metrics.release("expired", n, len(s.resv))
	}
	return n
}

// Restore replaces every reservation held with rs, read back from the database by a replica
// taking over the placement lane: each takes its room on its node at once, or as soon as the
// node is known. The journal is not told (the rows are already there).
func (s *Scheduler) Restore(rs []Reservation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.resv {
		delete(s.resv, h.SandboxID)
		if h.slot >= 0 {
			s.charge(h, -1)
		}
	}
	for _, r := range rs {
		if _, ok := s.resv[r.SandboxID]; ok {
			continue
		}
		h := &held{Reservation: r, slot: -1}
		if slot, ok := s.byID[r.NodeID]; ok {
			h.slot = slot
			s.charge(h, 1)
		}
		s.resv[r.SandboxID] = h
	}
	s.metrics.outstanding(len(s.resv))
}

// attachRestored charges the restored reservations of a node seen for the first time.
func (s *Scheduler) attachRestored(slot int32) {
	id := s.info[slot].st.ID
	for _, h := range s.resv {
		if h.slot < 0 && h.NodeID == id {
			h.slot = slot
			in := &s.info[slot]
			in.resCPU += h.CPU
			in.resMem += h.MemoryMiB
			in.resDisk += h.DiskMiB
			in.resMvm++
			in.inflight++
		}
	}
}

// Reservations returns every reservation outstanding, sorted by sandbox id.
func (s *Scheduler) Reservations() []Reservation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Reservation, 0, len(s.resv))
	for _, h := range s.resv {
		out = append(out, h.Reservation)
	}
	slices.SortFunc(out, func(a, b Reservation) int {
		switch {
		case a.SandboxID < b.SandboxID:
			return -1
		case a.SandboxID > b.SandboxID:
			return 1
		}
		return 0
	})
	return out
}

// Room returns a node's reported use, reserved use and remaining room, and whether the
// scheduler knows the node.
func (s *Scheduler) Room(nodeID string) (Room, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.byID[nodeID]
	if !ok {
		return Room{}, false
	}
	in := &s.info[slot]
	room := Room{
		Reported:      Usage{CPU: in.st.AllocatedCPU, MemoryMiB: in.st.AllocatedMemMiB, DiskMiB: in.st.AllocatedDiskMiB, MvmNum: in.st.MvmNum},
		Reserved:      Usage{CPU: in.resCPU, MemoryMiB: in.resMem, DiskMiB: in.resDisk, MvmNum: in.resMvm},
		Remaining:     Usage{CPU: max(in.roomCPU, 0), MemoryMiB: max(in.roomMem, 0), MvmNum: max(in.roomMvm, 0)},
		Reservations:  in.inflight,
		MemReserveMiB: s.memReserve(in),
	}
	if in.st.DiskMiB > 0 {
		room.Remaining.DiskMiB = max(in.roomDisk, 0)
	}
	return room, true
}
