-- +goose Up
-- sandboxes: every sandbox's record, owned by the control plane (docs/sandboxes.md). Times are
-- Unix ms on the control plane's clock, 0 while unset. spec holds the create's input as given
-- (command, env with secret:// references left as references, labels, node selector, timeout):
-- resolved secret values are never stored. vcpu, memory_gib, disk_gib and gpu are what it counts
-- against its quotas (its flavor's size), while charged is 1. queued is 1 while it waits for room
-- (pending, no node). deleted_at hides a deleted sandbox until its node confirms its end.
CREATE TABLE sandboxes (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL,
    template_id       TEXT NOT NULL,
    template_name     TEXT NOT NULL,
    pool_id           TEXT NOT NULL,
    flavor_id         TEXT NOT NULL,
    node_id           TEXT NOT NULL,
    state             TEXT NOT NULL,
    warm              INTEGER NOT NULL,
    claimed_at        BIGINT NOT NULL,
    spec              TEXT NOT NULL,
    vcpu              BIGINT NOT NULL,
    memory_gib        BIGINT NOT NULL,
    disk_gib          BIGINT NOT NULL,
    gpu               BIGINT NOT NULL,
    charged           INTEGER NOT NULL,
    priority          INTEGER NOT NULL,
    queued            INTEGER NOT NULL,
    created_by        TEXT NOT NULL,
    created_at        BIGINT NOT NULL,
    pending_reason    TEXT NOT NULL,
    starting_at       BIGINT NOT NULL,
    starting_reason   TEXT NOT NULL,
    running_at        BIGINT NOT NULL,
    running_reason    TEXT NOT NULL,
    ended_at          BIGINT NOT NULL,
    end_reason        TEXT NOT NULL,
    message           TEXT NOT NULL,
    exit_code         BIGINT,
    signal            TEXT NOT NULL,
    stdout_bytes      BIGINT NOT NULL,
    stderr_bytes      BIGINT NOT NULL,
    stdout_truncated  INTEGER NOT NULL,
    stderr_truncated  INTEGER NOT NULL,
    cpu_ms            BIGINT NOT NULL,
    peak_memory_bytes BIGINT NOT NULL,
    stop_requested_at BIGINT NOT NULL,
    deleted_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL
);
CREATE INDEX sandboxes_tenant ON sandboxes (tenant_id, id);
CREATE INDEX sandboxes_tenant_state ON sandboxes (tenant_id, state, id);
CREATE INDEX sandboxes_node ON sandboxes (node_id, state);
CREATE INDEX sandboxes_state ON sandboxes (state, node_id);
CREATE INDEX sandboxes_queue ON sandboxes (queued, pool_id, priority, created_at);
CREATE INDEX sandboxes_ended ON sandboxes (ended_at);
CREATE INDEX sandboxes_warm ON sandboxes (template_id, warm, claimed_at, state);
CREATE INDEX sandboxes_updated ON sandboxes (updated_at);
-- sandboxes_output: the captured output of a sandbox that ended, each stream at most
-- --result-max-bytes and the cut marker.
CREATE TABLE sandboxes_output (
    sandbox_id TEXT PRIMARY KEY,
    stdout     BYTEA NOT NULL,
    stderr     BYTEA NOT NULL
);
-- sandboxes_usage: what each tenant's charged sandboxes take of each pool, the counters
-- admission checks quotas against (in the transaction that changes them).
CREATE TABLE sandboxes_usage (
    tenant_id  TEXT NOT NULL,
    pool_id    TEXT NOT NULL,
    vcpu       BIGINT NOT NULL,
    memory_gib BIGINT NOT NULL,
    disk_gib   BIGINT NOT NULL,
    gpu        BIGINT NOT NULL,
    sandboxes  BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, pool_id)
);
-- sandboxes_assignments: the work queue of each node (nodeapi.Assignment), offered on every
-- work request until the agent lists it as done (done_at set).
CREATE TABLE sandboxes_assignments (
    id          TEXT PRIMARY KEY,
    node_id     TEXT NOT NULL,
    kind        TEXT NOT NULL,
    sandbox_id  TEXT NOT NULL,
    template_id TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    done_at     BIGINT NOT NULL
);
CREATE INDEX sandboxes_assignments_node ON sandboxes_assignments (node_id, done_at, id);
CREATE INDEX sandboxes_assignments_sandbox ON sandboxes_assignments (sandbox_id);
CREATE INDEX sandboxes_assignments_created ON sandboxes_assignments (created_at);
-- +goose Down
DROP TABLE sandboxes_assignments;
DROP TABLE sandboxes_usage;
DROP TABLE sandboxes_output;
DROP TABLE sandboxes;
