package sandboxes

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Module is the sandboxes module's migrations (`sandboxes/0001_sandboxes`): tables sandboxes,
// sandboxes_output, sandboxes_usage and sandboxes_assignments. Run store.LeaseModule first.
var Module = store.EmbeddedModule("sandboxes", migrations)

// columns are the columns of table sandboxes in scan order (scanRecord).
const columns = `id, tenant_id, template_id, template_name, pool_id, flavor_id, node_id, state, warm, claimed_at, spec,
	vcpu, memory_gib, disk_gib, gpu, charged, priority, queued, created_by, created_at, pending_reason,
	starting_at, starting_reason, running_at, running_reason, ended_at, end_reason, message, exit_code, signal,
	stdout_bytes, stderr_bytes, stdout_truncated, stderr_truncated, cpu_ms, peak_memory_bytes,
	stop_requested_at, deleted_at, updated_at, runs_as, stop_reason, unknown_at, reconnected_at`

type scanner interface{ Scan(dest ...any) error }

func scanRecord(row scanner) (*record, error) {
	var r record
	var state, specJSON string
	var warm, charged, queued, outT, errT int
	var exit sql.NullInt64
	if err := row.Scan(&r.ID, &r.TenantID, &r.TemplateID, &r.TemplateName, &r.PoolID, &r.FlavorID, &r.NodeID, &state, &warm, &r.ClaimedAt, &specJSON,
		&r.Res.VCPU, &r.Res.MemoryGiB, &r.Res.DiskGiB, &r.Res.GPU, &charged, &r.Priority, &queued, &r.CreatedBy, &r.CreatedAt, &r.PendingReason,
		&r.StartingAt, &r.StartingReason, &r.RunningAt, &r.RunningReason, &r.EndedAt, &r.EndReason, &r.Message, &exit, &r.Signal,
		&r.StdoutBytes, &r.StderrBytes, &outT, &errT, &r.CPUMillis, &r.PeakMemoryBytes,
		&r.StopRequestedAt, &r.DeletedAt, &r.UpdatedAt, &r.RunsAs, &r.StopReason, &r.UnknownAt, &r.ReconnectedAt); err != nil {
		return nil, err
	}
	r.State, r.Warm, r.Charged, r.Queued = State(state), warm == 1, charged == 1, queued == 1
	r.StdoutTruncated, r.StderrTruncated = outT == 1, errT == 1
	if exit.Valid {
		c := int(exit.Int64)
		r.ExitCode = &c
	}
	if err := json.Unmarshal([]byte(specJSON), &r.Spec); err != nil {
		return nil, fmt.Errorf("sandbox %s: its spec: %w", r.ID, err)
	}
	return &r, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// insert writes r as a new row (RunsAs its ID when unset).
func insert(ctx context.Context, q store.Querier, r *record) error {
	if r.RunsAs == "" {
		r.RunsAs = r.ID
	}
	var exit any
	if r.ExitCode != nil {
		exit = int64(*r.ExitCode)
	}
	_, err := q.ExecContext(ctx, `INSERT INTO sandboxes (`+columns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,
		$12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30,
		$31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43)`,
		r.ID, r.TenantID, r.TemplateID, r.TemplateName, r.PoolID, r.FlavorID, r.NodeID, string(r.State), b2i(r.Warm), r.ClaimedAt, mustJSON(r.Spec),
		r.Res.VCPU, r.Res.MemoryGiB, r.Res.DiskGiB, r.Res.GPU, b2i(r.Charged), r.Priority, b2i(r.Queued), r.CreatedBy, r.CreatedAt, r.PendingReason,
		r.StartingAt, r.StartingReason, r.RunningAt, r.RunningReason, r.EndedAt, r.EndReason, r.Message, exit, r.Signal,
		r.StdoutBytes, r.StderrBytes, b2i(r.StdoutTruncated), b2i(r.StderrTruncated), r.CPUMillis, r.PeakMemoryBytes,
		r.StopRequestedAt, r.DeletedAt, r.UpdatedAt, r.RunsAs, r.StopReason, r.UnknownAt, r.ReconnectedAt)
	if err != nil {
		return fmt.Errorf("insert sandbox %s: %w", r.ID, err)
	}
	return nil
}

// load returns sandbox id (deleted ones included), or nil when there is none.
func load(ctx context.Context, q store.Querier, id string) (*record, error) {
	return loadBy(ctx, q, "id", id)
}

// loadRunsAs returns the sandbox its node knows as id (deleted ones included), or nil when
// there is none.
func loadRunsAs(ctx context.Context, q store.Querier, id string) (*record, error) {
	return loadBy(ctx, q, "runs_as", id)
}

// loadBy returns the sandbox whose column ("id" or "runs_as") is id, or nil when there is none.
func loadBy(ctx context.Context, q store.Querier, column, id string) (*record, error) {
	r, err := scanRecord(q.QueryRowContext(ctx, `SELECT `+columns+` FROM sandboxes WHERE `+column+` = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load sandbox %s (%s): %w", id, column, err)
	}
	return r, nil
}

// query returns the rows where holds, in the order and up to the limit it says.
func query(ctx context.Context, q store.Querier, where string, args ...any) ([]*record, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+columns+` FROM sandboxes WHERE `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("query sandboxes: %w", err)
	}
	defer rows.Close()
	var out []*record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("scan sandbox: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// placeholders returns "$from, $from+1, ..." for n values.
func placeholders(from, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d", from+i)
	}
	return b.String()
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// notFound is the error of a sandbox the tenant does not have (another tenant's included).
func notFound(tenant, id string) error {
	return cubefleet.Errorf(cubefleet.CodeNotFound, "tenant %s has no sandbox %s", tenant, id)
}
