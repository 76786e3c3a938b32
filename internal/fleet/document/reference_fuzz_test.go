package document

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
)

// FuzzDecodeMatchesReference: Decode, parse and the rules behave exactly as the decoder did before
// it read with jsontext (reference_test.go). Decode returns an equal document, or the same
// problems (paths, messages, order); parse builds the same tree, offsets included, or fails with
// the same message; check reports the same problems on whatever the old mapper made of the input.
func FuzzDecodeMatchesReference(f *testing.F) {
	for _, s := range referenceSeeds(f) {
		if len(s) < 4096 {
			f.Add([]byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) { matchReference(t, data) })
}

// TestDecodeMatchesReference runs the comparison of FuzzDecodeMatchesReference on every seed, the
// large ones included.
func TestDecodeMatchesReference(t *testing.T) {
	for i, s := range referenceSeeds(t) {
		t.Run(fmt.Sprint(i), func(t *testing.T) { matchReference(t, []byte(s)) })
	}
}

// referenceSeeds is every fixture, the document at the limits, and inputs aimed at the tokenizer:
// escapes, lone surrogates, whitespace, nesting at the limit, malformed JSON of every kind, and
// problems inside values the mapper skips.
func referenceSeeds(t testing.TB) []string {
	var seeds []string
	for _, fx := range allFixtures(t) {
		seeds = append(seeds, fx.json)
	}
	limits, err := json.Marshal(limitsDocument())
	if err != nil {
		t.Fatal(err)
	}
	indented, err := json.MarshalIndent(limitsDocument().Pools[:3], "", " \t")
	if err != nil {
		t.Fatal(err)
	}
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	seeds = append(seeds, string(limits),
		`{"version":1,"pools":`+string(indented)+`}`,
		// Escapes in keys and values, lone and paired surrogates.
		`{"vers\u0069on":1,"sites":[{"name":"fr\u0061","kind":"sh\u0061red","region":"eu\/x"}]}`,
		`{"version":1,"sites":[{"name":"\ud800","kind":"\udc00\ud800\udc00x","region":"\ud800\u0041"}]}`,
		`{"version":1,"providerAccounts":[{"name":"a","provider":"hetzner-cloud","config":{"\ud83d\ude00":"\ud83d","t\u006fken":"secret://x","":"\"\\\/\b\f\n\r\t"}}]}`,
		`{"version":1,"sandboxTemplates":[{"name":"t","pool":"p","flavor":"f","imageId":"\u00a0\u2028x","network":"private","env":{"A\u0000":"\u0000"}}]}`,
		// Whitespace everywhere, and in every position a key or element offset is taken.
		" \t\r\n{ \"version\" : 1 ,\n \"sites\" : [ { \"name\" : \"a\" } , 3 , [ ] , { } ] ,\"pools\":[ ] } \n",
		"{\"version\":1,\"flavors\":[\n{\"pool\":\"p\",\"name\":\"f\",\"vcpu\":1,\"memoryGiB\":1,\"diskGiB\":1,\"gpu\":\"x\"}\n,\n{\"name\":\"f\"}\n]\n}",
		// Nesting at the limit and beyond, in fields the mapper skips and in ones it reads.
		`{"version":1,"x":`+deep(30)+`}`,
		`{"version":1,"x":`+deep(31)+`}`,
		`{"version":1,"x":`+deep(32)+`}`,
		`{"version":1,"providerAccounts":[{"name":"a","provider":"hetzner-cloud","config":{"k":`+deep(29)+`}}]}`,
		`{"version":1,"providerAccounts":[{"name":"a","provider":"hetzner-cloud","config":{"k":`+deep(30)+`}}]}`,
		`{"version":1,"sites":`+deep(40)+`}`,
		`{"version":1,"x":{"a":[{"b":{"c":[1,2,{"d":null}]}}]},"sites":[{"name":"s","kind":"shared","region":"eu"}]}`,
		// Malformed JSON, everywhere.
		`{"version":1} x`, `1x`, `01`, `[]]`, `{}}`, `{"a":1}{`, `truex`, `nul`, `"abc`, `{"a" 1}`, `{"a":}`,
		`[1,]`, `{,}`, `{"a":1,,"b":2}`, `-`, `1.`, `1e`, `"\x"`, `"\u12"`, "\"\t\"", `{"a":"b"`, `{"a"`, `{`,
		`[`, `]`, `}`, `:`, `,`, `{"version":1,"x":[1,2,}`, `{"version":1,"x":{"a":1 "b":2}}`, `{"version":1,"sites":[{]}`,
		`{"version":01}`, `{"version":1.}`, `{"version":+1}`, `{"version":.5}`, `{"version":1e+}`, `{"version":NaN}`,
		`{"version":tru}`, `{"version":1,"x":"\ud800\u12"}`, `{1:2}`, `{"version":1,}`, `{"version":1}]`,
		`{"version":1,"sites":[`, `{"version":1,"x":"`, `{"version":1,"x":[{"a":[1,2]`, "{\"version\":1,\"x\":\"a\nb\"}",
		`{"version":1,"x":[1 2]}`, `{"version":1,"x":[1,{"a":1,}]}`, `{"version":1,"x":{"a"::1}}`,
		// Numbers written every way.
		`{"version":1e0}`, `{"version":-0}`, `{"version":1E+0}`, `{"version":10e-1}`, `{"version":0.1e1}`,
		`{"version":1,"pools":[{"name":"p","site":"s","class":"vps-host","ownerQuota":{"a":1e999,"b":-1e-999,"c":123456789012345678901234567890}}]}`,
		// Repeated keys, at every level.
		`{"version":1,"version":2}`, `{"sites":[],"sites":{},"version":"x"}`,
		`{"version":1,"pools":[{"name":"p","name":1,"site":"s","class":"vps-host","ownerQuota":{"a":1,"a":2,"a":"x"},"offers":[],"offers":null}]}`,
		`{"version":1,"sandboxTemplates":[{"name":"t","pool":"p","flavor":"f","imageId":"i","network":"public","warm":{"min":3,"max":1,"min":9}}]}`,
		// The document is not an object.
		`[]`, `[{"version":1}]`, `"x"`, `1`, `true`, `false`, `null`, `{}`, ` {} `,
		// Problems the rules find, next to ones the mapper finds.
		`{"version":1,"sandboxTemplates":[{"name":"t","pool":"p","flavor":"f","imageId":"i","network":"public","warm":{"min":3,"max":"x"}}]}`,
		`{"version":1,"sandboxTemplates":[{"name":"t","pool":"p","flavor":"f","imageId":"i","network":"public","warm":{"min":3}}]}`,
		`{"version":1,"sandboxTemplates":[{"name":"t","pool":"p","flavor":"f","imageId":"i","network":"public","warm":{"min":3,"max":1}}]}`,
		`{"version":1,"pools":[{"name":"p","site":"s","class":"provider","providerAccount":"","policy":{"disruptionBudget":2,"x":1}},{"name":"p"}]}`,
		// Input that is not a JSON document at all.
		"", " ", "\xef\xbb\xbf{}", "{\"version\":1,\"x\":\"\xff\"}", "\xc3", "{\"a\":\"\xed\xa0\x80\"}",
	)
	return seeds
}

// matchReference fails t if Decode, parse or check behave differently from the reference on data.
func matchReference(t *testing.T, data []byte) {
	t.Helper()
	got, gotErr := Decode(data)
	want, wantErr := refDecode(data)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode(%q) =\n%+v\nthe reference gives\n%+v", data, got, want)
	}
	if g, w := problems(gotErr), problems(wantErr); !reflect.DeepEqual(g, w) {
		t.Fatalf("Decode(%q) reports\n%s\nthe reference reports\n%s", data, g, w)
	}

	tree, err := parse(data)
	refTree, refErr := refParse(data)
	if fmt.Sprint(err) != fmt.Sprint(refErr) {
		t.Fatalf("parse(%q) error = %v, the reference's = %v", data, err, refErr)
	}
	if refTree == nil {
		return
	}
	if diff := sameTree(tree, refTree, "$"); diff != "" {
		t.Fatalf("parse(%q) builds another tree than the reference: %s", data, diff)
	}

	m := refMapper{bad: make(map[string]struct{})}
	doc := m.document(refTree)
	c, rc := doc.check(), refCheck(doc)
	if !reflect.DeepEqual(c.errs, rc.errs) || !reflect.DeepEqual(c.deps, rc.deps) {
		t.Fatalf("check on the document of %q reports\n%+v %v\nthe reference reports\n%+v %v", data, c.errs, c.deps, rc.errs, rc.deps)
	}
}

