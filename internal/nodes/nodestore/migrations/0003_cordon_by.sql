-- +goose Up
-- Who cordoned a node (its isolation label), part of its registration so it survives restarts
-- and reaches every replica: a principal id (an API key's service account, "anonymous@<ip>"
-- from --node-agent-allow-unauthenticated) or "node:<node_id>" when the node cordoned itself
-- with its own credential. A node may lift only a cordon it set itself. '' while the node is
-- not cordoned, and for a cordon set before this column existed (treated as an operator's);
-- a draining node's cordon is its drain's.
ALTER TABLE nodes_registrations ADD COLUMN cordon_by TEXT NOT NULL DEFAULT '';
UPDATE nodes_registrations SET cordon_by = drain_by WHERE drain_requested_at <> 0;
-- +goose Down
ALTER TABLE nodes_registrations DROP COLUMN cordon_by;
