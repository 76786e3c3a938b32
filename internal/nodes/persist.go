package nodes

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Module is the nodes module's migrations (`nodes/0001_registry`, `nodes/0002_drain`,
// `nodes/0003_cordon_by`, `nodes/0004_join_token_revoke`). The
// registry also writes events (events.Module) and audit rows (audit.Module).
var Module = store.EmbeddedModule("nodes", migrations)

// ticket is a caller waiting for its write to be durable: done closes after the flush that
// wrote it commits; err is set first when the write was refused (errTokenSpent).
type ticket struct {
	done chan struct{}
	err  error
}

func newTicket() *ticket { return &ticket{done: make(chan struct{})} }

// pendingJoin is a registration with a join token, written only if the token still has a use.
type pendingJoin struct {
	use joinUse
	n   *node
	t   *ticket
}

// maxQueued bounds the queued events and audit rows while the database does not answer;
// beyond it new ones are dropped (and logged), so a long outage cannot exhaust memory.
const maxQueued = 100000

// writer queues what the flusher writes: registration rows (the node's whole current state,
// so repeated changes coalesce), deletions, join-token uses, events and audit rows. Status rows
// are not queued: each node's statusDirty flag marks them.
type writer struct {
	mu      sync.Mutex
	regs    map[*node]struct{}
	deletes []deletion
	joins   []pendingJoin
	events  []events.Event
	audits  []audit.Entry
	waiters []*ticket
	dropped int
	wake    chan struct{}
}

func (w *writer) init() {
	w.regs = map[*node]struct{}{}
	w.wake = make(chan struct{}, 1)
}

// kick asks the flusher to write now instead of at its next tick.
func (w *writer) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *writer) markReg(n *node) {
	w.mu.Lock()
	w.regs[n] = struct{}{}
	w.mu.Unlock()
}

func (w *writer) markRegWait(n *node, t *ticket) {
	w.mu.Lock()
	w.regs[n] = struct{}{}
	w.waiters = append(w.waiters, t)
	w.mu.Unlock()
}

func (w *writer) addJoin(u joinUse, n *node, t *ticket) {
	w.mu.Lock()
	w.joins = append(w.joins, pendingJoin{use: u, n: n, t: t})
	w.mu.Unlock()
}

// deletion is a node deleted at (Unix ms), queued for the flusher.
type deletion struct {
	id string
	at int64
}

func (w *writer) addDelete(id string, at int64) {
	w.mu.Lock()
	w.deletes = append(w.deletes, deletion{id: id, at: at})
	w.mu.Unlock()
	w.kick()
}

func (w *writer) addEvent(e events.Event) {
	w.mu.Lock()
	if len(w.events) < maxQueued {
		w.events = append(w.events, e)
	} else {
		w.dropped++
	}
	w.mu.Unlock()
}

func (w *writer) addAudit(e audit.Entry) {
	w.mu.Lock()
	if len(w.audits) < maxQueued {
		w.audits = append(w.audits, e)
	} else {
		w.dropped++
	}
	w.mu.Unlock()
}

// batch is what one flush writes.
type batch struct {
	regs    []*node
	deletes []deletion
	joins   []pendingJoin
	events  []events.Event
	audits  []audit.Entry
	waiters []*ticket
}

func (w *writer) take() batch {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := batch{deletes: w.deletes, joins: w.joins, events: w.events, audits: w.audits, waiters: w.waiters}
	for n := range w.regs {
		b.regs = append(b.regs, n)
	}
	clear(w.regs)
	w.deletes, w.joins, w.events, w.audits, w.waiters = nil, nil, nil, nil, nil
	return b
}

// putBack re-queues a batch whose flush failed, ahead of what was queued since.
func (w *writer) putBack(b batch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range b.regs {
		w.regs[n] = struct{}{}
	}
	w.deletes = append(b.deletes, w.deletes...)
	w.joins = append(b.joins, w.joins...)
	w.events = append(b.events, w.events...)
	w.audits = append(b.audits, w.audits...)
	w.waiters = append(b.waiters, w.waiters...)
}

func (w *writer) pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.regs) + len(w.deletes) + len(w.joins) + len(w.events) + len(w.audits)
}

