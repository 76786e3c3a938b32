-- +goose Up
-- fleet_applied records, per tenant, the last document applied and the drift found since.
CREATE TABLE fleet_applied (
    tenant_id  TEXT PRIMARY KEY,
    document   TEXT NOT NULL,
    plan_hash  TEXT NOT NULL,
    applied_by TEXT NOT NULL,
    applied_at BIGINT NOT NULL,
    prune      INTEGER NOT NULL,
    checked_at BIGINT,
    drift      TEXT
);
-- +goose Down
DROP TABLE fleet_applied;
