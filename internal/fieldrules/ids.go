package fieldrules

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxIDLen is the most characters (code points) of an id a caller chooses.
const MaxIDLen = 128

// IDRule is the rule of an id a caller chooses for something the control plane records and a
// node may name a directory after (a sandbox id), in words.
const IDRule = "1-128 characters of UTF-8 without whitespace, control or format characters (bidi, zero-width), '/', '\\' or '..'"

// CheckID returns what is wrong with v as an id a caller chooses (IDRule), or "" when nothing
// is. The message never repeats v: it may hold the very characters a terminal would act on.
func CheckID(v string) string {
	switch {
	case v == "":
		return "must not be empty: " + IDRule
	case !utf8.ValidString(v):
		return "is not valid UTF-8: " + IDRule
	case strings.Contains(v, ".."):
		return "must not contain '..': " + IDRule
	case strings.ContainsAny(v, `/\`):
		return "must not contain '/' or '\\': " + IDRule
	}
	n := 0
	for i, r := range v {
		n++
		if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Z) || unicode.IsSpace(r) {
			return fmt.Sprintf("holds the character U+%04X at byte %d: %s", r, i, IDRule)
		}
	}
	if n > MaxIDLen {
		return fmt.Sprintf("is %d characters long; at most %d: %s", n, MaxIDLen, IDRule)
	}
	return ""
}
