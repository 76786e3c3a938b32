package fleet

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/store"
)

// Names reads and writes fleet_names, the names fleet gives sites and pools. It implements
// compute.FleetNamer. The zero value is ready to use.
type Names struct{}

// FleetNames returns id -> fleet name for those of ids that have one.
func (Names) FleetNames(ctx context.Context, q store.Querier, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	for start := 0; start < len(ids); start += 500 {
		chunk := ids[start:min(start+500, len(ids))]
		ph := make([]string, len(chunk))
		args := make([]any, len(chunk))
		for i, id := range chunk {
			ph[i] = fmt.Sprintf("$%d", i+1)
			args[i] = id
		}
		rows, err := q.QueryContext(ctx, `SELECT object_id, name FROM fleet_names WHERE object_id IN (`+strings.Join(ph, ", ")+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("fleet names: %w", err)
		}
		for rows.Next() {
			var id, name string
			if err := rows.Scan(&id, &name); err != nil {
				rows.Close()
				return nil, err
			}
			out[id] = name
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// tenantNames returns kind -> name -> object id for every fleet name of tenantID.
func tenantNames(ctx context.Context, q store.Querier, tenantID string) (map[string]map[string]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT kind, name, object_id FROM fleet_names WHERE tenant_id = $1`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("fleet names: %w", err)
	}
	defer rows.Close()
	out := map[string]map[string]string{}
	for rows.Next() {
		var kind, name, id string
		if err := rows.Scan(&kind, &name, &id); err != nil {
			return nil, err
		}
		if out[kind] == nil {
			out[kind] = map[string]string{}
		}
		out[kind][name] = id
	}
	return out, rows.Err()
}

// setName gives object id the fleet name (tenantID, kind, name). A row that still holds the name
// for an object removed by hand (a pool archived, a site deleted through the compute API) is
// replaced: the plan that led here created the object because no live one has the name, and
// the removed object gives the name up. A name held by another live object is CONFLICT.
func setName(ctx context.Context, q store.Querier, tenantID, kind, name, id string) error {
	var held string
	err := q.QueryRowContext(ctx, `SELECT object_id FROM fleet_names WHERE tenant_id = $1 AND kind = $2 AND name = $3`, tenantID, kind, name).Scan(&held)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("record fleet name %s %s: %w", kind, name, err)
	case held != id:
		o, err := compute.Load(ctx, q, held)
		if err == nil && !o.Archived() {
			return cubefleet.Errorf(cubefleet.CodeConflict, "%s %s already names %s: plan again", kind, name, held)
		}
		if err != nil && !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
			return fmt.Errorf("record fleet name %s %s: %w", kind, name, err)
		}
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM fleet_names WHERE (tenant_id = $1 AND kind = $2 AND name = $3) OR object_id = $4`, tenantID, kind, name, id); err != nil {
		return fmt.Errorf("record fleet name %s %s: %w", kind, name, err)
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO fleet_names (tenant_id, kind, name, object_id) VALUES ($1, $2, $3, $4)`, tenantID, kind, name, id); err != nil {
		return fmt.Errorf("record fleet name %s %s: %w", kind, name, err)
	}
	return nil
}

func dropName(ctx context.Context, q store.Querier, id string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM fleet_names WHERE object_id = $1`, id); err != nil {
		return fmt.Errorf("drop fleet name of %s: %w", id, err)
	}
	return nil
}
