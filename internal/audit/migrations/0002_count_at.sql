-- +goose Up
-- call_count is how many calls a row stands for: 1, or more for a row that summarizes refused
-- calls (Summary). The index on at serves the retention sweep.
ALTER TABLE audit_log ADD COLUMN call_count BIGINT NOT NULL DEFAULT 1;
CREATE INDEX audit_log_at ON audit_log (at);
-- +goose Down
DROP INDEX audit_log_at;
ALTER TABLE audit_log DROP COLUMN call_count;
