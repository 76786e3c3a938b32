-- +goose Up
-- scheduler_reservations holds every reservation outstanding: room taken on a node for a
-- sandbox placed there and not yet listed in the node's report. The replica holding the
-- scheduler lease writes it (group commits, fenced by the lease); a replica taking the lease
-- over rebuilds its reservations from it. cpu in millicores, memory and disk in MiB, reserved_at
-- Unix ms.
CREATE TABLE scheduler_reservations (
    sandbox_id  TEXT PRIMARY KEY,
    node_id     TEXT NOT NULL,
    pool_id     TEXT NOT NULL,
    cpu         BIGINT NOT NULL,
    memory_mib  BIGINT NOT NULL,
    disk_mib    BIGINT NOT NULL,
    reserved_at BIGINT NOT NULL
);
CREATE INDEX scheduler_reservations_node ON scheduler_reservations (node_id);
-- scheduler_requests carries placements and releases from the other replicas to the lease
-- holder (the database is the authenticated channel between replicas): kind is place or
-- release, body the request's JSON, answer the holder's JSON answer once given. Times are Unix
-- ms. The requester deletes its row when it has read the answer; the holder drops stale rows.
CREATE TABLE scheduler_requests (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    body        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    answer      TEXT,
    answered_at BIGINT
);
CREATE INDEX scheduler_requests_open ON scheduler_requests (created_at);
-- +goose Down
DROP TABLE scheduler_requests;
DROP TABLE scheduler_reservations;
