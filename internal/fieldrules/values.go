package fieldrules

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/cubefleet/cubefleet/internal/secretref"
)

// StoreSecret is the fix for a literal secret where a reference belongs.
const StoreSecret = "store it with `cubefleet secrets create` and reference it as secret://NAME (or vault://PATH#field; env://NAME in the root tenant, for variables the operator allows)"

// CheckValueLen returns what is wrong with v as a value of a provider account's config or a
// template's env, or "" when nothing is: it holds at most MaxValueLen characters.
func CheckValueLen(v string) string {
	if len(v) > MaxValueLen { // more bytes than allowed characters: count them
		if n := utf8.RuneCountInString(v); n > MaxValueLen {
			return fmt.Sprintf("the value is %d characters long; at most %d are allowed", n, MaxValueLen)
		}
	}
	return ""
}

// CheckCredential returns what is wrong with v as the value under key in a provider account's
// config or a template's env, or "" when nothing is: when key names a credential
// (secretref.IsCredentialName), v is a well-formed secret reference. The message names key and
// never repeats v, which may be a literal secret.
func CheckCredential(key, v string) string {
	if !secretref.IsCredentialName(key) || secretref.IsRef(v) {
		return ""
	}
	for _, scheme := range []string{secretref.SchemeSecret, secretref.SchemeVault, secretref.SchemeEnv} {
		if strings.HasPrefix(v, scheme+":") {
			return key + " is not a well-formed secret reference; write it as " + secretref.Forms
		}
	}
	return key + " names a credential, so its value must be a secret reference, not a literal secret: " + StoreSecret
}

// TooMany returns the message for a list or map at path that holds n entries where at most max
// are allowed ("items" or "keys").
func TooMany(path string, n, max int, what string) string {
	return fmt.Sprintf("%s has %d %s; at most %d are allowed", path, n, what, max)
}

// CheckSecretRef returns what is wrong with v, the value under key in a provider account's config
// or a template's env of tenant, as a secret reference, or "" when nothing is (v that is no
// reference at all included; see CheckCredential for keys that need one): a secret:// reference
// names tenant's own secret store (secret://NAME, or secret://TENANT/NAME with tenant) and a
// secret that has reports the store holds (has looks a name or id up; its error is returned); a
// vault:// reference needs a Vault server (vault). The compute API refuses such a value and a fleet
// plan blocks on it, with the same message.
func CheckSecretRef(key, v, tenant string, vault bool, has func(nameOrID string) (bool, error)) (string, error) {
	ref, ok := secretref.Parse(v)
	if !ok {
		return "", nil
	}
	switch ref.Scheme {
	case secretref.SchemeSecret:
		if ref.Tenant != "" && ref.Tenant != tenant {
			return fmt.Sprintf("%s names tenant %s's secrets; an object may use only its own tenant's: store the secret in tenant %s and write secret://%s", key, ref.Tenant, tenant, ref.Name), nil
		}
		found, err := has(ref.Name)
		if err != nil || found {
			return "", err
		}
		return fmt.Sprintf("%s: tenant %s has no secret %s; create it with `cubefleet secrets create %s --tenant %s`", key, tenant, ref.Name, ref.Name, tenant), nil
	case secretref.SchemeVault:
		if !vault {
			return key + ": vault:// references need a Vault server (start the server with --vault-addr), or use secret:// or env://", nil
		}
	}
	return "", nil
}

// EnvRefRule says in words who may use env:// references: they read the server's own
// environment, so they are the operator's.
const EnvRefRule = "env:// references read the server's own environment, so only the root tenant may use them, and only for the variables the operator allows (cubefleet server --env-ref-allow PREFIX)"

// EnvRefs is the rule of env:// references (EnvRefRule): only the root tenant's objects hold
// them, and only for variables whose names start with one of Allow (--env-ref-allow, none by
// default). The compute API refuses any other env:// reference in a provider account's config
// or a template's env, and a fleet plan refuses a document that holds one, with the same
// message (INVALID_INPUT at the entry's path). Make one with ParseEnvRefs.
type EnvRefs struct {
	// Allow lists the prefixes of the variable names env:// references may name, matched with
	// case; empty allows none.
	Allow []string
}

// envPrefixRE is what an --env-ref-allow prefix looks like: the start of a variable name.
var envPrefixRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseEnvRefs returns the rule of the --env-ref-allow prefixes given. A prefix is the start of
// an environment variable name: a letter or '_', then letters, digits or '_'. Errors name the
// flag and the bad prefix.
func ParseEnvRefs(prefixes []string) (EnvRefs, error) {
	for _, p := range prefixes {
		if !envPrefixRE.MatchString(p) {
			return EnvRefs{}, fmt.Errorf("--env-ref-allow %q: give the start of environment variable names (a letter or _, then letters, digits or _), such as IONOS_", p)
		}
	}
	return EnvRefs{Allow: append([]string(nil), prefixes...)}, nil
}

// Check returns what is wrong with v, the value under key in a provider account's config or a
// template's env of an object of the root tenant (root) or of another, as an env:// reference,
// or "" when nothing is (v that is no env:// reference included). The message names key, the
// rule and the fix; it repeats the variable's name, never a value.
func (e EnvRefs) Check(key, v string, root bool) string {
	ref, ok := secretref.Parse(v)
	if !ok || ref.Scheme != secretref.SchemeEnv {
		return ""
	}
	if !root {
		return key + ": " + EnvRefRule + "; store the value with `cubefleet secrets create` and write secret://NAME"
	}
	for _, p := range e.Allow {
		if strings.HasPrefix(ref.Name, p) {
			return ""
		}
	}
	if len(e.Allow) == 0 {
		return fmt.Sprintf("%s: env://%s is not allowed: %s; this server allows none", key, ref.Name, EnvRefRule)
	}
	return fmt.Sprintf("%s: env://%s is not allowed: %s; this server allows the variables starting with %s", key, ref.Name, EnvRefRule, strings.Join(e.Allow, ", "))
}

// MaxQuoted is how many characters of a caller's value Quoted keeps (64).
const MaxQuoted = 64

// Quoted is v quoted for a message, cut at MaxQuoted characters with "…" (the rest is not
// echoed: an error never carries kilobytes of what the caller sent).
func Quoted(v string) string {
	if r := []rune(v); len(r) > MaxQuoted {
		return fmt.Sprintf("%q", string(r[:MaxQuoted-1])) + "…"
	}
	return fmt.Sprintf("%q", v)
}
