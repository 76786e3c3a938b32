-- +goose Up
-- events_log is the control plane's append-only event log: what happened to the things it
-- manages (node lifecycle first; webhooks deliver from here later).
CREATE TABLE events_log (
    id        TEXT PRIMARY KEY,
    at        BIGINT NOT NULL,
    tenant_id TEXT NOT NULL,
    type      TEXT NOT NULL,
    subject   TEXT NOT NULL,
    data      TEXT NOT NULL
);
CREATE INDEX events_log_tenant_at ON events_log (tenant_id, at);
CREATE INDEX events_log_subject ON events_log (subject, id);
-- +goose Down
DROP TABLE events_log;
