package sandboxes

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/store"
)

// The loops that run once across replicas, on the holder of the "sandboxes" lease: waiting
// creates (placed in offer priority order, then age; failed after --pending-timeout), lost
// sandboxes, warm pools, template preparation and the retention sweep. Every replica also
// follows the others' changes (on PostgreSQL) to wake its own waiters.

// sweepEvery is how often the retention sweep runs (1 minute); sweepBatch bounds one pass.
const (
	sweepEvery = time.Minute
	sweepBatch = 1000
	// doneKept is how long a done assignment is kept (1 hour), for a look at recent work.
	doneKept = time.Hour
	// prepareAgain is how long a node has to report a prepared template before it is asked
	// again (1 minute).
	prepareAgain = time.Minute
	// followEvery is how often a replica reads what the others changed (PostgreSQL only).
	followEvery = 200 * time.Millisecond
)

// Run runs the loops until ctx ends: it takes and renews the "sandboxes" lease and, while it
// holds it, runs Reconcile every Every and places waiting creates as soon as room may have
// freed (and at once on taking the lease over); on PostgreSQL it also wakes this replica's
// waiters for what other replicas changed. At the end it gives the lease up.
func (s *Service) Run(ctx context.Context) error {
	if s.db.Dialect() == store.Postgres {
		go s.follow(ctx)
	}
	leased := make(chan struct{})
	go func() { s.lease.Run(ctx); close(leased) }()
	defer func() { <-leased }()
	tick := time.NewTicker(s.cfg.Every)
	defer tick.Stop()
	lastSweep := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.hub.kick:
			if s.Holding() {
				s.logErr(ctx, "placing waiting sandboxes", s.PlaceWaiting(ctx))
				s.logErr(ctx, "keeping warm pools", s.KeepWarm(ctx))
			}
		case <-tick.C:
			if s.Holding() {
				s.Reconcile(ctx)
				if time.Since(lastSweep) >= sweepEvery {
					lastSweep = time.Now()
					s.logErr(ctx, "sweeping ended sandboxes", s.Sweep(ctx))
				}
			}
		}
	}
}

func (s *Service) logErr(ctx context.Context, what string, err error) {
	if err != nil && ctx.Err() == nil {
		s.log.Warn(what+" failed", "err", err)
	}
}

// Holding reports whether this replica holds the "sandboxes" lease.
func (s *Service) Holding() bool { return s.lease.Held() }

// Lead takes the "sandboxes" lease now if it is free (tests and a single server at start).
func (s *Service) Lead(ctx context.Context) { s.lease.Try(ctx) }

// Reconcile runs the lease holder's checks once: lost sandboxes, drains past their deadline,
// waiting creates, warm pools and template preparation. Run calls it every Every; tests call it after moving their clock.
func (s *Service) Reconcile(ctx context.Context) {
	s.logErr(ctx, "checking the nodes' sandboxes", s.CheckNodes(ctx))
	s.logErr(ctx, "stopping the sandboxes of drains past their deadline", s.EvictDrained(ctx))
	s.logErr(ctx, "placing waiting sandboxes", s.PlaceWaiting(ctx))
	s.logErr(ctx, "keeping warm pools", s.KeepWarm(ctx))
	s.logErr(ctx, "preparing templates", s.Prepare(ctx))
}

