package fleet

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cubefleet/cubefleet/internal/fleet/document"
	"github.com/cubefleet/cubefleet/internal/store"
)

// Applied is the record of a tenant's last apply (fleet spec, "Drift"). Times are Unix ms.
type Applied struct {
	PlanHash  string `json:"planHash"`
	AppliedBy string `json:"appliedBy"`
	AppliedAt int64  `json:"appliedAt"`
	Prune     bool   `json:"prune"`
	CheckedAt *int64 `json:"checkedAt,omitempty"`
}

// Drift is what the last drift check found: the changes (at most 50) a new plan of the applied
// document would make.
type Drift struct {
	Changes  []Change `json:"changes"`
	Summary  Summary  `json:"summary"`
	Blocked  bool     `json:"blocked"`
	PlanHash string   `json:"planHash"`
}

// Status is fleet.status's result; a tenant that never applied a document gets only TenantID.
type Status struct {
	TenantID string   `json:"tenantId"`
	Applied  *Applied `json:"applied,omitempty"`
	Drift    *Drift   `json:"drift,omitempty"`
}

func recordApplied(ctx context.Context, q store.Querier, tenantID string, canonical []byte, planHash, by string, prune bool, now time.Time) error {
	pr := 0
	if prune {
		pr = 1
	}
	at := now.UnixMilli()
	_, err := q.ExecContext(ctx, `INSERT INTO fleet_applied (tenant_id, document, plan_hash, applied_by, applied_at, prune, checked_at, drift)
		VALUES ($1, $2, $3, $4, $5, $6, $5, NULL)
		ON CONFLICT (tenant_id) DO UPDATE SET document = excluded.document, plan_hash = excluded.plan_hash, applied_by = excluded.applied_by,
			applied_at = excluded.applied_at, prune = excluded.prune, checked_at = excluded.checked_at, drift = NULL`,
		tenantID, string(canonical), planHash, by, at, pr)
	if err != nil {
		return fmt.Errorf("record applied document: %w", err)
	}
	return nil
}

// appliedDoc is a stored apply with its document.
type appliedDoc struct {
	Applied
	Document *document.Document
	Drift    *Drift
}

func loadApplied(ctx context.Context, q store.Querier, tenantID string) (*appliedDoc, error) {
	var a appliedDoc
	var doc string
	var prune int
	var checked sql.NullInt64
	var drift sql.NullString
	err := q.QueryRowContext(ctx, `SELECT document, plan_hash, applied_by, applied_at, prune, checked_at, drift FROM fleet_applied WHERE tenant_id = $1`, tenantID).
		Scan(&doc, &a.PlanHash, &a.AppliedBy, &a.AppliedAt, &prune, &checked, &drift)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load applied document: %w", err)
	}
	a.Prune = prune == 1
	if checked.Valid {
		a.CheckedAt = &checked.Int64
	}
	if drift.Valid {
		a.Drift = &Drift{}
		if err := json.Unmarshal([]byte(drift.String), a.Drift); err != nil {
			return nil, fmt.Errorf("decode recorded drift: %w", err)
		}
	}
	if a.Document, err = document.Decode([]byte(doc)); err != nil {
		return nil, fmt.Errorf("decode applied document: %w", err)
	}
	return &a, nil
}

// LoadStatus returns tenantID's applied record and the drift found by the last check.
func LoadStatus(ctx context.Context, q store.Querier, tenantID string) (*Status, error) {
	a, err := loadApplied(ctx, q, tenantID)
	if err != nil || a == nil {
		return &Status{TenantID: tenantID}, err
	}
	return &Status{TenantID: tenantID, Applied: &a.Applied, Drift: a.Drift}, nil
}

// CheckDrift re-plans tenantID's applied document and records the result: drift when the plan
// has calls or is blocked, none otherwise. It returns the status after the check, and whether
// the drift state changed (for events). A tenant with no applied document is left alone.
func (p *Planner) CheckDrift(ctx context.Context, db *store.DB, tenantID string, now time.Time) (*Status, error) {
	var st *Status
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		a, err := loadApplied(ctx, tx, tenantID)
		if err != nil || a == nil {
			st = &Status{TenantID: tenantID}
			return err
		}
		pl, err := p.Plan(ctx, tx, tenantID, a.Document, a.Prune)
		if err != nil {
			return err
		}
		var drift *Drift
		if len(pl.Calls) > 0 || pl.Summary.Blocked {
			drift = &Drift{Summary: pl.Summary, Blocked: pl.Summary.Blocked, PlanHash: pl.PlanHash, Changes: []Change{}}
			for _, c := range pl.Changes {
				if c.Action != ActionUnchanged && len(drift.Changes) < 50 {
					drift.Changes = append(drift.Changes, c)
				}
			}
		}
		var driftJSON sql.NullString
		if drift != nil {
			b, err := json.Marshal(drift)
			if err != nil {
				return err
			}
			driftJSON = sql.NullString{String: string(b), Valid: true}
		}
		at := now.UnixMilli()
		if _, err := tx.ExecContext(ctx, `UPDATE fleet_applied SET checked_at = $1, drift = $2 WHERE tenant_id = $3`, at, driftJSON, tenantID); err != nil {
			return fmt.Errorf("record drift: %w", err)
		}
		a.CheckedAt = &at
		st = &Status{TenantID: tenantID, Applied: &a.Applied, Drift: drift}
		return nil
	})
	return st, err
}

// AppliedTenants lists the tenants with an applied document.
func AppliedTenants(ctx context.Context, q store.Querier) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT tenant_id FROM fleet_applied ORDER BY tenant_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
