package sandboxes

import (
	"context"
	"database/sql"
	"fmt"
)

// keepOutput writes res's output streams of sandbox r (nothing when both are empty), then keeps
// r's tenant within --tenant-result-max-bytes: while the output its ended sandboxes keep passes
// the bound, the output of its oldest ended sandbox (by end, then id) other than r is dropped,
// its record, exit state and byte counts stay, and its message notes the pruning. r's own output
// always fits (the bound holds two whole streams).
func (s *Service) keepOutput(ctx context.Context, tx *sql.Tx, r *record, res result) error {
	if len(res.stdout) == 0 && len(res.stderr) == 0 {
		return nil
	}
	stdout, stderr := res.stdout, res.stderr
	if stdout == nil {
		stdout = []byte{}
	}
	if stderr == nil {
		stderr = []byte{}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sandboxes_output (sandbox_id, stdout, stderr) VALUES ($1, $2, $3)`, r.ID, stdout, stderr); err != nil {
		return fmt.Errorf("keep the output of %s: %w", r.ID, err)
	}
	return s.pruneOutput(ctx, tx, r.TenantID, r.ID)
}

// pruneBatch bounds the results one pass of pruneOutput reads.
const pruneBatch = 256

// pruneOutput drops the output of tenant's oldest ended sandboxes, except keep, until what the
// tenant's results keep is at most --tenant-result-max-bytes.
func (s *Service) pruneOutput(ctx context.Context, tx *sql.Tx, tenant, keep string) error {
	var total int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(stdout_bytes + stderr_bytes), 0) FROM sandboxes
		WHERE tenant_id = $1 AND output_pruned_at = 0 AND ended_at > 0`, tenant).Scan(&total); err != nil {
		return fmt.Errorf("sum the stored output of tenant %s: %w", tenant, err)
	}
	limit := s.cfg.TenantResultMaxBytes
	note := fmt.Sprintf("its output was pruned: tenant %s's stored output passed --tenant-result-max-bytes %d, which drops the oldest results' output first", tenant, limit)
	now := s.now()
	for total > limit {
		type kept struct {
			id    string
			bytes int64
		}
		var oldest []kept
		rows, err := tx.QueryContext(ctx, `SELECT id, stdout_bytes + stderr_bytes FROM sandboxes
			WHERE tenant_id = $1 AND output_pruned_at = 0 AND ended_at > 0 AND stdout_bytes + stderr_bytes > 0 AND id <> $2
			ORDER BY ended_at, id LIMIT $3`, tenant, keep, pruneBatch)
		if err != nil {
			return fmt.Errorf("find the oldest results of tenant %s: %w", tenant, err)
		}
		for rows.Next() {
			var k kept
			if err := rows.Scan(&k.id, &k.bytes); err != nil {
				rows.Close()
				return fmt.Errorf("find the oldest results of tenant %s: %w", tenant, err)
			}
			oldest = append(oldest, k)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("find the oldest results of tenant %s: %w", tenant, err)
		}
		if len(oldest) == 0 {
			return nil
		}
		for _, k := range oldest {
			if total <= limit {
				break
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM sandboxes_output WHERE sandbox_id = $1`, k.id); err != nil {
				return fmt.Errorf("prune the output of %s: %w", k.id, err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE sandboxes SET output_pruned_at = $2, updated_at = $2,
				message = CASE WHEN message = '' THEN $3 ELSE message || '; ' || $3 END WHERE id = $1`, k.id, now, note); err != nil {
				return fmt.Errorf("prune the output of %s: %w", k.id, err)
			}
			total -= k.bytes
		}
	}
	return nil
}
