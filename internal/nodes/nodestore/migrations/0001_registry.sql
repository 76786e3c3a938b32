-- +goose Up
-- nodes_registrations holds every registered node (durable: a stock Cubelet never registers
-- again, so a lost row would leave it answered 404 until it restarts). labels is a JSON object
-- (with the isolation label while cordoned); report is the JSON of the registered capacity,
-- quota, versions and host facts; credential_hash is the SHA-256 of the node credential ('' for
-- a stock Cubelet); health_state is the state the last health check saw (a Lost node stays Lost
-- across restarts).
CREATE TABLE nodes_registrations (
    node_id         TEXT PRIMARY KEY,
    host_ip         TEXT NOT NULL,
    agent           TEXT NOT NULL,
    pool_id         TEXT NOT NULL,
    cluster_label   TEXT NOT NULL,
    labels          TEXT NOT NULL,
    report          TEXT NOT NULL,
    credential_hash TEXT NOT NULL,
    cordon_detail   TEXT NOT NULL,
    health_state    TEXT NOT NULL,
    registered_at   BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    writer          TEXT NOT NULL
);
CREATE INDEX nodes_registrations_credential ON nodes_registrations (credential_hash);
CREATE INDEX nodes_registrations_updated ON nodes_registrations (updated_at);
-- nodes_status is each node's last report, written by the flusher at least every second:
-- live is the JSON of the conditions and metrics, inventory that of images and templates
-- (written only when they change). Times are Unix milliseconds on the control plane's clock,
-- except heartbeat_at (the node's, clamped). writer is the server replica that wrote the row
-- (replicas read each other's rows).
CREATE TABLE nodes_status (
    node_id      TEXT PRIMARY KEY,
    reported_at  BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    ready        INTEGER NOT NULL,
    live         TEXT NOT NULL,
    inventory    TEXT NOT NULL,
    writer       TEXT NOT NULL
);
CREATE INDEX nodes_status_reported ON nodes_status (reported_at);
-- nodes_deleted remembers recent deletions (an hour), so other replicas forget the node.
CREATE TABLE nodes_deleted (
    node_id TEXT NOT NULL,
    at      BIGINT NOT NULL,
    writer  TEXT NOT NULL
);
CREATE INDEX nodes_deleted_at ON nodes_deleted (at);
-- nodes_replicas lists the server replicas serving the registry (seen_at renewed every few
-- seconds); a replica alone skips reading the others' writes.
CREATE TABLE nodes_replicas (
    holder  TEXT PRIMARY KEY,
    seen_at BIGINT NOT NULL
);
-- nodes_join_tokens are the join tokens (hash: SHA-256 of the token, never the token). ip is
-- the address a token is bound to ('' until its first use binds it, unless any_ip).
CREATE TABLE nodes_join_tokens (
    id         TEXT PRIMARY KEY,
    hash       TEXT NOT NULL UNIQUE,
    prefix     TEXT NOT NULL,
    pool_id    TEXT NOT NULL,
    ip         TEXT NOT NULL,
    any_ip     INTEGER NOT NULL,
    uses       BIGINT NOT NULL,
    uses_left  BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    created_by TEXT NOT NULL
);
-- +goose Down
DROP TABLE nodes_replicas;
DROP TABLE nodes_deleted;
DROP TABLE nodes_join_tokens;
DROP TABLE nodes_status;
DROP TABLE nodes_registrations;
