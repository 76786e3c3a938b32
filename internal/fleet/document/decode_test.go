package document

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
)

// mustFail decodes data, expecting INVALID_INPUT, and returns the listed problems.
func mustFail(t *testing.T, data string) []cubefleet.FieldError {
	t.Helper()
	d, err := Decode([]byte(data))
	if err == nil {
		t.Fatalf("Decode accepted the document: %+v", d)
	}
	if d != nil {
		t.Errorf("Decode returned a document with its error")
	}
	var e *cubefleet.Error
	if !errors.As(err, &e) || e.Code != cubefleet.CodeInvalidInput {
		t.Fatalf("Decode error = %v, want a *cubefleet.Error with INVALID_INPUT", err)
	}
	list, ok := e.Details["errors"].([]cubefleet.FieldError)
	if !ok || len(list) == 0 {
		t.Fatalf("Details[errors] = %#v, want a non-empty []FieldError", e.Details["errors"])
	}
	if e.Details["path"] != list[0].Path {
		t.Errorf("Details[path] = %q, want the first error's path %q", e.Details["path"], list[0].Path)
	}
	return list
}

func paths(errs []cubefleet.FieldError) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Path
	}
	return out
}

func TestDecodeBad(t *testing.T) {
	fixtures := badFixtures()
	if len(fixtures) < 45 {
		t.Fatalf("%d bad fixtures, want at least 45", len(fixtures))
	}
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			errs := mustFail(t, f.json)
			want := f.path
			if f.paths != nil {
				want = f.paths[0]
				if got := paths(errs); !slices.Equal(got, f.paths) {
					t.Errorf("paths = %q, want %q", got, f.paths)
				}
			}
			if errs[0].Path != want {
				t.Errorf("first path = %q, want %q (errors: %+v)", errs[0].Path, want, errs)
			}
			for _, e := range errs {
				if e.Message == "" {
					t.Errorf("error at %q has no message", e.Path)
				}
				if strings.Contains(e.Message, "hunter2") {
					t.Errorf("message at %q echoes the literal secret: %q", e.Path, e.Message)
				}
			}
		})
	}
}

func TestDecodeGood(t *testing.T) {
	for _, f := range goodFixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			d, err := Decode([]byte(f.json))
			if err != nil {
				t.Fatalf("Decode: %v\n%+v", err, cubefleetErrors(err))
			}
			if errs := d.Validate(); errs != nil {
				t.Errorf("Validate on a decoded document = %+v, want nil", errs)
			}
		})
	}
}

func cubefleetErrors(err error) any {
	var e *cubefleet.Error
	if errors.As(err, &e) {
		return e.Details["errors"]
	}
	return nil
}

