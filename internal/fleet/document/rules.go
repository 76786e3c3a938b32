package document

import (
	"regexp"

	"github.com/cubefleet/cubefleet"
)

// The limits of a version 1 document (specs/fleet-config.md, "The document"). Schema() and
// Validate both read them, so the two cannot drift apart.
const (
	version     = 1
	maxItems    = 1000    // items in every list
	maxKeys     = 256     // keys in every map
	maxValueLen = 4096    // characters in a config or env value
	maxQuota    = 1 << 53 // largest quota, the largest integer JSON carries exactly
	maxPriority = 1000
	maxWarm     = 1000
	maxDepth    = 32  // nesting of arrays and objects Decode accepts
	maxErrors   = 200 // problems Decode lists before "...and N more"
)

// Integer ranges of a flavor.
const (
	maxVCPU      = 4096
	maxMemoryGiB = 65536
	maxDiskGiB   = 1048576
	maxGPU       = 64
)

// The patterns of the document's strings, shared by the validator and the JSON Schema. Every
// one is anchored, and every one means the same in Go's RE2 and in ECMA-262 (the dialect JSON
// Schema names).
const (
	namePattern      = `^[a-z0-9][a-z0-9._-]{0,62}$`
	idTail           = `_[0-9A-HJKMNP-TV-Z]{26}`
	siteRefPattern   = `^(?:[a-z0-9][a-z0-9._-]{0,62}|site` + idTail + `)$`
	poolRefPattern   = `^(?:[a-z0-9][a-z0-9._-]{0,62}|pool` + idTail + `)$`
	regionPattern    = `^[a-z0-9][a-z0-9-]{0,62}$`
	gpuModelPattern  = `^[A-Za-z0-9._-]{1,63}$`
	configKeyPattern = `^[A-Za-z0-9_.-]{1,63}$`
	resourcePattern  = `^[A-Za-z][A-Za-z0-9._-]{0,63}$`
	envNamePattern   = `^[A-Za-z_][A-Za-z0-9_]{0,254}$`
	imageIDPattern   = `^[^\p{Cc}\p{Z}]{1,255}$`
	// secretRefPattern: secret://NAME, secret://TENANT/NAME, vault://PATH[#field], env://NAME.
	// A vault path and field are printable ASCII without space or '#'.
	secretRefPattern = `^(?:secret://(?:[A-Za-z0-9._-]{1,63}/)?[A-Za-z0-9._-]{1,63}` +
		`|vault://[!-"$-~]+(?:#[!-"$-~]+)?` +
		`|env://[A-Za-z_][A-Za-z0-9_]*)$`
	// secretKeyPattern matches a config key or env name that names a credential, in any case.
	// It is spelled without flags so that ECMA-262 reads it the same.
	secretKeyPattern = `[Tt][Oo][Kk][Ee][Nn]|[Pp][Aa][Ss][Ss][Ww][Oo][Rr][Dd]|[Ss][Ee][Cc][Rr][Ee][Tt]` +
		`|[Kk][Ee][Yy]|[Cc][Rr][Ee][Dd][Ee][Nn][Tt][Ii][Aa][Ll]`
)

// The simple patterns run without the regexp engine (Validate matches thousands of strings per
// document); TestPatternsMatchTheirRegexps proves each equals its pattern above.
var (
	nameMatcher      = newASCII("a-z0-9", "a-z0-9._-", 63)
	regionMatcher    = newASCII("a-z0-9", "a-z0-9-", 63)
	gpuModelMatcher  = newASCII("A-Za-z0-9._-", "A-Za-z0-9._-", 63)
	configKeyMatcher = newASCII("A-Za-z0-9_.-", "A-Za-z0-9_.-", 63)
	resourceMatcher  = newASCII("A-Za-z", "A-Za-z0-9._-", 64)
	envNameMatcher   = newASCII("A-Za-z_", "A-Za-z0-9_", 255)

	imageIDRE   = regexp.MustCompile(imageIDPattern)
	secretRefRE = regexp.MustCompile(secretRefPattern)
)

// asciiPattern matches ^[first][rest]{0,max-1}$ for classes of ASCII characters.
type asciiPattern struct {
	first, rest [256]bool
	max         int // length in bytes, the first included
}

