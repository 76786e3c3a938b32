-- +goose Up
-- stop_reason: why the control plane stopped a running sandbox other than for a delete
-- ('node_drained': its node's drain deadline passed), so its end says so (killed, that reason)
-- rather than the agent's "stopped"; '' for none.
ALTER TABLE sandboxes ADD COLUMN stop_reason TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sandboxes DROP COLUMN stop_reason;
