package document

import (
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestImageIDMatchesItsRegexp: isImageID, which Validate runs, accepts exactly what
// imageIDPattern, which the JSON Schema publishes, accepts.
func TestImageIDMatchesItsRegexp(t *testing.T) {
	re := regexp.MustCompile(imageIDPattern)
	var chars []string
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if unicode.In(r, unicode.Cc, unicode.Z) || r < 0x100 || r%997 == 0 {
			chars = append(chars, string(r))
		}
	}
	chars = append(chars, "\xff", "\xc3", "\xed\xa0\x80", string(utf8.RuneError))
	var inputs []string
	for _, c := range chars {
		inputs = append(inputs, c, "a"+c, c+"a", "a"+c+"b")
	}
	for _, n := range []int{0, 1, 254, 255, 256} {
		for _, c := range []string{"i", "é", "😀", "\xff"} {
			inputs = append(inputs, strings.Repeat(c, n), strings.Repeat(c, n)+"\n", "\t"+strings.Repeat(c, n))
		}
	}
	for _, s := range inputs {
		if got, want := isImageID(s), re.MatchString(s); got != want {
			t.Errorf("isImageID(%q) = %v, the regexp says %v", s, got, want)
		}
	}
}
