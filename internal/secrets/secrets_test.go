package secrets_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/privatefile"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var now = time.UnixMilli(1_790_251_200_000)

// box returns a Box for a key of 32 copies of b.
func box(t *testing.T, b byte) *secrets.Box {
	t.Helper()
	x, err := secrets.NewBox(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// sealedOf returns the sealed column of the secret id, as stored.
func sealedOf(t *testing.T, db *store.DB, id string) string {
	t.Helper()
	var sealed string
	if err := db.QueryRowContext(context.Background(), `SELECT sealed FROM secrets WHERE id = $1`, id).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	return sealed
}

// TestSealRoundTrip: a value comes back as it went in, by name and by id, and after a rotation;
// what the database holds is neither the value nor any encoding of it, and sealing the same
// value twice stores two different texts.
func TestSealRoundTrip(t *testing.T) {
	storetest.Each(t, []store.Module{secrets.Module}, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		b := box(t, 1)
		const value = "hunter2: correct horse battery staple \x00 ü"
		s, err := b.Create(ctx, db, "acme", "db-password", value, "usr_admin", now)
		if err != nil {
			t.Fatal(err)
		}
		if !cubefleet.IsID(s.ID, "sec") || s.TenantID != "acme" || s.Name != "db-password" || s.CreatedBy != "usr_admin" || s.CreatedAt != now.UnixMilli() {
			t.Errorf("Create = %+v", s)
		}
		for _, ref := range []string{"db-password", s.ID} {
			if got, err := b.Value(ctx, db, "acme", ref); err != nil || got != value {
				t.Errorf("Value(%s) = %q, %v; want the value", ref, got, err)
			}
		}
		sealed := sealedOf(t, db, s.ID)
		for _, form := range []string{value, "hunter2", base64.StdEncoding.EncodeToString([]byte(value)), fmt.Sprintf("%x", value)} {
			if strings.Contains(sealed, form) {
				t.Errorf("the sealed column holds %q", form)
			}
		}
		again, err := b.Create(ctx, db, "acme", "same-value", value, "usr_admin", now)
		if err != nil {
			t.Fatal(err)
		}
		if sealedOf(t, db, again.ID) == sealed {
			t.Error("the same value sealed twice stored the same text (the nonce repeats)")
		}

		// Rotation keeps the id and returns the new value.
		rotated, err := b.Update(ctx, db, "acme", "db-password", "new-value")
		if err != nil || rotated.ID != s.ID {
			t.Fatalf("Update = %+v, %v", rotated, err)
		}
		if got, err := b.Value(ctx, db, "acme", s.ID); err != nil || got != "new-value" {
			t.Errorf("Value after Update = %q, %v", got, err)
		}

		// The largest value fits; one byte more does not.
		big := strings.Repeat("v", secrets.MaxValueBytes)
		if _, err := b.Create(ctx, db, "acme", "big", big, "usr_admin", now); err != nil {
			t.Fatalf("a %d-byte value: %v", len(big), err)
		}
		if got, err := b.Value(ctx, db, "acme", "big"); err != nil || got != big {
			t.Errorf("the largest value did not round-trip: %d bytes, %v", len(got), err)
		}
	})
}

// TestCheckKey: a new database records the key's fingerprint, the same key passes again, and
// another key (a replica started with its own secrets.key, or a replaced file) is refused
// with ErrWrongKey and a message that names secrets.key and the fix, and holds nothing of
// either key.
func TestCheckKey(t *testing.T) {
	storetest.Each(t, []store.Module{secrets.Module}, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		first, other := box(t, 1), box(t, 2)
		if err := first.CheckKey(ctx, db); err != nil {
			t.Fatalf("first key on a new database: %v", err)
		}
		if err := first.CheckKey(ctx, db); err != nil {
			t.Fatalf("the same key again: %v", err)
		}
		err := other.CheckKey(ctx, db)
		if !errors.Is(err, secrets.ErrWrongKey) {
			t.Fatalf("another key: %v, want ErrWrongKey", err)
		}
		msg := err.Error()
		if !strings.Contains(msg, "secrets.key") || !strings.Contains(msg, "copy the secrets.key") {
			t.Errorf("the refusal does not say what to do: %q", msg)
		}
		for _, k := range []byte{1, 2} {
			key := bytes.Repeat([]byte{k}, 32)
			for _, form := range []string{string(key), fmt.Sprintf("%x", key), base64.StdEncoding.EncodeToString(key)} {
				if strings.Contains(msg, form) {
					t.Errorf("the refusal holds a key: %q", msg)
				}
			}
		}
		// The other key still cannot take the database over.
		if err := first.CheckKey(ctx, db); err != nil {
			t.Errorf("the first key after a refusal: %v", err)
		}
	})
}