// flushTimeout bounds one flush of the flusher's loop (and so how long a shutdown waits for
// the flush in flight).
const flushTimeout = 15 * time.Second

// flushLoop flushes every FlushEvery, and at once when kicked, until ctx ends. A failed flush
// keeps everything queued for the next one.
func (r *Registry) flushLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.FlushEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.w.wake:
		}
		// A flush is not cancelled by ctx: cancelling one mid-commit leaves its outcome unknown,
		// and a batch that did commit would be queued and written again (duplicate ids).
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		err := r.Flush(fctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				r.log.Error("writing node state to the database failed; it stays queued in memory", "err", err)
			}
			failing = true
		} else if failing {
			r.log.Info("node state is being written again")
			failing = false
		}
	}
}

// statusRow is one node's status as the flusher writes it.
type statusRow struct {
	n         *node
	row       []any
	inventory string // "" when unchanged
}

// liveRecord is the JSON of nodes_status.live.
type liveRecord struct {
	Conditions    []Condition `json:"conditions,omitempty"`
	Allocated     *Allocated  `json:"allocated,omitempty"`
	DiskUsage     *DiskUsage  `json:"disk_usage,omitempty"`
	MetricAt      int64       `json:"metric_at,omitempty"`
	MetricLocalAt int64       `json:"metric_local_at,omitempty"`
}

// appendLive appends n's liveRecord JSON, encoded by hand (the flusher writes 10,000 a
// second). Requires n.mu.
func appendLive(dst []byte, n *node) []byte {
	dst = append(dst, `{"conditions":`...)
	dst = appendConditions(dst, n.conditions)
	if n.hasAllocated {
		a := n.allocated
		dst = append(dst, `,"allocated":{"milli_cpu":`...)
		dst = strconv.AppendInt(dst, a.MilliCPU, 10)
		dst = appendIntField(dst, "memory_mb", a.MemoryMB)
		dst = appendIntField(dst, "mvm_num", a.MvmNum)
		dst = appendIntField(dst, "mvm_running_num", a.MvmRunningNum)
		dst = appendIntField(dst, "nic_queues", a.NICQueues)
		dst = appendIntField(dst, "data_disk_mb", a.DataDiskMB)
		dst = appendIntField(dst, "storage_disk_mb", a.StorageDiskMB)
		dst = append(dst, '}')
	}
	if n.hasDiskUsage {
		d := n.diskUsage
		dst = append(dst, `,"disk_usage":{"data_disk_usage_per":`...)
		dst = appendFloat(dst, d.DataDiskUsagePer)
		dst = appendFloatField(dst, "storage_disk_usage_per", d.StorageDiskUsagePer)
		dst = appendFloatField(dst, "sys_disk_usage_per", d.SysDiskUsagePer)
		dst = append(dst, '}')
	}
	dst = appendIntField(dst, "metric_at", n.metricAt)
	dst = appendIntField(dst, "metric_local_at", n.metricLocalAt)
	return append(dst, '}')
}

// inventoryRecord is the JSON of nodes_status.inventory.
type inventoryRecord struct {
	Images            json.RawMessage `json:"images,omitempty"`
	Templates         json.RawMessage `json:"local_templates,omitempty"`
	TemplatesReported bool            `json:"local_templates_reported,omitempty"`
}

// reportRecord is the JSON of nodes_registrations.report.
type reportRecord struct {
	GRPCPort            int64     `json:"grpc_port,omitempty"`
	Capacity            Resources `json:"capacity"`
	Allocatable         Resources `json:"allocatable"`
	InstanceType        string    `json:"instance_type,omitempty"`
	QuotaCPU            int64     `json:"quota_cpu,omitempty"`
	QuotaMemMB          int64     `json:"quota_mem_mb,omitempty"`
	CreateConcurrentNum int64     `json:"create_concurrent_num,omitempty"`
	MaxMvmNum           int64     `json:"max_mvm_num,omitempty"`
	PausedReleaseRatio  *float64  `json:"paused_release_ratio,omitempty"`
	Versions            []Version `json:"versions,omitempty"`
	HostFacts           HostFacts `json:"host_facts"`
}

