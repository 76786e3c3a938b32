package api

import (
	"context"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/audit"
)

// logPage checks the page of an append-only log a list asks for: limit 0 (the default) to 1000,
// since a Unix time in ms (0: from the start), cursor "" or an id with prefix (what names it,
// e.g. "an audit row id"), and no cursor with newest (the tail of the log). Each problem is
// INVALID_INPUT naming the field.
func logPage(limit int, since int64, cursor string, newest bool, prefix, what string) error {
	switch {
	case newest && cursor != "":
		return cubefleet.Invalid("cursor", "cursor pages forward from %s; newest reads the tail of the log: give one or the other", what)
	case limit < 0 || limit > 1000:
		return cubefleet.Invalid("limit", "limit is 1 to 1000")
	case since < 0:
		return cubefleet.Invalid("since", "since is a Unix time in milliseconds")
	case cursor != "" && !cubefleet.IsID(cursor, prefix):
		return cubefleet.Invalid("cursor", "cursor %q is not a page's nextCursor (%s, %s_...): pass the nextCursor of the previous page", cursor, what, prefix)
	}
	return nil
}

// registerAuditMethods registers audit.list (audit:read on tenant/<id>).
func registerAuditMethods(r *Registry, d *deps) {
	r.Register(Method{Name: "audit.list", Handle: Typed(d.auditList)})
}

// auditList is the handler of audit.list.
func (d *deps) auditList(ctx context.Context, c *Call, in contract.AuditListInput) (any, error) {
	if err := logPage(in.Limit, in.Since, in.Cursor, in.Newest, "aud", "an audit row id"); err != nil {
		return nil, err
	}
	f := audit.Filter{TenantID: in.TenantID, Since: in.Since, Limit: in.Limit, Cursor: in.Cursor}
	if in.Newest {
		items, older, err := audit.Newest(ctx, c.Q, f)
		return contract.AuditList{Items: sliceOf(items, auditEntryFrom), OlderExist: older}, err
	}
	items, next, err := audit.List(ctx, c.Q, f)
	return contract.AuditList{Items: sliceOf(items, auditEntryFrom), NextCursor: next}, err
}
