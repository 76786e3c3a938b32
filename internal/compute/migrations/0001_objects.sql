-- +goose Up
CREATE TABLE compute_objects (
    id              TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    kind            TEXT NOT NULL,
    parent_id       TEXT NOT NULL,
    ref_a           TEXT NOT NULL,
    ref_b           TEXT NOT NULL,
    unique_name     TEXT,
    spec            TEXT NOT NULL,
    revision        BIGINT NOT NULL,
    idempotency_key TEXT NOT NULL,
    created_by      TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    archived_at     BIGINT
);
CREATE UNIQUE INDEX compute_objects_unique_name ON compute_objects (tenant_id, kind, parent_id, unique_name);
CREATE INDEX compute_objects_tenant_kind ON compute_objects (tenant_id, kind, id);
CREATE INDEX compute_objects_ref_a ON compute_objects (ref_a);
CREATE INDEX compute_objects_ref_b ON compute_objects (ref_b);
CREATE INDEX compute_objects_kind_name ON compute_objects (kind, unique_name);
-- +goose Down
DROP TABLE compute_objects;