// TestWrongKeyOrAlteredValue: a value sealed under one key does not open under another, nor
// after its sealed text moved to another secret's row or was altered; each failure wraps
// ErrWrongKey and never contains the value.
func TestWrongKeyOrAlteredValue(t *testing.T) {
	storetest.Each(t, []store.Module{secrets.Module}, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		b := box(t, 1)
		const value = "s3cr3t-value"
		a, err := b.Create(ctx, db, "acme", "a", value, "usr_admin", now)
		if err != nil {
			t.Fatal(err)
		}
		c, err := b.Create(ctx, db, "acme", "c", "other-value", "usr_admin", now)
		if err != nil {
			t.Fatal(err)
		}
		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, secrets.ErrWrongKey) {
				t.Errorf("%s: %v, want ErrWrongKey", what, err)
			} else if strings.Contains(err.Error(), value) || strings.Contains(err.Error(), "other-value") {
				t.Errorf("%s: the error holds a value: %v", what, err)
			}
		}
		_, err = box(t, 2).Value(ctx, db, "acme", "a")
		check("another key", err)

		// Move a's sealed text into c's row: the id is bound to it.
		if _, err := db.ExecContext(ctx, `UPDATE secrets SET sealed = $1 WHERE id = $2`, sealedOf(t, db, a.ID), c.ID); err != nil {
			t.Fatal(err)
		}
		_, err = b.Value(ctx, db, "acme", "c")
		check("a sealed value moved to another secret", err)

		// Flip one bit of a's ciphertext.
		raw, _ := base64.StdEncoding.DecodeString(sealedOf(t, db, a.ID))
		raw[len(raw)-1] ^= 1
		if _, err := db.ExecContext(ctx, `UPDATE secrets SET sealed = $1 WHERE id = $2`, base64.StdEncoding.EncodeToString(raw), a.ID); err != nil {
			t.Fatal(err)
		}
		_, err = b.Value(ctx, db, "acme", "a")
		check("an altered sealed value", err)

		// Not base64, or too short to hold a nonce: refused, and not taken for a wrong key.
		for _, junk := range []string{"not base64!", base64.StdEncoding.EncodeToString([]byte("short"))} {
			if _, err := db.ExecContext(ctx, `UPDATE secrets SET sealed = $1 WHERE id = $2`, junk, a.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Value(ctx, db, "acme", "a"); err == nil || errors.Is(err, secrets.ErrWrongKey) || !strings.Contains(err.Error(), a.ID) {
				t.Errorf("sealed %q: %v, want an error naming the secret", junk, err)
			}
		}
	})
}

// TestValuesNeverInErrors: every refusal that involves a value is INVALID_INPUT, CONFLICT or
// NOT_FOUND with the field or the name, and never repeats the value.
func TestValuesNeverInErrors(t *testing.T) {
	storetest.Each(t, []store.Module{secrets.Module}, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		b := box(t, 1)
		const value = "pa55w0rd-never-shown"
		if _, err := b.Create(ctx, db, "acme", "taken", value, "usr_admin", now); err != nil {
			t.Fatal(err)
		}
		tooBig := value + strings.Repeat("x", secrets.MaxValueBytes)
		create := func(name, v string) error { _, err := b.Create(ctx, db, "acme", name, v, "u", now); return err }
		update := func(name, v string) error { _, err := b.Update(ctx, db, "acme", name, v); return err }
		for _, c := range []struct {
			what string
			err  error
			code cubefleet.Code
			path string
		}{
			{"an empty value", create("empty", ""), cubefleet.CodeInvalidInput, "value"},
			{"a value over 64 KiB", create("big", tooBig), cubefleet.CodeInvalidInput, "value"},
			{"a name taken", create("taken", value), cubefleet.CodeConflict, ""},
			{"a bad name", create("no spaces", value), cubefleet.CodeInvalidInput, "name"},
			{"a name of 64 characters", create(strings.Repeat("n", 64), value), cubefleet.CodeInvalidInput, "name"},
			{"an update to an empty value", update("taken", ""), cubefleet.CodeInvalidInput, "value"},
			{"an update over 64 KiB", update("taken", tooBig), cubefleet.CodeInvalidInput, "value"},
			{"an update of a missing secret", update("missing", value), cubefleet.CodeNotFound, ""},
		} {
			err := c.err
			if !cubefleet.IsCode(err, c.code) {
				t.Errorf("%s: %v, want %s", c.what, err, c.code)
				continue
			}
			if strings.Contains(err.Error(), value) {
				t.Errorf("%s: the error repeats the value: %v", c.what, err)
			}
			var ce *cubefleet.Error
			if c.path != "" && (!errors.As(err, &ce) || ce.Details["path"] != c.path) {
				t.Errorf("%s: %v, want details.path %q", c.what, err, c.path)
			}
		}
		if _, err := b.Value(ctx, db, "acme", "missing"); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
			t.Errorf("the value of a missing secret: %v, want NOT_FOUND", err)
		}
		// Nothing was written by the refusals, and the value is the first one.
		if got, err := b.Value(ctx, db, "acme", "taken"); err != nil || got != value {
			t.Errorf("after the refusals: %q, %v", got, err)
		}
		if list, err := secrets.List(ctx, db, "acme"); err != nil || len(list) != 1 {
			t.Errorf("after the refusals: %+v, %v", list, err)
		}
	})
}

