// Package secrets is the control plane's secret store: values sealed with AES-256-GCM under a
// key file in the data directory, stored per tenant by name, never returned by any API. Documents
// refer to them as secret://NAME (package secretref).
package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/privatefile"
	"github.com/cubefleet/cubefleet/internal/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Module is the secrets module's migrations (`secrets/0001_store`).
var Module = store.EmbeddedModule("secrets", migrations)

// Box seals and opens secret values. It is safe for concurrent use.
type Box struct {
	aead        cipher.AEAD
	fingerprint string // hex HMAC-SHA256 of a fixed label under the key
}

// ErrKeyMissing is returned by OpenKey when the key file is missing while the database has
// recorded a key: its sealed secrets (tenant secrets, webhook signing secrets) open only under
// that key, so none is created.
var ErrKeyMissing = errors.New("secrets.key is missing")

// OpenKey loads the 32-byte key at path for the database q and checks it with CheckKey. A
// missing key file is created (32 random bytes, mode 0600, its directory 0700) only for a
// database that has recorded no key yet; otherwise it fails with ErrKeyMissing, naming the
// file and what to restore, and writes nothing. An existing key file must be a regular file
// owned by the caller with mode 0600 and hold 32 bytes; a key the database did not record
// fails with ErrWrongKey. No error holds the key.
func OpenKey(ctx context.Context, q store.Querier, path string) (*Box, error) {
	key, err := privatefile.Read(path)
	if errors.Is(err, os.ErrNotExist) {
		var recorded int
		if err := q.QueryRowContext(ctx, `SELECT count(*) FROM secrets_key_check`).Scan(&recorded); err != nil {
			return nil, fmt.Errorf("secret key check: %w", err)
		}
		if recorded > 0 {
			return nil, fmt.Errorf("%w: %s: this database was first served with a secrets.key, and the secrets it holds sealed (tenant secrets, webhook signing secrets) open only under that key; restore secrets.key (mode 0600) from a backup of the data directory, or copy it from another server of this database, then start again; no new key was written", ErrKeyMissing, path)
		}
		key = make([]byte, 32)
		if _, err := io.ReadFull(rand.Reader, key); err != nil {
			return nil, err
		}
		if err := privatefile.Write(path, key); err != nil {
			return nil, fmt.Errorf("secret key: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("secret key %s: want 32 bytes, found %d", path, len(key))
	}
	b, err := NewBox(key)
	if err != nil {
		return nil, err
	}
	if err := b.CheckKey(ctx, q); err != nil {
		return nil, err
	}
	return b, nil
}

// NewBox returns a Box for a 32-byte key (AES-256); a key of any other length is refused.
func NewBox(key []byte) (*Box, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("secret key: want 32 bytes, found %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("cubefleet secrets.key check v1"))
	return &Box{aead: aead, fingerprint: hex.EncodeToString(mac.Sum(nil))}, nil
}

// ErrWrongKey is returned by CheckKey when the database's secrets were sealed with another key.
var ErrWrongKey = errors.New("secrets.key is not the key this database's secrets are sealed with")

// CheckKey records b's key fingerprint in a new database, and otherwise checks that it is the
// recorded one: replicas sharing one PostgreSQL need the same secrets.key. It returns an error
// wrapping ErrWrongKey on a mismatch; the fingerprint reveals nothing of the key.
func (b *Box) CheckKey(ctx context.Context, q store.Querier) error {
	if _, err := q.ExecContext(ctx, `INSERT INTO secrets_key_check (id, fingerprint) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, b.fingerprint); err != nil {
		return fmt.Errorf("secret key check: %w", err)
	}
	var recorded string
	if err := q.QueryRowContext(ctx, `SELECT fingerprint FROM secrets_key_check WHERE id = 1`).Scan(&recorded); err != nil {
		return fmt.Errorf("secret key check: %w", err)
	}
	if !hmac.Equal([]byte(recorded), []byte(b.fingerprint)) {
		return fmt.Errorf("%w: copy the secrets.key of the data directory that first served this database (every replica needs the same one)", ErrWrongKey)
	}
	return nil
}

func (b *Box) seal(plain []byte, id string) (string, error) {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := io.ReadFull(rand.Reader, nonce); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b.aead.Seal(nonce, nonce, plain, []byte(id))), nil
}

// open returns the value that seal sealed for the secret id. It fails, wrapping ErrWrongKey,
// when b's key is not the one that sealed it or the sealed text was altered or moved to another
// secret (id is the cipher's additional data).
func (b *Box) open(sealed, id string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil || len(raw) < b.aead.NonceSize() {
		return nil, fmt.Errorf("secret %s: the sealed value is not one this store wrote", id)
	}
	n := b.aead.NonceSize()
	plain, err := b.aead.Open(nil, raw[:n], raw[n:], []byte(id))
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w, or its sealed value was altered", id, ErrWrongKey)
	}
	return plain, nil
}

// Value returns the value of tenantID's secret nameOrID (a name or an id), unsealed: what the
// control plane resolves a secret:// reference to when it must hand the value on (a sandbox's
// environment, issue "Sandboxes"); callers never log it or store it elsewhere. Errors:
// NOT_FOUND; one wrapping ErrWrongKey when b's key did not seal the value (or the sealed text
// was altered). No error contains the value.
func (b *Box) Value(ctx context.Context, q store.Querier, tenantID, nameOrID string) (string, error) {
	var id, sealed string
	err := q.QueryRowContext(ctx, `SELECT id, sealed FROM secrets WHERE tenant_id = $1 AND (name = $2 OR id = $2)`, tenantID, nameOrID).Scan(&id, &sealed)
	if errors.Is(err, sql.ErrNoRows) {
		return "", cubefleet.Errorf(cubefleet.CodeNotFound, "tenant %s has no secret %s", tenantID, nameOrID)
	}
	if err != nil {
		return "", fmt.Errorf("read secret: %w", err)
	}
	plain, err := b.open(sealed, id)
	if err != nil {
		return "", err
	}
	return string(plain), nil
}

// Secret is a secret as listings show it: never its value.
type Secret struct {
	ID        string `json:"id"`
	TenantID  string `json:"tenantId"`
	Name      string `json:"name"`
	CreatedBy string `json:"createdBy"`
	CreatedAt int64  `json:"createdAt"` // Unix ms
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,63}$`)

// MaxValueBytes is the largest secret value accepted (64 KiB).
const MaxValueBytes = 64 << 10

// Create seals value and stores it as name in tenantID. Errors: INVALID_INPUT (bad name, empty
// or oversized value; the message never contains the value), CONFLICT (name taken).
func (b *Box) Create(ctx context.Context, q store.Querier, tenantID, name, value, createdBy string, now time.Time) (Secret, error) {
	if !namePattern.MatchString(name) {
		return Secret{}, cubefleet.Invalid("name", "secret names are 1-63 of letters, digits, '.', '_', '-'")
	}
	if value == "" || len(value) > MaxValueBytes {
		return Secret{}, cubefleet.Invalid("value", "a secret value is 1 byte to 64 KiB")
	}
	s := Secret{ID: cubefleet.NewID("sec"), TenantID: tenantID, Name: name, CreatedBy: createdBy, CreatedAt: now.UnixMilli()}
	sealed, err := b.seal([]byte(value), s.ID)
	if err != nil {
		return Secret{}, err
	}
	_, err = q.ExecContext(ctx, `INSERT INTO secrets (id, tenant_id, name, sealed, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		s.ID, s.TenantID, s.Name, sealed, s.CreatedBy, s.CreatedAt)
	if store.IsUniqueViolation(err) {
		return Secret{}, cubefleet.Errorf(cubefleet.CodeConflict, "tenant %s already has a secret %s", tenantID, name)
	}
	if err != nil {
		return Secret{}, fmt.Errorf("create secret: %w", err)
	}
	return s, nil
}

// Update seals value as the new value of tenantID's secret nameOrID (rotation). Errors:
// INVALID_INPUT (empty or oversized value; never echoed), NOT_FOUND.
func (b *Box) Update(ctx context.Context, q store.Querier, tenantID, nameOrID, value string) (Secret, error) {
	if value == "" || len(value) > MaxValueBytes {
		return Secret{}, cubefleet.Invalid("value", "a secret value is 1 byte to 64 KiB")
	}
	s, err := get(ctx, q, tenantID, nameOrID)
	if err != nil {
		return Secret{}, err
	}
	sealed, err := b.seal([]byte(value), s.ID)
	if err != nil {
		return Secret{}, err
	}
	if _, err := q.ExecContext(ctx, `UPDATE secrets SET sealed = $1 WHERE id = $2`, sealed, s.ID); err != nil {
		return Secret{}, fmt.Errorf("update secret: %w", err)
	}
	return s, nil
}

func get(ctx context.Context, q store.Querier, tenantID, nameOrID string) (Secret, error) {
	var s Secret
	err := q.QueryRowContext(ctx, `SELECT id, tenant_id, name, created_by, created_at FROM secrets WHERE tenant_id = $1 AND (name = $2 OR id = $2)`, tenantID, nameOrID).
		Scan(&s.ID, &s.TenantID, &s.Name, &s.CreatedBy, &s.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return Secret{}, cubefleet.Errorf(cubefleet.CodeNotFound, "tenant %s has no secret %s", tenantID, nameOrID)
	}
	return s, err
}

// List returns tenantID's secrets by name, without values.
func List(ctx context.Context, q store.Querier, tenantID string) ([]Secret, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, tenant_id, name, created_by, created_at FROM secrets WHERE tenant_id = $1 ORDER BY name`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	defer rows.Close()
	out := []Secret{}
	for rows.Next() {
		var s Secret
		if err := rows.Scan(&s.ID, &s.TenantID, &s.Name, &s.CreatedBy, &s.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// Exists reports whether tenantID has a secret whose name or id is nameOrID.
func Exists(ctx context.Context, q store.Querier, tenantID, nameOrID string) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM secrets WHERE tenant_id = $1 AND (name = $2 OR id = $2)`, tenantID, nameOrID).Scan(&n)
	return n > 0, err
}

// Delete removes tenantID's secret whose name or id is nameOrID, or returns NOT_FOUND.
func Delete(ctx context.Context, q store.Querier, tenantID, nameOrID string) (Secret, error) {
	s, err := get(ctx, q, tenantID, nameOrID)
	if err != nil {
		return Secret{}, err
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM secrets WHERE id = $1`, s.ID); err != nil {
		return Secret{}, fmt.Errorf("delete secret: %w", err)
	}
	return s, nil
}

// Get returns the metadata of tenantID's secret nameOrID, or NOT_FOUND.
func Get(ctx context.Context, q store.Querier, tenantID, nameOrID string) (Secret, error) {
	return get(ctx, q, tenantID, nameOrID)
}

// Refs returns the reference forms that name s: secret://NAME, secret://ID and the same with
// the tenant (secret://TENANT/NAME, secret://TENANT/ID).
func (s Secret) Refs() []string {
	return []string{"secret://" + s.Name, "secret://" + s.ID, "secret://" + s.TenantID + "/" + s.Name, "secret://" + s.TenantID + "/" + s.ID}
}
