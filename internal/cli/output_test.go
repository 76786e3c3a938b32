package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSafeText(t *testing.T) {
	for in, want := range map[string]string{
		"":                                 "",
		"10.0.0.7":                         "10.0.0.7",
		"Grüße, 東京 \\x1b stays":            "Grüße, 東京 \\x1b stays", // backslashes are kept
		"x\x1b[31mRED\nFAKE 1.2.3.4 Ready": `x\x1b[31mRED\nFAKE 1.2.3.4 Ready`,
		"a\rb\tc\x00d\x7fe":                `a\rb\tc\x00d\x7fe`,
		"c1 \u0085 \u009b31m":              `c1 \u0085 \u009b31m`,
		"bidi \u202aa\u202bb\u202cc\u202dd\u202ee": `bidi \u202aa\u202bb\u202cc\u202dd\u202ee`,
		"isolates \u2066\u2067\u2068\u2069":        `isolates \u2066\u2067\u2068\u2069`,
		"marks \u200e\u200f\u061c":                 `marks \u200e\u200f\u061c`,
		"lines \u2028\u2029":                       `lines \u2028\u2029`,
		"zero\u200bwidth\u200c\u200d\u2060\ufeff":  `zero\u200bwidth\u200c\u200d\u2060\ufeff`,
		"bad \xff\xfe utf-8":                       `bad \xff\xfe utf-8`,
		"a real \ufffd stays":                      "a real \ufffd stays",
	} {
		if got := safeText(in); got != want {
			t.Errorf("safeText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHumanOutputIsEscaped checks the output layer's three writers: table cells, "key: value"
// lines and linef's string and error arguments (the format is trusted).
func TestHumanOutputIsEscaped(t *testing.T) {
	type state string
	var b bytes.Buffer
	printTable(&b, []string{"NODE", "STATE"}, [][]string{{"n\x1b[2J", "Ready\nFAKE"}})
	printFields(&b, 6, [][2]string{{"Label", "x\u202ey"}})
	linef(&b, "Cordoned node %s: %s (%v, %d).\n", "a\nb", state("S\tt"), errors.New("e\x1b"), 3)
	want := "NODE      STATE\n" +
		`n\x1b[2J` + "  " + `Ready\nFAKE` + "\n" +
		`Label: x\u202ey` + "\n" +
		`Cordoned node a\nb: S\tt (e\x1b, 3).` + "\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestCompareNodeIDs(t *testing.T) {
	ids := []string{"cube-b", "127.0.0.200", "fd00::2", "127.0.0.50", "", "cube-a", "10.0.0.7", "fd00::10", "::ffff:1.2.3.4", "9.9.9.9", "10.0.0.07"}
	slices.SortFunc(ids, compareNodeIDs)
	want := []string{"9.9.9.9", "10.0.0.7", "127.0.0.50", "127.0.0.200", "::ffff:1.2.3.4", "fd00::2", "fd00::10", "", "10.0.0.07", "cube-a", "cube-b"}
	if !slices.Equal(ids, want) {
		t.Errorf("sorted %q\nwant   %q", ids, want)
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"10m":                  now.Add(-10 * time.Minute),
		"2h":                   now.Add(-2 * time.Hour),
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"2026-01-01T00:00:00Z": time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got, err := parseSince(in, now); err != nil || got != want.UnixMilli() {
			t.Errorf("parseSince(%q) = %d, %v; want %d", in, got, err, want.UnixMilli())
		}
	}
	if got, err := parseSince("", now); got != 0 || err != nil {
		t.Errorf("parseSince(\"\") = %d, %v", got, err)
	}
	for _, bad := range []string{"yesterday", "-5m", "0s", "2026-01-01"} {
		var u usageError
		if _, err := parseSince(bad, now); !errors.As(err, &u) {
			t.Errorf("parseSince(%q): %v, want a usage error", bad, err)
		}
	}
}

func TestWithError(t *testing.T) {
	e := errorJSON{Code: "CONFLICT", Message: "m"}
	for _, c := range []struct {
		r    *jsonResult
		want string
	}{
		{&jsonResult{}, `{"error":{"code":"CONFLICT","message":"m"}}`},
		{&jsonResult{v: map[string]any{"id": "n", "now": 1}, set: true}, `{"id":"n","now":1,"error":{"code":"CONFLICT","message":"m"}}`},
		{&jsonResult{v: struct{}{}, set: true}, `{"error":{"code":"CONFLICT","message":"m"}}`},
		{&jsonResult{v: []string{"a"}, set: true}, `{"result":["a"],"error":{"code":"CONFLICT","message":"m"}}`},
		{&jsonResult{v: map[string]any{"error": "x"}, set: true}, `{"result":{"error":"x"},"error":{"code":"CONFLICT","message":"m"}}`},
	} {
		b, err := json.Marshal(withError(c.r, e))
		if err != nil || string(b) != c.want {
			t.Errorf("withError(%+v) = %s, %v; want %s", c.r.v, b, err, c.want)
		}
	}
}

func TestJSONRequested(t *testing.T) {
	for args, want := range map[string]bool{
		"tenants list -o json":               true,
		"tenants list -ojson":                true,
		"tenants list -o=json":               true,
		"tenants list --output json":         true,
		"tenants list --output=json":         true,
		"tenants list -o json -o table":      false,
		"tenants list":                       false,
		"tenants list --output yaml":         false,
		"nodes label n -- -o json":           false,
		"tenants list --bogus --output json": true,
	} {
		if got := jsonRequested(nil, strings.Fields(args)); got != want {
			t.Errorf("jsonRequested(%s) = %v, want %v", args, got, want)
		}
	}
}