func TestDecodeExample(t *testing.T) {
	data, err := os.ReadFile("testdata/example.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	budget := 0.1
	want := &Document{
		Version:          1,
		Sites:            []Site{{Name: "fra", Kind: "shared", Region: "eu-central"}},
		ProviderAccounts: []ProviderAccount{{Name: "cloud", Provider: "hetzner-cloud", Config: map[string]string{"token": "secret://hetzner", "location": "fsn1"}}},
		Pools: []Pool{
			{Name: "vps-fra", Site: "fra", Class: "vps-host", GPUModel: "L40S", Policy: &Policy{DisruptionBudget: &budget},
				OwnerQuota: map[string]int64{"gpu": 8},
				Offers:     []Offer{{Tenant: "acme", Quota: map[string]int64{"vcpu": 64, "gpu": 2}, Priority: 5}}},
			{Name: "burst", Site: "fra", Class: "provider", ProviderAccount: "cloud"},
		},
		Flavors: []Flavor{{Pool: "vps-fra", Name: "g1.small", VCPU: 2, MemoryGiB: 4, DiskGiB: 40}},
		SandboxTemplates: []SandboxTemplate{{Name: "py-small", Pool: "vps-fra", Flavor: "g1.small", ImageID: "ubuntu-24.04",
			Env: map[string]string{"PIP_INDEX_URL": "secret://root/sec_01k…"}, Network: "private", Warm: &Warm{Min: 2, Max: 4}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Decode(example) =\n%+v\nwant\n%+v", got, want)
	}
}

func TestDecodeMessages(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"malformed names the position", "{\n  \"version\": 1,\n}", "malformed JSON at line 3, column 1 (byte 18)"},
		{"trailing data names the position", `{"version":1}  x`, "at line 1, column 16 (byte 15)"},
		{"invalid UTF-8 names the position", "{\"version\":1,\"x\":\"é\xff\"}", "not valid UTF-8 at line 1, column 20 (byte 20)"},
		{"unknown field lists the fields", doc("sites", `{"name":"fra","kind":"shared","region":"eu","zone":"a"}`), "a site has the fields name, kind, region"},
		{"literal secret says how to fix it", doc("providerAccounts", `{"name":"a","provider":"hetzner-cloud","config":{"token":"hunter2"}}`), "cubefleet secrets create"},
		{"repeat names the first index", doc("sites", siteOK, siteOK, siteOK), "repeats the name of sites[0]"},
		{"repeated offer names the first index", doc("pools", with(poolOK, `"offers":[{"tenant":"acme"},{"tenant":"acme"}]`)), "repeats the tenant of pools[0].offers[0]"},
		{"wrong type names both", `{"version":"1"}`, "version must be a whole number, not a string"},
		{"missing field says what to set", `{}`, "version is required; set it to 1"},
		{"list limit", doc("flavors", repeat(`{"pool":"p","name":"NAME","vcpu":1,"memoryGiB":1,"diskGiB":1}`, 1001, func(i int) string { return "f" + itoa(i) })...), "flavors has 1001 items; at most 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := mustFail(t, tt.json)
			var all []string
			for _, e := range errs {
				all = append(all, e.Path+": "+e.Message)
			}
			if !strings.Contains(strings.Join(all, "\n"), tt.want) {
				t.Errorf("errors =\n%s\nwant one containing %q", strings.Join(all, "\n"), tt.want)
			}
		})
	}
}

// TestDecodeNeverEchoesSecrets: whatever is wrong around a literal secret, no message and no
// error string repeats it.
func TestDecodeNeverEchoesSecrets(t *testing.T) {
	const secret = "s3cr3t-value-do-not-log"
	docs := []string{
		doc("providerAccounts", `{"name":"a","provider":"hetzner-cloud","config":{"token":"`+secret+`"}}`),
		doc("providerAccounts", `{"name":"a","provider":"hetzner-cloud","config":{"location":"`+secret+strings.Repeat("x", 5000)+`"}}`),
		doc("providerAccounts", `{"name":"a","provider":"hetzner-cloud","config":{"PASSWORD":"secret://`+secret+`/x/y"}}`),
		doc("sandboxTemplates", with(templateOK, `"env":{"GITHUB_TOKEN":"`+secret+`"}`)),
		doc("sandboxTemplates", with(templateOK, `"env":{"AWS_SECRET_ACCESS_KEY":"vault://`+secret+` x"}`)),
	}
	for _, d := range docs {
		_, err := Decode([]byte(d))
		if err == nil {
			t.Fatalf("Decode accepted %s", d)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error string echoes the secret: %v", err)
		}
		b, _ := json.Marshal(cubefleetErrors(err))
		if strings.Contains(string(b), secret) {
			t.Errorf("details echo the secret: %s", b)
		}
	}
}

func TestDecodeCapsErrors(t *testing.T) {
	sites := repeat(`{"name":"NAME","kind":"x","region":"y"}`, 300, func(i int) string { return "s" + itoa(i) })
	errs := mustFail(t, doc("sites", sites...))
	if len(errs) != maxErrors+1 {
		t.Fatalf("%d errors, want %d and one more entry", len(errs), maxErrors)
	}
	last := errs[maxErrors]
	if last.Path != "" || !strings.Contains(last.Message, "100 more") {
		t.Errorf("last entry = %+v, want path \"\" and \"…and 100 more\"", last)
	}
	if errs[maxErrors-1].Path != "sites[199].kind" {
		t.Errorf("error %d at %q, want sites[199].kind", maxErrors-1, errs[maxErrors-1].Path)
	}
}

