package api_test

import (
	"encoding/json"

	"path/filepath"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestMethodGoldens holds every method's wire contract (its OpenAPI operation: input and output
// schemas, permission, scope form, body cap) to testdata/methods/<name>.json, rendered from the
// contract's types alone: a change to the wire shows as a golden diff, and a method without a
// golden file fails (go test ./api -update writes it).
func TestMethodGoldens(t *testing.T) {
	names := map[string]bool{}
	for _, m := range api.Methods() {
		names[m.Name+".json"] = true
		if m.Input == nil || m.Output == nil || m.Permission == "" || m.Scope == 0 || m.Summary == "" {
			t.Errorf("%s: a method needs a summary, a permission, a scope form, an input and an output type", m.Name)
		}
		testkit.GoldenJSON(t, filepath.Join("methods", m.Name+".json"), api.Operation(m))
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "methods", "*.json"))
	for _, f := range files {
		if !names[filepath.Base(f)] {
			t.Errorf("%s is the golden file of no method: delete it", f)
		}
	}
}

// TestOpenAPI checks the whole document against its golden file and that it names every method.
func TestOpenAPI(t *testing.T) {
	doc, err := api.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "openapi.json", doc)
	var d struct {
		Paths map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	for _, m := range api.Methods() {
		if d.Paths["/api/v1/"+m.Name] == nil {
			t.Errorf("the OpenAPI document has no path for %s", m.Name)
		}
	}
}

func TestLookup(t *testing.T) {
	m, ok := api.Lookup("sandboxes.create")
	if !ok || m.Permission != "sandboxes:create" || m.Scope != api.OnTenant || !m.Write || m.MaxBody != api.DefaultMaxBody {
		t.Errorf("Lookup(sandboxes.create) = %+v, %v", m, ok)
	}
	if _, ok := api.Lookup("sandboxes.nope"); ok {
		t.Error("Lookup found a method the API does not have")
	}
	for _, m := range api.Methods() {
		if strings.Count(m.Name, ".") < 1 {
			t.Errorf("method %q is not <domain>.<verb>", m.Name)
		}
	}
}

// TestSandboxStateFinal is the rule table of SandboxState.Final.
func TestSandboxStateFinal(t *testing.T) {
	for s, want := range map[api.SandboxState]bool{
		api.SandboxPending: false, api.SandboxStarting: false, api.SandboxRunning: false,
		api.SandboxExited: true, api.SandboxFailed: true, api.SandboxKilled: true, api.SandboxLost: true,
	} {
		if got := s.Final(); got != want {
			t.Errorf("%s.Final() = %v, want %v", s, got, want)
		}
	}
}
