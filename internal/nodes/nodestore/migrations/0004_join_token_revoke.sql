-- +goose Up
-- A join token can be revoked (nodes.joinTokens.revoke): revoked_at is when (Unix ms; 0: not
-- revoked) and revoked_by who (a principal id). Every replica reads it when the token is used,
-- so a revoked token is refused everywhere at once.
ALTER TABLE nodes_join_tokens ADD COLUMN revoked_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE nodes_join_tokens ADD COLUMN revoked_by TEXT NOT NULL DEFAULT '';
-- +goose Down
ALTER TABLE nodes_join_tokens DROP COLUMN revoked_by;
ALTER TABLE nodes_join_tokens DROP COLUMN revoked_at;
