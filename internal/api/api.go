// Package api is the public API's method table: every method's name (`compute.pools.create`),
// the permission it decides and the form of the scope it decides it on, whether it writes, its
// input, output and handler (one file per domain: compute.go, fleet.go, iam.go, audit.go,
// secrets.go, nodes.go). Call runs a method for an HTTP request: it decides the permission
// before the handler touches data, audits refusals and writes, and runs writes in one
// transaction with their audit row. Handlers call their domain package directly. The permission
// catalogue (`cubefleet keys permissions`) is derived from what the methods declare
// (../shared/DESIGN.md, "Public API conventions").
package api

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/strictjson"
)

// Decision is what a method decides for one input: Permission on Scope, acting on TenantID
// (the audit row's tenant).
type Decision struct {
	Permission string
	Scope      string
	TenantID   string
}

// ScopeForm is the form of the scope a method decides its permission on, as the contract
// declares it (contract.ScopeForm). The zero ScopeForm is none: Register refuses a method
// without one.
type ScopeForm = contract.ScopeForm

// The scope forms: on tenant/<tenantId> (the audit row's tenant is tenantId; the catalogue
// shows tenant/<id>), on compute-fleet/global (root-tenant principals only; tenantId is the
// audit row's tenant), and on tenant/root (root-tenant principals only; the input names no
// tenant).
const (
	OnTenant = contract.OnTenant
	OnFleet  = contract.OnFleet
	OnRoot   = contract.OnRoot
)

// catalogue returns the scope of form f as the catalogue shows it and whether only
// root-tenant principals may hold a permission decided on it.
func catalogue(f ScopeForm) (scope string, rootOnly bool) {
	switch f {
	case OnTenant:
		return iam.ScopeFormTenant, false
	case OnFleet:
		return iam.ScopeFleet, true
	case OnRoot:
		return iam.TenantScope(iam.RootTenant), true
	}
	return "", false
}

// Call is one invocation as a handler sees it.
type Call struct {
	Principal *iam.Principal
	RequestID string
	// Q runs the handler's SQL: the write transaction for write methods, the database for reads
	// and composite methods.
	Q store.Querier

	method   string
	decision Decision
	now      func() time.Time
}

// AuditEntry returns the call's own audit row (outcome ok, At now) as the method table writes
// it; a composite method writes it inside its own transaction, adding Target and Message.
func (c *Call) AuditEntry() audit.Entry {
	return audit.Entry{
		At: c.now().UnixMilli(), TenantID: c.decision.TenantID, PrincipalID: c.Principal.ID, Method: c.method,
		Permission: c.decision.Permission, Scope: c.decision.Scope, Outcome: audit.OutcomeOK, RequestID: c.RequestID,
	}
}

// DefaultMaxBody is the body cap of a method that declares none, MaxDocumentBody that of the
// methods that take a fleet document or a compute object (the contract's).
const (
	DefaultMaxBody  = contract.DefaultMaxBody
	MaxDocumentBody = contract.MaxDocumentBody
)

// Method is one API method: its handler, and what the contract declares of it.
type Method struct {
	Name    string // e.g. "compute.pools.create"
	Summary string // one line for the OpenAPI document
	// Permission is the permission the method decides before its handler runs, e.g.
	// "compute:pools:create"; Scope is the form of the scope it decides it on. Register takes
	// them, with Summary, Write, MaxBody, Input and Output, from the contract's row of the same
	// name (contract.Lookup) when the method leaves them out; it panics when a method has no
	// permission and scope form either way. The catalogue is built from them.
	Permission string
	Scope      ScopeForm
	// Write methods run in one transaction with their audit row.
	Write bool
	// Composite methods (fleet.apply) run their own transactions and write their own audit
	// rows; Call passes them the database.
	Composite bool
	// MaxBody is the largest request body the method takes, in bytes (a larger one is
	// PAYLOAD_TOO_LARGE, 413); zero means DefaultMaxBody. The transport reads no more.
	MaxBody int64
	// Handle runs the method.
	Handle func(ctx context.Context, c *Call, in json.RawMessage) (any, error)
	// Input and Output are zero values of the contract's input and output types.
	Input, Output any
}

