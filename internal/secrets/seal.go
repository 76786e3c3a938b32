package secrets

import (
	"encoding/base64"
	"fmt"
)

// Seal seals plain under the box's key for another module that must read its secret back (a
// webhook signing secret): base64 of nonce || AES-256-GCM ciphertext, bound to id (the owning
// record's id) as associated data, so a sealed value copied to another record does not open.
func (b *Box) Seal(plain []byte, id string) (string, error) {
	return b.seal(plain, id)
}

// Open opens a value Seal sealed for id. It fails when the value was sealed under another key
// or for another id, or was altered.
func (b *Box) Open(sealed, id string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil || len(raw) < b.aead.NonceSize() {
		return nil, fmt.Errorf("open sealed value of %s: malformed", id)
	}
	n := b.aead.NonceSize()
	plain, err := b.aead.Open(nil, raw[:n], raw[n:], []byte(id))
	if err != nil {
		return nil, fmt.Errorf("open sealed value of %s: %w", id, err)
	}
	return plain, nil
}
