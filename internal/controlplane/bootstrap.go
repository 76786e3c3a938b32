package controlplane

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/api"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/privatefile"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
)

// DevTenants returns the example tenants --dev seeds ("acme" and "globex"; dev only: a
// production server gets its tenants through iam.tenants.create).
func DevTenants() []string { return []string{"acme", "globex"} }

// bootstrapDev runs --dev's first-start work in one transaction: the root tenant and its
// administrator (whose key goes to <data-dir>/admin.token, mode 0600, never to a log), and the
// example tenants. On later starts it only makes sure the example tenants exist.
func (sys *System) bootstrapDev(ctx context.Context) error {
	path := filepath.Join(sys.cfg.DataDir, AdminTokenFile)
	now := sys.cfg.Now()
	err := sys.DB.InTx(ctx, func(tx *sql.Tx) error {
		key, token, err := iam.Bootstrap(ctx, tx, sys.API.Catalogue(), now)
		switch {
		case errors.Is(err, iam.ErrInitialized):
			// Initialized before: the admin key was written then.
		case err != nil:
			return fmt.Errorf("dev bootstrap: %w", err)
		default:
			if err := writeTokenFile(path, token); err != nil {
				return fmt.Errorf("dev bootstrap: %w", err)
			}
			sys.tokenPath = path
			sys.cfg.Log.Info("dev mode: created the root tenant and an administrator key", "key_id", key.ID, "token_file", path)
		}
		for _, t := range DevTenants() {
			ok, err := iam.TenantExists(ctx, tx, t)
			if err != nil {
				return fmt.Errorf("dev tenants: %w", err)
			}
			if !ok {
				if _, err := iam.CreateTenant(ctx, tx, t, now); err != nil {
					return fmt.Errorf("dev tenants: %w", err)
				}
				sys.cfg.Log.Info("dev mode: seeded example tenant", "tenant", t)
			}
		}
		return nil
	})
	if err != nil && sys.tokenPath != "" {
		os.Remove(sys.tokenPath) // the key it holds was rolled back
		sys.tokenPath = ""
	}
	return err
}

// writeTokenFile writes token to path with mode 0600, refusing to replace a file.
func writeTokenFile(path, token string) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("refusing to overwrite %s: move it away first", path)
	}
	if err := privatefile.Write(path, []byte(token+"\n")); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// InitConfig configures Init.
type InitConfig struct {
	// DataDir is the server's data directory (created with mode 0700). Defaults to
	// DefaultDataDir.
	DataDir string
	// Database is a postgres:// URL or a SQLite path, default <DataDir>/cubefleet.db.
	Database string
	// TokenOut is the file the administrator key is written to (mode 0600). Required; an
	// existing file is never overwritten.
	TokenOut string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Init prepares a production control plane once: it migrates the database, creates the root
// tenant and its first administrator (every permission), and writes the administrator's API key
// to cfg.TokenOut (mode 0600) in the same transaction, so a failure leaves nothing behind. It
// returns the key's metadata, never the token. Errors: CONFLICT when the database is already
// initialized; INVALID_INPUT when TokenOut is empty or exists.
func Init(ctx context.Context, cfg InitConfig) (iam.Key, error) {
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir
	}
	if cfg.Database == "" {
		cfg.Database = filepath.Join(cfg.DataDir, DBFile)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.TokenOut == "" {
		return iam.Key{}, cubefleet.Invalid("tokenOut", "--token-out names the file to write the administrator key to")
	}
	if _, err := os.Lstat(cfg.TokenOut); err == nil {
		return iam.Key{}, cubefleet.Invalid("tokenOut", "refusing to overwrite %s: name a new file", cfg.TokenOut)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return iam.Key{}, fmt.Errorf("data dir: %w", err)
	}
	db, err := store.Open(ctx, cfg.Database)
	if err != nil {
		return iam.Key{}, err
	}
	defer db.Close()
	if err := db.Migrate(ctx, Modules()...); err != nil {
		return iam.Key{}, err
	}
	// The key that seals secrets is made now, with the database, so replicas can copy it
	// before any of them starts.
	if _, err := secrets.OpenKey(ctx, db, filepath.Join(cfg.DataDir, SecretsKeyFile)); err != nil {
		return iam.Key{}, err
	}
	var key iam.Key
	wrote := false
	err = db.InTx(ctx, func(tx *sql.Tx) error {
		k, token, err := iam.Bootstrap(ctx, tx, api.Catalogue(), cfg.Now())
		if errors.Is(err, iam.ErrInitialized) {
			return cubefleet.Errorf(cubefleet.CodeConflict,
				"this control plane is already initialized (the root tenant has principals); use its administrator key, or make another with `cubefleet keys create`")
		}
		if err != nil {
			return err
		}
		if err := writeTokenFile(cfg.TokenOut, token); err != nil {
			return err
		}
		wrote = true
		key = k
		return nil
	})
	if err != nil {
		if wrote {
			os.Remove(cfg.TokenOut) // the key it holds was rolled back
		}
		return iam.Key{}, err
	}
	return key, nil
}
