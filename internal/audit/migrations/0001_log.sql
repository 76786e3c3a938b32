-- +goose Up
CREATE TABLE audit_log (
    id           TEXT PRIMARY KEY,
    at           BIGINT NOT NULL,
    tenant_id    TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    method       TEXT NOT NULL,
    permission   TEXT NOT NULL,
    scope        TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    target       TEXT NOT NULL,
    request_id   TEXT NOT NULL,
    message      TEXT NOT NULL
);
CREATE INDEX audit_log_tenant_at ON audit_log (tenant_id, at);
-- +goose Down
DROP TABLE audit_log;
