package api_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/api"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/iam"
)

// docRow is one row of docs/iam.md's permission table.
type docRow struct {
	permission string   // as written: `prefix:a|b|c`, or the compute:<kind>:<verb> family
	scope      string   // the scope cell's first code span
	rootOnly   bool     // the scope cell says "(root only)"
	methods    []string // the methods cell's code spans
	text       string   // the whole row
}

// familyRow is the one row that describes every compute kind's permissions.
const familyRow = "compute:<kind>:<verb>"

func readPermissionTable(t *testing.T) []docRow {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "iam.md"))
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([^`]+)`")
	var rows []docRow
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "\x00"), "|")
		if len(cells) < 5 {
			t.Fatalf("docs/iam.md: a permission row needs permission, scope and methods: %s", line)
		}
		unescape := func(s string) string { return strings.ReplaceAll(s, "\x00", "|") }
		span := func(cell string) []string {
			var out []string
			for _, m := range code.FindAllStringSubmatch(unescape(cell), -1) {
				out = append(out, m[1])
			}
			return out
		}
		r := docRow{text: line, rootOnly: strings.Contains(cells[2], "(root only)"), methods: span(cells[3])}
		if p := span(cells[1]); len(p) == 1 {
			r.permission = p[0]
		}
		if s := span(cells[2]); len(s) > 0 {
			r.scope = s[0]
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatal("docs/iam.md has no permission table")
	}
	return rows
}

// permissions returns the permissions a row documents: `prefix:a|b|c` is prefix:a, prefix:b and
// prefix:c; the family row is every verb of every compute kind.
func (r docRow) permissions() []string {
	if r.permission == familyRow {
		var out []string
		for _, k := range compute.Kinds {
			for _, verb := range k.Verbs() {
				out = append(out, k.Permission(verb))
			}
		}
		return out
	}
	i := strings.LastIndex(r.permission, ":")
	var out []string
	for _, verb := range strings.Split(r.permission[i+1:], "|") {
		out = append(out, r.permission[:i+1]+verb)
	}
	return out
}

// covers reports whether the row's methods cell names method: spelled out, as `prefix.*`, or
// (the family row) as compute.<kind>.<verb>.
func (r docRow) covers(method string) bool {
	for _, m := range r.methods {
		if m == method || m == "compute.<kind>.<verb>" && strings.HasPrefix(method, "compute.") {
			return true
		}
		if prefix, ok := strings.CutSuffix(m, "*"); ok && strings.HasPrefix(method, prefix) {
			return true
		}
	}
	return false
}

// TestIAMDocMatchesCatalogue checks docs/iam.md's permission table against the catalogue the
// method table declares (`cubefleet keys permissions`), both ways: every permission a method
// declares has a row (a method added without one fails here), every row's permission is
// declared by some method, with the scope form and root-only flag the row gives, and the row
// names every method that decides it.
func TestIAMDocMatchesCatalogue(t *testing.T) {
	catalogue := api.Catalogue()
	byPermission := map[string]iam.PermissionInfo{}
	for _, p := range catalogue {
		byPermission[p.Permission] = p
	}
	documented := map[string]bool{}
	for _, r := range readPermissionTable(t) {
		if r.permission == familyRow {
			for _, k := range compute.Kinds {
				if !strings.Contains(r.text, k.API) {
					t.Errorf("docs/iam.md's %s row does not name the kind %s", familyRow, k.API)
				}
			}
		}
		for _, perm := range r.permissions() {
			documented[perm] = true
			p, ok := byPermission[perm]
			if !ok {
				t.Errorf("docs/iam.md lists %s, but no API method declares it", perm)
				continue
			}
			if p.Scope != r.scope || p.RootOnly != r.rootOnly {
				t.Errorf("docs/iam.md grants %s on %s (root only: %v); the method table on %s (root only: %v)", perm, r.scope, r.rootOnly, p.Scope, p.RootOnly)
			}
			for _, m := range p.Methods {
				if !r.covers(m) {
					t.Errorf("docs/iam.md's row for %s does not name %s, which decides it", perm, m)
				}
			}
		}
	}
	for _, p := range catalogue {
		if !documented[p.Permission] {
			t.Errorf("docs/iam.md's permission table has no row for %s (%s on %s)", p.Permission, strings.Join(p.Methods, ", "), p.Scope)
		}
	}
	if !slices.IsSortedFunc(catalogue, func(a, b iam.PermissionInfo) int { return strings.Compare(a.Permission, b.Permission) }) {
		t.Error("the catalogue is not sorted by permission")
	}
}
