package document

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/cubefleet/cubefleet/internal/fieldrules"
)

// schemaPatterns returns every regular expression of the schema: the values of "pattern" and the
// keys of "patternProperties", with the JSON pointer of each.
func schemaPatterns(t *testing.T) map[string]string {
	t.Helper()
	var s any
	if err := json.Unmarshal(Schema(), &s); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				switch p, isString := c.(string); {
				case k == "pattern" && isString:
					out[at+"/pattern"] = p
				case k == "patternProperties":
					for re := range c.(map[string]any) {
						out[at+"/patternProperties/"+re] = re
					}
				}
				walk(at+"/"+k, c)
			}
		case []any:
			for _, c := range v {
				walk(at+"/[]", c)
			}
		}
	}
	walk("#", s)
	return out
}

// TestSchemaPatternsArePortable: every regular expression in the schema uses only the constructs
// every draft 2020-12 validator compiles (fieldrules.Portable: no \p{...}, no flags, no
// lookarounds, no \A or \z, ...), and the schema's text is ASCII.
func TestSchemaPatternsArePortable(t *testing.T) {
	patterns := schemaPatterns(t)
	if len(patterns) < 10 {
		t.Fatalf("found %d patterns in the schema, want every string rule's", len(patterns))
	}
	for at, re := range patterns {
		if err := fieldrules.Portable(re); err != nil {
			t.Errorf("%s: %v", at, err)
		}
	}
	for i, c := range Schema() {
		if c >= utf8.RuneSelf {
			t.Fatalf("Schema() has a byte beyond ASCII at %d", i)
		}
	}
}

// TestSchemaLoadsInPython loads the schema with Python's jsonschema, whose patterns compile with
// Python's re: Draft202012Validator.check_schema accepts it, examples/fleet.json validates, and
// every fixture gets the verdict the Go schema library gives it. It skips only when python3 or
// its jsonschema module is missing (`pip install jsonschema` or `apt-get install
// python3-jsonschema` to run it).
func TestSchemaLoadsInPython(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python half of the schema check is skipped")
	}
	if out, err := exec.Command(python, "-c", "import jsonschema").CombinedOutput(); err != nil {
		t.Skipf("python3 has no jsonschema module (%v: %s): the Python half of the schema check is skipped", err, bytes.TrimSpace(out))
	}
	dir := t.TempDir()
	schemaFile := filepath.Join(dir, "schema.json")
	if err := os.WriteFile(schemaFile, Schema(), 0o600); err != nil {
		t.Fatal(err)
	}
	// The fixtures that are one JSON value, in UTF-8, without repeated keys.
	sch := compileSchema(t)
	var texts []string
	var want []bool
	for _, f := range allFixtures(t) {
		if !utf8.ValidString(f.json) || !json.Valid([]byte(f.json)) || f.gap == gapDupKey || f.gap == gapUTF8 {
			continue
		}
		ok, _ := schemaAccepts(sch, []byte(f.json))
		texts = append(texts, f.json)
		want = append(want, ok)
	}
	fixturesFile := filepath.Join(dir, "fixtures.json")
	raw, err := json.Marshal(texts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fixturesFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	const script = `
import decimal, json, sys
from jsonschema import Draft202012Validator
schema = json.load(open(sys.argv[1], encoding="utf-8"))
Draft202012Validator.check_schema(schema)
v = Draft202012Validator(schema)
example = json.load(open(sys.argv[2], encoding="utf-8"))
errors = [e.message for e in v.iter_errors(example)]
if errors:
    sys.exit("examples/fleet.json does not validate: %s" % errors)
def number(literal):
    # Numbers exactly, as JSON Schema sees them: 1.0000000000000000001 is above 1, 2.0 is an
    # integer (huge ones stay decimals: int() of 1e999999999 would not finish).
    d = decimal.Decimal(literal)
    if d == d.to_integral_value() and d.adjusted() < 400:
        return int(d)
    return d
verdicts = []
for text in json.load(open(sys.argv[3], encoding="utf-8")):
    try:
        verdicts.append(v.is_valid(json.loads(text, parse_float=number)))
    except ValueError:
        verdicts.append(None)
print(json.dumps(verdicts))
`
	out, err := exec.Command(python, "-c", script, schemaFile, "../../../examples/fleet.json", fixturesFile).CombinedOutput()
	if err != nil {
		t.Fatalf("Python's jsonschema refuses the schema: %v\n%s", err, out)
	}
	var got []*bool
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(texts) {
		t.Fatalf("python printed %q (%v), want %d verdicts", out, err, len(texts))
	}
	for i := range texts {
		switch {
		case got[i] == nil:
			t.Errorf("Python's json cannot read fixture %.120s", texts[i])
		case *got[i] != want[i]:
			t.Errorf("Python's jsonschema says valid=%v, the Go library valid=%v, for %.200s", *got[i], want[i], texts[i])
		}
	}
	t.Logf("Python's jsonschema agrees with the Go library on %d fixtures", len(texts))
}
