package compute_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/cubefleet/cubefleet/internal/compute"
)

// checkDecode draws a spec of type S, stores it as the service does (encoding/json), and
// checks that DecodeSpec reads back what encoding/json reads back.
func checkDecode[S any](t *rapid.T) {
	spec := rapid.Make[S]().Draw(t, "spec")
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Skip("not storable:", err) // NaN and infinite floats
	}
	var want, got S
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if err := (compute.Object{Kind: "x", ID: "x_1", Spec: raw}).DecodeSpec(&got); err != nil {
		t.Fatalf("DecodeSpec(%s): %v", raw, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeSpec(%s) = %#v; encoding/json reads %#v", raw, got, want)
	}
}

// TestDecodeSpecMatchesEncodingJSON: every spec the service stores decodes to the value
// encoding/json gives, for every kind's spec type.
func TestDecodeSpecMatchesEncodingJSON(t *testing.T) {
	t.Run("site", rapid.MakeCheck(checkDecode[compute.SiteSpec]))
	t.Run("providerAccount", rapid.MakeCheck(checkDecode[compute.ProviderAccountSpec]))
	t.Run("pool", rapid.MakeCheck(checkDecode[compute.PoolSpec]))
	t.Run("ownerQuota", rapid.MakeCheck(checkDecode[compute.OwnerQuotaSpec]))
	t.Run("offer", rapid.MakeCheck(checkDecode[compute.OfferSpec]))
	t.Run("flavor", rapid.MakeCheck(checkDecode[compute.FlavorSpec]))
	t.Run("sandboxTemplate", rapid.MakeCheck(checkDecode[compute.SandboxTemplateSpec]))
}