// Decide returns the decision for input in: the method's Permission on the scope its Scope form
// names. It reads tenantId with the handlers' decoder (strictjson.DecodePart), so both see the
// same tenant. It is INVALID_INPUT when the form needs the input's tenantId and in has none, or
// when in is not a strict JSON object.
func (m *Method) Decide(in json.RawMessage) (Decision, error) {
	if m.Scope == OnRoot {
		return Decision{Permission: m.Permission, Scope: iam.TenantScope(iam.RootTenant), TenantID: iam.RootTenant}, nil
	}
	var t TenantInput
	if err := strictjson.DecodePart(in, &t); err != nil {
		return Decision{}, err
	}
	if t.TenantID == "" {
		return Decision{}, cubefleet.Invalid("tenantId", "tenantId is required")
	}
	d := Decision{Permission: m.Permission, Scope: iam.TenantScope(t.TenantID), TenantID: t.TenantID}
	if m.Scope == OnFleet {
		d.Scope = iam.ScopeFleet
	}
	return d, nil
}

// Registry holds the methods. Register them all before serving; then it is safe for concurrent
// use.
type Registry struct {
	db      *store.DB
	methods map[string]*Method
	order   []*Method // registration order, the order the catalogue lists a permission's methods in
	now     func() time.Time
	log     *slog.Logger
}

// NewRegistry returns an empty registry over db. now and log may be nil. New returns one
// holding every method of the API.
func NewRegistry(db *store.DB, now func() time.Time, log *slog.Logger) *Registry {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Registry{db: db, methods: map[string]*Method{}, now: now, log: log}
}

// Register adds m (with MaxBody DefaultMaxBody when it declares none), taking what it leaves
// out from the contract's row of its name. It panics (the method table is fixed at start-up) on
// a duplicate name, a method without a handler, a Permission or a Scope, and a permission
// another method declares on another scope form.
func (r *Registry) Register(m Method) {
	if c, ok := contract.Lookup(m.Name); ok && m.Permission == "" {
		m.Summary, m.Permission, m.Scope, m.Write, m.MaxBody, m.Input, m.Output = c.Summary, c.Permission, c.Scope, c.Write, c.MaxBody, c.Input, c.Output
	}
	switch {
	case m.Name == "" || m.Handle == nil:
		panic(fmt.Sprintf("api: method %q needs a name and a handler", m.Name))
	case r.methods[m.Name] != nil:
		panic("api: duplicate method " + m.Name)
	case m.Permission == "" || m.Scope < OnTenant || m.Scope > OnRoot:
		panic("api: method " + m.Name + " declares no permission and scope form")
	}
	for _, o := range r.order {
		if o.Permission == m.Permission && o.Scope != m.Scope {
			panic(fmt.Sprintf("api: %s decides %s on another scope form than %s does", m.Name, m.Permission, o.Name))
		}
	}
	if m.MaxBody <= 0 {
		m.MaxBody = DefaultMaxBody
	}
	r.methods[m.Name] = &m
	r.order = append(r.order, &m)
}

