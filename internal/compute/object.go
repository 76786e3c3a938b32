package compute

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/store"
)

// Object is one compute object: common metadata plus its kind's spec as JSON (SiteSpec,
// PoolSpec, ...). It marshals flat, the metadata fields next to the spec's:
// `{"id":"pool_01...","tenantId":"root","name":"vps-fra","revision":2,"siteId":"site_01...",...}`.
type Object struct {
	ID             string
	TenantID       string
	Kind           string
	ParentID       string    // the pool of an owner quota, offer or flavor; "" otherwise
	Refs           [2]string // ids this object references (site, pool, provider account, flavor), "" when unused
	Name           string    // own name (provider accounts, flavors, templates) or fleet name (sites, pools)
	Spec           json.RawMessage
	Revision       int64 // starts at 1, +1 on every update
	IdempotencyKey string
	CreatedBy      string
	CreatedAt      int64  // Unix ms
	UpdatedAt      int64  // Unix ms
	ArchivedAt     *int64 // Unix ms; pools only
}

type objectMeta struct {
	ID             string `json:"id"`
	TenantID       string `json:"tenantId"`
	Name           string `json:"name,omitempty"`
	Revision       int64  `json:"revision"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	CreatedBy      string `json:"createdBy"`
	CreatedAt      int64  `json:"createdAt"`
	UpdatedAt      int64  `json:"updatedAt"`
	ArchivedAt     *int64 `json:"archivedAt,omitempty"`
}

// MarshalJSON renders the object flat: metadata, then the spec's fields.
func (o Object) MarshalJSON() ([]byte, error) {
	meta, err := json.Marshal(objectMeta{o.ID, o.TenantID, o.Name, o.Revision, o.IdempotencyKey, o.CreatedBy, o.CreatedAt, o.UpdatedAt, o.ArchivedAt})
	if err != nil {
		return nil, err
	}
	spec := bytes.TrimSpace(o.Spec)
	if len(spec) <= 2 {
		return meta, nil
	}
	out := make([]byte, 0, len(meta)+len(spec))
	out = append(out, meta[:len(meta)-1]...)
	out = append(out, ',')
	return append(out, spec[1:]...), nil
}

// DecodeSpec decodes o's spec into v (a pointer to the kind's spec type). Specs are stored as
// encoding/json marshals the spec types, so they are read with the faster decoder of
// github.com/go-json-experiment/json, which gives the same values for them (a plan decodes
// thousands of specs; TestDecodeSpecMatchesEncodingJSON holds the two decoders to one result).
func (o Object) DecodeSpec(v any) error {
	if err := jsonv2.Unmarshal(o.Spec, v); err != nil {
		return fmt.Errorf("decode %s %s: %w", o.Kind, o.ID, err)
	}
	return nil
}

// Archived reports whether the object (a pool) is archived.
func (o Object) Archived() bool { return o.ArchivedAt != nil }

const objectColumns = `id, tenant_id, kind, parent_id, ref_a, ref_b, unique_name, spec, revision, idempotency_key, created_by, created_at, updated_at, archived_at`

func scanObject(row interface{ Scan(...any) error }) (Object, error) {
	var o Object
	var name sql.NullString
	var spec string
	var archived sql.NullInt64
	if err := row.Scan(&o.ID, &o.TenantID, &o.Kind, &o.ParentID, &o.Refs[0], &o.Refs[1], &name, &spec, &o.Revision, &o.IdempotencyKey, &o.CreatedBy, &o.CreatedAt, &o.UpdatedAt, &archived); err != nil {
		return Object{}, err
	}
	o.Name = name.String
	o.Spec = json.RawMessage(spec)
	if archived.Valid {
		o.ArchivedAt = &archived.Int64
	}
	return o, nil
}

func queryObjects(ctx context.Context, q store.Querier, where string, args ...any) ([]Object, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+objectColumns+` FROM compute_objects WHERE `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("query objects: %w", err)
	}
	defer rows.Close()
	var out []Object
	for rows.Next() {
		o, err := scanObject(rows)
		if err != nil {
			return nil, fmt.Errorf("scan object: %w", err)
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// Load returns object id whatever its tenant, or NOT_FOUND.
func Load(ctx context.Context, q store.Querier, id string) (Object, error) {
	o, err := scanObject(q.QueryRowContext(ctx, `SELECT `+objectColumns+` FROM compute_objects WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Object{}, cubefleet.Errorf(cubefleet.CodeNotFound, "no object %s", id)
	}
	if err != nil {
		return Object{}, fmt.Errorf("load %s: %w", id, err)
	}
	return o, nil
}

// LoadNamed returns the objects of kind whose own name is name, of every tenant, ordered by id
// (a sandbox template named in a scheduler.place input).
func LoadNamed(ctx context.Context, q store.Querier, kind, name string) ([]Object, error) {
	return queryObjects(ctx, q, `kind = $1 AND unique_name = $2 ORDER BY id`, kind, name)
}

// stateColumns are the columns LoadTenant reads: what planning and export compare.
const stateColumns = `id, kind, parent_id, ref_a, ref_b, unique_name, spec, revision, archived_at`

