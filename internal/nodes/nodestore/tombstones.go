package nodestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/cubefleet/cubefleet/internal/nodes"
)

// A deletion wins on every replica. Deleting a node removes its rows and writes a tombstone
// (nodes_deleted: the node, when (Unix ms) and the replica that deleted it); another replica
// may still hold the node in memory until its next Sync, and what it writes of the node
// meanwhile (a report, a health state, a drain's end) must not bring it back. So a
// registration is shadowed by a tombstone another replica wrote at or after it registered:
// the flush does not write it, nor the report of a node whose stored registration is
// shadowed or gone, and the reads (load, LoadNode, Sync) do not return a shadowed row that a
// flush racing the deletion wrote anyway. A node that registers again after its deletion is a
// new registration (registered after the tombstone, or through the replica that deleted it,
// which no longer held it) and comes back. pruneTombstones removes the shadowed rows before it
// forgets a tombstone.

// shadowedBy joins nodes_registrations aliased r to the tombstones d that shadow it.
const shadowedBy = `d.node_id = r.node_id AND d.at >= r.registered_at AND d.writer <> r.writer`

// notShadowed is the condition, on nodes_registrations aliased r, that no tombstone shadows
// the row.
const notShadowed = `NOT EXISTS (SELECT 1 FROM nodes_deleted d WHERE ` + shadowedBy + `)`

// tombstones returns the latest deletion (Unix ms) of each node other replicas deleted within
// tombstoneTTL, as tx sees them.
func (s *Store) tombstones(ctx context.Context, tx *sql.Tx) (map[string]int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT node_id, max(at) FROM nodes_deleted WHERE writer <> $1 GROUP BY node_id`, s.holder)
	if err != nil {
		return nil, fmt.Errorf("read node deletions: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var at int64
		if err := rows.Scan(&id, &at); err != nil {
			return nil, fmt.Errorf("read node deletions: %w", err)
		}
		out[id] = at
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read node deletions: %w", err)
	}
	return out, nil
}

// dropShadowed removes from regs the registrations a tombstone shadows, and from status the
// reports of nodes whose stored registration (regs already written in tx) is shadowed or
// absent; it returns what is left of status and the ids it dropped.
func dropShadowed(ctx context.Context, tx *sql.Tx, tombs map[string]int64, regs map[string]nodes.Registration, status []nodes.Status) ([]nodes.Status, []string, error) {
	if len(tombs) == 0 {
		return status, nil, nil
	}
	var dropped []string
	for id, reg := range regs {
		if at, ok := tombs[id]; ok && reg.RegisteredAt <= at {
			delete(regs, id)
			dropped = append(dropped, id)
		}
	}
	live := map[string]bool{}                    // tombstoned nodes registered again since, as stored
	kept := make([]nodes.Status, 0, len(status)) // status is the flush's: InTx may run again
	for _, st := range status {
		at, ok := tombs[st.NodeID]
		if !ok {
			kept = append(kept, st)
			continue
		}
		again, seen := live[st.NodeID]
		if !seen {
			if reg, queued := regs[st.NodeID]; queued {
				again = reg.RegisteredAt > at
			} else {
				var registeredAt int64
				err := tx.QueryRowContext(ctx, `SELECT registered_at FROM nodes_registrations WHERE node_id = $1`, st.NodeID).Scan(&registeredAt)
				if err != nil && !errors.Is(err, sql.ErrNoRows) {
					return nil, nil, fmt.Errorf("read the registration of node %s: %w", st.NodeID, err)
				}
				again = err == nil && registeredAt > at
			}
			live[st.NodeID] = again
		}
		if again {
			kept = append(kept, st)
		} else {
			dropped = append(dropped, st.NodeID)
		}
	}
	return kept, dropped, nil
}

// deleteShadowed removes the rows of registrations a tombstone shadows (written by a flush
// that raced the deletion) and the reports of nodes with a tombstone and no registration.
func (s *Store) deleteShadowed(ctx context.Context) error {
	return s.db.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM nodes_registrations WHERE node_id IN (SELECT r.node_id FROM nodes_registrations r
			JOIN nodes_deleted d ON `+shadowedBy+`)`); err != nil {
			return fmt.Errorf("delete the rows of deleted nodes: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM nodes_status WHERE node_id IN (SELECT node_id FROM nodes_deleted)
			AND node_id NOT IN (SELECT node_id FROM nodes_registrations)`); err != nil {
			return fmt.Errorf("delete the reports of deleted nodes: %w", err)
		}
		return nil
	})
}
