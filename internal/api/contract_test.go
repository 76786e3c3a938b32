package api_test

import (
	"reflect"
	"testing"

	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/api"
)

// TestEveryMethodHasItsContract holds the method table to the contract's: every registered
// method has a contract row (so contract types, an OpenAPI entry and a golden file) with the
// same permission, scope form, write flag, body cap and types, and every contract row is
// registered. A method added without its contract fails here.
func TestEveryMethodHasItsContract(t *testing.T) {
	registered := map[string]bool{}
	for _, m := range api.New(api.Config{}).Methods() {
		registered[m.Name] = true
		c, ok := contract.Lookup(m.Name)
		if !ok {
			t.Errorf("%s is registered but the contract (package api at the module root) has no row for it: add its types and row there", m.Name)
			continue
		}
		if m.Permission != c.Permission || m.Scope != c.Scope || m.Write != c.Write || m.MaxBody != c.MaxBody || m.Summary != c.Summary {
			t.Errorf("%s: registered as %s on %s (write %v, max body %d), the contract says %s on %s (write %v, max body %d)",
				m.Name, m.Permission, m.Scope, m.Write, m.MaxBody, c.Permission, c.Scope, c.Write, c.MaxBody)
		}
		if reflect.TypeOf(m.Input) != reflect.TypeOf(c.Input) || reflect.TypeOf(m.Output) != reflect.TypeOf(c.Output) {
			t.Errorf("%s: input %T, output %T; the contract's are %T, %T", m.Name, m.Input, m.Output, c.Input, c.Output)
		}
		for _, v := range []any{m.Input, m.Output} {
			if p := reflect.TypeOf(v).PkgPath(); p != "" && p != "github.com/cubefleet/cubefleet/api" {
				t.Errorf("%s: %T is not a contract type", m.Name, v)
			}
		}
	}
	for _, c := range contract.Methods() {
		if !registered[c.Name] {
			t.Errorf("the contract has %s but the method table registers no handler for it", c.Name)
		}
	}
}