// collectStatus takes every node whose status changed since the last flush (clearing its
// flag) and copies what the flusher writes.
func (r *Registry) collectStatus() []statusRow {
	var out []statusRow
	for _, n := range r.nodes() {
		if !n.statusDirty.CompareAndSwap(true, false) {
			continue
		}
		n.mu.Lock()
		if n.deleted {
			n.mu.Unlock()
			continue
		}
		live := string(appendLive(make([]byte, 0, 512), n))
		sr := statusRow{n: n}
		var inv []byte
		if n.inventoryDirty {
			inv, _ = json.Marshal(inventoryRecord{Images: n.imagesJSON, Templates: n.templatesJSON, TemplatesReported: n.templatesReported})
			n.inventoryDirty = false
		}
		reportedAt, heartbeatAt, ready := n.reportedAt, n.heartbeatAt, boolInt(n.ready)
		n.mu.Unlock()
		sr.row = []any{n.id, reportedAt, heartbeatAt, ready, live, r.holder}
		sr.inventory = string(inv)
		out = append(out, sr)
	}
	return out
}

// registrationRow copies n's registration row, as written by replica holder. Requires n.mu.
func registrationRow(n *node, holder string) []any {
	labels := orEmpty(n.labelsJSON, "{}")
	report, _ := json.Marshal(reportRecord{
		GRPCPort: n.grpcPort, Capacity: n.capacity, Allocatable: n.allocatable, InstanceType: n.instanceType,
		QuotaCPU: n.quotaCPU, QuotaMemMB: n.quotaMemMB, CreateConcurrentNum: n.createConcurrent, MaxMvmNum: n.maxMvm,
		PausedReleaseRatio: n.pausedRatio, Versions: n.versions, HostFacts: n.hostFacts,
	})
	return []any{n.id, n.hostIP, n.agent, n.poolID, n.clusterLabel, string(labels), string(report), n.credHash, n.cordonDetail,
		string(n.state), n.registeredAt, n.updatedAt, holder, n.drainReason, n.drainBy, n.drainAt, n.drainedAt, n.cordonBy}
}

var (
	registrationCols = []bulkCol{{"node_id", "text"}, {"host_ip", "text"}, {"agent", "text"}, {"pool_id", "text"},
		{"cluster_label", "text"}, {"labels", "text"}, {"report", "text"}, {"credential_hash", "text"}, {"cordon_detail", "text"},
		{"health_state", "text"}, {"registered_at", "bigint"}, {"updated_at", "bigint"}, {"writer", "text"},
		{"drain_reason", "text"}, {"drain_by", "text"}, {"drain_requested_at", "bigint"}, {"drained_at", "bigint"},
		{"cordon_by", "text"}}
	statusCols = []bulkCol{{"node_id", "text"}, {"reported_at", "bigint"}, {"heartbeat_at", "bigint"}, {"ready", "int"}, {"live", "text"},
		{"writer", "text"}}
)

