package fieldrules

import (
	"strings"
	"testing"
)

func TestCheckID(t *testing.T) {
	for _, c := range []struct {
		id, want string // want: a part of the problem, "" for a valid id
	}{
		{"sbx-1", ""},
		{"sbx_01J8ZQ.a-b", ""},
		{"ünïcode-✓", ""},
		{strings.Repeat("a", MaxIDLen), ""},
		{strings.Repeat("ü", MaxIDLen), ""},
		{"", "must not be empty"},
		{strings.Repeat("a", MaxIDLen+1), "129 characters long"},
		{"a/b", "'/'"},
		{`a\b`, "'/'"},
		{"..", "'..'"},
		{"a..b", "'..'"},
		{"a b", "U+0020"},
		{"a\tb", "U+0009"},
		{"a\nb", "U+000A"},
		{"a\x00b", "U+0000"},
		{"a\x1b[31m", "U+001B"},
		{"a\u0085b", "U+0085"},
		{"a\u202eb", "U+202E"},
		{"a\u2066b", "U+2066"},
		{"a\u200bb", "U+200B"},
		{"a\ufeffb", "U+FEFF"},
		{"a\u2028b", "U+2028"},
		{"a\u00a0b", "U+00A0"},
		{"a\xffb", "not valid UTF-8"},
	} {
		got := CheckID(c.id)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("CheckID(%q) = %q, want %q", c.id, got, c.want)
		}
	}
}

// FuzzCheckID: an id CheckID accepts climbs out of no directory and holds nothing a terminal
// would act on.
func FuzzCheckID(f *testing.F) {
	for _, s := range []string{"sbx-1", "..", "a/b", "a\u202eb", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckID(s) != "" {
			return
		}
		if s == "" || strings.Contains(s, "..") || strings.ContainsAny(s, "/\\\x00\n\r\t\x1b\u202e\u2066\u200b") {
			t.Errorf("CheckID accepted %q", s)
		}
	})
}
