package api

import (
	"context"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
)

// AuditListInput is the input of audit.list: TenantID's rows at or after Since (Unix ms; 0: all),
// at most Limit of them (1-1000, default 100), after Cursor (the previous page's nextCursor).
type AuditListInput struct {
	TenantID string `json:"tenantId"`
	Since    int64  `json:"since,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	Cursor   string `json:"cursor,omitempty"`
}

// AuditList is a page of audit rows, oldest first; NextCursor is absent on the last page.
type AuditList struct {
	Items      []audit.Entry `json:"items"`
	NextCursor string        `json:"nextCursor,omitempty"`
}

func registerAuditMethods(r *Registry, d *deps) {
	r.Register(Method{
		Name: "audit.list", Summary: "Read a tenant's audit log, oldest first",
		Permission: "audit:read", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in AuditListInput) (any, error) {
			if in.Limit < 0 || in.Limit > 1000 {
				return nil, cubefleet.Invalid("limit", "limit is 1 to 1000")
			}
			if in.Since < 0 {
				return nil, cubefleet.Invalid("since", "since is a Unix time in milliseconds")
			}
			if in.Cursor != "" && !cubefleet.IsID(in.Cursor, "aud") {
				return nil, cubefleet.Invalid("cursor", "cursor %q is not a page's nextCursor (an audit row id, aud_...): pass the nextCursor of the previous page", in.Cursor)
			}
			items, next, err := audit.List(ctx, c.Q, audit.Filter{TenantID: in.TenantID, Since: in.Since, Limit: in.Limit, Cursor: in.Cursor})
			return AuditList{Items: items, NextCursor: next}, err
		}),
		Input: AuditListInput{}, Output: AuditList{},
	})
}
