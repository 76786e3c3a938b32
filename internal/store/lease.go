package store

import (
	"context"
	"embed"
	"fmt"
	"time"
)

//go:embed migrations/*.sql
var migrations embed.FS

// LeaseModule is the store's own migrations (`store/0001_leases`): run it before taking leases.
var LeaseModule = EmbeddedModule("store", migrations)

// TryLease takes or renews the lease name for holder until now+ttl and reports whether holder
// holds it. A lease whose holder stopped renewing is taken over once it expires, so a replica
// that dies loses its leases within ttl (docs/server.md, "Several replicas").
func (db *DB) TryLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (bool, error) {
	at, until := now.UnixMilli(), now.Add(ttl).UnixMilli()
	res, err := db.ExecContext(ctx, `INSERT INTO store_leases (name, holder, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE store_leases.holder = excluded.holder OR store_leases.expires_at < $4`, name, holder, until, at)
	if err != nil {
		return false, fmt.Errorf("lease %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("lease %s: %w", name, err)
	}
	return n == 1, nil
}
