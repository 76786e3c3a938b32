-- +goose Up
-- unknown_at: when the sandbox's node stopped reporting and it became unknown (its last time; 0
-- for never); reconnected_at: when its node came back within the disconnect grace and it ran
-- on (0 for never, or not since). docs/sandboxes.md, "States".
ALTER TABLE sandboxes ADD COLUMN unknown_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN reconnected_at BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE sandboxes DROP COLUMN reconnected_at;
ALTER TABLE sandboxes DROP COLUMN unknown_at;
