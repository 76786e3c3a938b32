package cubefleet

import (
	"crypto/sha256"
	"regexp"

	"github.com/oklog/ulid/v2"
)

// NewID returns a fresh id `<prefix>_<26 Crockford base32 characters>` (ULID-shaped, sortable
// by creation time), e.g. `pool_01JQ...`.
func NewID(prefix string) string {
	return prefix + "_" + ulid.Make().String()
}

// DerivedID returns the deterministic id for an object created with idempotency key by the
// principal caller: the first 128 bits of SHA-256(key, caller) in ULID form. The same key and
// caller always give the same id, so a retried create converges (fleet spec, "Names instead of
// ids").
func DerivedID(prefix, key, caller string) string {
	sum := sha256.Sum256([]byte(key + "\x00" + caller))
	var u ulid.ULID
	copy(u[:], sum[:16])
	return prefix + "_" + u.String()
}

var idPattern = regexp.MustCompile(`^[a-z]+_[0-9A-HJKMNP-TV-Z]{26}$`)

// IsID reports whether s has the shape of an id with the given prefix ("" accepts any prefix).
func IsID(s, prefix string) bool {
	if !idPattern.MatchString(s) {
		return false
	}
	return prefix == "" || (len(s) == len(prefix)+27 && s[:len(prefix)+1] == prefix+"_")
}
