package fleet

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/cubefleet/cubefleet/internal/events"
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

// MaxDriftChanges is how many changes a recorded drift (and a fleet.drifted event) holds at
// most; Summary counts them all (fleet spec, "Drift").
const MaxDriftChanges = 50

// Drift is what the last drift check found: the changes (at most MaxDriftChanges) a new plan
// of the applied document would make, less the fields the drift ignore rules leave out, and
// PlanHash, the drift's identity: the hash of every drifted change with its fields' values now
// and in the document (hashChanges). The same drift has the same hash whatever revisions the
// objects went through; it is not a --plan-hash for fleet apply.
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
	// DriftIgnore lists the server's drift ignore rules (KIND.FIELD) in force.
	DriftIgnore []string `json:"driftIgnore,omitempty"`
	// Now is the server's clock when it answered (Unix ms), so a client shows the age of
	// Applied.CheckedAt by the clock that set it; 0 where no request asked (the reconciler).
	Now int64 `json:"now,omitempty"`
}

// recordApplied records tenantID's applied document through q (the apply's transaction); when
// it replaces one whose last check found drift, the drift is cleared and fleet.applied
// published in the same transaction.
func recordApplied(ctx context.Context, q store.Querier, tenantID string, canonical []byte, planHash, by string, prune bool, now time.Time) error {
	prev, err := loadApplied(ctx, q, tenantID)
	if err != nil {
		return err
	}
	if prev != nil && prev.Drift != nil {
		ev, err := appliedEvent(tenantID, planHash, by, prev.Drift.PlanHash, now)
		if err != nil {
			return err
		}
		if err := events.Append(ctx, q, *ev); err != nil {
			return err
		}
	}
	pr := 0
	if prune {
		pr = 1
	}
	at := now.UnixMilli()
	_, err = q.ExecContext(ctx, `INSERT INTO fleet_applied (tenant_id, document, plan_hash, applied_by, applied_at, prune, checked_at, drift, document_hash)
		VALUES ($1, $2, $3, $4, $5, $6, $5, NULL, $7)
		ON CONFLICT (tenant_id) DO UPDATE SET document = excluded.document, plan_hash = excluded.plan_hash, applied_by = excluded.applied_by,
			applied_at = excluded.applied_at, prune = excluded.prune, checked_at = excluded.checked_at, drift = NULL, document_hash = excluded.document_hash`,
		tenantID, string(canonical), planHash, by, at, pr, documentHash(canonical))
	if err != nil {
		return fmt.Errorf("record applied document: %w", err)
	}
	return nil
}

// appliedDoc is a stored apply: its record, the drift recorded, and the hash of its document
// (DocumentHash, "" for a row applied before the hash was kept).
type appliedDoc struct {
	Applied
	Drift        *Drift
	DocumentHash string
}