// Flush writes everything queued and every changed status in one transaction, then wakes
// the registrations waiting for it. On failure everything stays queued. Run calls it every
// FlushEvery; tests and shutdown call it directly. Only one flush runs at a time.
func (r *Registry) Flush(ctx context.Context) error {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	start := time.Now()
	mark := r.jnl.mark() // before take: every record journaled so far is in b, or was written
	b := r.w.take()
	status := r.collectStatus()
	if len(status) == 0 && len(b.regs) == 0 && len(b.deletes) == 0 && len(b.joins) == 0 && len(b.events) == 0 && len(b.audits) == 0 {
		for _, t := range b.waiters {
			close(t.done)
		}
		return nil
	}
	var spent []pendingJoin
	err := r.db.InTx(ctx, func(tx *sql.Tx) error {
		spent = spent[:0]
		for _, d := range b.deletes {
			for _, table := range []string{"nodes_registrations", "nodes_status"} {
				if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE node_id = $1`, d.id); err != nil {
					return fmt.Errorf("delete node %s: %w", d.id, err)
				}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO nodes_deleted (node_id, at, writer) VALUES ($1, $2, $3)`, d.id, d.at, r.holder); err != nil {
				return fmt.Errorf("delete node %s: %w", d.id, err)
			}
		}
		var regRows [][]any
		written := map[*node]bool{}
		for _, j := range b.joins {
			used, err := useJoinToken(ctx, tx, j.use.tokenID, j.use.ip)
			if err != nil {
				return err
			}
			if !used {
				spent = append(spent, j)
				continue
			}
			b.regs = append(b.regs, j.n)
		}
		for _, n := range b.regs {
			if written[n] || isSpent(spent, n) {
				continue
			}
			written[n] = true
			n.mu.Lock()
			if !n.deleted {
				regRows = append(regRows, registrationRow(n, r.holder))
			}
			n.mu.Unlock()
		}
		if err := r.bulkUpsert(ctx, tx, "nodes_registrations", registrationCols, nil, regRows); err != nil {
			return err
		}
		rows := make([][]any, len(status))
		for i, s := range status {
			rows[i] = s.row
		}
		if err := r.bulkUpsert(ctx, tx, "nodes_status", statusCols, []string{"inventory"}, rows); err != nil {
			return err
		}
		for _, s := range status {
			if s.inventory == "" {
				continue
			}
			if _, err := tx.ExecContext(ctx, `UPDATE nodes_status SET inventory = $2 WHERE node_id = $1`, s.n.id, s.inventory); err != nil {
				return fmt.Errorf("write inventory of %s: %w", s.n.id, err)
			}
		}
		if err := events.Append(ctx, tx, b.events...); err != nil {
			return err
		}
		var ab audit.Batch
		for _, e := range b.audits {
			ab.Add(e)
		}
		return ab.Flush(ctx, tx)
	})
	r.m.flushTime.Observe(time.Since(start).Seconds())
	if err != nil {
		r.m.flushes.WithLabelValues("error").Inc()
		r.w.putBack(b)
		for _, s := range status {
			s.n.statusDirty.Store(true)
			if s.inventory != "" {
				s.n.mu.Lock()
				s.n.inventoryDirty = true
				s.n.mu.Unlock()
			}
		}
		r.m.pending.Set(float64(r.w.pending()))
		return err
	}
	r.m.flushes.WithLabelValues("ok").Inc()
	r.m.flushRows.Add(float64(len(status)))
	if err := r.jnl.written(mark); err != nil {
		r.log.Error("emptying the node registration journal failed; it is replayed (harmlessly) at the next start", "err", err)
	}
	for _, j := range spent {
		r.dropSpent(j)
	}
	for _, t := range b.waiters {
		close(t.done)
	}
	for _, j := range b.joins {
		close(j.t.done)
	}
	r.m.pending.Set(float64(r.w.pending()))
	r.w.mu.Lock()
	dropped := r.w.dropped
	r.w.dropped = 0
	r.w.mu.Unlock()
	if dropped > 0 {
		r.log.Error("dropped node events and audit rows queued while the database did not answer", "dropped", dropped)
	}
	return nil
}

func isSpent(spent []pendingJoin, n *node) bool {
	for _, j := range spent {
		if j.n == n {
			return true
		}
	}
	return false
}

// dropSpent undoes a join whose token another replica used up first: the node and its
// credential are forgotten, and the waiting registration answers 401.
func (r *Registry) dropSpent(j pendingJoin) {
	j.t.err = errTokenSpent
	r.joinMu.Lock()
	delete(r.ledger, j.use.hash) // stale: read the token again on its next use
	r.joinMu.Unlock()
	r.regMu.Lock()
	j.n.mu.Lock()
	j.n.deleted = true
	cred := j.n.credHash
	j.n.mu.Unlock()
	r.remove(j.n, cred)
	r.regMu.Unlock()
	r.w.addDelete(j.n.id, r.now())
	r.log.Warn("a join token was used up by another replica before this registration was written; the registration is refused", "node", j.n.id, "join_token", j.use.tokenID)
}

// bulkCol is one column of a bulk upsert: its name and SQL type (text, bigint or int).
type bulkCol struct{ name, typ string }

// bulkRows is how many rows one PostgreSQL bulk statement writes: enough to make 10,000 rows a
// handful of round trips, few enough that the driver's buffers (kept by each pooled connection)
// stay near a megabyte.
const bulkRows = 1000

