package document

import (
	"unicode"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/secretref"
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
	// secretRefPattern and secretKeyPattern come from package secretref, so the document, the
	// schema and the compute API agree on what a reference and a credential name are.
	secretRefPattern = secretref.Pattern
	secretKeyPattern = secretref.CredentialPattern
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

// isImageID matches imageIDPattern, ^[^\p{Cc}\p{Z}]{1,255}$: 1-255 characters, none a control
// character or a Unicode space separator. Like the regexp, it reads a byte that is not UTF-8 as
// one character, U+FFFD.
func isImageID(s string) bool {
	n := 0
	for _, r := range s {
		if n++; n > 255 || unicode.In(r, unicode.Cc, unicode.Z) {
			return false
		}
	}
	return n > 0
}

// The enumerations of the document.
var (
	siteKinds = []string{"shared", "dedicated"}
	providers = []string{"hetzner-cloud", "ionos-cloud"}
	poolClass = []string{"vps-host", "provider"}
	networks  = []string{"private", "public"}
)

// The fixes the messages suggest, shared so that every message says the same thing.
const (
	nameRule      = "1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit"
	storeSecret   = "store it with `cubefleet secrets create` and reference it as secret://NAME (or vault://PATH#field, env://NAME)"
	secretRefRule = "secret://NAME, secret://TENANT/NAME, vault://PATH[#field] or env://NAME"
)

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
