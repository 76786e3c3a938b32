package fleet

import (
	"context"
	"fmt"
	"strings"

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

func setName(ctx context.Context, q store.Querier, tenantID, kind, name, id string) error {
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
