package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Several server replicas may share one PostgreSQL (../shared/DESIGN.md, "Scaling out"): a
// node's reports land on whichever replica its connection reaches. Each replica keeps the
// registry in memory and writes what it receives (rows tagged with its holder id); every
// FlushEvery it reads the rows the other replicas wrote since its last read (newer reports,
// changed registrations, deletions), so every replica answers every read with every node's
// latest report, at most a flush interval or two late. One replica at a time, the holder of the
// lease nodes.health, turns health changes into events, so each change is one event. A replica
// alone (the usual SQLite case) skips the reads: replicas announce themselves in
// nodes_replicas.

const (
	// replicaEvery is how often a replica announces itself and looks for others.
	replicaEvery = 5 * time.Second
	// replicaTTL is how long an announcement counts.
	replicaTTL = 30 * time.Second
	// syncSlack re-reads rows this much older than the last read, for clocks that differ
	// between replicas and transactions that commit late.
	syncSlack = 5 * time.Second
	// tombstoneTTL is how long deletions are remembered for the other replicas.
	tombstoneTTL = time.Hour
	// healthLease is the lease of the replica that turns health changes into events.
	healthLease = "nodes.health"
	// healthLeaseTTL is how long a replica holds healthLease without renewing it.
	healthLeaseTTL = 10 * time.Second
)

// announce records this replica in nodes_replicas and notes whether others are alive. Errors
// are logged and keep the previous answer.
func (r *Registry) announce(ctx context.Context) {
	now := time.Now()
	_, err := r.db.ExecContext(ctx, `INSERT INTO nodes_replicas (holder, seen_at) VALUES ($1, $2)
		ON CONFLICT (holder) DO UPDATE SET seen_at = excluded.seen_at`, r.holder, now.UnixMilli())
	if err == nil {
		var n int
		err = r.db.QueryRowContext(ctx, `SELECT count(*) FROM nodes_replicas WHERE holder <> $1 AND seen_at > $2`,
			r.holder, now.Add(-replicaTTL).UnixMilli()).Scan(&n)
		r.others.Store(n > 0)
	}
	if err != nil && ctx.Err() == nil {
		r.log.Warn("announcing this replica of the node registry failed", "err", err)
	}
}

// retire removes this replica's announcement and gives up the health lease (at shutdown), so
// the next replica or restart takes over at once. (store has no release; an expired lease is
// what TryLease takes over.)
func (r *Registry) retire(ctx context.Context) {
	r.db.ExecContext(ctx, `DELETE FROM nodes_replicas WHERE holder = $1`, r.holder)
	r.db.ExecContext(ctx, `UPDATE store_leases SET expires_at = 0 WHERE name = $1 AND holder = $2`, healthLease, r.holder)
	r.leader.Store(false)
}

// lead takes or renews the health lease; on an error the previous answer stands.
func (r *Registry) lead(ctx context.Context) {
	ok, err := r.db.TryLease(ctx, healthLease, r.holder, healthLeaseTTL, time.Now())
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("renewing the node health lease failed", "err", err)
		}
		return
	}
	if ok != r.leader.Load() {
		r.log.Info("node health events", "this_replica_emits", ok, "holder", r.holder)
	}
	r.leader.Store(ok)
}

// Sync reads what the other replicas wrote since the last Sync: newer reports, changed
// registrations and deletions. It does nothing while this replica is alone. Run calls it every
// FlushEvery.
func (r *Registry) Sync(ctx context.Context) error {
	if !r.others.Load() {
		return nil
	}
	now := r.now()
	since := r.synced.Load() - syncSlack.Milliseconds()
	if err := r.syncDeletions(ctx, since); err != nil {
		return err
	}
	if err := r.syncRegistrations(ctx, since); err != nil {
		return err
	}
	if err := r.syncStatus(ctx, since); err != nil {
		return err
	}
	r.synced.Store(now)
	return nil
}

