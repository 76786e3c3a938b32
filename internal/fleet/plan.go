package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/gowebpki/jcs"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/fleet/document"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/strictjson"
)

// Actions of a change.
const (
	ActionCreate    = "create"
	ActionUpdate    = "update"
	ActionDelete    = "delete"
	ActionUnchanged = "unchanged"
)

// Change is one item of a plan: an item of the document or, with prune, an object the document
// leaves out. Fields lists the fields an update changes and Diffs their current and desired
// values, in the same order; Blocked says the change cannot be applied, and Note says why (or
// notes something harmless, e.g. an unenforced quota key).
type Change struct {
	Kind    string      `json:"kind"`
	Name    string      `json:"name"`
	Action  string      `json:"action"`
	Fields  []string    `json:"fields,omitempty"`
	Diffs   []FieldDiff `json:"diffs,omitempty"`
	Blocked bool        `json:"blocked,omitempty"`
	Note    string      `json:"note,omitempty"`
}

// FieldDiff is one field an update changes: its value now (From) and in the document (To), as
// the API shows them; nil (JSON null) is an empty value. Config entries are secret references,
// never secrets, so a diff shows nothing secret.
type FieldDiff struct {
	Field string `json:"field"`
	From  any    `json:"from"`
	To    any    `json:"to"`
}

// Call is one API call fleet.apply makes: Method (e.g. "compute.pools.create") and its Input
// exactly as the API takes it. Kind and Name say which change it belongs to. A create carries
// its idempotency key (`fleet:<tenant>:<kind>:<name>`), never the id derived from it, and
// references objects the same plan creates as `key:<idempotency key>`; updates and deletes
// carry the object's current revision.
type Call struct {
	Method string         `json:"method"`
	Kind   string         `json:"kind"`
	Name   string         `json:"name"`
	Input  map[string]any `json:"input"`
	op     *compute.Op    // the call as compute runs it (Input is made from it)
}

// Summary counts a plan's changes: those that can run by action, and the blocked ones
// (BlockedChanges, which run nothing) apart; Blocked is true when any change is blocked.
type Summary struct {
	Create         int  `json:"create"`
	Update         int  `json:"update"`
	Delete         int  `json:"delete"`
	Unchanged      int  `json:"unchanged"`
	Blocked        bool `json:"blocked"`
	BlockedChanges int  `json:"blockedChanges,omitempty"`
}

// Plan is the result of fleet.plan (fleet spec, "Plan"). PlanHash is the hex SHA-256 of the
// RFC 8785 canonical JSON of Calls: the same document against the same fleet gives the same
// hash in every process and for every caller. NotInDocument lists, for a plan without prune,
// the tenant's objects the document leaves out, which the plan keeps and a plan with prune
// would delete (archive, for pools), in the order prune would list them; sites, which fleet
// never deletes, are not among them. It is empty with prune (they are deletes then) and is not
// part of PlanHash.
type Plan struct {
	TenantID      string      `json:"tenantId"`
	Prune         bool        `json:"prune"`
	Changes       []Change    `json:"changes"`
	Calls         []Call      `json:"calls"`
	Summary       Summary     `json:"summary"`
	PlanHash      string      `json:"planHash"`
	NotInDocument []ObjectRef `json:"notInDocument"`
}

// ObjectRef names one object of a tenant's fleet: its kind (site, pool, offer, ...) and its
// fleet name (docs/fleet-document.md, "Names instead of ids").
type ObjectRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// Planner diffs documents against the stored fleet.
type Planner struct {
	// Compute says which kinds this deployment serves (its Disabled modules).
	Compute *compute.Service
	// VaultConfigured is true when a Vault server is configured (--vault-addr); without one,
	// vault:// references block the plan.
	VaultConfigured bool
	// DriftIgnore are the drift ignore rules (--drift-ignore): drift checks leave these fields
	// out; Plan never does.
	DriftIgnore []IgnoreRule

	docs docCache // applied documents decoded by drift checks, by hash
}