func TestValidateBuiltInCode(t *testing.T) {
	nan := 0.0
	nan /= nan
	tests := []struct {
		name  string
		doc   *Document
		paths []string
	}{
		{"nil document", nil, []string{""}},
		{"zero document", &Document{}, []string{"version"}},
		{"valid", &Document{Version: 1, Sites: []Site{{Name: "fra", Kind: "shared", Region: "eu"}}}, nil},
		{"empty site", &Document{Version: 1, Sites: []Site{{}}}, []string{"sites[0].name", "sites[0].kind", "sites[0].region"}},
		{"NaN budget", &Document{Version: 1, Pools: []Pool{{Name: "p", Site: "s", Class: "vps-host", Policy: &Policy{DisruptionBudget: &nan}}}},
			[]string{"pools[0].policy.disruptionBudget"}},
		{"map keys sorted", &Document{Version: 1, Pools: []Pool{{Name: "p", Site: "s", Class: "vps-host",
			OwnerQuota: map[string]int64{"z": -1, "a": -1, "m.x": -2}}}},
			[]string{"pools[0].ownerQuota.a", `pools[0].ownerQuota["m.x"]`, "pools[0].ownerQuota.z"}},
		{"quota above 2^53", &Document{Version: 1, Pools: []Pool{{Name: "p", Site: "s", Class: "vps-host", OwnerQuota: map[string]int64{"gpu": 1<<53 + 1}}}},
			[]string{"pools[0].ownerQuota.gpu"}},
		{"negative gpu", &Document{Version: 1, Flavors: []Flavor{{Pool: "p", Name: "f", VCPU: 1, MemoryGiB: 1, DiskGiB: 1, GPU: -1}}},
			[]string{"flavors[0].gpu"}},
		{"negative warm", &Document{Version: 1, SandboxTemplates: []SandboxTemplate{{Name: "t", Pool: "p", Flavor: "f", ImageID: "i", Network: "public",
			Warm: &Warm{Min: 3, Max: -1}}}}, []string{"sandboxTemplates[0].warm.max"}},
		{"grace past an hour", &Document{Version: 1, SandboxTemplates: []SandboxTemplate{{Name: "t", Pool: "p", Flavor: "f", ImageID: "i", Network: "public",
			TerminationGraceSeconds: 3601}}}, []string{"sandboxTemplates[0].terminationGraceSeconds"}},
		{"negative grace", &Document{Version: 1, SandboxTemplates: []SandboxTemplate{{Name: "t", Pool: "p", Flavor: "f", ImageID: "i", Network: "public",
			TerminationGraceSeconds: -1}}}, []string{"sandboxTemplates[0].terminationGraceSeconds"}},
		{"disconnect grace past a day", &Document{Version: 1, SandboxTemplates: []SandboxTemplate{{Name: "t", Pool: "p", Flavor: "f", ImageID: "i", Network: "private",
			DisconnectGraceSeconds: 86401}}}, []string{"sandboxTemplates[0].disconnectGraceSeconds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := paths(tt.doc.Validate())
			if len(got) == 0 {
				got = nil
			}
			if !slices.Equal(got, tt.paths) {
				t.Errorf("Validate paths = %q, want %q", got, tt.paths)
			}
		})
	}
}

func TestNumbers(t *testing.T) {
	ints := []struct {
		lit  string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"-0", 0, true}, {"7", 7, true}, {"-7", -7, true}, {"1.0", 1, true}, {"1e3", 1000, true},
		{"1.5e1", 15, true}, {"100e-2", 1, true}, {"0.0e5", 0, true}, {"1.5", 0, false}, {"1e-1", 0, false},
		{"9007199254740992", 1 << 53, true}, {"9007199254740993", bigInt, true}, {"1e16", bigInt, true},
		{"-1e300", -bigInt, true}, {"1e99999999999999999999", bigInt, true}, {"1e-99999999999999999999", 0, false},
		{"0.0000000000000000000000001e25", 1, true},
	}
	for _, tt := range ints {
		got, ok := intValue(tt.lit)
		if got != tt.want || ok != tt.ok {
			t.Errorf("intValue(%q) = %d, %v; want %d, %v", tt.lit, got, ok, tt.want, tt.ok)
		}
	}
	unit := map[string]bool{"0": true, "-0": true, "1": true, "1.0": true, "0.1": true, "10e-1": true, "1e-400": true,
		"1.0000000000000000001": false, "-0.1": false, "1e400": false, "2": false, "0.99999999999999999999": true}
	for lit, want := range unit {
		if got := inUnitInterval(lit); got != want {
			t.Errorf("inUnitInterval(%q) = %v, want %v", lit, got, want)
		}
	}
}

