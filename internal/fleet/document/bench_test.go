package document

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cubefleet/cubefleet/internal/fieldrules"
)

// limitsDocument is a document at the list limits: 1000 of every list, each pool with an owner
// quota and three offers with quotas.
func limitsDocument() *Document {
	budget := 0.25
	d := &Document{Version: 1}
	for i := range fieldrules.MaxItems {
		site := fmt.Sprintf("site-%d", i)
		pool := fmt.Sprintf("pool-%d", i)
		d.Sites = append(d.Sites, Site{Name: site, Kind: "shared", Region: "eu-central"})
		d.ProviderAccounts = append(d.ProviderAccounts, ProviderAccount{Name: fmt.Sprintf("account-%d", i), Provider: "ionos-cloud",
			Config: map[string]string{"token": fmt.Sprintf("secret://root/ionos-%d", i), "location": "de/fra", "contract": "31337"}})
		p := Pool{Name: pool, Site: site, Class: "vps-host", GPUModel: "L40S", Policy: &Policy{DisruptionBudget: &budget},
			OwnerQuota: map[string]int64{"vcpu": 512, "memoryGiB": 4096, "gpu": 8}}
		for j := range 3 {
			p.Offers = append(p.Offers, Offer{Tenant: fmt.Sprintf("tenant-%d", j), Priority: j,
				Quota: map[string]int64{"vcpu": 64, "memoryGiB": 256, "gpu": int64(j)}})
		}
		d.Pools = append(d.Pools, p)
		d.Flavors = append(d.Flavors, Flavor{Pool: pool, Name: "g1.small", VCPU: 2, MemoryGiB: 4, DiskGiB: 40, GPU: i % 2})
		d.SandboxTemplates = append(d.SandboxTemplates, SandboxTemplate{Name: fmt.Sprintf("tpl-%d", i), Pool: pool, Flavor: "g1.small",
			ImageID: "ubuntu-24.04", Network: "private", Warm: &Warm{Min: 1, Max: 4},
			Env: map[string]string{"PIP_INDEX_URL": "https://pypi.example.com/simple", "API_TOKEN": "env://API_TOKEN", "LANG": "C.UTF-8"}})
	}
	return d
}

func TestLimitsDocument(t *testing.T) {
	d := limitsDocument()
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(raw)
	if err != nil {
		t.Fatalf("Decode rejected the document at the limits: %v", err)
	}
	roundTrip(t, got)
	d.Sites = append(d.Sites, Site{Name: "one-more", Kind: "shared", Region: "eu"})
	if errs := d.Validate(); len(errs) != 1 || errs[0].Path != "sites" {
		t.Errorf("Validate with 1001 sites = %+v, want one error at sites", errs)
	}
}

func BenchmarkDecode(b *testing.B) {
	raw, err := json.Marshal(limitsDocument())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	d := limitsDocument()
	b.ReportAllocs()
	for b.Loop() {
		if errs := d.Validate(); errs != nil {
			b.Fatal(errs)
		}
	}
}

func BenchmarkCanonical(b *testing.B) {
	d := limitsDocument()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonical(d); err != nil {
			b.Fatal(err)
		}
	}
}
