package api

import (
	"context"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/audit"
)

// registerAuditMethods registers audit.list (audit:read on tenant/<id>).
func registerAuditMethods(r *Registry, d *deps) {
	r.Register(Method{Name: "audit.list", Handle: Typed(func(ctx context.Context, c *Call, in contract.AuditListInput) (any, error) {
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
		return contract.AuditList{Items: sliceOf(items, auditEntryFrom), NextCursor: next}, err
	})})
}