// loadApplied reads tenantID's apply record without its document (appliedDocument reads that),
// or nil when the tenant never applied one.
func loadApplied(ctx context.Context, q store.Querier, tenantID string) (*appliedDoc, error) {
	var a appliedDoc
	var prune int
	var checked sql.NullInt64
	var drift, hash sql.NullString
	err := q.QueryRowContext(ctx, `SELECT plan_hash, applied_by, applied_at, prune, checked_at, drift, document_hash FROM fleet_applied WHERE tenant_id = $1`, tenantID).
		Scan(&a.PlanHash, &a.AppliedBy, &a.AppliedAt, &prune, &checked, &drift, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load applied document: %w", err)
	}
	a.Prune = prune == 1
	a.DocumentHash = hash.String
	if checked.Valid {
		a.CheckedAt = &checked.Int64
	}
	if drift.Valid {
		a.Drift = &Drift{}
		if err := json.Unmarshal([]byte(drift.String), a.Drift); err != nil {
			return nil, fmt.Errorf("decode recorded drift: %w", err)
		}
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

// CheckDrift re-plans tenantID's applied document now and records the result (drift when the
// plan, less the fields p.DriftIgnore leaves out, has calls or is blocked), publishing
// fleet.drifted or fleet.converged in the same transaction when the drift changed. It returns
// the status after the check. A tenant with no applied document gets only its TenantID.
func (p *Planner) CheckDrift(ctx context.Context, db *store.DB, tenantID string, now time.Time) (*Status, error) {
	c, err := p.check(ctx, db, tenantID, now, time.Time{})
	if err != nil {
		return nil, err
	}
	return c.Status, nil
}

// Status returns tenantID's applied record, the drift found by the last check and the ignore
// rules in force (fleet.status).
func (p *Planner) Status(ctx context.Context, q store.Querier, tenantID string) (*Status, error) {
	st, err := LoadStatus(ctx, q, tenantID)
	if err != nil {
		return nil, err
	}
	st.DriftIgnore = p.ignoreStrings()
	return st, nil
}

func (p *Planner) ignoreStrings() []string {
	var out []string
	for _, r := range p.DriftIgnore {
		out = append(out, r.String())
	}
	return out
}

// driftCheck is the outcome of one tenant's check.
type driftCheck struct {
	Status  *Status
	Skipped bool   // checked since the cut-off (by another replica, or fleet.status --check)
	Event   string // EventDrifted, EventConverged, or "" when nothing was published
}

// check is CheckDrift that skips a tenant checked after notBefore (zero: never skips). It
// holds the tenant's lock (the one fleet.apply takes) from before it reads the recorded drift
// until it commits, so two checks, or a check and an apply, never interleave.
func (p *Planner) check(ctx context.Context, db *store.DB, tenantID string, now, notBefore time.Time) (*driftCheck, error) {
	var out *driftCheck
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		if err := db.LockKey(ctx, tx, "fleet:"+tenantID); err != nil {
			return err
		}
		a, err := loadApplied(ctx, tx, tenantID)
		if err != nil || a == nil {
			out = &driftCheck{Status: &Status{TenantID: tenantID}}
			return err
		}
		if !notBefore.IsZero() && a.CheckedAt != nil && *a.CheckedAt > notBefore.UnixMilli() {
			out = &driftCheck{Status: &Status{TenantID: tenantID, Applied: &a.Applied, Drift: a.Drift}, Skipped: true}
			return nil
		}
		doc, err := p.appliedDocument(ctx, tx, tenantID, a.DocumentHash)
		if err != nil {
			return err
		}
		pl, err := p.Plan(ctx, tx, tenantID, doc, a.Prune)
		if err != nil {
			return err
		}
		drift, err := p.driftOf(pl)
		if err != nil {
			return err
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
		out = &driftCheck{Status: &Status{TenantID: tenantID, Applied: &a.Applied, Drift: drift, DriftIgnore: p.ignoreStrings()}}
		out.Status.Applied.CheckedAt = &at
		ev, err := driftEvent(tenantID, a, drift, now)
		if err != nil || ev == nil {
			return err
		}
		out.Event = ev.Type
		return events.Append(ctx, tx, *ev)
	})
	return out, err
}

// driftOf is the drift a plan of the applied document shows, less the ignored fields: nil when
// no call would run and nothing is blocked.
func (p *Planner) driftOf(pl *Plan) (*Drift, error) {
	changes, calls := ignoring(pl, p.DriftIgnore)
	summary := summarize(changes)
	if len(calls) == 0 && !summary.Blocked {
		return nil, nil
	}
	var drifted []Change
	for _, c := range changes {
		if c.Action != ActionUnchanged || c.Blocked {
			drifted = append(drifted, c)
		}
	}
	hash, err := hashChanges(drifted)
	if err != nil {
		return nil, err
	}
	d := &Drift{Summary: summary, Blocked: summary.Blocked, PlanHash: hash, Changes: []Change{}}
	d.Changes = append(d.Changes, drifted[:min(len(drifted), MaxDriftChanges)]...)
	return d, nil
}

// hashChanges is a drift's identity: the hex SHA-256 of the RFC 8785 canonical JSON of every
// drifted change (kind, name, action, the fields with their values now and in the document,
// blocked and why), the ignored fields already left out. The revisions the plan's calls carry
// are not in it, so an edit of an ignored field, or an edit and its revert, is the same drift;
// a field changed to yet another value is a new one.
func hashChanges(changes []Change) (string, error) {
	if changes == nil {
		changes = []Change{}
	}
	raw, err := json.Marshal(changes)
	if err != nil {
		return "", fmt.Errorf("drift hash: %w", err)
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return "", fmt.Errorf("drift hash: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// ListStatus returns the status of every tenant with an applied document, by tenant, without
// reading the documents (the console's Fleet drift page).
func ListStatus(ctx context.Context, q store.Querier) ([]Status, error) {
	rows, err := q.QueryContext(ctx, `SELECT tenant_id, plan_hash, applied_by, applied_at, prune, checked_at, drift FROM fleet_applied ORDER BY tenant_id`)
	if err != nil {
		return nil, fmt.Errorf("list fleet status: %w", err)
	}
	defer rows.Close()
	out := []Status{}
	for rows.Next() {
		var st Status
		var a Applied
		var prune int
		var checked sql.NullInt64
		var drift sql.NullString
		if err := rows.Scan(&st.TenantID, &a.PlanHash, &a.AppliedBy, &a.AppliedAt, &prune, &checked, &drift); err != nil {
			return nil, fmt.Errorf("list fleet status: %w", err)
		}
		a.Prune = prune == 1
		if checked.Valid {
			a.CheckedAt = &checked.Int64
		}
		st.Applied = &a
		if drift.Valid {
			st.Drift = &Drift{}
			if err := json.Unmarshal([]byte(drift.String), st.Drift); err != nil {
				return nil, fmt.Errorf("decode the recorded drift of %s: %w", st.TenantID, err)
			}
		}
		out = append(out, st)
	}
	return out, rows.Err()
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
