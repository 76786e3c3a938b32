package server

import (
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestRefusedKeysLeaveATrace: a revoked or expired key that is still used (on the API, the
// internal nodes routes or the console's sign-in) leaves an audit row naming the key (its
// tenant, principal and id; never the token), summarized like the node refusals: one row at
// once, then one a minute with the count. Every refused key is counted in
// cubefleet_api_auth_failures_total by reason (unknown keys included, which name no tenant to
// audit in), and the log line of the call names the key id.
func TestRefusedKeysLeaveATrace(t *testing.T) {
	storetest.Each(t, controlplane.Modules(), func(t *testing.T, db *store.DB) {
		now := fixedNow()
		var offset atomic.Int64
		e := mustStart(t, db, func(c *Config) { c.Now = func() time.Time { return now.Add(time.Duration(offset.Load())) } })
		var revoked, expiring contract.KeyCreated
		e.must(e.admin, "iam.keys.create", map[string]any{"tenantId": "acme", "name": "old-ci", "grants": []string{"audit:read@tenant/acme"}}, &revoked)
		e.must(e.admin, "iam.keys.create", map[string]any{"tenantId": "acme", "name": "short", "grants": []string{"audit:read@tenant/acme"}, "ttlSeconds": 60}, &expiring)
		e.must(e.admin, "iam.keys.revoke", map[string]any{"tenantId": "acme", "id": revoked.Key.ID}, nil)
		offset.Store(int64(2 * time.Minute)) // the short key has expired

		const uses = 50
		for range uses {
			for _, token := range []string{revoked.Token, expiring.Token, "cfk_unknown-key"} {
				if status, body := e.post(token, "audit.list", map[string]any{"tenantId": "acme"}); status != http.StatusUnauthorized {
					t.Fatalf("a refused key: %d %s", status, body)
				}
			}
		}
		// Node routes take API keys too.
		req, _ := http.NewRequest("GET", e.url+nodeapi.NodesPrefix, nil)
		req.Header.Set("Authorization", "Bearer "+revoked.Token)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a revoked key on the internal nodes routes: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
		// So does the console's sign-in.
		if resp, err := http.PostForm(e.url+"/console/sign-in", url.Values{"key": {revoked.Token}}); err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a revoked key signing in to the console: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
		const revokedUses = uses + 2
		rows := func(keyID string) (n, calls int) {
			t.Helper()
			if err := db.QueryRow(`SELECT count(*), coalesce(sum(call_count), 0) FROM audit_log WHERE target = $1 AND outcome = 'unauthenticated' AND tenant_id = 'acme'`, keyID).Scan(&n, &calls); err != nil {
				t.Fatal(err)
			}
			return n, calls
		}
		if n, _ := rows(revoked.Key.ID); n != 1 {
			t.Errorf("%d audit rows for %d uses of a revoked key within a minute, want 1 at once", n, revokedUses)
		}
		if n, _ := rows(expiring.Key.ID); n != 1 {
			t.Errorf("%d audit rows for %d uses of an expired key within a minute, want 1 at once", n, uses)
		}
		offset.Add(int64(2 * time.Minute))
		e.srv.flushKeyTraces(t.Context())
		if n, calls := rows(revoked.Key.ID); n != 2 || calls != revokedUses {
			t.Errorf("after the window: %d rows for %d calls of the revoked key, want 2 rows counting %d", n, calls, revokedUses)
		}
		if n, calls := rows(expiring.Key.ID); n != 2 || calls != uses {
			t.Errorf("after the window: %d rows for %d calls of the expired key, want 2 rows counting %d", n, calls, uses)
		}
		for reason, want := range map[string]float64{"revoked_key": revokedUses, "expired_key": uses, "unknown_key": uses} {
			if got := metricValue(t, e.url, `cubefleet_api_auth_failures_total{reason="`+reason+`"}`); got != want {
				t.Errorf("cubefleet_api_auth_failures_total{reason=%q} = %v, want %v", reason, got, want)
			}
		}
		logs := e.log.String()
		if !strings.Contains(logs, `"key_id":"`+revoked.Key.ID+`"`) || !strings.Contains(logs, `"key_id":"`+expiring.Key.ID+`"`) {
			t.Errorf("no log line names the refused keys")
		}
		for _, secret := range []string{revoked.Token, expiring.Token, "cfk_unknown-key"} {
			if strings.Contains(logs, secret) {
				t.Errorf("the log holds a token")
			}
		}
	})
}

// TestAuditRetention: the server sweeps the audit log: rows older than --audit-retention go,
// the others stay.
func TestAuditRetention(t *testing.T) {
	db := storetest.SQLite(t, controlplane.Modules()...)
	for id, age := range map[string]time.Duration{"aud_old": 8 * 24 * time.Hour, "aud_new": 6 * 24 * time.Hour} {
		if _, err := db.Exec(`INSERT INTO audit_log (id, at, tenant_id, principal_id, method, permission, scope, outcome, target, request_id, message)
			VALUES ($1, $2, 'root', 'p', 'm', '', '', 'ok', '', '', '')`, id, fixedNow().Add(-age).UnixMilli()); err != nil {
			t.Fatal(err)
		}
	}
	mustStart(t, db, func(c *Config) { c.Now = fixedNow; c.AuditRetention = 7 * 24 * time.Hour })
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		db.QueryRow(`SELECT count(*) FROM audit_log WHERE id = 'aud_old'`).Scan(&n)
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an audit row past the retention is still there")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var kept int
	db.QueryRow(`SELECT count(*) FROM audit_log WHERE id = 'aud_new'`).Scan(&kept)
	if kept != 1 {
		t.Fatal("the sweep deleted a row within the retention")
	}
}