func TestPathsReadBack(t *testing.T) {
	root, err := parse([]byte(`{"a":{"b.c":[{"d":1}],"":{"\"q\"":2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{join(join(join("", "a"), "b.c"), "") + "[0].d", join(join(join("", "a"), ""), `"q"`)} {
		if off := offsetOf(root, p); off <= root.members[0].val.off {
			t.Errorf("offsetOf(%q) = %d, did not read the path back", p, off)
		}
	}
	if got := join(join("", "a"), "b.c"); got != `a["b.c"]` {
		t.Errorf("join = %q, want a[\"b.c\"]", got)
	}
	if got, want := join("config", strings.Repeat("é", 200)), `config["`+strings.Repeat("é", 32)+`…"]`; got != want {
		t.Errorf("join with a long key = %q, want %q", got, want)
	}
}

// largeBadDocument is a 2.9 MB document with a problem at every key of a huge map and in every
// item of a huge list.
func largeBadDocument() string {
	var b strings.Builder
	b.WriteString(`{"version":1,"providerAccounts":[{"name":"a","provider":"hetzner-cloud","config":{`)
	for i := range 100000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"bad key ` + itoa(i) + `":"x"`)
	}
	b.WriteString(`}}],"sites":[`)
	for i := range 20000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"name":"s","kind":"k","region":"R","zone":1}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// TestDecodeLargeInputs: problems at every key of a huge map, or in every item of a huge list,
// stop at maxErrors reported problems. Their cost (linear in the input) is measured by
// BenchmarkDecodeLargeInput, not asserted against a clock.
func TestDecodeLargeInputs(t *testing.T) {
	if testing.Short() {
		t.Skip("large inputs")
	}
	if errs := mustFail(t, largeBadDocument()); len(errs) != maxErrors+1 {
		t.Errorf("%d errors, want %d", len(errs), maxErrors+1)
	}
}

// BenchmarkDecodeLargeInput decodes largeBadDocument (about 1-2 s per op on a 2-core machine;
// a quadratic path would take minutes).
func BenchmarkDecodeLargeInput(b *testing.B) {
	doc := largeBadDocument()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := Decode([]byte(doc)); err == nil {
			b.Fatal("the document decoded")
		}
	}
}

// TestDecodeRefusesMoreObjectsThanOneDocumentHolds: the object count (every list item, owner
// quota key and offer) is one of the document's rules, so Decode (the server's fleet.plan and
// the CLI's fleet validate) refuses a document over it, naming the count.
func TestDecodeRefusesMoreObjectsThanOneDocumentHolds(t *testing.T) {
	var pools []string
	for i := range 100 {
		var quota []string
		for k := range 201 {
			quota = append(quota, fmt.Sprintf(`"r%d":1`, k))
		}
		pools = append(pools, fmt.Sprintf(`{"name":"p%d","site":"fra","class":"vps-host","ownerQuota":{%s}}`, i, strings.Join(quota, ",")))
	}
	_, err := Decode([]byte(`{"version":1,"pools":[` + strings.Join(pools, ",") + `]}`))
	var e *cubefleet.Error
	if !errors.As(err, &e) || e.Code != cubefleet.CodeInvalidInput || !strings.Contains(e.Message, "20200 objects") {
		t.Fatalf("Decode of 20,200 objects = %v, want INVALID_INPUT naming the count", err)
	}
	if fe := e.Details["errors"].([]cubefleet.FieldError); len(fe) != 1 || fe[0].Path != "" {
		t.Errorf("errors = %+v, want one at the document", fe)
	}
}