// LoadTenant returns every object of tenantID (archived pools included), ordered by kind and
// id, with what planning and export read: ID, Kind, ParentID, Refs, Name, Spec, Revision and
// ArchivedAt (TenantID is tenantID; IdempotencyKey, CreatedBy, CreatedAt and UpdatedAt are left
// empty, which halves what a plan of thousands of objects reads). Names are the stored own
// names; fleet names are the caller's to add.
func LoadTenant(ctx context.Context, q store.Querier, tenantID string) ([]Object, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM compute_objects WHERE tenant_id = $1`, tenantID).Scan(&n); err != nil {
		return nil, fmt.Errorf("count objects: %w", err)
	}
	rows, err := q.QueryContext(ctx, `SELECT `+stateColumns+` FROM compute_objects WHERE tenant_id = $1 ORDER BY kind, id`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("query objects: %w", err)
	}
	defer rows.Close()
	// Scanned in place into one slice sized by the count (a hint: the transaction may see more),
	// with the scan targets reused: a tenant of thousands of objects costs a few allocations a
	// row, not a copy of every object per growth of the slice.
	out := make([]Object, 0, n)
	var name sql.NullString
	var spec string
	var archived sql.NullInt64
	for rows.Next() {
		out = append(out, Object{TenantID: tenantID})
		o := &out[len(out)-1]
		if err := rows.Scan(&o.ID, &o.Kind, &o.ParentID, &o.Refs[0], &o.Refs[1], &name, &spec, &o.Revision, &archived); err != nil {
			return nil, fmt.Errorf("scan object: %w", err)
		}
		o.Name = name.String
		o.Spec = json.RawMessage(spec)
		if archived.Valid {
			at := archived.Int64
			o.ArchivedAt = &at
		}
	}
	return out, rows.Err()
}

// LoadOfferedTo returns the offers made to tenantID by other tenants, and the pools they offer.
func LoadOfferedTo(ctx context.Context, q store.Querier, tenantID string) (offers, pools []Object, err error) {
	offers, err = queryObjects(ctx, q, `kind = $1 AND unique_name = $2 ORDER BY id`, KindOffer, tenantID)
	if err != nil {
		return nil, nil, err
	}
	for _, o := range offers {
		p, err := Load(ctx, q, o.ParentID)
		if err != nil {
			return nil, nil, err
		}
		pools = append(pools, p)
	}
	return offers, pools, nil
}

// insertObject inserts o unless an object with its id exists; inserted is false then.
func insertObject(ctx context.Context, q store.Querier, o Object) (inserted bool, err error) {
	var name any
	if o.Name != "" {
		name = o.Name
	}
	res, err := q.ExecContext(ctx, `INSERT INTO compute_objects (`+objectColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, NULL)
		ON CONFLICT (id) DO NOTHING`,
		o.ID, o.TenantID, o.Kind, o.ParentID, o.Refs[0], o.Refs[1], name, string(o.Spec), o.Revision, o.IdempotencyKey, o.CreatedBy, o.CreatedAt, o.UpdatedAt)
	if store.IsUniqueViolation(err) {
		return false, cubefleet.Errorf(cubefleet.CodeConflict, "%s with this name already exists", cubefleet.Article(o.Kind))
	}
	if err != nil {
		return false, fmt.Errorf("insert %s: %w", o.Kind, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// updateObject writes o's spec and archive time if its revision is still o.Revision-1.
func updateObject(ctx context.Context, q store.Querier, o Object) error {
	res, err := q.ExecContext(ctx, `UPDATE compute_objects SET spec = $1, ref_a = $2, ref_b = $3, revision = $4, updated_at = $5, archived_at = $6 WHERE id = $7 AND revision = $8`,
		string(o.Spec), o.Refs[0], o.Refs[1], o.Revision, o.UpdatedAt, o.ArchivedAt, o.ID, o.Revision-1)
	if err != nil {
		return fmt.Errorf("update %s: %w", o.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return revisionConflict(o.ID, o.Revision-1)
	}
	return nil
}

func deleteObject(ctx context.Context, q store.Querier, o Object) error {
	res, err := q.ExecContext(ctx, `DELETE FROM compute_objects WHERE id = $1 AND revision = $2`, o.ID, o.Revision)
	if err != nil {
		return fmt.Errorf("delete %s: %w", o.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return revisionConflict(o.ID, o.Revision)
	}
	return nil
}

// ErrRevision is wrapped by the CONFLICT error an update or delete returns when the object's
// revision is not the one the caller named (someone changed it in between).
var ErrRevision = errors.New("revision changed")

func revisionConflict(id string, rev int64) error {
	return &cubefleet.Error{Code: cubefleet.CodeConflict, Message: fmt.Sprintf("%s changed since revision %d: read it again", id, rev), Err: ErrRevision}
}

// referrers returns the live (not archived) objects that reference id.
func referrers(ctx context.Context, q store.Querier, id string) ([]Object, error) {
	return queryObjects(ctx, q, `(ref_a = $1 OR ref_b = $1) AND archived_at IS NULL ORDER BY kind, id`, id)
}
