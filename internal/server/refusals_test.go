package server

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

func TestUnknownTenantIsNotFound(t *testing.T) {
	storetest.Each(t, controlplane.Modules(), func(t *testing.T, db *store.DB) {
		e := newFleetEnv(t, db)
		for _, c := range []struct {
			method string
			in     map[string]any
		}{
			{"compute.sites.create", map[string]any{"tenantId": "nosuch", "kind": "shared", "region": "eu"}},
			{"compute.pools.list", map[string]any{"tenantId": "nosuch"}},
			{"secrets.create", map[string]any{"tenantId": "nosuch", "name": "s", "value": "v"}},
			{"fleet.plan", map[string]any{"tenantId": "nosuch", "config": raw(`{"version":1}`)}},
			{"fleet.apply", map[string]any{"tenantId": "nosuch", "config": raw(docV1)}},
			{"fleet.export", map[string]any{"tenantId": "nosuch"}},
		} {
			if err := e.call(e.admin, c.method, c.in, nil); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
				t.Errorf("%s on an unknown tenant = %v, want NOT_FOUND", c.method, err)
			}
		}
		var n int
		db.QueryRow(`SELECT count(*) FROM compute_objects WHERE tenant_id = 'nosuch'`).Scan(&n)
		if n != 0 {
			t.Fatalf("%d objects were created in an unknown tenant", n)
		}
	})
}

func TestRefusedEscalationIsAudited(t *testing.T) {
	storetest.Each(t, controlplane.Modules(), func(t *testing.T, db *store.DB) {
		e := newFleetEnv(t, db)
		var key struct {
			Token string `json:"token"`
		}
		e.mustCall(e.admin, "iam.keys.create", map[string]any{"tenantId": "root", "name": "keys-only", "grants": []string{"iam:keys:create@tenant/root"}}, &key)
		err := e.call(key.Token, "iam.keys.create", map[string]any{"tenantId": "root", "name": "esc", "grants": []string{"compute:fleet:admin@compute-fleet/global"}}, nil)
		if !cubefleet.IsCode(err, cubefleet.CodeForbidden) {
			t.Fatalf("granting what one does not hold = %v, want FORBIDDEN", err)
		}
		var rows int
		db.QueryRow(`SELECT count(*) FROM audit_log WHERE method = 'iam.keys.create' AND outcome = 'forbidden'`).Scan(&rows)
		if rows != 1 {
			t.Fatalf("forbidden audit rows = %d, want 1", rows)
		}
	})
}

func TestAnObjectUsesOnlyItsOwnTenantsSecrets(t *testing.T) {
	storetest.Each(t, controlplane.Modules(), func(t *testing.T, db *store.DB) {
		e := newFleetEnv(t, db)
		err := e.call(e.admin, "compute.providerAccounts.create", map[string]any{"tenantId": "acme", "name": "stolen", "provider": "hetzner-cloud",
			"config": map[string]string{"token": "secret://root/hetzner"}}, nil)
		if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) || !strings.Contains(err.Error(), "own tenant") {
			t.Fatalf("referencing another tenant's secret = %v, want INVALID_INPUT", err)
		}
		e.mustCall(e.admin, "compute.providerAccounts.create", map[string]any{"tenantId": "root", "name": "mine", "provider": "hetzner-cloud",
			"config": map[string]string{"token": "secret://root/hetzner"}}, nil)
	})
}

func TestSecretsRotateAndRefuseDeletingOneInUse(t *testing.T) {
	storetest.Each(t, controlplane.Modules(), func(t *testing.T, db *store.DB) {
		e := newFleetEnv(t, db)
		if _, err := e.apply(e.admin, raw(docV1), false, ""); err != nil {
			t.Fatal(err)
		}
		var before string
		db.QueryRow(`SELECT sealed FROM secrets WHERE name = 'pip-index'`).Scan(&before)
		e.mustCall(e.admin, "secrets.update", map[string]any{"tenantId": "root", "name": "pip-index", "value": "rotated"}, nil)
		var after string
		db.QueryRow(`SELECT sealed FROM secrets WHERE name = 'pip-index'`).Scan(&after)
		if after == before || strings.Contains(after, "rotated") {
			t.Fatal("the update did not reseal the value")
		}
		err := e.call(e.admin, "secrets.delete", map[string]any{"tenantId": "root", "name": "pip-index"}, nil)
		if !cubefleet.IsCode(err, cubefleet.CodeConflict) || !strings.Contains(err.Error(), "py-small") {
			t.Fatalf("deleting a secret a template uses = %v, want CONFLICT naming it", err)
		}
		e.mustCall(e.admin, "secrets.create", map[string]any{"tenantId": "root", "name": "unused_1", "value": "v"}, nil)
		e.mustCall(e.admin, "secrets.delete", map[string]any{"tenantId": "root", "name": "unused_1"}, nil)
	})
}

func TestAnotherSecretsKeyIsRefused(t *testing.T) {
	db := storetest.SQLite(t, controlplane.Modules()...)
	newFleetEnv(t, db) // seals with the key of its own data directory
	_, err := New(t.Context(), Config{DB: db, DataDir: t.TempDir(), Listen: "127.0.0.1:0"}, nil)
	if err == nil || !strings.Contains(err.Error(), "secrets.key") {
		t.Fatalf("a second data directory's key = %v, want a refusal naming secrets.key", err)
	}
}