// CheckNodes ends the sandboxes their nodes lost (lost, with the reason): every placed sandbox
// of a node that is deleted (node_deleted); a starting one or an idle warm one of a node that
// is Down or Lost (node_down); a running one of such a node is unknown (node_disconnected) until its disconnect
// grace (its template's disconnectGraceSeconds, else DisconnectGrace) after the node's last
// report, and lost (node_down) after it; a running (or unknown) sandbox its node's reports have
// not listed for UnlistedGrace (not_listed); a starting one its node has not listed within
// StartTimeout (start_timeout). A starting sandbox its node lists is running (its event may
// still travel); an unknown one its node, back, lists is running again (reconnected). Nodes that
// do not list sandboxes (stock Cubelets) are judged by their health only.
func (s *Service) CheckNodes(ctx context.Context) error {
	now := s.now()
	byID := map[string]nodes.WorkNode{}
	listed := map[string]map[string]bool{}
	for _, n := range s.cfg.Nodes.WorkNodes() {
		byID[n.ID] = n
		if n.SandboxesReported {
			set := make(map[string]bool, len(n.Sandboxes))
			for _, id := range n.Sandboxes {
				set[id] = true
			}
			listed[n.ID] = set
		}
	}
	live, err := query(ctx, s.db, `state IN ($1, $2, $3) AND node_id <> ''`, string(StateStarting), string(StateRunning), string(StateUnknown))
	if err != nil {
		return err
	}
	s.loopMu.Lock()
	seen := make(map[string]int64, len(live))
	type loss struct {
		r              *record
		reason, detail string
		listed         bool // a report of its node listed it (lastListed holds its placement time till then)
	}
	var lost []loss
	var running, disconnected, reconnected []*record
	grace := s.cfg.UnlistedGrace.Milliseconds()
	for _, r := range live {
		n, ok := byID[r.NodeID]
		switch {
		case !ok:
			lost = append(lost, loss{r, ReasonNodeDeleted, "node " + r.NodeID + " was deleted", s.lastListed[r.ID] > max(r.StartingAt, r.RunningAt)})
			continue
		case n.State == nodes.StateDown || n.State == nodes.StateLost:
			away := time.Duration(now-n.ReportedAt) * time.Millisecond
			grace := s.disconnectGrace(r)
			detail := fmt.Sprintf("node %s is %s: its last report is %s old", r.NodeID, n.State, away.Round(time.Second))
			if r.State != StateStarting && (!r.Warm || r.ClaimedAt != 0) { // an idle warm sandbox is a cache: lost at once
				if away <= grace {
					if r.State == StateRunning {
						disconnected = append(disconnected, r)
					}
					seen[r.ID] = s.lastListed[r.ID]
					continue
				}
				detail += fmt.Sprintf(", past its disconnect grace of %s", grace)
			}
			lost = append(lost, loss{r, ReasonNodeDown, detail, s.lastListed[r.ID] > max(r.StartingAt, r.RunningAt)})
			continue
		}
		set := listed[r.NodeID]
		if set == nil {
			continue
		}
		last := max(s.lastListed[r.ID], r.StartingAt, r.RunningAt, r.UnknownAt)
		if set[r.RunsAs] {
			last = max(last, n.ReportedAt)
			switch r.State {
			case StateStarting:
				running = append(running, r)
			case StateUnknown:
				reconnected = append(reconnected, r)
			}
		}
		seen[r.ID] = last
		switch {
		case set[r.RunsAs]:
		case r.State != StateStarting && n.ReportedAt-last > grace:
			lost = append(lost, loss{r, ReasonNotListed, fmt.Sprintf("node %s no longer lists it: its reports since %s do not",
				r.NodeID, time.UnixMilli(last).UTC().Format(time.RFC3339)), true})
		case r.State == StateStarting && now-r.StartingAt > s.cfg.StartTimeout.Milliseconds():
			lost = append(lost, loss{r, ReasonStartTimeout, fmt.Sprintf("node %s did not report it running within %s of its placement",
				r.NodeID, s.cfg.StartTimeout), false})
		}
	}
	s.lastListed = seen
	s.loopMu.Unlock()
	for _, r := range running {
		if err := s.markRunning(ctx, r, ReasonListed); err != nil {
			return err
		}
	}
	for _, r := range disconnected {
		if err := s.markUnknown(ctx, r, true); err != nil {
			return err
		}
	}
	for _, r := range reconnected {
		if err := s.markUnknown(ctx, r, false); err != nil {
			return err
		}
	}
	for _, l := range lost {
		if (l.reason == ReasonNodeDown || l.reason == ReasonNodeDeleted) && !l.listed {
			again, err := s.placeAgainIfUnstarted(ctx, l.r, l.detail)
			if err != nil {
				return err
			}
			if again {
				continue
			}
		}
		if err := s.lose(ctx, l.r, l.reason, l.detail); err != nil {
			return err
		}
	}
	return nil
}

