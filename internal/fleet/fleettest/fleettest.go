// Package fleettest builds fleet documents for tests and benchmarks.
package fleettest

import (
	"encoding/json"
	"fmt"
)

// LimitsDocument returns a valid document at the limits: 1000 items in every list (1000 sites,
// provider accounts, pools, flavors and sandbox templates: 5,000 objects), about 0.9 MB of
// JSON. Its provider accounts take their tokens from env:// references, so it plans without any
// secret in the store.
func LimitsDocument() []byte {
	type m = map[string]any
	var sites, accounts, pools, flavors, templates []m
	for i := range 1000 {
		site, pool := fmt.Sprintf("site-%04d", i), fmt.Sprintf("pool-%04d", i)
		sites = append(sites, m{"name": site, "kind": "shared", "region": "eu-central"})
		accounts = append(accounts, m{"name": fmt.Sprintf("acct-%04d", i), "provider": "ionos-cloud", "config": m{"location": "de/fra", "token": "env://IONOS_TOKEN"}})
		pools = append(pools, m{"name": pool, "site": site, "class": "vps-host", "gpuModel": "L40S", "policy": m{"disruptionBudget": 0.1}})
		flavors = append(flavors, m{"pool": pool, "name": "g1.small", "vcpu": 2, "memoryGiB": 4, "diskGiB": 40})
		templates = append(templates, m{"name": fmt.Sprintf("tpl-%04d", i), "pool": pool, "flavor": "g1.small", "imageId": "ubuntu-24.04", "network": "private", "warm": m{"min": 0, "max": 2}})
	}
	doc, err := json.Marshal(m{"version": 1, "sites": sites, "providerAccounts": accounts, "pools": pools, "flavors": flavors, "sandboxTemplates": templates})
	if err != nil {
		panic(err) // plain maps always marshal
	}
	return doc
}