// bulkUpsert writes rows (one value per column, the first column the primary key: strings for
// text, int64 or int for the others). On PostgreSQL each column travels as one array parameter
// expanded by unnest, one statement per bulkRows rows, so 10,000 rows cost a handful of round
// trips; on SQLite (in process, no round trips) one prepared statement runs per row. A
// conflicting row has every column but the key replaced; keep lists columns a new row gets as
// '{}' and an existing row keeps.
func (r *Registry) bulkUpsert(ctx context.Context, tx *sql.Tx, table string, cols []bulkCol, keep []string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	pg := r.db.Dialect() == store.Postgres
	names := make([]string, 0, len(cols)+len(keep))
	exprs := make([]string, 0, len(cols)+len(keep))
	var sets, arrays, aliases []string
	for i, c := range cols {
		names = append(names, c.name)
		if pg {
			arrays = append(arrays, fmt.Sprintf("$%d::%s[]", i+1, c.typ))
			aliases = append(aliases, fmt.Sprintf("c%d", i))
			exprs = append(exprs, "u."+aliases[i])
		} else {
			exprs = append(exprs, fmt.Sprintf("$%d", i+1))
		}
		if i > 0 {
			sets = append(sets, c.name+" = excluded."+c.name)
		}
	}
	for _, k := range keep {
		names = append(names, k)
		exprs = append(exprs, "'{}'")
	}
	conflict := ` ON CONFLICT (` + cols[0].name + `) DO UPDATE SET ` + strings.Join(sets, ", ")
	if !pg {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO `+table+` (`+strings.Join(names, ", ")+`) VALUES (`+strings.Join(exprs, ", ")+`)`+conflict)
		if err != nil {
			return fmt.Errorf("write %s: %w", table, err)
		}
		defer stmt.Close()
		for _, row := range rows {
			if _, err := stmt.ExecContext(ctx, row...); err != nil {
				return fmt.Errorf("write %s: %w", table, err)
			}
		}
		return nil
	}
	query := `INSERT INTO ` + table + ` (` + strings.Join(names, ", ") + `) SELECT ` + strings.Join(exprs, ", ") +
		` FROM unnest(` + strings.Join(arrays, ", ") + `) AS u(` + strings.Join(aliases, ", ") + `)` + conflict
	for start := 0; start < len(rows); start += bulkRows {
		if _, err := tx.ExecContext(ctx, query, columnArrays(cols, rows[start:min(start+bulkRows, len(rows))])...); err != nil {
			return fmt.Errorf("write %s: %w", table, err)
		}
	}
	return nil
}

// columnArrays turns rows into one Go slice per column ([]string for text, []int64 otherwise),
// which pgx sends as PostgreSQL arrays.
func columnArrays(cols []bulkCol, rows [][]any) []any {
	out := make([]any, len(cols))
	for i, c := range cols {
		if c.typ == "text" {
			col := make([]string, len(rows))
			for j, row := range rows {
				col[j], _ = row[i].(string)
			}
			out[i] = col
			continue
		}
		col := make([]int64, len(rows))
		for j, row := range rows {
			switch v := row[i].(type) {
			case int64:
				col[j] = v
			case int:
				col[j] = int64(v)
			}
		}
		out[i] = col
	}
	return out
}

// load reads every registration and its last status into memory. Restored nodes get the
// restart grace (see New).
func (r *Registry) load(ctx context.Context) error {
	rows, err := r.db.QueryContext(ctx, loadQuery)
	if err != nil {
		return fmt.Errorf("load nodes: %w", err)
	}
	defer rows.Close()
	now := r.now()
	for rows.Next() {
		n, err := r.scanNode(rows, now)
		if err != nil {
			return err
		}
		r.add(n)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load nodes: %w", err)
	}
	return nil
}

// loadOne reads node id from the database (nil when it is not there).
func (r *Registry) loadOne(ctx context.Context, id string) (*node, error) {
	rows, err := r.db.QueryContext(ctx, loadQuery+` WHERE r.node_id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("load node %s: %w", id, err)
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	return r.scanNode(rows, r.now())
}

const loadQuery = `SELECT r.node_id, r.host_ip, r.agent, r.pool_id, r.cluster_label, r.labels, r.report, r.credential_hash,
	r.cordon_detail, r.health_state, r.registered_at, r.updated_at, s.reported_at, s.heartbeat_at, s.ready, s.live, s.inventory,
	r.drain_reason, r.drain_by, r.drain_requested_at, r.drained_at, r.cordon_by
	FROM nodes_registrations r LEFT JOIN nodes_status s ON s.node_id = r.node_id`

func (r *Registry) scanNode(rows *sql.Rows, now int64) (*node, error) {
	n := &node{}
	var labels, report, state string
	var reportedAt, heartbeatAt, ready sql.NullInt64
	var live, inv sql.NullString
	if err := rows.Scan(&n.id, &n.hostIP, &n.agent, &n.poolID, &n.clusterLabel, &labels, &report, &n.credHash, &n.cordonDetail,
		&state, &n.registeredAt, &n.updatedAt, &reportedAt, &heartbeatAt, &ready, &live, &inv,
		&n.drainReason, &n.drainBy, &n.drainAt, &n.drainedAt, &n.cordonBy); err != nil {
		return nil, fmt.Errorf("load nodes: %w", err)
	}
	if err := json.Unmarshal([]byte(labels), &n.labels); err != nil {
		return nil, fmt.Errorf("load node %s: labels: %w", n.id, err)
	}
	var rep reportRecord
	if err := json.Unmarshal([]byte(report), &rep); err != nil {
		return nil, fmt.Errorf("load node %s: report: %w", n.id, err)
	}
	n.grpcPort, n.capacity, n.allocatable, n.instanceType = rep.GRPCPort, rep.Capacity, rep.Allocatable, rep.InstanceType
	n.quotaCPU, n.quotaMemMB, n.createConcurrent, n.maxMvm = rep.QuotaCPU, rep.QuotaMemMB, rep.CreateConcurrentNum, rep.MaxMvmNum
	n.pausedRatio = rep.PausedReleaseRatio
	n.setVersions(rep.Versions)
	n.setHostFacts(rep.HostFacts)
	n.setLabels(n.labels)
	n.reportedAt, n.heartbeatAt = n.updatedAt, n.updatedAt
	if reportedAt.Valid {
		n.reportedAt, n.heartbeatAt, n.ready = reportedAt.Int64, heartbeatAt.Int64, ready.Int64 == 1
	}
	if live.Valid {
		var l liveRecord
		if err := json.Unmarshal([]byte(live.String), &l); err != nil {
			return nil, fmt.Errorf("load node %s: status: %w", n.id, err)
		}
		n.conditions, n.metricAt, n.metricLocalAt = l.Conditions, l.MetricAt, l.MetricLocalAt
		if l.Allocated != nil {
			n.allocated, n.hasAllocated = *l.Allocated, true
		}
		if l.DiskUsage != nil {
			n.diskUsage, n.hasDiskUsage = *l.DiskUsage, true
		}
	}
	if inv.Valid {
		var i inventoryRecord
		if err := json.Unmarshal([]byte(inv.String), &i); err != nil {
			return nil, fmt.Errorf("load node %s: inventory: %w", n.id, err)
		}
		var images []Image
		var templates []LocalTemplate
		if len(i.Images) > 0 {
			if err := json.Unmarshal(i.Images, &images); err != nil {
				return nil, fmt.Errorf("load node %s: images: %w", n.id, err)
			}
			n.setImages(images)
		}
		if len(i.Templates) > 0 {
			if err := json.Unmarshal(i.Templates, &templates); err != nil {
				return nil, fmt.Errorf("load node %s: templates: %w", n.id, err)
			}
			n.setTemplates(templates)
		}
		n.templatesReported = i.TemplatesReported
	}
	// The restart grace: measure health from the later of the last report and this start,
	// so no node turns Suspect, Down or Lost for a full timeout after a restart; a node the
	// server had already seen Lost stays Lost.
	n.healthBase = n.reportedAt
	if State(state) != StateLost {
		n.healthBase = max(n.reportedAt, r.started)
	}
	n.state, n.stateAt = r.health(n, now), now
	switch State(state) {
	case StateReady, StateSuspect, StateDown, StateLost:
		n.wasReady = true
	}
	return n, nil
}