func (r *Registry) syncDeletions(ctx context.Context, since int64) error {
	rows, err := r.db.QueryContext(ctx, `SELECT node_id, at FROM nodes_deleted WHERE at > $1 AND writer <> $2`, since, r.holder)
	if err != nil {
		return fmt.Errorf("sync deletions: %w", err)
	}
	type del struct {
		id string
		at int64
	}
	var dels []del
	for rows.Next() {
		var d del
		if err := rows.Scan(&d.id, &d.at); err != nil {
			rows.Close()
			return fmt.Errorf("sync deletions: %w", err)
		}
		dels = append(dels, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sync deletions: %w", err)
	}
	for _, d := range dels {
		r.regMu.Lock()
		if n := r.node(d.id); n != nil {
			n.mu.Lock()
			gone := n.registeredAt <= d.at // not registered again since
			if gone {
				n.deleted = true
			}
			cred := n.credHash
			n.mu.Unlock()
			if gone {
				r.remove(n, cred)
			}
		}
		r.regMu.Unlock()
	}
	return nil
}

func (r *Registry) syncRegistrations(ctx context.Context, since int64) error {
	rows, err := r.db.QueryContext(ctx, `SELECT node_id FROM nodes_registrations WHERE updated_at > $1 AND writer <> $2`, since, r.holder)
	if err != nil {
		return fmt.Errorf("sync registrations: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("sync registrations: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sync registrations: %w", err)
	}
	for _, id := range ids {
		fresh, err := r.loadOne(ctx, id)
		if err != nil {
			return err
		}
		if fresh == nil {
			continue
		}
		r.regMu.Lock()
		if n := r.node(id); n == nil {
			r.add(fresh)
		} else {
			n.mu.Lock()
			if fresh.updatedAt > n.updatedAt {
				copyRegistration(n, fresh)
			}
			n.mu.Unlock()
			r.listGen.Add(1)
		}
		r.regMu.Unlock()
	}
	return nil
}

// copyRegistration copies the registration fields of src (read from the database) into n.
// Requires n.mu.
func copyRegistration(n, src *node) {
	n.hostIP, n.grpcPort, n.capacity, n.allocatable = src.hostIP, src.grpcPort, src.capacity, src.allocatable
	n.instanceType, n.clusterLabel = src.instanceType, src.clusterLabel
	n.quotaCPU, n.quotaMemMB, n.createConcurrent, n.maxMvm, n.pausedRatio = src.quotaCPU, src.quotaMemMB, src.createConcurrent, src.maxMvm, src.pausedRatio
	n.setLabels(src.labels)
	n.setVersions(src.versions)
	n.setHostFacts(src.hostFacts)
	n.agent, n.poolID, n.credHash, n.cordonDetail, n.cordonBy = src.agent, src.poolID, src.credHash, src.cordonDetail, src.cordonBy
	n.drainReason, n.drainBy, n.drainAt, n.drainedAt = src.drainReason, src.drainBy, src.drainAt, src.drainedAt
	n.registeredAt, n.updatedAt = src.registeredAt, src.updatedAt
	n.versionsHash, n.hostFactsHash = 0, 0
}

func (r *Registry) syncStatus(ctx context.Context, since int64) error {
	rows, err := r.db.QueryContext(ctx, `SELECT node_id, reported_at, heartbeat_at, ready, live FROM nodes_status
		WHERE reported_at > $1 AND writer <> $2`, since, r.holder)
	if err != nil {
		return fmt.Errorf("sync reports: %w", err)
	}
	defer rows.Close()
	var missing []string
	for rows.Next() {
		var id, live string
		var reportedAt, heartbeatAt, ready int64
		if err := rows.Scan(&id, &reportedAt, &heartbeatAt, &ready, &live); err != nil {
			return fmt.Errorf("sync reports: %w", err)
		}
		n := r.node(id)
		if n == nil {
			missing = append(missing, id)
			continue
		}
		n.mu.Lock()
		if reportedAt > n.reportedAt && !n.deleted {
			n.reportedAt, n.healthBase, n.heartbeatAt, n.ready = reportedAt, reportedAt, heartbeatAt, ready == 1
			var l liveRecord
			if json.Unmarshal([]byte(live), &l) == nil {
				n.conditions, n.metricAt, n.metricLocalAt = l.Conditions, l.MetricAt, l.MetricLocalAt
				if l.Allocated != nil {
					n.allocated, n.hasAllocated = *l.Allocated, true
				}
				if l.DiskUsage != nil {
					n.diskUsage, n.hasDiskUsage = *l.DiskUsage, true
				}
			}
		}
		n.mu.Unlock()
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sync reports: %w", err)
	}
	rows.Close()
	for _, id := range missing {
		if _, err := r.find(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// pruneTombstones forgets deletions older than tombstoneTTL.
func (r *Registry) pruneTombstones(ctx context.Context) {
	if _, err := r.db.ExecContext(ctx, `DELETE FROM nodes_deleted WHERE at < $1`, r.now()-tombstoneTTL.Milliseconds()); err != nil && ctx.Err() == nil {
		r.log.Warn("pruning node deletions failed", "err", err)
	}
}
