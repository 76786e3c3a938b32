-- +goose Up
-- fleet_names keeps the names fleet as code gave to objects that have none of their own
-- (sites and pools).
CREATE TABLE fleet_names (
    tenant_id TEXT NOT NULL,
    kind      TEXT NOT NULL,
    name      TEXT NOT NULL,
    object_id TEXT NOT NULL UNIQUE,
    PRIMARY KEY (tenant_id, kind, name)
);
-- +goose Down
DROP TABLE fleet_names;
