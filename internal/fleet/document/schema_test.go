package document

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compileSchema compiles Schema() with the JSON Schema library, which also checks it against
// the draft 2020-12 meta-schema.
func compileSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema()))
	if err != nil {
		t.Fatalf("Schema() is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatalf("Schema() does not compile: %v", err)
	}
	return sch
}

// schemaAccepts reports whether the schema library reads data and finds it valid.
func schemaAccepts(sch *jsonschema.Schema, data []byte) (bool, error) {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return false, err
	}
	if err := sch.Validate(inst); err != nil {
		return false, err
	}
	return true, nil
}

// TestSchemaAgreesWithDecode runs every fixture through Decode and through the JSON Schema: both
// must give the same verdict, except for the rules JSON Schema cannot express, where the fixture
// names the gap and the schema must accept what Decode rejects.
func TestSchemaAgreesWithDecode(t *testing.T) {
	sch := compileSchema(t)
	for _, f := range allFixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			_, decErr := Decode([]byte(f.json))
			schemaOK, schemaErr := schemaAccepts(sch, []byte(f.json))
			switch {
			case f.ok && decErr != nil:
				t.Fatalf("Decode rejected a good fixture: %v", decErr)
			case !f.ok && decErr == nil:
				t.Fatalf("Decode accepted a bad fixture")
			case f.gap != "":
				if !schemaOK {
					t.Errorf("known gap (%s): the schema should accept, but it rejects: %v", f.gap, schemaErr)
				}
			case schemaOK != f.ok:
				t.Errorf("the schema says valid=%v (%v), Decode says valid=%v", schemaOK, schemaErr, f.ok)
			}
		})
	}
}

func TestSchemaShape(t *testing.T) {
	var s map[string]any
	if err := json.Unmarshal(Schema(), &s); err != nil {
		t.Fatal(err)
	}
	if s["$id"] != "https://cubefleet.dev/schemas/fleet-document-v1.json" || s["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$id = %v, $schema = %v", s["$id"], s["$schema"])
	}
	if !bytes.Contains(Schema(), []byte("\n  \"$id\"")) {
		t.Errorf("Schema() is not indented")
	}
	// Every property of every object has a description.
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				for name, p := range props {
					pm, _ := p.(map[string]any)
					if d, _ := pm["description"].(string); d == "" {
						t.Errorf("%s.properties.%s has no description", path, name)
					}
				}
			}
			for k, c := range v {
				walk(path+"."+k, c)
			}
		case []any:
			for _, c := range v {
				walk(path+"[]", c)
			}
		}
	}
	walk("#", s)
	// The units are stated.
	for _, want := range []string{"in GiB", "number of virtual CPUs", "number of GPUs", "a count"} {
		if !bytes.Contains(Schema(), []byte(want)) {
			t.Errorf("the schema does not say %q", want)
		}
	}
	if !bytes.Equal(Schema(), Schema()) {
		t.Errorf("Schema() is not stable")
	}
	if strings.Contains(string(Schema()), `\u003c`) {
		t.Errorf("Schema() escapes HTML characters")
	}
}
