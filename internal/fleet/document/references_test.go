package document_test

import (
	"slices"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/fleet/document"
)

// TestExternal: every reference to an object the document does not define is reported with
// the referring field's path; references the document defines are not, nor an offer's tenant,
// which no document defines.
func TestExternal(t *testing.T) {
	ext := func(what string) string { return document.ExternalMessage + " (" + what + ")" }
	for _, c := range []struct {
		name string
		doc  string
		want []cubefleet.FieldError
	}{
		{"self-contained", `{"version": 1, "sites": [{"name": "fra", "kind": "shared", "region": "eu"}],
			"pools": [{"name": "p", "site": "fra", "class": "vps-host"}],
			"flavors": [{"pool": "p", "name": "small", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1}],
			"sandboxTemplates": [{"name": "t", "pool": "p", "flavor": "small", "imageId": "img", "network": "private"}]}`, nil},
		{"a template naming a flavor and a pool defined nowhere, and an offer's tenant", `{"version": 1,
			"pools": [{"name": "p", "site": "fra", "class": "provider", "providerAccount": "cloud", "offers": [{"tenant": "acme"}]}],
			"flavors": [{"pool": "gone", "name": "small", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1}],
			"sandboxTemplates": [{"name": "t", "pool": "elsewhere", "flavor": "big", "imageId": "img", "network": "private"},
				{"name": "u", "pool": "p", "flavor": "small", "imageId": "img", "network": "private"}]}`, []cubefleet.FieldError{
			{Path: "pools[0].site", Message: ext(`site "fra"`)},
			{Path: "pools[0].providerAccount", Message: ext(`provider account "cloud"`)},
			{Path: "flavors[0].pool", Message: ext(`pool "gone"`)},
			{Path: "sandboxTemplates[0].pool", Message: ext(`pool "elsewhere"`)},
			{Path: "sandboxTemplates[0].flavor", Message: ext(`flavor "elsewhere/big"`)},
			{Path: "sandboxTemplates[1].flavor", Message: ext(`flavor "p/small"`)}, // small is gone's, not p's
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := document.Decode([]byte(c.doc))
			if err != nil {
				t.Fatal(err)
			}
			if got := d.External(); !slices.Equal(got, c.want) {
				t.Errorf("External() =\n%v\nwant\n%v", got, c.want)
			}
		})
	}
}
