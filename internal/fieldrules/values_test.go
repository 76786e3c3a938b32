package fieldrules

import (
	"strings"
	"testing"
)

func TestQuoted(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"py", `"py"`},
		{strings.Repeat("x", MaxQuoted), `"` + strings.Repeat("x", MaxQuoted) + `"`},
		{strings.Repeat("é", 5000), `"` + strings.Repeat("é", MaxQuoted-1) + `"…`},
	} {
		if got := Quoted(c.in); got != c.want {
			t.Errorf("Quoted(%d characters) = %q, want %q", len([]rune(c.in)), got, c.want)
		}
	}
}
