package nodestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/store"
)

// Flush writes everything queued and every status reported since the last flush in one
// transaction, then tells the registrations waiting for it. On failure everything stays
// queued for the next flush. Run calls it every FlushEvery (and at once for a registration);
// Close, tests and benchmarks call it directly. Only one flush runs at a time.
func (s *Store) Flush(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	start := time.Now()
	mark := s.jnl.mark() // before take: every record journaled so far is in b, or was written
	b := s.q.take()
	var status []nodes.Status
	if s.reg != nil {
		status = s.reg.TakeStatus(s.retry)
	}
	s.retry = nil
	if len(status) == 0 && b.empty() {
		for _, w := range b.waiters {
			w <- nil
		}
		return nil
	}
	var spent []pendingJoin
	var shadowed []string // nodes another replica deleted: their rows are not written back
	taken := status
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		spent, status, shadowed = spent[:0], taken, nil
		for _, d := range b.deletes {
			for _, table := range []string{"nodes_registrations", "nodes_status"} {
				if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE node_id = $1`, d.ID); err != nil {
					return fmt.Errorf("delete node %s: %w", d.ID, err)
				}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO nodes_deleted (node_id, at, writer) VALUES ($1, $2, $3)`, d.ID, d.At, s.holder); err != nil {
				return fmt.Errorf("delete node %s: %w", d.ID, err)
			}
		}
		regs := make(map[string]nodes.Registration, len(b.regs)+len(b.joins))
		for id, reg := range b.regs {
			regs[id] = reg
		}
		for _, j := range b.joins {
			used, err := useJoinToken(ctx, tx, j.use.TokenID, j.use.IP)
			if err != nil {
				return err
			}
			id := j.reg.NodeID
			switch {
			case !used:
				spent = append(spent, j)
				delete(regs, id)
			case j.deleted:
			default:
				if _, newer := regs[id]; !newer {
					regs[id] = j.reg
				}
			}
		}
		if len(regs) > 0 || len(status) > 0 {
			tombs, err := s.tombstones(ctx, tx)
			if err != nil {
				return err
			}
			if status, shadowed, err = dropShadowed(ctx, tx, tombs, regs, status); err != nil {
				return err
			}
		}
		regRows := make([][]any, 0, len(regs))
		for _, reg := range regs {
			regRows = append(regRows, registrationRow(&reg, s.holder))
		}
		if err := s.bulkUpsert(ctx, tx, "nodes_registrations", registrationCols, nil, regRows); err != nil {
			return err
		}
		rows := make([][]any, len(status))
		for i := range status {
			rows[i] = statusRow(&status[i], s.holder)
		}
		if err := s.bulkUpsert(ctx, tx, "nodes_status", statusCols, []string{"inventory"}, rows); err != nil {
			return err
		}
		for i := range status {
			inv := status[i].Inventory
			if inv == nil {
				continue
			}
			data, _ := json.Marshal(inventoryRecord{Images: inv.Images, Templates: inv.Templates, TemplatesReported: inv.TemplatesReported})
			if _, err := tx.ExecContext(ctx, `UPDATE nodes_status SET inventory = $2 WHERE node_id = $1`, status[i].NodeID, string(data)); err != nil {
				return fmt.Errorf("write inventory of %s: %w", status[i].NodeID, err)
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
	s.m.flushTime.Observe(time.Since(start).Seconds())
	if err != nil {
		s.m.flushes.WithLabelValues("error").Inc()
		s.q.putBack(b)
		s.retry = taken
		s.m.pending.Set(float64(s.q.pending()))
		return err
	}
	if len(shadowed) > 0 {
		s.log.Debug("not writing back nodes deleted through another replica", "nodes", len(shadowed))
	}
	s.m.flushes.WithLabelValues("ok").Inc()
	s.m.flushRows.Add(float64(len(status)))
	if err := s.jnl.written(mark); err != nil {
		s.log.Error("emptying the node registration journal failed; it is replayed (harmlessly) at the next start", "err", err)
	}
	for _, j := range spent {
		s.dropSpent(j)
	}
	for _, w := range b.waiters {
		w <- nil
	}
	for _, j := range b.joins {
		if !isSpent(spent, j) {
			j.done <- nil
		}
	}
	s.m.pending.Set(float64(s.q.pending()))
	if dropped := s.q.takeDropped(); dropped > 0 {
		s.log.Error("dropped node events and audit rows queued while the database did not answer", "dropped", dropped)
	}
	return nil
}

func isSpent(spent []pendingJoin, j pendingJoin) bool {
	for _, sp := range spent {
		if sp.done == j.done {
			return true
		}
	}
	return false
}

// dropSpent undoes a join whose token another replica used up first: the registry forgets the
// node and its credential, its deletion is queued (for the other replicas), and the waiting
// registration answers 401.
func (s *Store) dropSpent(j pendingJoin) {
	s.joinMu.Lock()
	delete(s.ledger, j.use.Hash) // stale: read the token again on its next use
	s.joinMu.Unlock()
	if j.spent != nil {
		j.spent()
	}
	s.Delete(j.reg.NodeID, s.now())
	s.log.Warn("a join token was used up by another replica before this registration was written; the registration is refused", "node", j.reg.NodeID, "join_token", j.use.TokenID)
	j.done <- nodes.ErrTokenSpent
}

// liveRecord is the JSON of nodes_status.live.
type liveRecord struct {
	Conditions    []nodeapi.Condition `json:"conditions,omitempty"`
	Allocated     *nodeapi.Allocated  `json:"allocated,omitempty"`
	DiskUsage     *nodeapi.DiskUsage  `json:"disk_usage,omitempty"`
	MetricAt      int64               `json:"metric_at,omitempty"`
	MetricLocalAt int64               `json:"metric_local_at,omitempty"`
	Sandboxes     []string            `json:"sandboxes,omitempty"`
	// ReportInterval is the node's observed report interval in ms (nodes.Status); absent in
	// rows written before it was kept, and while not observed.
	ReportInterval int64 `json:"report_interval_ms,omitempty"`
}

// appendLive appends st's liveRecord JSON, encoded by hand (the flusher writes 10,000 a
// second).
func appendLive(dst []byte, st *nodes.Status) []byte {
	dst = append(dst, `{"conditions":`...)
	dst = nodeapi.AppendConditions(dst, st.Conditions)
	if st.Allocated != nil {
		dst = append(dst, `,"allocated":`...)
		dst = st.Allocated.AppendJSON(dst)
	}
	if st.DiskUsage != nil {
		dst = append(dst, `,"disk_usage":`...)
		dst = st.DiskUsage.AppendJSON(dst)
	}
	dst = append(dst, `,"metric_at":`...)
	dst = strconv.AppendInt(dst, st.MetricAt, 10)
	dst = append(dst, `,"metric_local_at":`...)
	dst = strconv.AppendInt(dst, st.MetricLocalAt, 10)
	if st.Sandboxes != nil {
		dst = append(dst, `,"sandboxes":[`...)
		for i, id := range st.Sandboxes {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = nodeapi.AppendString(dst, id)
		}
		dst = append(dst, ']')
	}
	if st.ReportInterval > 0 {
		dst = append(dst, `,"report_interval_ms":`...)
		dst = strconv.AppendInt(dst, st.ReportInterval, 10)
	}
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
	GRPCPort            int64                      `json:"grpc_port,omitempty"`
	Capacity            nodeapi.Resources          `json:"capacity"`
	Allocatable         nodeapi.Resources          `json:"allocatable"`
	InstanceType        string                     `json:"instance_type,omitempty"`
	QuotaCPU            int64                      `json:"quota_cpu,omitempty"`
	QuotaMemMB          int64                      `json:"quota_mem_mb,omitempty"`
	CreateConcurrentNum int64                      `json:"create_concurrent_num,omitempty"`
	MaxMVMNum           int64                      `json:"max_mvm_num,omitempty"`
	PausedReleaseRatio  *float64                   `json:"paused_release_ratio,omitempty"`
	Versions            []nodeapi.ComponentVersion `json:"versions,omitempty"`
	HostFacts           nodeapi.HostFacts          `json:"host_facts"`
}

// statusRow is st's nodes_status row (statusCols), as written by replica holder.
func statusRow(st *nodes.Status, holder string) []any {
	ready := 0
	if st.Ready {
		ready = 1
	}
	return []any{st.NodeID, st.ReportedAt, st.HeartbeatAt, ready, string(appendLive(make([]byte, 0, 512), st)), holder}
}

// registrationRow is reg's nodes_registrations row (registrationCols), as written by replica
// holder.
func registrationRow(reg *nodes.Registration, holder string) []any {
	labels := []byte("{}")
	if reg.Labels != nil {
		labels, _ = json.Marshal(reg.Labels)
	}
	report, _ := json.Marshal(reportRecord{
		GRPCPort: reg.GRPCPort, Capacity: reg.Capacity, Allocatable: reg.Allocatable, InstanceType: reg.InstanceType,
		QuotaCPU: reg.QuotaCPU, QuotaMemMB: reg.QuotaMemMB, CreateConcurrentNum: reg.CreateConcurrentNum, MaxMVMNum: reg.MaxMVMNum,
		PausedReleaseRatio: reg.PausedReleaseRatio, Versions: reg.Versions, HostFacts: reg.HostFacts,
	})
	return []any{reg.NodeID, reg.HostIP, reg.Agent, reg.PoolID, reg.ClusterLabel, string(labels), string(report), reg.CredentialHash,
		reg.CordonDetail, string(reg.State), reg.RegisteredAt, reg.UpdatedAt, holder, reg.DrainReason, reg.DrainBy, reg.DrainAt,
		reg.DrainedAt, reg.CordonBy, reg.DrainDeadline}
}

var (
	registrationCols = []bulkCol{{"node_id", "text"}, {"host_ip", "text"}, {"agent", "text"}, {"pool_id", "text"},
		{"cluster_label", "text"}, {"labels", "text"}, {"report", "text"}, {"credential_hash", "text"}, {"cordon_detail", "text"},
		{"health_state", "text"}, {"registered_at", "bigint"}, {"updated_at", "bigint"}, {"writer", "text"},
		{"drain_reason", "text"}, {"drain_by", "text"}, {"drain_requested_at", "bigint"}, {"drained_at", "bigint"},
		{"cordon_by", "text"}, {"drain_deadline", "bigint"}}
	statusCols = []bulkCol{{"node_id", "text"}, {"reported_at", "bigint"}, {"heartbeat_at", "bigint"}, {"ready", "int"}, {"live", "text"},
		{"writer", "text"}}
)

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
func (s *Store) bulkUpsert(ctx context.Context, tx *sql.Tx, table string, cols []bulkCol, keep []string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	pg := s.db.Dialect() == store.Postgres
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
