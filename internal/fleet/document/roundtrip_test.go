package document

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// roundTrip checks that an accepted document re-encodes and re-decodes to itself, and that its
// canonical form is stable. It is shared by TestRoundTrip and FuzzDecode.
func roundTrip(t *testing.T, d *Document) {
	t.Helper()
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	again, err := Decode(raw)
	if err != nil {
		t.Fatalf("Decode(json.Marshal(d)): %v\n%s", err, raw)
	}
	if !reflect.DeepEqual(d, again) {
		t.Fatalf("round trip changed the document:\n%+v\n%+v", d, again)
	}
	c1, err := Canonical(d)
	if err != nil {
		t.Fatalf("Canonical: %v", err)
	}
	back, err := Decode(c1)
	if err != nil {
		t.Fatalf("Decode(Canonical(d)): %v", err)
	}
	if !reflect.DeepEqual(d, back) {
		t.Fatalf("the canonical form decodes to another document")
	}
	fast, err := DecodeCanonical(c1)
	if err != nil {
		t.Fatalf("DecodeCanonical(Canonical(d)): %v", err)
	}
	if !reflect.DeepEqual(back, fast) {
		t.Fatalf("DecodeCanonical reads another document than Decode:\n%+v\n%+v", back, fast)
	}
	c2, err := Canonical(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c1, c2) {
		t.Fatalf("Canonical is not stable:\n%s\n%s", c1, c2)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, f := range goodFixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			d, err := Decode([]byte(f.json))
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, d)
		})
	}
}

func TestCanonical(t *testing.T) {
	d, err := Decode([]byte(`{"version":1,"sandboxTemplates":[{"network":"private","name":"t","pool":"p","flavor":"f","imageId":"i",` +
		`"env":{"b":"x","HTML":"<&>","A":"\u00e9\u2028"}}],"pools":[{"site":"fra","name":"p","class":"vps-host","ownerQuota":{"vcpu":8,"gpu":1},` +
		`"policy":{"disruptionBudget":0.10}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"pools":[{"class":"vps-host","name":"p","ownerQuota":{"gpu":1,"vcpu":8},"policy":{"disruptionBudget":0.1},"site":"fra"}],` +
		`"sandboxTemplates":[{"env":{"A":"é` + "\u2028" + `","HTML":"<&>","b":"x"},"flavor":"f","imageId":"i","name":"t","network":"private","pool":"p"}],"version":1}`
	if string(got) != want {
		t.Errorf("Canonical =\n%s\nwant\n%s", got, want)
	}
	// The same document written another way has the same canonical form.
	d2, err := Decode([]byte(`{"pools":[{"policy":{"disruptionBudget":1e-1},"ownerQuota":{"gpu":1.0,"vcpu":8},"class":"vps-host","name":"p","site":"fra"}],` +
		`"version":1.0,"sandboxTemplates":[{"env":{"A":"é\u2028","HTML":"\u003c&>","b":"x"},"network":"private","name":"t","pool":"p","flavor":"f","imageId":"i"}],` +
		`"flavors":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	got2, err := Canonical(d2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, got2) {
		t.Errorf("equal documents have different canonical forms:\n%s\n%s", got, got2)
	}
	nan := 0.0
	nan /= nan
	if _, err := Canonical(&Document{Version: 1, Pools: []Pool{{Policy: &Policy{DisruptionBudget: &nan}}}}); err == nil {
		t.Errorf("Canonical accepted a NaN budget")
	}
}