// placeAgainIfUnstarted places sandbox r again, keeping its id, when its node went down (or was
// deleted: why says which) before it acknowledged r: r is starting, its node never reported it
// running or marked its start done (the caller checked that its reports never listed it). It does so up to PlacementAttempts placements;
// past them (and for warm sandboxes, which the warm pool makes again) it reports false and r is
// lost. The start queued on the dead node is cancelled, so the node does not start r should it
// come back.
func (s *Service) placeAgainIfUnstarted(ctx context.Context, r *record, why string) (bool, error) {
	if r.State != StateStarting || r.Warm || r.RunningAt != 0 {
		return false, nil
	}
	var starts, acked int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN node_id = $2 AND done_at > 0 THEN 1 ELSE 0 END), 0)
		FROM sandboxes_assignments WHERE sandbox_id = $1 AND kind = $3`, r.ID, r.NodeID, string(nodeapi.KindStart)).Scan(&starts, &acked); err != nil {
		return false, fmt.Errorf("count the placements of %s: %w", r.ID, err)
	}
	if acked > 0 || starts >= s.cfg.PlacementAttempts {
		return false, nil
	}
	msg := fmt.Sprintf("%s before it started the sandbox: placed again (placement %d of at most %d)", why, starts+1, s.cfg.PlacementAttempts)
	return s.unplace(ctx, r, r.NodeID, msg)
}

// unplace cancels node's queued work for sandbox r and, while r is starting there, makes it
// wait for room again with message, keeping its id; its reservation is released and the loops
// place it. It reports false when r changed meanwhile.
func (s *Service) unplace(ctx context.Context, r *record, node, message string) (bool, error) {
	now := s.now()
	var changed bool
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE sandboxes_assignments SET done_at = $3 WHERE node_id = $1 AND sandbox_id = $2 AND done_at = 0`,
			node, r.ID, now); err != nil {
			return fmt.Errorf("cancel the work of %s on node %s: %w", r.ID, node, err)
		}
		res, err := tx.ExecContext(ctx, `UPDATE sandboxes SET node_id = '', state = $2, starting_at = 0, starting_reason = '', queued = 1,
			pending_reason = $3, message = $4, updated_at = $5 WHERE id = $1 AND state = $6 AND node_id = $7`,
			r.ID, string(StatePending), ReasonWaitingForRoom, message, now, string(StateStarting), node)
		if err != nil {
			return fmt.Errorf("place %s again: %w", r.ID, err)
		}
		n, _ := res.RowsAffected()
		changed = n == 1
		return nil
	})
	if err != nil || !changed {
		return false, err
	}
	s.log.Warn("sandbox placed again", "sandbox", r.ID, "tenant", r.TenantID, "node", node, "detail", message)
	s.release(ctx, r.RunsAs)
	s.hub.changed(r.ID)
	s.hub.kickLoops()
	return true, nil
}

// disconnectGrace is how long after its node's last report running sandbox r stays unknown:
// its template's disconnectGraceSeconds, else DisconnectGrace.
func (s *Service) disconnectGrace(r *record) time.Duration {
	if g := r.Spec.DisconnectGraceSeconds; g > 0 {
		return time.Duration(g) * time.Second
	}
	return s.cfg.DisconnectGrace
}

