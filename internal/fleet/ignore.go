package fleet

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
)

// IgnoreRule is one drift ignore rule, written KIND.FIELD (`pool.gpuModel`): drift detection
// leaves that field of every object of that kind out, the way Argo CD's ignoreDifferences does;
// plan and apply never do (issue "Drift events", item 2; server flag --drift-ignore).
type IgnoreRule struct {
	Kind  string // a document kind: site, providerAccount, pool, ownerQuota, offer, flavor, sandboxTemplate
	Field string // a field a plan can name for that kind (its Change.Fields)
}

// String returns the rule as KIND.FIELD.
func (r IgnoreRule) String() string { return r.Kind + "." + r.Field }

// fixedFields are the fields a plan names, per kind, besides the kind's updatable ones
// (compute.Kinds): those it blocks on because they cannot change (docs/plan-apply.md, "What
// each kind can do").
var fixedFields = map[string][]string{
	compute.KindSite:            {"kind", "region"},
	compute.KindProviderAccount: {"provider"},
	compute.KindPool:            {"site", "class", "providerAccount"},
	compute.KindFlavor:          {"gpu"},
	compute.KindSandboxTemplate: {"pool"},
}

// DriftFields returns the fields a plan can name for kind (updatable first, then fixed), or
// nil for an unknown kind.
func DriftFields(kind string) []string {
	info, ok := compute.Info(kind)
	if !ok {
		return nil
	}
	return append(slices.Clone(info.Updatable), fixedFields[kind]...)
}

// ParseIgnoreRules parses --drift-ignore values (KIND.FIELD each), dropping repeats and keeping
// the order given. An unknown kind or field is an error that lists what is valid.
func ParseIgnoreRules(values []string) ([]IgnoreRule, error) {
	var out []IgnoreRule
	seen := map[IgnoreRule]bool{}
	for _, v := range values {
		kind, field, ok := strings.Cut(strings.TrimSpace(v), ".")
		if !ok || kind == "" || field == "" {
			return nil, fmt.Errorf("--drift-ignore %q: write KIND.FIELD, e.g. pool.gpuModel", v)
		}
		fields := DriftFields(kind)
		if fields == nil {
			kinds := make([]string, len(compute.Kinds))
			for i, k := range compute.Kinds {
				kinds[i] = k.Kind
			}
			return nil, fmt.Errorf("--drift-ignore %q: unknown kind %s; kinds are %s", v, kind, strings.Join(kinds, ", "))
		}
		if !slices.Contains(fields, field) {
			return nil, fmt.Errorf("--drift-ignore %q: %s has no field %s that drift can find; its fields are %s", v, cubefleet.Article(kind), field, strings.Join(fields, ", "))
		}
		r := IgnoreRule{Kind: kind, Field: field}
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out, nil
}

// ignoring returns pl's changes and calls without the fields rules ignore: an update left with
// no field becomes unchanged and its call goes; an update keeping some fields keeps its call
// without the ignored inputs. pl itself is not changed.
func ignoring(pl *Plan, rules []IgnoreRule) (changes []Change, calls []Call) {
	if len(rules) == 0 {
		return pl.Changes, pl.Calls
	}
	ignored := map[string]map[string]bool{} // kind -> field -> ignored
	for _, r := range rules {
		if ignored[r.Kind] == nil {
			ignored[r.Kind] = map[string]bool{}
		}
		ignored[r.Kind][r.Field] = true
	}
	type key struct{ kind, name string }
	trimmed := map[key]Change{} // updates that lost fields, as they are now
	changes = make([]Change, 0, len(pl.Changes))
	for _, c := range pl.Changes {
		if c.Action != ActionUpdate || ignored[c.Kind] == nil {
			changes = append(changes, c)
			continue
		}
		kept := slices.DeleteFunc(slices.Clone(c.Fields), func(f string) bool { return ignored[c.Kind][f] })
		if len(kept) == len(c.Fields) {
			changes = append(changes, c)
			continue
		}
		c.Diffs = slices.DeleteFunc(slices.Clone(c.Diffs), func(d FieldDiff) bool { return ignored[c.Kind][d.Field] })
		c.Fields = kept
		if len(kept) == 0 {
			c.Action, c.Fields, c.Diffs = ActionUnchanged, nil, nil
		}
		trimmed[key{c.Kind, c.Name}] = c
		changes = append(changes, c)
	}
	calls = make([]Call, 0, len(pl.Calls))
	for _, call := range pl.Calls {
		c, ok := trimmed[key{call.Kind, call.Name}]
		if !ok || !strings.HasSuffix(call.Method, ".update") {
			calls = append(calls, call)
			continue
		}
		if c.Action == ActionUnchanged {
			continue
		}
		in := maps.Clone(call.Input)
		for f := range ignored[call.Kind] {
			delete(in, f)
		}
		call.Input = in
		calls = append(calls, call)
	}
	return changes, calls
}
