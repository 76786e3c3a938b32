package nodes

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
)

// CredentialKind is what a node-agent call authenticates with (its Authorization header).
type CredentialKind int

// The credential kinds.
const (
	// CredentialNone: no Authorization header (a stock Cubelet, from an allowed network).
	CredentialNone CredentialKind = iota
	// CredentialNode: a node credential (nodeapi.CredentialPrefix).
	CredentialNode
	// CredentialJoin: a join token (nodeapi.JoinTokenPrefix).
	CredentialJoin
	// CredentialAPIKey: an API key (iam.TokenPrefix); it cannot register nodes.
	CredentialAPIKey
)

// Credential is what a call authenticates with: its kind and, for a node credential or a join
// token, the token's SHA-256 (HashToken). The token itself never reaches the registry.
type Credential struct {
	Kind CredentialKind
	Hash string
}

// HashToken is the hex SHA-256 of a token, the only form in which the registry keeps and
// compares node credentials and join tokens.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// sameHash compares two token hashes in constant time.
func sameHash(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// newSecret returns a fresh token: prefix and 32 random bytes in unpadded base64url.
func newSecret(prefix string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Refusal is a call refused because of who makes it (not of what it sent): Code is
// UNAUTHENTICATED (401), FORBIDDEN (403) or CONFLICT (409); Reason is a short snake_case word
// (the reason label of cubefleet_node_agent_refusals_total, and what identical refusals are
// summarized by); Message tells the caller what to do. It never holds a secret. The HTTP edge
// audits and answers it.
type Refusal struct {
	Code    cubefleet.Code
	Reason  string
	Message string
}

// Error returns the message.
func (f *Refusal) Error() string { return f.Message }

// Outcome is the refusal's audit outcome: "unauthenticated", "forbidden" or "conflict".
func (f *Refusal) Outcome() string {
	switch f.Code {
	case cubefleet.CodeForbidden:
		return audit.OutcomeForbidden
	case cubefleet.CodeConflict:
		return "conflict"
	}
	return "unauthenticated"
}

// Unauthenticated is an UNAUTHENTICATED refusal for reason with a formatted message.
func Unauthenticated(reason, format string, args ...any) *Refusal {
	return &Refusal{Code: cubefleet.CodeUnauthenticated, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Forbidden is a FORBIDDEN refusal for reason with a formatted message.
func Forbidden(reason, format string, args ...any) *Refusal {
	return &Refusal{Code: cubefleet.CodeForbidden, Reason: reason, Message: fmt.Sprintf(format, args...)}
}
