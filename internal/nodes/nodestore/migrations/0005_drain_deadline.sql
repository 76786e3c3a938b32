-- +goose Up
-- When a drain stops the sandboxes still running on its node (Unix ms): `nodes drain
-- --deadline`. 0 for none (the drain waits for their own ends), and whenever the node is not
-- draining.
ALTER TABLE nodes_registrations ADD COLUMN drain_deadline BIGINT NOT NULL DEFAULT 0;
-- +goose Down
ALTER TABLE nodes_registrations DROP COLUMN drain_deadline;
