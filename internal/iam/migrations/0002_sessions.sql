-- +goose Up
-- iam_sessions are the web console's sign-ins: each holds the API key it was made from, so it
-- dies with the key (revoked or expired), and expires on its own.
CREATE TABLE iam_sessions (
    token_hash TEXT PRIMARY KEY,
    key_id     TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX iam_sessions_key ON iam_sessions (key_id);
-- +goose Down
DROP TABLE iam_sessions;