// newASCII builds an asciiPattern from classes written as in a regexp: "a-z0-9._-".
func newASCII(first, rest string, max int) *asciiPattern {
	return &asciiPattern{first: asciiClass(first), rest: asciiClass(rest), max: max}
}

func asciiClass(spec string) (set [256]bool) {
	for i := 0; i < len(spec); i++ {
		if i+2 < len(spec) && spec[i+1] == '-' {
			for c := int(spec[i]); c <= int(spec[i+2]); c++ {
				set[c] = true
			}
			i += 2
			continue
		}
		set[spec[i]] = true
	}
	return set
}

func (p *asciiPattern) match(s string) bool {
	if len(s) == 0 || len(s) > p.max || !p.first[s[0]] {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !p.rest[s[i]] {
			return false
		}
	}
	return true
}

func isRegion(s string) bool    { return regionMatcher.match(s) }
func isGPUModel(s string) bool  { return gpuModelMatcher.match(s) }
func isConfigKey(s string) bool { return configKeyMatcher.match(s) }
func isResource(s string) bool  { return resourceMatcher.match(s) }
func isEnvName(s string) bool   { return envNameMatcher.match(s) }

// The enumerations of the document.
var (
	siteKinds  = []string{"shared", "dedicated"}
	providers  = []string{"hetzner-cloud", "ionos-cloud"}
	poolClass  = []string{"vps-host", "provider"}
	networks   = []string{"private", "public"}
	secretWord = []string{"token", "password", "secret", "key", "credential"}
)

// The fixes the messages suggest, shared so that every message says the same thing.
const (
	nameRule      = "1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit"
	storeSecret   = "store it with `cubefleet secrets create` and reference it as secret://NAME (or vault://PATH#field, env://NAME)"
	secretRefRule = "secret://NAME, secret://TENANT/NAME, vault://PATH[#field] or env://NAME"
)

// IsSecretRef reports whether s is a well-formed secret reference (specs/fleet-config.md,
// "The document"; DESIGN.md, "Secrets and private files"): `secret://NAME` or
// `secret://TENANT/NAME` (each 1-63 of A-Z, a-z, 0-9, '.', '_', '-', so an id such as sec_01...
// fits), `vault://PATH` with an optional `#field` (printable ASCII without spaces or '#'), or
// `env://NAME` (a letter or '_', then letters, digits or '_').
func IsSecretRef(s string) bool { return secretRefRE.MatchString(s) }

// SecretBearingConfigKey reports whether a provider account config key names a credential: it
// contains, in any case, token, password, secret, key or credential. The value of such a key must
// be a secret reference (see IsSecretRef); the planner also uses it to mask values it shows.
func SecretBearingConfigKey(key string) bool { return containsSecretWord(key) }

// SecretBearingEnvName reports whether a sandbox template env variable names a credential: its
// name contains, in any case, TOKEN, PASSWORD, SECRET, KEY or CREDENTIAL. The value of such a
// variable must be a secret reference (see IsSecretRef).
func SecretBearingEnvName(name string) bool { return containsSecretWord(name) }

// containsSecretWord folds ASCII letters only, as secretKeyPattern does.
func containsSecretWord(s string) bool {
	for i := 0; i < len(s); i++ {
		for _, w := range secretWord {
			if hasLowerPrefixFold(s[i:], w) {
				return true
			}
		}
	}
	return false
}

// hasLowerPrefixFold reports whether s starts with prefix (lower-case ASCII), ignoring the case
// of ASCII letters in s.
func hasLowerPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for j := 0; j < len(prefix); j++ {
		c := s[j]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[j] {
			return false
		}
	}
	return true
}

// isName reports whether s is a document name.
func isName(s string) bool { return nameMatcher.match(s) }

// isSiteRef reports whether s names a site: a name or a site id.
func isSiteRef(s string) bool { return isName(s) || cubefleet.IsID(s, "site") }

// isPoolRef reports whether s names a pool: a name or a pool id.
func isPoolRef(s string) bool { return isName(s) || cubefleet.IsID(s, "pool") }

func oneOf(s string, allowed []string) bool {
	for _, a := range allowed {
		if s == a {
			return true
		}
	}
	return false
}