// TestAMissingSecretsKeyIsNotReplaced: a data directory whose secrets.key was deleted, while its
// database holds sealed secrets, does not start, says the file is missing and what to restore,
// and writes no new key; the restored file starts it again.
func TestAMissingSecretsKeyIsNotReplaced(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, err := New(t.Context(), Config{Dev: true, DataDir: dir, Listen: "127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.sys.Box.Create(t.Context(), s.db, "root", "db-password", "the-value", "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := filepath.Join(dir, controlplane.SecretsKeyFile)
	key, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	_, err = New(t.Context(), Config{Dev: true, DataDir: dir, Listen: "127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	if !errors.Is(err, secrets.ErrKeyMissing) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "restore secrets.key") {
		t.Fatalf("a start without its secrets.key = %v, want ErrKeyMissing naming %s and what to restore", err, path)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a new secrets.key was written (%v)", err)
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = New(t.Context(), Config{Dev: true, DataDir: dir, Listen: "127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("a start with the restored secrets.key: %v", err)
	}
	defer s.Close()
	if got, err := s.sys.Box.Value(t.Context(), s.db, "root", "db-password"); err != nil || got != "the-value" {
		t.Errorf("the secret after the restore: %q, %v", got, err)
	}
}

func TestATakenPortWritesNothing(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := New(t.Context(), Config{Dev: true, DataDir: dir, Listen: taken.Addr().String()}, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("New on a taken port succeeded")
	}
	for _, f := range []string{controlplane.AdminTokenFile, controlplane.DBFile, controlplane.SecretsKeyFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after a failed start (%v)", f, err)
		}
	}
}

func TestHelpfulRefusals(t *testing.T) {
	db := storetest.SQLite(t, controlplane.Modules()...)
	e := newFleetEnv(t, db)
	if _, err := e.apply(e.admin, raw(docV1), false, ""); err != nil {
		t.Fatal(err)
	}
	// A name where an id belongs says so.
	err := e.call(e.admin, "compute.pools.update", map[string]any{"tenantId": "root", "id": "vps-fra", "gpuModel": "H100"}, nil)
	if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) || !strings.Contains(err.Error(), "compute.pools.list") {
		t.Errorf("a name as id = %v, want INVALID_INPUT pointing to compute.pools.list", err)
	}
	// A grant on a tenant that does not exist is refused.
	err = e.call(e.admin, "iam.keys.create", map[string]any{"tenantId": "root", "name": "typo", "grants": []string{"compute:pools:list@tenant/nosuch"}}, nil)
	if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("a grant on an unknown tenant = %v, want INVALID_INPUT", err)
	}
	// An upper-case plan hash is the same hash.
	p := e.plan(e.admin, raw(docV2), false)
	if _, err := e.apply(e.admin, raw(docV2), false, strings.ToUpper(p.PlanHash)); err != nil {
		t.Errorf("apply with the upper-case hash: %v", err)
	}
	// Applying the same hash again says the plan moved, with both hashes.
	_, err = e.apply(e.admin, raw(docV2), false, p.PlanHash)
	if !cubefleet.IsCode(err, cubefleet.CodeConfigDrift) || !strings.Contains(err.Error(), p.PlanHash[:12]) {
		t.Errorf("re-applying a hash = %v, want CONFIG_DRIFT naming it", err)
	}
}

// TestListCursorRefused: a cursor that is not a page's nextCursor is INVALID_INPUT naming
// cursor, not a silent listing from the start.
func TestListCursorRefused(t *testing.T) {
	storetest.Each(t, controlplane.Modules(), func(t *testing.T, db *store.DB) {
		e := newFleetEnv(t, db)
		for _, c := range []struct {
			method string
			in     map[string]any
		}{
			{"events.list", map[string]any{"cursor": "bogus"}},
			{"events.list", map[string]any{"cursor": cubefleet.NewID("aud")}},
			{"audit.list", map[string]any{"tenantId": "root", "cursor": "bogus"}},
			{"events.list", map[string]any{"newest": true, "cursor": cubefleet.NewID("evt")}},
		} {
			err := e.call(e.admin, c.method, c.in, nil)
			var ce *cubefleet.Error
			if !errors.As(err, &ce) || ce.Code != cubefleet.CodeInvalidInput || ce.Details["path"] != "cursor" {
				t.Errorf("%s %v = %v, want INVALID_INPUT at cursor", c.method, c.in, err)
			}
		}
		if err := e.call(e.admin, "events.list", map[string]any{"cursor": cubefleet.NewID("evt")}, nil); err != nil {
			t.Errorf("events.list with an event id as cursor: %v", err)
		}
	})
}

// TestInternalListenOnListen: an --internal-listen that takes --listen's address says so.
func TestInternalListenOnListen(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = New(t.Context(), Config{Listen: addr, InternalListen: addr, DataDir: t.TempDir()}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "--internal-listen "+addr+" takes the address --listen") {
		t.Fatalf("New with --internal-listen = --listen: %v", err)
	}
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:3010", "127.0.0.1:3010", true},
		{"0.0.0.0:3010", "127.0.0.1:3010", true},
		{"[::]:3010", "10.0.0.1:3010", true},
		{":3010", "10.0.0.1:3010", true},
		{"127.0.0.2:3010", "127.0.0.1:3010", false},
		{"127.0.0.1:3011", "127.0.0.1:3010", false},
	} {
		if got := overlaps(c.a, c.b); got != c.want {
			t.Errorf("overlaps(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
