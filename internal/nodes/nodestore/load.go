package nodestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/cubefleet/cubefleet/internal/nodes"
)

// load reads every registration (but those a deletion shadows) and its last status.
func (s *Store) load(ctx context.Context) ([]nodes.Record, error) {
	rows, err := s.db.QueryContext(ctx, loadQuery)
	if err != nil {
		return nil, fmt.Errorf("load nodes: %w", err)
	}
	defer rows.Close()
	var out []nodes.Record
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load nodes: %w", err)
	}
	return out, nil
}

// LoadNode reads node id (nodes.Store): nil when it is not stored.
func (s *Store) LoadNode(ctx context.Context, id string) (*nodes.Record, error) {
	rows, err := s.db.QueryContext(ctx, loadQuery+` AND r.node_id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("load node %s: %w", id, err)
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	rec, err := scanRecord(rows)
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

const loadQuery = `SELECT r.node_id, r.host_ip, r.agent, r.pool_id, r.cluster_label, r.labels, r.report, r.credential_hash,
	r.cordon_detail, r.health_state, r.registered_at, r.updated_at, s.reported_at, s.heartbeat_at, s.ready, s.live, s.inventory,
	r.drain_reason, r.drain_by, r.drain_requested_at, r.drained_at, r.cordon_by, r.drain_deadline
	FROM nodes_registrations r LEFT JOIN nodes_status s ON s.node_id = r.node_id WHERE ` + notShadowed

// scanRecord reads one row of loadQuery.
func scanRecord(rows *sql.Rows) (nodes.Record, error) {
	var rec nodes.Record
	g := &rec.Registration
	var labels, report, state string
	var reportedAt, heartbeatAt, ready sql.NullInt64
	var live, inv sql.NullString
	if err := rows.Scan(&g.NodeID, &g.HostIP, &g.Agent, &g.PoolID, &g.ClusterLabel, &labels, &report, &g.CredentialHash, &g.CordonDetail,
		&state, &g.RegisteredAt, &g.UpdatedAt, &reportedAt, &heartbeatAt, &ready, &live, &inv,
		&g.DrainReason, &g.DrainBy, &g.DrainAt, &g.DrainedAt, &g.CordonBy, &g.DrainDeadline); err != nil {
		return rec, fmt.Errorf("load nodes: %w", err)
	}
	g.State = nodes.State(state)
	if err := json.Unmarshal([]byte(labels), &g.Labels); err != nil {
		return rec, fmt.Errorf("load node %s: labels: %w", g.NodeID, err)
	}
	var rep reportRecord
	if err := json.Unmarshal([]byte(report), &rep); err != nil {
		return rec, fmt.Errorf("load node %s: report: %w", g.NodeID, err)
	}
	g.GRPCPort, g.Capacity, g.Allocatable, g.InstanceType = rep.GRPCPort, rep.Capacity, rep.Allocatable, rep.InstanceType
	g.QuotaCPU, g.QuotaMemMB, g.CreateConcurrentNum, g.MaxMVMNum = rep.QuotaCPU, rep.QuotaMemMB, rep.CreateConcurrentNum, rep.MaxMVMNum
	g.PausedReleaseRatio, g.Versions, g.HostFacts = rep.PausedReleaseRatio, rep.Versions, rep.HostFacts
	if !reportedAt.Valid {
		return rec, nil
	}
	st := &nodes.Status{NodeID: g.NodeID, ReportedAt: reportedAt.Int64, HeartbeatAt: heartbeatAt.Int64, Ready: ready.Int64 == 1}
	if live.Valid {
		if err := parseLive(live.String, st); err != nil {
			return rec, fmt.Errorf("load node %s: status: %w", g.NodeID, err)
		}
	}
	if inv.Valid {
		var i inventoryRecord
		if err := json.Unmarshal([]byte(inv.String), &i); err != nil {
			return rec, fmt.Errorf("load node %s: inventory: %w", g.NodeID, err)
		}
		st.Inventory = &nodes.Inventory{Images: i.Images, Templates: i.Templates, TemplatesReported: i.TemplatesReported}
	}
	rec.Status = st
	return rec, nil
}

// parseLive reads a liveRecord into st (and marks st Live).
func parseLive(live string, st *nodes.Status) error {
	var l liveRecord
	if err := json.Unmarshal([]byte(live), &l); err != nil {
		return err
	}
	st.Live = true
	st.Conditions, st.Allocated, st.DiskUsage, st.MetricAt, st.MetricLocalAt = l.Conditions, l.Allocated, l.DiskUsage, l.MetricAt, l.MetricLocalAt
	st.Sandboxes = l.Sandboxes // `[]` decodes to an empty list, absent to nil
	st.ReportInterval = l.ReportInterval
	return nil
}