// markUnknown moves running r to unknown (disconnected: its node stopped reporting), or
// unknown r back to running (its node came back and lists it), unless it changed meanwhile.
// Neither is an event of the tenant's log: the sandbox may run on all along.
func (s *Service) markUnknown(ctx context.Context, r *record, disconnected bool) error {
	now := s.now()
	q, from, to := `UPDATE sandboxes SET state = $2, unknown_at = $3, updated_at = $3 WHERE id = $1 AND state = $4`, StateRunning, StateUnknown
	if !disconnected {
		q, from, to = `UPDATE sandboxes SET state = $2, reconnected_at = $3, updated_at = $3 WHERE id = $1 AND state = $4`, StateUnknown, StateRunning
	}
	var changed bool
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q, r.ID, string(to), now, string(from))
		if err != nil {
			return fmt.Errorf("mark %s %s: %w", r.ID, to, err)
		}
		n, _ := res.RowsAffected()
		changed = n == 1
		return nil
	})
	if err != nil || !changed {
		return err
	}
	if disconnected {
		s.log.Warn("sandbox unknown: its node stopped reporting", "sandbox", r.ID, "tenant", r.TenantID, "node", r.NodeID, "grace", s.disconnectGrace(r))
	} else {
		s.log.Info("sandbox running again: its node came back within the disconnect grace", "sandbox", r.ID, "tenant", r.TenantID, "node", r.NodeID)
	}
	s.hub.changed(r.ID)
	return nil
}

// lose ends r as lost (reason, detail) and queues a stop for its node, should it come back.
func (s *Service) lose(ctx context.Context, r *record, reason, detail string) error {
	var changed bool
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		if changed, err = s.finish(ctx, tx, r, StateLost, reason, detail, nil); err != nil || !changed {
			return err
		}
		if reason == ReasonNodeDeleted {
			return nil
		}
		return enqueue(ctx, tx, r.NodeID, nodeapi.KindStop, r.ID, "", s.now())
	})
	if err != nil || !changed {
		return err
	}
	s.log.Warn("sandbox lost", "sandbox", r.ID, "tenant", r.TenantID, "node", r.NodeID, "reason", reason, "detail", detail)
	s.m.lost(reason)
	s.ended(ctx, r, StateLost)
	return nil
}

// waitingPriority is the priority of warm pool creates: behind every tenant's own.
const waitingPriority = -1

// PlaceWaiting places the creates that wait for room, in priority order (the offer's, the
// pool's owner first), then age; one that waited longer than PendingTimeout fails
// (pending_timeout). A create of a template with an idle warm sandbox on a node it could use
// claims it; one that does not fit stays waiting (its message says why) while later ones that
// fit are placed, and idle warm sandboxes on nodes it could use make room for it: one of its
// template that is still starting is left for it to claim, one of another template is stopped.
// Warm sandboxes are a cache and never hold room against real work: a warm pool top-up is
// placed only once no create of its pool waits.
func (s *Service) PlaceWaiting(ctx context.Context) error {
	recs, err := query(ctx, s.db, `queued = 1 ORDER BY priority DESC, created_at, id LIMIT 1000`)
	if err != nil || len(recs) == 0 {
		return err
	}
	now := s.now()
	full := map[string]error{}  // the refusal of each pool and size nothing fitted this pass: later creates of the same size need not try
	waiting := map[string]int{} // creates left waiting per pool: their top-ups wait too
	var rooms *warmRooms        // the warm sandboxes that hold room, read once a create needs them
	for _, r := range recs {
		if now-r.CreatedAt > s.cfg.PendingTimeout.Milliseconds() {
			if err := s.failWaiting(ctx, r); err != nil {
				return err
			}
			continue
		}
		if r.Warm && waiting[r.PoolID] > 0 {
			continue
		}
		if !r.Warm && rooms == nil {
			if rooms, err = s.readWarmRooms(ctx); err != nil {
				return err
			}
		}
		if !r.Warm {
			claimed, err := s.claimForWaiting(ctx, r, rooms)
			if err != nil {
				return err
			}
			if claimed {
				continue
			}
		}
		key := fmt.Sprintf("%s/%d/%d/%d/%v", r.PoolID, r.Res.VCPU, r.Res.MemoryGiB, r.Res.DiskGiB, r.Spec.NodeSelector)
		refused := full[key]
		if refused == nil {
			node, err := s.cfg.Placer.Place(ctx, placementOf(r))
			switch {
			case err == nil:
				if err := s.placeWaiting(ctx, r, node); err != nil {
					return err
				}
				continue
			case cubefleet.IsCode(err, cubefleet.CodeResourceExhausted):
				full[key], refused = err, err
			default:
				return err
			}
		}
		// Every create left waiting says what keeps it out (the scheduler's per-reason
		// counts), also one behind others of its size that did not ask again.
		msg := waitingMessage(refused, s.poolName(ctx, r.PoolID))
		if n := waiting[r.PoolID]; n > 0 && !r.Warm {
			msg += fmt.Sprintf(" (%s ahead)", cubefleet.Count(n, "create", "creates"))
		}
		if msg != r.Message {
			s.db.ExecContext(ctx, `UPDATE sandboxes SET message = $2 WHERE id = $1 AND queued = 1`, r.ID, msg)
			r.Message = msg
		}
		if r.Warm {
			continue
		}
		waiting[r.PoolID]++
		if err := s.makeRoom(ctx, r, rooms); err != nil {
			return err
		}
	}
	return nil
}

