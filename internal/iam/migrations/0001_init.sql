-- +goose Up
CREATE TABLE iam_tenants (
    id         TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL
);
CREATE TABLE iam_principals (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL REFERENCES iam_tenants (id),
    kind       TEXT NOT NULL,
    name       TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE iam_grants (
    principal_id TEXT NOT NULL REFERENCES iam_principals (id),
    permission   TEXT NOT NULL,
    scope        TEXT NOT NULL,
    PRIMARY KEY (principal_id, permission, scope)
);
CREATE TABLE iam_keys (
    id           TEXT PRIMARY KEY,
    principal_id TEXT NOT NULL REFERENCES iam_principals (id),
    token_hash   TEXT NOT NULL UNIQUE,
    prefix       TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    created_by   TEXT NOT NULL,
    expires_at   BIGINT,
    revoked_at   BIGINT
);
CREATE INDEX iam_principals_tenant ON iam_principals (tenant_id);
CREATE INDEX iam_keys_principal ON iam_keys (principal_id);
-- +goose Down
DROP TABLE iam_keys;
DROP TABLE iam_grants;
DROP TABLE iam_principals;
DROP TABLE iam_tenants;
