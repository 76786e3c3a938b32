-- +goose Up
-- webhook_subscriptions: a tenant's webhook endpoints. webhook_subscription_types: the event
-- types each one receives, keyed for the fan-out that Append runs in the event's transaction.
CREATE TABLE webhook_subscriptions (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL,
    url         TEXT NOT NULL,
    description TEXT NOT NULL,
    created_by  TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX webhook_subscriptions_tenant ON webhook_subscriptions (tenant_id, id);
CREATE TABLE webhook_subscription_types (
    tenant_id       TEXT NOT NULL,
    type            TEXT NOT NULL,
    subscription_id TEXT NOT NULL,
    PRIMARY KEY (tenant_id, type, subscription_id)
);
CREATE INDEX webhook_subscription_types_sub ON webhook_subscription_types (subscription_id);
-- webhook_secrets: signing secrets, sealed with the server's secrets key. expires_at is NULL
-- for the current one; a rotated-out one signs too until it expires (the overlap).
CREATE TABLE webhook_secrets (
    id              TEXT PRIMARY KEY,
    subscription_id TEXT NOT NULL,
    sealed          TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT
);
CREATE INDEX webhook_secrets_sub ON webhook_secrets (subscription_id);
-- webhook_deliveries is the outbox: one row per event and subscription, with the exact body
-- every attempt sends. state: pending, delivered, failed (dead-lettered). A replica claims a
-- row until claimed_until before it sends, so one replica at a time attempts it.
CREATE TABLE webhook_deliveries (
    id              TEXT PRIMARY KEY,
    subscription_id TEXT NOT NULL,
    tenant_id       TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    body            TEXT NOT NULL,
    state           TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    retry_from      BIGINT NOT NULL,
    attempts        INTEGER NOT NULL,
    next_attempt_at BIGINT NOT NULL,
    claimed_by      TEXT NOT NULL,
    claimed_until   BIGINT NOT NULL,
    last_attempt_at BIGINT,
    last_status     INTEGER,
    last_error      TEXT NOT NULL,
    done_at         BIGINT,
    UNIQUE (subscription_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
CREATE INDEX webhook_deliveries_sub ON webhook_deliveries (subscription_id, id);
CREATE INDEX webhook_deliveries_tenant ON webhook_deliveries (tenant_id, id);
-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE webhook_secrets;
DROP TABLE webhook_subscription_types;
DROP TABLE webhook_subscriptions;
