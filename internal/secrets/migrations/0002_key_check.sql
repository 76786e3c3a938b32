-- +goose Up
-- secrets_key_check holds a fingerprint of the key that seals this database's secrets, so a
-- server started with another secrets.key refuses to run instead of sealing with a second key.
CREATE TABLE secrets_key_check (
    id          INTEGER PRIMARY KEY,
    fingerprint TEXT NOT NULL
);
-- +goose Down
DROP TABLE secrets_key_check;