// TestMetadata: List, Get, Exists and Delete by name or id, per tenant; a Secret's JSON never
// has a value; Refs names every reference form.
func TestMetadata(t *testing.T) {
	storetest.Each(t, []store.Module{secrets.Module}, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		b := box(t, 1)
		var made []secrets.Secret
		for _, name := range []string{"zeta", "alpha", "mid.dle_1-x"} {
			s, err := b.Create(ctx, db, "acme", name, "v-"+name, "usr_admin", now)
			if err != nil {
				t.Fatal(err)
			}
			made = append(made, s)
		}
		if _, err := b.Create(ctx, db, "globex", "alpha", "globex-value", "usr_admin", now); err != nil {
			t.Fatalf("the same name in another tenant: %v", err)
		}
		list, err := secrets.List(ctx, db, "acme")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range list {
			names = append(names, s.Name)
		}
		if strings.Join(names, ",") != "alpha,mid.dle_1-x,zeta" {
			t.Errorf("List names %v, want them sorted", names)
		}
		if empty, err := secrets.List(ctx, db, "initech"); err != nil || empty == nil || len(empty) != 0 {
			t.Errorf("List of a tenant without secrets = %#v, %v; want an empty list (JSON [])", empty, err)
		}
		js, _ := json.Marshal(list)
		if bytes.Contains(js, []byte("v-")) || bytes.Contains(js, []byte(`"value"`)) || bytes.Contains(js, []byte("sealed")) {
			t.Errorf("a listing's JSON holds a value: %s", js)
		}

		zeta := made[0]
		for _, ref := range []string{"zeta", zeta.ID} {
			if got, err := secrets.Get(ctx, db, "acme", ref); err != nil || got != zeta {
				t.Errorf("Get(%s) = %+v, %v", ref, got, err)
			}
			if ok, err := secrets.Exists(ctx, db, "acme", ref); err != nil || !ok {
				t.Errorf("Exists(%s) = %v, %v", ref, ok, err)
			}
			// Another tenant sees nothing of it, by name or by id.
			if _, err := secrets.Get(ctx, db, "globex", ref); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
				t.Errorf("globex Get(%s): %v, want NOT_FOUND", ref, err)
			}
			if _, err := b.Value(ctx, db, "globex", ref); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
				t.Errorf("globex Value(%s): %v, want NOT_FOUND", ref, err)
			}
		}
		if got, err := b.Value(ctx, db, "globex", "alpha"); err != nil || got != "globex-value" {
			t.Errorf("globex's own alpha = %q, %v", got, err)
		}

		if got, err := secrets.Delete(ctx, db, "acme", zeta.ID); err != nil || got != zeta {
			t.Fatalf("Delete = %+v, %v", got, err)
		}
		if ok, err := secrets.Exists(ctx, db, "acme", "zeta"); err != nil || ok {
			t.Errorf("Exists after Delete = %v, %v", ok, err)
		}
		if _, err := secrets.Delete(ctx, db, "acme", "zeta"); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
			t.Errorf("Delete again: %v, want NOT_FOUND", err)
		}
		want := []string{"secret://zeta", "secret://" + zeta.ID, "secret://acme/zeta", "secret://acme/" + zeta.ID}
		if got := zeta.Refs(); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("Refs = %v, want %v", got, want)
		}
	})
}

