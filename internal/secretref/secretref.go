// Package secretref parses the secret references that documents and objects carry instead of
// secret values: `secret://NAME` or `secret://TENANT/NAME` (the control plane's secret store),
// `vault://PATH[#FIELD]` (a Vault server, when one is configured) and `env://NAME` (the
// server's environment). It also says which config keys and environment variable names hold
// credentials and so must be references (fleet spec, "The document"). The fleet document's
// JSON Schema uses the same patterns.
package secretref

import (
	"regexp"
	"strings"
)

// Schemes of a reference.
const (
	SchemeSecret = "secret"
	SchemeVault  = "vault"
	SchemeEnv    = "env"
)

// Pattern is the regular expression (RE2 and ECMA-262 alike) of a well-formed reference:
// secret://NAME or secret://TENANT/NAME (each 1-63 of A-Z, a-z, 0-9, '.', '_', '-', so an id
// such as sec_01... fits), vault://PATH with an optional #field (printable ASCII without space
// or '#'), or env://NAME (a letter or '_', then letters, digits or '_'). It uses only the
// constructs every JSON Schema validator compiles (fieldrules.Portable): plain groups, no flags.
const Pattern = `^(secret://([A-Za-z0-9._-]{1,63}/)?[A-Za-z0-9._-]{1,63}` +
	`|vault://[!-"$-~]+(#[!-"$-~]+)?` +
	`|env://[A-Za-z_][A-Za-z0-9_]*)$`

// Forms lists the forms of a reference in words, for messages.
const Forms = "secret://NAME, secret://TENANT/NAME, vault://PATH[#field] or env://NAME"

// CredentialPattern matches (unanchored, in any ASCII case) a config key or variable name that
// names a credential: one containing token, password, secret, key or credential. It is spelled
// without flags so that ECMA-262 reads it the same.
const CredentialPattern = `[Tt][Oo][Kk][Ee][Nn]|[Pp][Aa][Ss][Ss][Ww][Oo][Rr][Dd]|[Ss][Ee][Cc][Rr][Ee][Tt]` +
	`|[Kk][Ee][Yy]|[Cc][Rr][Ee][Dd][Ee][Nn][Tt][Ii][Aa][Ll]`

var refRE = regexp.MustCompile(Pattern)

// Ref is a parsed reference. For SchemeSecret, Tenant is "" when the reference names the
// document's own tenant; Name is the secret's name or id. For SchemeVault, Name is the path
// (with any #field). For SchemeEnv, Name is the variable.
type Ref struct {
	Scheme string
	Tenant string
	Name   string
}

// Parse parses s; ok is false when s is not a well-formed reference (see Pattern).
func Parse(s string) (ref Ref, ok bool) {
	if !refRE.MatchString(s) {
		return Ref{}, false
	}
	scheme, rest, _ := strings.Cut(s, "://")
	if scheme == SchemeSecret {
		if tenant, name, two := strings.Cut(rest, "/"); two {
			return Ref{Scheme: scheme, Tenant: tenant, Name: name}, true
		}
	}
	return Ref{Scheme: scheme, Name: rest}, true
}

// IsRef reports whether s is a well-formed reference.
func IsRef(s string) bool { return refRE.MatchString(s) }

var credentialWords = []string{"token", "password", "secret", "key", "credential"}

// IsCredentialName reports whether a provider account config key or a template environment
// variable name names a credential (see CredentialPattern), so its value must be a reference.
func IsCredentialName(name string) bool {
	lower := strings.ToLower(name)
	for _, w := range credentialWords {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}
