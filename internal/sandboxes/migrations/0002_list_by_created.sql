-- +goose Up
-- sandboxes.list orders a tenant's sandboxes newest first by creation time (a claimed warm
-- sandbox's is its claim's), then id.
CREATE INDEX sandboxes_tenant_created ON sandboxes (tenant_id, created_at, id);

-- +goose Down
DROP INDEX sandboxes_tenant_created;
