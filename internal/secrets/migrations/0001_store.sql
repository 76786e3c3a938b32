-- +goose Up
CREATE TABLE secrets (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    name       TEXT NOT NULL,
    sealed     TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX secrets_tenant_name ON secrets (tenant_id, name);
-- +goose Down
DROP TABLE secrets;
