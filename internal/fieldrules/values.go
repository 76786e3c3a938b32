package fieldrules

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cubefleet/cubefleet/internal/secretref"
)

// StoreSecret is the fix for a literal secret where a reference belongs.
const StoreSecret = "store it with `cubefleet secrets create` and reference it as secret://NAME (or vault://PATH#field, env://NAME)"

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
