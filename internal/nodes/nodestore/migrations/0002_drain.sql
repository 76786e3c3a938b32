-- +goose Up
-- A node's drain (nodes.drain), part of its registration so it survives restarts and reaches
-- every replica: drain_requested_at is when it was asked (Unix ms; 0: not draining), drain_by
-- who asked (a principal id), drain_reason why; drained_at is when the draining node first
-- reported no sandboxes (Unix ms; 0: not yet). Uncordon clears all four.
ALTER TABLE nodes_registrations ADD COLUMN drain_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes_registrations ADD COLUMN drain_by TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes_registrations ADD COLUMN drain_requested_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE nodes_registrations ADD COLUMN drained_at BIGINT NOT NULL DEFAULT 0;
-- +goose Down
ALTER TABLE nodes_registrations DROP COLUMN drained_at;
ALTER TABLE nodes_registrations DROP COLUMN drain_requested_at;
ALTER TABLE nodes_registrations DROP COLUMN drain_by;
ALTER TABLE nodes_registrations DROP COLUMN drain_reason;
