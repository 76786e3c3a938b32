package api

import (
	"encoding/json"
	"testing"

	"github.com/cubefleet/cubefleet/internal/fleet/document"
)

// TestFleetDocumentWireKeepsEveryField: a fleet document with every field set reads the same
// through the contract as it does itself, so an export (or a plan's document) through the API
// loses nothing a later apply would then remove (a template's egressAllow, a pool's
// policy.egressAllow, ...).
func TestFleetDocumentWireKeepsEveryField(t *testing.T) {
	doc, err := document.Decode([]byte(`{"version":1,
		"sites":[{"name":"fra","kind":"shared","region":"eu-central"}],
		"providerAccounts":[{"name":"cloud","provider":"hetzner-cloud","config":{"token":"secret://hetzner","location":"fsn1"}}],
		"pools":[{"name":"vps-fra","site":"fra","class":"vps-host","gpuModel":"L40S",
			"policy":{"disruptionBudget":0.1,"egressAllow":["10.20.0.0/16","fd12:3456::/32"]},
			"ownerQuota":{"gpu":8},"offers":[{"tenant":"acme","quota":{"vcpu":64},"priority":5}]},
			{"name":"burst","site":"fra","class":"provider","providerAccount":"cloud"}],
		"flavors":[{"pool":"vps-fra","name":"g1.small","vcpu":2,"memoryGiB":4,"diskGiB":40,"gpu":1}],
		"sandboxTemplates":[{"name":"vm","pool":"vps-fra","flavor":"g1.small","imageId":"busybox","env":{"LANG":"C.UTF-8"},
			"network":"public","warm":{"min":1,"max":2},"terminationGraceSeconds":30,"disconnectGraceSeconds":120,
			"runtime":"microvm","egressAllow":["10.20.0.0/16"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(fleetDocumentFrom(*doc))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("through the contract:\n%s\nwant the document's own:\n%s", got, want)
	}
}
