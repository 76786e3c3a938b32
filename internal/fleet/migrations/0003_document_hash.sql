-- +goose Up
-- document_hash is the hex SHA-256 of the applied document (its canonical form): drift checks
-- keep decoded documents by it, so an unchanged document is not read and decoded again.
-- Rows applied before have none, and are read every time until the next apply.
ALTER TABLE fleet_applied ADD COLUMN document_hash TEXT;
-- +goose Down
ALTER TABLE fleet_applied DROP COLUMN document_hash;
