// Package api is the public API's method table: every method's name (`compute.pools.create`),
// the permission it decides and on which scope, whether it writes, and its handler. Call runs a
// method for an HTTP request: it decides the permission before the handler touches data, audits
// refusals and writes, and runs writes in one transaction. Check and Invoke let a composite
// method (fleet.apply) decide many calls first and then run them inside its own transaction
// (../shared/DESIGN.md, "Public API conventions"; fleet spec, "Apply").
package api

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"sort"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/strictjson"
)

// Decision is what a method must decide for one input: Permission on Scope, acting on TenantID
// (the audit row's tenant).
type Decision struct {
	Permission string
	Scope      string
	TenantID   string
}

// Call is one invocation as a handler sees it.
type Call struct {
	Principal *iam.Principal
	RequestID string
	// Q runs the handler's SQL: the write transaction for write methods, the database for reads
	// and composite methods.
	Q store.Querier
}

// Method is one API method.
type Method struct {
	Name    string // e.g. "compute.pools.create"
	Summary string // one line for the OpenAPI document
	// Write methods run in one transaction with their audit row.
	Write bool
	// Composite methods (fleet.apply) run their own transactions; Call passes them the database.
	Composite bool
	// Decide returns the permission to decide for an input, or INVALID_INPUT when the input
	// cannot name its scope.
	Decide func(in json.RawMessage) (Decision, error)
	// Handle runs the method.
	Handle func(ctx context.Context, c *Call, in json.RawMessage) (any, error)
	// Input and Output are zero values of the input and output types, for the OpenAPI document.
	Input, Output any
}

// Registry holds the methods. Register them all before serving; then it is safe for concurrent
// use.
type Registry struct {
	db      *store.DB
	methods map[string]*Method
	now     func() time.Time
	log     *slog.Logger
}

// NewRegistry returns an empty registry over db. now and log may be nil.
func NewRegistry(db *store.DB, now func() time.Time, log *slog.Logger) *Registry {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Registry{db: db, methods: map[string]*Method{}, now: now, log: log}
}

// Register adds m. It panics on a duplicate name: the method table is fixed at start-up.
func (r *Registry) Register(m Method) {
	if _, dup := r.methods[m.Name]; dup {
		panic("api: duplicate method " + m.Name)
	}
	r.methods[m.Name] = &m
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

func (r *Registry) method(name string) (*Method, error) {
	m, ok := r.methods[name]
	if !ok {
		return nil, cubefleet.Errorf(cubefleet.CodeNotFound, "no API method %s; GET /api/v1/openapi.json lists them", name)
	}
	return m, nil
}

// Call runs method name for principal p (nil: unauthenticated). It decides the permission
// first; a refusal is FORBIDDEN and is audited in its own transaction. A write method runs in
// one transaction with its audit row.
func (r *Registry) Call(ctx context.Context, p *iam.Principal, requestID, name string, in json.RawMessage) (any, error) {
	m, err := r.method(name)
	if err != nil {
		return nil, err
	}
	d, err := r.decide(ctx, m, p, requestID, in)
	if err != nil {
		return nil, err
	}
	c := &Call{Principal: p, RequestID: requestID, Q: r.db}
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
			return r.audit(ctx, tx, c, m, d, audit.OutcomeOK, out)
		})
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
	c := &Call{Principal: p, RequestID: requestID, Q: r.db}
	if err := r.audit(ctx, r.db, c, m, d, audit.OutcomeForbidden, nil); err != nil {
		r.log.ErrorContext(ctx, "audit refusal", "method", m.Name, "err", err)
	}
}

// Check decides method name's permission for input in as p, without running it; a refusal is
// FORBIDDEN and is audited, as Call's is.
func (r *Registry) Check(ctx context.Context, p *iam.Principal, requestID, name string, in json.RawMessage) error {
	m, err := r.method(name)
	if err != nil {
		return err
	}
	if m.Composite || !m.Write {
		return cubefleet.Errorf(cubefleet.CodeInvalidInput, "%s cannot run inside another method", name)
	}
	_, err = r.decide(ctx, m, p, requestID, in)
	return err
}

// Invoke runs write method name inside the caller's transaction tx, as p, and queues its audit
// row in batch; the caller flushes the batch in the same transaction. The caller has decided the
// permission with Check.
func (r *Registry) Invoke(ctx context.Context, tx store.Querier, batch *audit.Batch, p *iam.Principal, requestID, name string, in json.RawMessage) (any, error) {
	m, err := r.method(name)
	if err != nil {
		return nil, err
	}
	if m.Composite || !m.Write {
		return nil, cubefleet.Errorf(cubefleet.CodeInvalidInput, "%s cannot run inside another method", name)
	}
	d, err := m.Decide(in)
	if err != nil {
		return nil, err
	}
	c := &Call{Principal: p, RequestID: requestID, Q: tx}
	out, err := m.Handle(ctx, c, in)
	if err != nil {
		return nil, err
	}
	batch.Add(r.entry(c, m, d, audit.OutcomeOK, out))
	return out, nil
}

// Audit writes an audit row for a composite method's own success, inside its transaction.
func (r *Registry) Audit(ctx context.Context, tx store.Querier, c *Call, name string, d Decision, target, message string) error {
	return audit.Record(ctx, tx, audit.Entry{
		At: r.now().UnixMilli(), TenantID: d.TenantID, PrincipalID: c.Principal.ID, Method: name,
		Permission: d.Permission, Scope: d.Scope, Outcome: audit.OutcomeOK, Target: target, RequestID: c.RequestID, Message: message,
	})
}

// Targeted is implemented by outputs that name the object a call acted on.
type Targeted interface{ AuditTarget() string }

func (r *Registry) audit(ctx context.Context, q store.Querier, c *Call, m *Method, d Decision, outcome string, out any) error {
	return audit.Record(ctx, q, r.entry(c, m, d, outcome, out))
}

func (r *Registry) entry(c *Call, m *Method, d Decision, outcome string, out any) audit.Entry {
	target := ""
	if t, ok := out.(Targeted); ok {
		target = t.AuditTarget()
	}
	return audit.Entry{
		At: r.now().UnixMilli(), TenantID: d.TenantID, PrincipalID: c.Principal.ID, Method: m.Name,
		Permission: d.Permission, Scope: d.Scope, Outcome: outcome, Target: target, RequestID: c.RequestID,
	}
}

// TenantInput is the part of every tenant-scoped input that names the tenant.
type TenantInput struct {
	TenantID string `json:"tenantId"`
}

// OnTenant decides permission on "tenant/<tenantId>" of the input.
func OnTenant(permission string) func(json.RawMessage) (Decision, error) {
	return func(in json.RawMessage) (Decision, error) {
		var t TenantInput
		if err := json.Unmarshal(in, &t); err != nil {
			return Decision{}, cubefleet.Invalid("", "the input must be a JSON object with tenantId")
		}
		if t.TenantID == "" {
			return Decision{}, cubefleet.Invalid("tenantId", "tenantId is required")
		}
		return Decision{Permission: permission, Scope: iam.TenantScope(t.TenantID), TenantID: t.TenantID}, nil
	}
}

// OnFleet decides permission on compute-fleet/global; the audit row's tenant is the input's
// tenantId (required).
func OnFleet(permission string) func(json.RawMessage) (Decision, error) {
	onTenant := OnTenant(permission)
	return func(in json.RawMessage) (Decision, error) {
		d, err := onTenant(in)
		d.Scope = iam.ScopeFleet
		return d, err
	}
}

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