// warmRooms are the warm sandboxes that hold room (placed, not claimed, not stopping) by pool,
// oldest first, and by pool the count of those already stopping (each makes room for one
// waiting create).
type warmRooms struct {
	idle     map[string][]*record
	stopping map[string]int
}

// readWarmRooms reads the warm sandboxes that hold room.
func (s *Service) readWarmRooms(ctx context.Context) (*warmRooms, error) {
	recs, err := query(ctx, s.db, `warm = 1 AND claimed_at = 0 AND deleted_at = 0 AND node_id <> '' AND state IN ($1, $2) ORDER BY created_at, id`,
		string(StateStarting), string(StateRunning))
	if err != nil {
		return nil, err
	}
	w := &warmRooms{idle: map[string][]*record{}, stopping: map[string]int{}}
	for _, r := range recs {
		if r.StopRequestedAt != 0 {
			w.stopping[r.PoolID]++
		} else {
			w.idle[r.PoolID] = append(w.idle[r.PoolID], r)
		}
	}
	// A warm sandbox stopped for room has ended, but its node's last report may still list it:
	// until the next report the scheduler counts its room as used, so it still counts as
	// stopping here (else the next pass would stop another one for the same create).
	ended, err := query(ctx, s.db, `warm = 1 AND claimed_at = 0 AND deleted_at = 0 AND node_id <> '' AND stop_requested_at >= $1 AND state NOT IN ($2, $3, $4)`,
		s.now()-(10*time.Minute).Milliseconds(), string(StatePending), string(StateStarting), string(StateRunning))
	if err != nil {
		return nil, err
	}
	listed := map[string][]string{}
	for _, r := range ended {
		ids, ok := listed[r.NodeID]
		if !ok {
			n, found, err := s.cfg.Nodes.WorkNode(ctx, r.NodeID)
			if err != nil {
				return nil, err
			}
			if found && n.SandboxesReported {
				ids = n.Sandboxes
			}
			listed[r.NodeID] = ids
		}
		if slices.Contains(ids, r.RunsAs) {
			w.stopping[r.PoolID]++
		}
	}
	return w, nil
}