// call groups, in the order fleet.apply runs them (fleet spec, "Plan": dependency order).
const (
	grpAccountWrite = iota
	grpSiteCreate
	grpPoolCreate
	grpPoolUpdateQuota
	grpOfferWrite
	grpFlavorWrite
	grpTemplateWrite
	grpTemplateDelete
	grpFlavorDelete
	grpOfferDelete
	grpPoolArchive
	grpAccountDelete
	numGroups
)

// Plan diffs doc against tenantID's objects as read through q and returns the plan. It changes
// nothing. doc must have passed document validation. A document that holds an env://
// reference tenantID may not use (fieldrules.EnvRefs, the compute API's rule) is INVALID_INPUT
// listing each at its path, such as providerAccounts[1].config.token.
func (p *Planner) Plan(ctx context.Context, q store.Querier, tenantID string, doc *document.Document, prune bool) (*Plan, error) {
	// A document describes at most fieldrules.MaxObjects objects, so a plan, its response and
	// its apply stay bounded; Decode refused more, and a document built in code is held to it
	// here.
	if err := doc.CheckObjects(); err != nil {
		return nil, err
	}
	if err := checkEnvRefs(doc, tenantID, p.envRefs()); err != nil {
		return nil, err
	}
	n := doc.Objects()
	st, err := loadState(ctx, q, tenantID)
	if err != nil {
		return nil, err
	}
	b := &builder{ctx: ctx, q: q, p: p, st: st, tenant: tenantID, prune: prune,
		siteRef: map[string]string{}, poolRef: map[string]string{}, accountRef: map[string]string{}, flavorRef: map[string]string{},
		matched: make(map[string]bool, n), desiredRefs: map[string][]string{}, changes: make([]Change, 0, n)}
	if err := b.build(doc); err != nil {
		return nil, err
	}
	return b.finish()
}

// builder holds one plan's working state.
type builder struct {
	ctx    context.Context
	q      store.Querier
	p      *Planner
	st     *state
	tenant string
	prune  bool

	changes []Change
	groups  [numGroups][]Call

	siteRef, poolRef, accountRef map[string]string   // document name -> id, or key:... for new objects
	flavorRef                    map[string]string   // poolRef + "/" + name -> id or key:...
	matched                      map[string]bool     // existing ids the document names
	desiredRefs                  map[string][]string // existing id -> the document's items that reference it
	deleted                      map[string]bool
	notInDocument                []ObjectRef // without prune: what prune would remove
}

func (b *builder) key(kind, name string) string {
	return "fleet:" + b.tenant + ":" + kind + ":" + name
}

func (b *builder) newRef(kind, name string) string { return compute.KeyRef(b.key(kind, name)) }

func (b *builder) build(doc *document.Document) error {
	steps := []func(*document.Document) error{b.accounts, b.sites, b.pools, b.flavors, b.templates}
	for _, step := range steps {
		if err := step(doc); err != nil {
			return err
		}
	}
	if b.prune {
		b.pruneUnnamed()
	} else {
		for _, o := range b.unnamed() {
			b.notInDocument = append(b.notInDocument, ObjectRef{Kind: o.Kind, Name: b.st.nameOf(o)})
		}
	}
	return nil
}

// change records a change and, unless it is blocked or unchanged (or op is nil), its call: op,
// and the same call as the API takes it (inputOf), which the plan shows and its hash covers.
func (b *builder) change(c Change, group int, op *compute.Op) {
	b.changes = append(b.changes, c)
	if c.Blocked || c.Action == ActionUnchanged || op == nil {
		return
	}
	b.groups[group] = append(b.groups[group], Call{Method: method(op.Kind, op.Verb), Kind: c.Kind, Name: c.Name, Input: inputOf(op), op: op})
}