// Methods returns the registered methods sorted by name.
func (r *Registry) Methods() []*Method {
	out := make([]*Method, 0, len(r.methods))
	for _, m := range r.methods {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the method called name.
func (r *Registry) Lookup(name string) (*Method, bool) {
	m, ok := r.methods[name]
	return m, ok
}

// Catalogue returns the permission catalogue of the registered methods: one entry per declared
// permission, with its scope form, whether only root-tenant principals may hold it, and the
// methods that decide it in registration order; sorted by permission.
func (r *Registry) Catalogue() iam.Catalogue {
	index := map[string]int{}
	out := iam.Catalogue{}
	for _, m := range r.order {
		if i, ok := index[m.Permission]; ok {
			out[i].Methods = append(out[i].Methods, m.Name)
			continue
		}
		scope, rootOnly := catalogue(m.Scope)
		index[m.Permission] = len(out)
		out = append(out, iam.PermissionInfo{Permission: m.Permission, Scope: scope, RootOnly: rootOnly, Methods: []string{m.Name}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Permission < out[j].Permission })
	return out
}

// Call runs method name for principal p (nil: unauthenticated, refused UNAUTHENTICATED). It
// decides the permission first; a refusal is FORBIDDEN and is audited in its own transaction.
// Only a caller allowed on a tenant learns that it does not exist (NOT_FOUND). A write method
// runs in one transaction with its audit row, so a failing handler leaves nothing.
func (r *Registry) Call(ctx context.Context, p *iam.Principal, requestID, name string, in json.RawMessage) (any, error) {
	m, ok := r.methods[name]
	if !ok {
		return nil, cubefleet.Errorf(cubefleet.CodeNotFound, "no API method %s; GET /api/v1/openapi.json lists them", name)
	}
	d, err := r.decide(ctx, m, p, requestID, in)
	if err != nil {
		return nil, err
	}
	c := &Call{Principal: p, RequestID: requestID, Q: r.db, method: m.Name, decision: d, now: r.now}
	var out any
	if !m.Write || m.Composite {
		out, err = m.Handle(ctx, c, in)
	} else {
		err = r.db.InTx(ctx, func(tx *sql.Tx) error {
			c.Q = tx
			var err error
			if out, err = m.Handle(ctx, c, in); err != nil {
				return err
			}
			row := c.AuditEntry()
			if a, ok := out.(audited); ok {
				row.Target, row.Message, out = a.target, a.message, a.out
			}
			return audit.Record(ctx, tx, row)
		})
	}
	if a, ok := out.(audited); ok {
		out = a.out
	}
	if cubefleet.IsCode(err, cubefleet.CodeForbidden) {
		// A refusal the handler made itself (granting what the caller does not hold, say) is
		// audited like one the method table made.
		r.auditRefusal(ctx, m, p, requestID, d)
	}
	if store.IsBusy(err) {
		return nil, &cubefleet.Error{Code: cubefleet.CodeResourceExhausted, Err: err,
			Message: "the database is busy with another write (a large fleet apply, say): retry shortly; PostgreSQL serves concurrent writes better than SQLite"}
	}
	return out, err
}

func (r *Registry) decide(ctx context.Context, m *Method, p *iam.Principal, requestID string, in json.RawMessage) (Decision, error) {
	if p == nil {
		return Decision{}, cubefleet.Errorf(cubefleet.CodeUnauthenticated, "no credentials: send Authorization: Bearer <api key>")
	}
	d, err := m.Decide(in)
	if err != nil {
		return Decision{}, err
	}
	if err := iam.Decide(p, d.Permission, d.Scope); err != nil {
		r.auditRefusal(ctx, m, p, requestID, d)
		return Decision{}, err
	}
	// Only a caller allowed to act on the tenant learns whether it exists.
	if d.TenantID != "" {
		ok, err := iam.TenantExists(ctx, r.db, d.TenantID)
		if err != nil {
			return Decision{}, err
		}
		if !ok {
			return Decision{}, cubefleet.Errorf(cubefleet.CodeNotFound, "tenant %s does not exist; `cubefleet tenants list` shows the tenants", d.TenantID)
		}
	}
	return d, nil
}

// auditRefusal writes a forbidden row in its own transaction; a failure is logged, not
// returned, so the caller still gets its FORBIDDEN.
func (r *Registry) auditRefusal(ctx context.Context, m *Method, p *iam.Principal, requestID string, d Decision) {
	c := &Call{Principal: p, RequestID: requestID, method: m.Name, decision: d, now: r.now}
	row := c.AuditEntry()
	row.Outcome = audit.OutcomeForbidden
	if err := audit.Record(ctx, r.db, row); err != nil {
		r.log.ErrorContext(ctx, "audit refusal", "method", m.Name, "err", err)
	}
}

// audited is a write's output with what its audit row says besides the call: the object the
// call acted on (target, an id) and, for a forced call, what it overrode (message). Call
// answers out.
type audited struct {
	out             any
	target, message string
}

// TenantInput is the part of every tenant-scoped input that names the tenant
// (contract.TenantInput).
type TenantInput = contract.TenantInput

// Typed adapts a handler of a typed input (decoded strictly: unknown fields and wrong types are
// INVALID_INPUT naming the field) to a Method's Handle.
func Typed[In any](h func(ctx context.Context, c *Call, in In) (any, error)) func(context.Context, *Call, json.RawMessage) (any, error) {
	return func(ctx context.Context, c *Call, raw json.RawMessage) (any, error) {
		var in In
		if err := strictjson.Decode(raw, &in); err != nil {
			return nil, err
		}
		return h(ctx, c, in)
	}
}

// idleKey carries a call's idle hook in its context.
type idleKey struct{}

// WithIdle returns ctx carrying idle, which the transport runs when the call's handler says it
// only waits from then on (Idle): the server gives the call's work-pool slot back, so a long poll
// does not keep other calls from running.
func WithIdle(ctx context.Context, idle func()) context.Context {
	return context.WithValue(ctx, idleKey{}, idle)
}

// Idle tells the transport that the call only waits from now on (a long poll: sandboxes.wait,
// a create waiting for its sandbox to run), doing no more work than reading a row when woken
// and answering. It does nothing when the transport gave no hook (tests calling Call directly).
func Idle(ctx context.Context) {
	if idle, ok := ctx.Value(idleKey{}).(func()); ok {
		idle()
	}
}
