package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestEnvRefsAreTheOperators: an env:// reference reads the server's environment, so only the
// root tenant may use one, and only for the variables --env-ref-allow lets through; anything
// else is INVALID_INPUT at the entry's path naming the rule, in the compute API and in fleet
// plans and applies alike (a key of tenant acme once stored env://HOME in a provider account).
func TestEnvRefsAreTheOperators(t *testing.T) {
	storetest.Each(t, controlplane.Modules(), func(t *testing.T, db *store.DB) {
		e := newFleetEnvConfig(t, Config{DB: db, EnvRefAllow: []string{"IONOS_"}})
		var key struct {
			Token string `json:"token"`
		}
		e.mustCall(e.admin, "iam.keys.create", map[string]any{"tenantId": "acme", "name": "acme-ops", "grants": []string{"compute:providerAccounts:*@tenant/acme"}}, &key)
		invalid := func(what string, err error, path, says string) {
			t.Helper()
			var ce *cubefleet.Error
			if !errors.As(err, &ce) || ce.Code != cubefleet.CodeInvalidInput || ce.Details["path"] != path || !strings.Contains(ce.Message, says) {
				t.Errorf("%s = %v, want INVALID_INPUT at %s saying %q", what, err, path, says)
			}
		}
		account := func(tenant, value string) map[string]any {
			return map[string]any{"tenantId": tenant, "name": "stolen", "provider": "ionos-cloud", "config": map[string]string{"token": value}}
		}
		invalid("acme's env://HOME", e.call(key.Token, "compute.providerAccounts.create", account("acme", "env://HOME"), nil), "config.token", "only the root tenant")
		invalid("acme's env://IONOS_TOKEN", e.call(key.Token, "compute.providerAccounts.create", account("acme", "env://IONOS_TOKEN"), nil), "config.token", "only the root tenant")
		invalid("root's env://HOME", e.call(e.admin, "compute.providerAccounts.create", account("root", "env://HOME"), nil), "config.token", "--env-ref-allow")
		e.mustCall(e.admin, "compute.providerAccounts.create", account("root", "env://IONOS_TOKEN"), nil)

		acmeDoc := `{"version":1,"providerAccounts":[{"name":"a","provider":"ionos-cloud","config":{"location":"de/fra"}},
			{"name":"b","provider":"ionos-cloud","config":{"token":"env://IONOS_TOKEN"}}]}`
		for _, method := range []string{"fleet.plan", "fleet.apply"} {
			invalid("acme's document on "+method, e.call(e.admin, method, map[string]any{"tenantId": "acme", "config": raw(acmeDoc)}, nil),
				"providerAccounts[1].config.token", "only the root tenant")
		}
		rootDoc := `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu"}],"pools":[{"name":"p","site":"fra","class":"vps-host"}],
			"flavors":[{"pool":"p","name":"f","vcpu":1,"memoryGiB":1,"diskGiB":1}],
			"providerAccounts":[{"name":"b","provider":"ionos-cloud","config":{"token":"env://IONOS_TOKEN"}}],
			"sandboxTemplates":[{"name":"t","pool":"p","flavor":"f","imageId":"i","network":"private","env":{"SHELL_TOKEN":"env://SHELL","X":"env://IONOS_X"}}]}`
		invalid("root's document with env://SHELL", e.call(e.admin, "fleet.plan", map[string]any{"tenantId": "root", "config": raw(rootDoc)}, nil),
			"sandboxTemplates[0].env.SHELL_TOKEN", "env://SHELL is not allowed")
		e.plan(e.admin, raw(strings.Replace(rootDoc, "env://SHELL", "env://IONOS_SHELL", 1)), false)
		var n int
		db.QueryRow(`SELECT count(*) FROM compute_objects WHERE tenant_id = 'acme'`).Scan(&n)
		if n != 0 {
			t.Fatalf("tenant acme holds %d objects after its refused env:// references", n)
		}
	})
}