// createOp is the create of kind with spec for the document's item name (its idempotency key);
// compute gets name only for its named kinds (computeName).
func (b *builder) createOp(kind, name, computeName string, spec any) *compute.Op {
	return &compute.Op{Verb: compute.VerbCreate, Kind: kind, Ref: compute.Ref{TenantID: b.tenant}, IdempotencyKey: b.key(kind, name), Name: computeName, Spec: spec}
}

// refOp is verb (an update's or a remove's) on existing object o at its current revision.
func (b *builder) refOp(verb string, o *compute.Object) *compute.Op {
	rev := o.Revision
	return &compute.Op{Verb: verb, Kind: o.Kind, Ref: compute.Ref{TenantID: b.tenant, ID: o.ID, Revision: &rev}}
}

// inputOf is op as the compute API takes it: tenantId; a create's idempotencyKey, name (named
// kinds) and spec fields (empty omitempty ones left out); an update's or a remove's id and
// revision, and an update's fields (null for an empty one).
func inputOf(op *compute.Op) map[string]any {
	in := map[string]any{"tenantId": op.Ref.TenantID}
	if op.Verb == compute.VerbCreate {
		in["idempotencyKey"] = op.IdempotencyKey
		if op.Name != "" {
			in["name"] = op.Name
		}
		copyFields(in, op.Spec)
		return in
	}
	in["id"] = op.Ref.ID
	if op.Ref.Revision != nil {
		in["revision"] = *op.Ref.Revision
	}
	for _, f := range op.Fields {
		in[f] = value(op.Spec, f)
	}
	return in
}

// method returns the compute API method of verb on kind (compute.pools.create).
func method(kind, verb string) string {
	info, _ := compute.Info(kind)
	return info.Method(verb)
}

// notes collects a change's notes; blocked notes block it.
type notes struct {
	text    []string
	blocked bool
}

func (n *notes) block(format string, args ...any) {
	n.blocked = true
	n.text = append(n.text, fmt.Sprintf(format, args...))
}

func (n *notes) note(format string, args ...any) {
	n.text = append(n.text, fmt.Sprintf(format, args...))
}

func (n *notes) apply(c Change) Change {
	c.Blocked = n.blocked
	c.Note = strings.Join(n.text, "; ")
	return c
}

const noSandboxes = "this deployment does not run sandboxes"

// served blocks n when this deployment does not serve kind.
func (b *builder) served(kind string, n *notes) {
	if b.p.Compute != nil && !b.p.Compute.Serves(kind) {
		if kind == compute.KindSandboxTemplate {
			n.block("%s (vps v0.5)", noSandboxes)
		} else {
			n.block("%s", noSandboxes)
		}
	}
}

// envRefs returns the rule of env:// references: the compute API's.
func (p *Planner) envRefs() fieldrules.EnvRefs {
	if p.Compute == nil {
		return fieldrules.EnvRefs{}
	}
	return p.Compute.EnvRefs
}

// checkEnvRefs refuses the env:// references of doc that tenantID may not hold (rule):
// INVALID_INPUT listing each at its path in the document.
func checkEnvRefs(doc *document.Document, tenantID string, rule fieldrules.EnvRefs) error {
	root := tenantID == iam.RootTenant
	var errs []cubefleet.FieldError
	check := func(list string, i int, field string, values map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(values)) {
			if msg := rule.Check(k, values[k], root); msg != "" {
				at := strictjson.Member(strictjson.Index(strictjson.Member("", list), i), field)
				errs = append(errs, cubefleet.FieldError{Path: strictjson.Member(at, k), Message: msg})
			}
		}
	}
	for i, a := range doc.ProviderAccounts {
		check("providerAccounts", i, "config", a.Config)
	}
	for i, t := range doc.SandboxTemplates {
		check("sandboxTemplates", i, "env", t.Env)
	}
	if len(errs) > 0 {
		return cubefleet.InvalidAll(errs)
	}
	return nil
}