// problems renders what an error of Decode reports: its text, and the details of an INVALID_INPUT.
func problems(err error) string {
	if err == nil {
		return "no error"
	}
	var e *cubefleet.Error
	if !errors.As(err, &e) {
		return "not a *cubefleet.Error: " + err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\npath %q\n", e.Code, err, e.Details["path"])
	list, _ := e.Details["errors"].([]cubefleet.FieldError)
	for _, fe := range list {
		fmt.Fprintf(&b, "%q: %s\n", fe.Path, fe.Message)
	}
	return b.String()
}

// sameTree returns how the trees a and b differ, or "" if they are the same.
func sameTree(a, b *node, at string) string {
	switch {
	case a == nil || b == nil:
		if a != b {
			return at + ": one tree has no node"
		}
		return ""
	case a.kind != b.kind || a.off != b.off || a.end != b.end || a.text != b.text:
		return fmt.Sprintf("%s: kind %d off %d end %d text %q, want kind %d off %d end %d text %q",
			at, a.kind, a.off, a.end, a.text, b.kind, b.off, b.end, b.text)
	case len(a.members) != len(b.members) || len(a.elems) != len(b.elems):
		return fmt.Sprintf("%s: %d members %d elements, want %d and %d", at, len(a.members), len(a.elems), len(b.members), len(b.elems))
	}
	for i := range a.members {
		am, bm := a.members[i], b.members[i]
		if am.key != bm.key || am.off != bm.off {
			return fmt.Sprintf("%s: member %d is %q at %d, want %q at %d", at, i, am.key, am.off, bm.key, bm.off)
		}
		if d := sameTree(am.val, bm.val, fmt.Sprintf("%s.%q", at, am.key)); d != "" {
			return d
		}
	}
	for i := range a.elems {
		if d := sameTree(a.elems[i], b.elems[i], fmt.Sprintf("%s[%d]", at, i)); d != "" {
			return d
		}
	}
	return ""
}
