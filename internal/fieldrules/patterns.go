package fieldrules

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The patterns of strings.
var (
	// Name is an object name (provider accounts, flavors, sandbox templates), a name fleet
	// gives a site or pool, and a tenant id: 1-63 of a-z, 0-9, '.', '_', '-', starting with a
	// letter or digit. '/', ':' and ' -> ' never appear in a name, so the composite names of
	// flavors, owner quotas and offers cannot collide.
	Name = ascii("a-z0-9", "a-z0-9._-", 63,
		"1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit")
	// Region is a site's region label, e.g. eu-central.
	Region = ascii("a-z0-9", "a-z0-9-", 63,
		"1-63 lower-case letters, digits or '-', starting with a letter or digit, e.g. eu-central")
	// GPUModel is the GPU model of a pool's hosts, e.g. L40S.
	GPUModel = ascii("A-Za-z0-9._-", "A-Za-z0-9._-", 63,
		"1-63 letters, digits, '.', '_' or '-', e.g. L40S")
	// ConfigKey is a key of a provider account's config.
	ConfigKey = ascii("A-Za-z0-9_.-", "A-Za-z0-9_.-", 63,
		"1-63 letters, digits, '_', '.' or '-'")
	// Resource is a quota's resource name (vcpu, memoryGiB, diskGiB, gpu, sandboxes, ...).
	Resource = ascii("A-Za-z", "A-Za-z0-9._-", 64,
		"a letter, then up to 63 letters, digits, '.', '_' or '-' (vcpu, memoryGiB, diskGiB, gpu, sandboxes)")
	// EnvName is the name of a template's environment variable.
	EnvName = ascii("A-Za-z_", "A-Za-z0-9_", 255,
		"a letter or '_', then up to 254 letters, digits or '_'")
	// ImageID is the image a sandbox template boots: 1-255 characters, none of them a control
	// character (Unicode category Cc) or a space separator (Z: Zs, Zl, Zp), so no whitespace of
	// any kind and no NUL.
	ImageID = &Pattern{
		pattern: "^[^" + classOf(imageIDExcluded) + "]{1," + strconv.Itoa(MaxImageIDLen) + "}$",
		rule:    "1-255 characters without whitespace or control characters, e.g. ubuntu-24.04",
		other:   isImageID,
	}
)

// MaxImageIDLen is the most characters (code points) of an image id.
const MaxImageIDLen = 255

// imageIDExcluded are the characters an image id must not hold.
var imageIDExcluded = []*unicode.RangeTable{unicode.Cc, unicode.Z}

// Pattern is a rule for one string: an anchored regular expression in the portable subset (see
// Portable), the rule in words, and a matcher that checks it without the regexp engine. Match
// and the regular expression accept exactly the same strings (the package's tests check it); a
// byte that is not UTF-8 counts as one character, U+FFFD, as in Go's regexp.
type Pattern struct {
	pattern string
	rule    string
	// The matcher of ^[first][rest]{0,max-1}$ for classes of ASCII characters, or other.
	first, rest [256]bool
	max         int // length in bytes, the first included
	other       func(string) bool
}

// ascii returns the Pattern ^[first][rest]{0,max-1}$, its classes written as in a regular
// expression ("a-z0-9._-": ranges and single characters, '-' last).
func ascii(first, rest string, max int, rule string) *Pattern {
	p := &Pattern{rule: rule, first: asciiClass(first), rest: asciiClass(rest), max: max}
	if first == rest {
		p.pattern = "^[" + rest + "]{1," + strconv.Itoa(max) + "}$"
	} else {
		p.pattern = "^[" + first + "][" + rest + "]{0," + strconv.Itoa(max-1) + "}$"
	}
	return p
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

// Match reports whether s obeys the rule.
func (p *Pattern) Match(s string) bool {
	if p.other != nil {
		return p.other(s)
	}
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

// Pattern returns the anchored regular expression, for JSON Schema's "pattern" and for Go's
// regexp alike.
func (p *Pattern) Pattern() string { return p.pattern }

// Rule returns the rule in words, for messages: "1-63 lower-case letters, ...".
func (p *Pattern) Rule() string { return p.rule }

// isImageID matches ImageID without the regexp engine.
func isImageID(s string) bool {
	n := 0
	for _, r := range s {
		if n++; n > MaxImageIDLen || unicode.In(r, imageIDExcluded...) {
			return false
		}
	}
	return n > 0
}

// classOf writes the characters of tables as the inside of a character class in the portable
// subset: ranges of code points, \xHH for those up to U+00FF, the character itself above. Every
// character must lie in the Basic Multilingual Plane, so that an ECMA-262 validator without the
// u flag, which reads UTF-16 code units, reads each as one.
func classOf(tables []*unicode.RangeTable) string {
	var spans [][2]rune // inclusive
	for _, t := range tables {
		for _, r := range t.R16 {
			spans = stride(spans, rune(r.Lo), rune(r.Hi), rune(r.Stride))
		}
		for _, r := range t.R32 {
			spans = stride(spans, rune(r.Lo), rune(r.Hi), rune(r.Stride))
		}
	}
	slices.SortFunc(spans, func(a, b [2]rune) int { return int(a[0] - b[0]) })
	var merged [][2]rune
	for _, s := range spans {
		if n := len(merged); n > 0 && s[0] <= merged[n-1][1]+1 {
			merged[n-1][1] = max(merged[n-1][1], s[1])
			continue
		}
		merged = append(merged, s)
	}
	var b strings.Builder
	for _, s := range merged {
		if s[1] > 0xFFFF {
			panic("fieldrules: a character class holds a character beyond the Basic Multilingual Plane") // a bug, caught by the tests
		}
		b.WriteString(classChar(s[0]))
		if s[1] > s[0]+1 {
			b.WriteByte('-')
		}
		if s[1] > s[0] {
			b.WriteString(classChar(s[1]))
		}
	}
	return b.String()
}

// stride appends the code points lo, lo+step, ... hi to spans.
func stride(spans [][2]rune, lo, hi, step rune) [][2]rune {
	if step == 1 {
		return append(spans, [2]rune{lo, hi})
	}
	for r := lo; r <= hi; r += step {
		spans = append(spans, [2]rune{r, r})
	}
	return spans
}

func classChar(r rune) string {
	if r <= 0xFF {
		const hex = "0123456789ABCDEF"
		return `\x` + string(hex[r>>4]) + string(hex[r&0xF])
	}
	var buf [utf8.UTFMax]byte
	return string(buf[:utf8.EncodeRune(buf[:], r)])
}