// checkSecrets blocks n for each secret reference the compute API would refuse
// (fieldrules.CheckSecretRef): a secret:// reference the tenant's secret store lacks or to
// another tenant's, a vault:// reference when no Vault is configured.
func (b *builder) checkSecrets(values map[string]string, n *notes) error {
	has := func(name string) (bool, error) { return b.st.hasSecret(b.ctx, b.q, name) }
	for _, k := range slices.Sorted(maps.Keys(values)) {
		msg, err := fieldrules.CheckSecretRef(k, values[k], b.tenant, b.p.VaultConfigured, has)
		if err != nil {
			return err
		}
		if msg != "" {
			n.block("%s", msg)
		}
	}
	return nil
}

// update records an update (or unchanged) change of existing object o: names lists the
// updatable fields to compare between the desired and current specs (structs of one type).
// fixed names the fixed fields the document would change (each already blocks n).
func (b *builder) update(o *compute.Object, name string, group int, names []string, desired, current any, fixed []string, n notes) {
	changed := diff(names, desired, current)
	c := Change{Kind: o.Kind, Name: name, Action: ActionUnchanged}
	if all := append(slices.Clone(fixed), changed...); len(all) > 0 {
		c.Action = ActionUpdate
		c.Fields = all
		c.Diffs = diffs(all, desired, current)
	}
	if c.Action == ActionUnchanged {
		b.change(n.apply(c), group, nil) // no call: most objects of a converged fleet
		return
	}
	op := b.refOp(compute.VerbUpdate, o)
	op.Spec, op.Fields = desired, changed
	b.change(n.apply(c), group, op)
}

func (b *builder) finish() (*Plan, error) {
	pl := &Plan{TenantID: b.tenant, Prune: b.prune, Changes: b.changes, Calls: []Call{}, NotInDocument: b.notInDocument}
	if pl.NotInDocument == nil {
		pl.NotInDocument = []ObjectRef{}
	}
	for _, g := range b.groups {
		pl.Calls = append(pl.Calls, g...)
	}
	if pl.Changes == nil {
		pl.Changes = []Change{}
	}
	pl.Summary = summarize(pl.Changes)
	h, err := HashCalls(pl.Calls)
	if err != nil {
		return nil, err
	}
	pl.PlanHash = h
	return pl, nil
}

// summarize counts changes: those that can run by action, the blocked ones apart.
func summarize(changes []Change) Summary {
	var s Summary
	for _, c := range changes {
		if c.Blocked {
			s.Blocked = true
			s.BlockedChanges++
			continue
		}
		switch c.Action {
		case ActionCreate:
			s.Create++
		case ActionUpdate:
			s.Update++
		case ActionDelete:
			s.Delete++
		default:
			s.Unchanged++
		}
	}
	return s
}

// HashCalls returns the hex SHA-256 of the RFC 8785 canonical JSON of calls.
func HashCalls(calls []Call) (string, error) {
	raw, err := json.Marshal(calls)
	if err != nil {
		return "", fmt.Errorf("plan hash: %w", err)
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return "", fmt.Errorf("plan hash: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// blockedError is the PLAN_BLOCKED error for a blocked plan: it names the first blocked changes.
func blockedError(pl *Plan) error {
	var lines []string
	for _, c := range pl.Changes {
		if c.Blocked {
			lines = append(lines, fmt.Sprintf("%s %s: %s", c.Kind, c.Name, c.Note))
		}
	}
	sort.Strings(lines)
	msg := "the plan is blocked"
	if len(lines) > 0 {
		msg += ": " + lines[0]
		if len(lines) > 1 {
			msg += fmt.Sprintf(" (and %d more)", len(lines)-1)
		}
	}
	return &cubefleet.Error{Code: cubefleet.CodePlanBlocked, Message: msg, Details: map[string]any{"blocked": lines}}
}