// TestConcurrentUse: one Box seals and opens from many goroutines at once (run with -race).
func TestConcurrentUse(t *testing.T) {
	db := storetest.SQLite(t, secrets.Module)
	ctx := context.Background()
	b := box(t, 1)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			name, value := fmt.Sprintf("s%02d", i), fmt.Sprintf("value-%02d", i)
			if _, err := b.Create(ctx, db, "acme", name, value, "u", now); err != nil {
				errs <- err
				return
			}
			if got, err := b.Value(ctx, db, "acme", name); err != nil || got != value {
				errs <- fmt.Errorf("%s = %q, %v", name, got, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestOpenKey: for a new database a missing key file is created with 32 random bytes, mode
// 0600, owned by the caller, in a directory it creates with mode 0700; opening it again gives
// the same key; a key file that is not private, or not 32 bytes, is refused with the fix and
// without its contents; a key file missing for a database that recorded a key is not created.
func TestOpenKey(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(dir, "secrets.key")
	db := storetest.SQLite(t, secrets.Module)
	first, err := secrets.OpenKey(ctx, db, path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Errorf("key file: mode %04o, %d bytes; want 0600 and 32", fi.Mode().Perm(), fi.Size())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		t.Errorf("key file owned by uid %d, want %d", st.Uid, os.Geteuid())
	}
	if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("data directory: %v %v, want mode 0700", di.Mode().Perm(), err)
	}
	key, _ := os.ReadFile(path)
	if bytes.Equal(key, make([]byte, 32)) {
		t.Error("the key is all zeros")
	}
	other, err := secrets.OpenKey(ctx, storetest.SQLite(t, secrets.Module), filepath.Join(t.TempDir(), "secrets.key"))
	if err != nil {
		t.Fatal(err)
	}

	// The same file gives the same key: the database's fingerprint matches and values open.
	if _, err := first.Create(ctx, db, "acme", "db", "the-value", "u", now); err != nil {
		t.Fatal(err)
	}
	again, err := secrets.OpenKey(ctx, db, path)
	if err != nil {
		t.Errorf("the same key file reopened: %v", err)
	} else if got, err := again.Value(ctx, db, "acme", "db"); err != nil || got != "the-value" {
		t.Errorf("a value after reopening the key file: %q, %v", got, err)
	}
	if err := other.CheckKey(ctx, db); !errors.Is(err, secrets.ErrWrongKey) {
		t.Errorf("a second key file: %v, want ErrWrongKey", err)
	}

	// Missing for a database that recorded a key: refused, naming the file and what to
	// restore; no key is written.
	elsewhere := filepath.Join(t.TempDir(), "secrets.key")
	_, err = secrets.OpenKey(ctx, db, elsewhere)
	if !errors.Is(err, secrets.ErrKeyMissing) || !strings.Contains(err.Error(), elsewhere) || !strings.Contains(err.Error(), "restore secrets.key") {
		t.Errorf("a missing key file for a database with a key: %v, want ErrKeyMissing naming the file and the fix", err)
	}
	if _, err := os.Stat(elsewhere); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a key file was written for a database with a key (%v)", err)
	}

	// Not private: refused, naming the fix; the file is left as it is.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = secrets.OpenKey(ctx, db, path)
	if !errors.Is(err, privatefile.ErrUnsafe) || !strings.Contains(err.Error(), "chmod 600 "+path) {
		t.Errorf("a key file of mode 0644: %v, want a refusal naming chmod 600", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, key) {
		t.Error("the refused key file was rewritten")
	}
	os.Chmod(path, 0o600)
	link := filepath.Join(t.TempDir(), "secrets.key")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.OpenKey(ctx, db, link); !errors.Is(err, privatefile.ErrUnsafe) || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a symlink to the key file: %v, want a refusal", err)
	}
	if os.Geteuid() == 0 {
		foreign := filepath.Join(t.TempDir(), "secrets.key")
		if err := os.WriteFile(foreign, key, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(foreign, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := secrets.OpenKey(ctx, db, foreign); !errors.Is(err, privatefile.ErrUnsafe) || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Errorf("a key file owned by another user: %v, want a refusal", err)
		}
	}

	// Not 32 bytes: refused with the length, never the contents.
	short := filepath.Join(t.TempDir(), "secrets.key")
	if err := os.WriteFile(short, []byte("sixteen-byte-key"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = secrets.OpenKey(ctx, db, short)
	if err == nil || !strings.Contains(err.Error(), "want 32 bytes, found 16") || strings.Contains(err.Error(), "sixteen") {
		t.Errorf("a 16-byte key file: %v", err)
	}
}

// TestNewBoxKeyLength: NewBox takes a 32-byte key only (AES-256, not AES-128 or AES-192).
func TestNewBoxKeyLength(t *testing.T) {
	for _, n := range []int{0, 16, 24, 31, 33} {
		if _, err := secrets.NewBox(make([]byte, n)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("want 32 bytes, found %d", n)) {
			t.Errorf("NewBox of a %d-byte key: %v", n, err)
		}
	}
}
