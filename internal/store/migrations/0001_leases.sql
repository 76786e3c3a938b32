-- +goose Up
-- store_leases lets one server replica at a time run each background loop (drift, ...).
CREATE TABLE store_leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
-- +goose Down
DROP TABLE store_leases;
