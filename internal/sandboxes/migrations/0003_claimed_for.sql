-- +goose Up
-- claimed_for: the id of the waiting create that claimed this warm sandbox ('' for none); that
-- id answers for the sandbox (docs/sandboxes.md, "Warm pools").
ALTER TABLE sandboxes ADD COLUMN claimed_for TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_claimed_for ON sandboxes (claimed_for);

-- +goose Down
DROP INDEX sandboxes_claimed_for;
ALTER TABLE sandboxes DROP COLUMN claimed_for;
