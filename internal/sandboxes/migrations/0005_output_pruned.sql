-- +goose Up
-- output_pruned_at: when an ended sandbox's output was dropped because its tenant's stored
-- output passed --tenant-result-max-bytes (its record, exit state and byte counts stay; its
-- message says so); 0 while its output is kept. sandboxes_tenant_ended finds a tenant's oldest
-- kept results.
ALTER TABLE sandboxes ADD COLUMN output_pruned_at BIGINT NOT NULL DEFAULT 0;
CREATE INDEX sandboxes_tenant_ended ON sandboxes (tenant_id, output_pruned_at, ended_at);

-- +goose Down
DROP INDEX sandboxes_tenant_ended;
ALTER TABLE sandboxes DROP COLUMN output_pruned_at;