// take removes and returns the first warm sandbox of r's pool for which ok holds on a node r
// could use (Ready, not cordoned or draining, carrying r's nodeSelector, big enough for r).
func (w *warmRooms) take(ctx context.Context, s *Service, r *record, ok func(*record) bool) (*record, error) {
	cands := w.idle[r.PoolID]
	for i, x := range cands {
		if !ok(x) {
			continue
		}
		n, found, err := s.cfg.Nodes.WorkNode(ctx, x.NodeID)
		if err != nil {
			return nil, err
		}
		if !found || n.State != nodes.StateReady || n.Cordoned || n.Draining || !selects(n.Labels, r.Spec.NodeSelector) ||
			n.QuotaCPU < r.Res.VCPU*1000 || n.QuotaMemMiB < r.Res.MemoryGiB*1024 {
			continue
		}
		w.idle[r.PoolID] = slices.Delete(cands, i, i+1)
		return x, nil
	}
	return nil, nil
}

// claimForWaiting gives waiting r an idle warm sandbox of its template that runs on a node it
// could use, if there is one (claimed true).
func (s *Service) claimForWaiting(ctx context.Context, r *record, rooms *warmRooms) (bool, error) {
	changed, err := s.templateChangedAt(ctx, r.TemplateID)
	if err != nil {
		return false, err
	}
	for {
		x, err := rooms.take(ctx, s, r, func(x *record) bool {
			return x.TemplateID == r.TemplateID && x.State == StateRunning && madeFromCurrent(x.CreatedAt, changed)
		})
		if x == nil || err != nil {
			return false, err
		}
		ok, err := s.claimWaiting(ctx, r, x)
		if ok || err != nil {
			return ok, err
		}
	}
}

// makeRoom makes room for waiting r, which does not fit: a warm sandbox of its template still
// starting on a node it could use is left for it to claim once ready; else a warm sandbox
// already stopping in its pool makes the room; else an idle warm sandbox on a node it could use
// is stopped (warm_surplus), and when its node confirms the end the room is r's (the next pass
// places it).
func (s *Service) makeRoom(ctx context.Context, r *record, rooms *warmRooms) error {
	changed, err := s.templateChangedAt(ctx, r.TemplateID)
	if err != nil {
		return err
	}
	mine, err := rooms.take(ctx, s, r, func(x *record) bool { return x.TemplateID == r.TemplateID && madeFromCurrent(x.CreatedAt, changed) })
	if mine != nil || err != nil {
		return err
	}
	if rooms.stopping[r.PoolID] > 0 {
		rooms.stopping[r.PoolID]--
		return nil
	}
	x, err := rooms.take(ctx, s, r, func(*record) bool { return true })
	if x == nil || err != nil {
		return err
	}
	return s.stopIdle(ctx, idle{id: x.ID, node: x.NodeID, state: x.State, createdAt: x.CreatedAt}, ReasonWarmSurplus,
		fmt.Sprintf("its room on node %s went to sandbox %s, which waited for room", x.NodeID, r.ID))
}

