// Package secretref parses the secret references that documents and objects carry instead of
// secret values: `secret://NAME` or `secret://TENANT/NAME` (the control plane's secret store),
// `vault://PATH[#FIELD]` (a Vault server, when one is configured) and `env://NAME` (the
// server's environment). It also says which config keys and environment variable names hold
// credentials and so must be references (fleet spec, "The document").
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

// Ref is a parsed reference. For SchemeSecret, Tenant is "" when the reference names the
// document's own tenant; Name is the secret's name or id. For SchemeVault, Name is the path
// (with any #field). For SchemeEnv, Name is the variable.
type Ref struct {
	Scheme string
	Tenant string
	Name   string
}

var (
	secretName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,63}$`)
	tenantName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	vaultPath  = regexp.MustCompile(`^[A-Za-z0-9._/-]{1,255}(#[A-Za-z0-9._-]{1,63})?$`)
	envVar     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,254}$`)
)

// Parse parses s; ok is false when s is not a well-formed reference.
func Parse(s string) (ref Ref, ok bool) {
	scheme, rest, found := strings.Cut(s, "://")
	if !found {
		return Ref{}, false
	}
	switch scheme {
	case SchemeSecret:
		tenant, name, two := strings.Cut(rest, "/")
		if !two {
			tenant, name = "", rest
		} else if !tenantName.MatchString(tenant) {
			return Ref{}, false
		}
		if !secretName.MatchString(name) {
			return Ref{}, false
		}
		return Ref{Scheme: scheme, Tenant: tenant, Name: name}, true
	case SchemeVault:
		if !vaultPath.MatchString(rest) {
			return Ref{}, false
		}
		return Ref{Scheme: scheme, Name: rest}, true
	case SchemeEnv:
		if !envVar.MatchString(rest) {
			return Ref{}, false
		}
		return Ref{Scheme: scheme, Name: rest}, true
	}
	return Ref{}, false
}

// IsRef reports whether s is a well-formed reference.
func IsRef(s string) bool {
	_, ok := Parse(s)
	return ok
}

// CredentialConfigKey reports whether a provider account config key names a credential: it
// contains, in any case, token, password, secret, key or credentials.
func CredentialConfigKey(key string) bool {
	k := strings.ToLower(key)
	for _, w := range []string{"token", "password", "secret", "key", "credentials"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// CredentialEnvName reports whether an environment variable name names a credential: it
// contains, in any case, TOKEN, PASSWORD, SECRET, KEY or CREDENTIAL.
func CredentialEnvName(name string) bool {
	n := strings.ToUpper(name)
	for _, w := range []string{"TOKEN", "PASSWORD", "SECRET", "KEY", "CREDENTIAL"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