// placeWaiting moves waiting r to node, whose room the scheduler reserved.
func (s *Service) placeWaiting(ctx context.Context, r *record, node string) error {
	now := s.now()
	kind := nodeapi.KindStart
	if r.Warm {
		kind = nodeapi.KindWarm
	}
	placed := false
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sandboxes SET node_id = $2, state = $3, starting_at = $4, starting_reason = $5, queued = 0, message = '',
			updated_at = $4 WHERE id = $1 AND queued = 1 AND state = $6`, r.ID, node, string(StateStarting), now, ReasonPlaced, string(StatePending))
		if err != nil {
			return fmt.Errorf("place %s: %w", r.ID, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil // deleted meanwhile
		}
		placed = true
		return enqueue(ctx, tx, node, kind, r.ID, r.TemplateID, now)
	})
	if err != nil || !placed {
		s.release(ctx, r.RunsAs)
		return err
	}
	s.m.placedLate(r, now)
	s.hub.work(node)
	s.hub.changed(r.ID)
	return nil
}

// poolName is pool's fleet name, for messages (its id when it has none or cannot be read).
func (s *Service) poolName(ctx context.Context, pool string) string {
	return s.poolNameIn(ctx, s.db, pool)
}

// poolNameIn is poolName read through q (a transaction's).
func (s *Service) poolNameIn(ctx context.Context, q store.Querier, pool string) string {
	if s.cfg.Names == nil {
		return pool
	}
	if names, err := s.cfg.Names.FleetNames(ctx, q, []string{pool}); err == nil && names[pool] != "" {
		return names[pool]
	}
	return pool
}

// failWaiting ends waiting r: no room within PendingTimeout. Its message names the constraint
// that kept it out (the last "why not placed", with the scheduler's per-reason counts) and
// when a retry can succeed.
func (s *Service) failWaiting(ctx context.Context, r *record) error {
	pool := s.poolName(ctx, r.PoolID)
	msg := fmt.Sprintf("no node of pool %s had room within %s (--pending-timeout)", pool, s.cfg.PendingTimeout)
	if last := strings.TrimPrefix(r.Message, "waiting for room in pool "+pool+": "); last != "" {
		msg += "; last: " + last
	}
	msg += "; retry the create once room frees in the pool (its sandboxes end, or nodes join it or are uncordoned)"
	var changed bool
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		changed, err = s.finish(ctx, tx, r, StateFailed, ReasonPendingTimeout, msg, nil)
		return err
	})
	if err == nil && changed {
		s.ended(ctx, r, StateFailed)
	}
	return err
}

// Sweep removes the sandboxes that ended more than ResultRetention ago, and deleted ones that
// have ended, with their output, and done assignments older than an hour.
func (s *Service) Sweep(ctx context.Context) error {
	cutoff := s.now() - s.cfg.ResultRetention.Milliseconds()
	for {
		rows, err := s.db.QueryContext(ctx, `SELECT id FROM sandboxes WHERE ended_at > 0 AND (ended_at < $1 OR deleted_at > 0) LIMIT `+fmt.Sprint(sweepBatch), cutoff)
		if err != nil {
			return fmt.Errorf("find ended sandboxes: %w", err)
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) == 0 {
			break
		}
		if err := s.db.InTx(ctx, func(tx *sql.Tx) error { return remove(ctx, tx, ids) }); err != nil {
			return err
		}
		s.m.swept(len(ids))
		if len(ids) < sweepBatch {
			break
		}
	}
	_, err := s.db.ExecContext(ctx, `DELETE FROM sandboxes_assignments WHERE done_at > 0 AND done_at < $1`, s.now()-doneKept.Milliseconds())
	return err
}

// follow wakes this replica's waiters for what other replicas changed: the sandboxes someone
// waits for here, and the nodes whose work requests are held here, every followEvery.
func (s *Service) follow(ctx context.Context) {
	t := time.NewTicker(followEvery)
	defer t.Stop()
	since := s.now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sbx, nds := s.hub.watched()
		from := since - 2000 // clocks of replicas differ a little
		since = s.now()
		if len(nds) > 0 {
			s.wakeChanged(ctx, `SELECT DISTINCT node_id FROM sandboxes_assignments WHERE created_at > $1 AND node_id IN (`+placeholders(2, len(nds))+`)`,
				from, nds, s.hub.work)
		}
		if len(sbx) > 0 {
			s.wakeChanged(ctx, `SELECT id FROM sandboxes WHERE updated_at > $1 AND id IN (`+placeholders(2, len(sbx))+`)`, from, sbx, s.hub.changed)
		}
	}
}

// wakeChanged runs q (from, then ids) and wakes the ids it returns.
func (s *Service) wakeChanged(ctx context.Context, q string, from int64, ids []string, wakeFn func(...string)) {
	for chunk := range slices.Chunk(ids, 500) {
		rows, err := s.db.QueryContext(ctx, q, append([]any{from}, anys(chunk)...)...)
		if err != nil {
			return
		}
		var got []string
		for rows.Next() {
			var id string
			if rows.Scan(&id) == nil {
				got = append(got, id)
			}
		}
		rows.Close()
		wakeFn(got...)
	}
}
