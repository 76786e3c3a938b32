package fieldrules

import (
	"errors"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/cubefleet/cubefleet/internal/secretref"
)

// patterns is every Pattern of the table, by name.
var patterns = map[string]*Pattern{
	"Name": Name, "Region": Region, "GPUModel": GPUModel, "ConfigKey": ConfigKey,
	"Resource": Resource, "EnvName": EnvName, "ImageID": ImageID,
}

// TestASCIIMatchersMatchTheirRegexps: the matchers accept exactly what their regular
// expressions accept, on every string of up to 3 characters of an alphabet of edge cases, and on
// random strings around each length limit.
func TestASCIIMatchersMatchTheirRegexps(t *testing.T) {
	alphabet := []string{"a", "z", "A", "Z", "0", "9", ".", "_", "-", "/", ":", " ", "é", "\x00", "\n", "K", "\xff"}
	var inputs []string
	var grow func(prefix string, n int)
	grow = func(prefix string, n int) {
		inputs = append(inputs, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			grow(prefix+c, n-1)
		}
	}
	grow("", 3)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{26, 27, 31, 62, 63, 64, 65, 254, 255, 256} {
		for range 300 {
			var b strings.Builder
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
			for b.Len() < n {
				if rng.IntN(40) == 0 {
					b.WriteString(alphabet[rng.IntN(len(alphabet))])
				} else {
					b.WriteString(alphabet[rng.IntN(9)]) // mostly valid characters
				}
			}
			inputs = append(inputs, b.String())
		}
	}
	for name, p := range patterns {
		re := regexp.MustCompile(p.Pattern())
		for _, s := range inputs {
			if got, want := p.Match(s), re.MatchString(s); got != want {
				t.Errorf("%s (%s): Match(%q) = %v, the regexp says %v", name, p.Pattern(), s, got, want)
			}
		}
	}
}

// TestImageIDIsNoControlOrSpace: ImageID's matcher and its portable regular expression both
// accept exactly the strings of 1-255 characters with no character of \p{Cc} or \p{Z}, for every
// code point alone and inside other characters.
func TestImageIDIsNoControlOrSpace(t *testing.T) {
	exact := regexp.MustCompile(`^[^\p{Cc}\p{Z}]{1,255}$`)
	portable := regexp.MustCompile(ImageID.Pattern())
	check := func(s string) {
		want := exact.MatchString(s)
		if got := ImageID.Match(s); got != want {
			t.Errorf("ImageID.Match(%q) = %v, want %v", s, got, want)
		}
		if got := portable.MatchString(s); got != want {
			t.Errorf("the portable pattern on %q = %v, want %v", s, got, want)
		}
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		c := string(r)
		check(c)
		if unicode.In(r, unicode.Cc, unicode.Z) || r < 0x100 || r%997 == 0 {
			check("a" + c)
			check(c + "a")
			check("a" + c + "b")
		}
	}
	for _, c := range []string{"\xff", "\xc3", "\xed\xa0\x80", string(utf8.RuneError)} {
		check(c)
		check("a" + c + "b")
	}
	for _, n := range []int{0, 1, 254, 255, 256} {
		for _, c := range []string{"i", "é", "😀", "\xff"} {
			check(strings.Repeat(c, n))
			check(strings.Repeat(c, n) + "\n")
			check("\t" + strings.Repeat(c, n))
		}
	}
	for _, bad := range []string{"img\u00a0x", "img\x00x", "img x", "img\u2028x", "img\u0085x", "img\u3000x", "img\u007fx"} {
		if ImageID.Match(bad) {
			t.Errorf("ImageID accepts %q", bad)
		}
	}
}

func TestEveryPatternIsPortable(t *testing.T) {
	for name, p := range patterns {
		if err := Portable(p.Pattern()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, re := range []string{secretref.Pattern, secretref.CredentialPattern} {
		if err := Portable(re); err != nil {
			t.Errorf("secretref: %v", err)
		}
	}
}

func TestPortable(t *testing.T) {
	good := []string{
		`^[a-z0-9][a-z0-9._-]{0,62}$`,
		`^(secret://([A-Za-z0-9._-]{1,63}/)?[A-Za-z0-9._-]{1,63}|env://[A-Za-z_][A-Za-z0-9_]*)$`,
		`^[^\x00-\x20\x7F-\xA0` + "\u1680" + `]{1,255}$`,
		`^a\.b\/c\+$`,
		`[-a]`, `[a-]`, `[\-a]`, `[!-"$-~]+`, `^(a|b|)$`, `x{3}`, `x{3,}`,
	}
	for _, re := range good {
		if err := Portable(re); err != nil {
			t.Errorf("Portable(%q) = %v, want nil", re, err)
		}
	}
	bad := map[string]string{
		`^[^\p{Cc}\p{Z}]$`: `\p`,
		`^\d+$`:            `\d`,
		`^\w$`:             `\w`,
		`^\s$`:             `\s`,
		`^\S{1,255}$`:      `\S`,
		`^(?:a|b)$`:        "(?",
		`(?i)abc`:          "(?",
		`a(?=b)`:           "(?",
		`a(?!b)`:           "(?",
		`\Aabc\z`:          `\A`,
		`abc\Z`:            `\Z`,
		`\babc`:            `\b`,
		`a.b`:              "'.'",
		`\u0041`:           `\u`,
		`\x{41}`:           `\x`,
		`[[:alpha:]]`:      "'['",
		`a*?`:              "quantifier after a quantifier",
		`a{2}{3}`:          "", // Go's parser refuses it first
		`a++`:              "", // Go's parser refuses it first
		`a{1,2000}`:        "", // Go's parser refuses it first
		`[a-z&&b]`:         "doubled",
		`[a--z]`:           "", // Go's parser refuses it first
		`[a-c-e]`:          "right after a range",
		`(a)\1`:            `\1`,
		`\-`:               `\-`,
		"^\U0001F600$":     "Basic Multilingual Plane",
		`[z-a]`:            "", // Go's parser refuses it first
		`a)`:               "",
		`*a`:               "",
	}
	for re, want := range bad {
		err := Portable(re)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Portable(%q) = %v, want an error saying %q", re, err, want)
		}
	}
}

func TestMapValue(t *testing.T) {
	cases := []struct{ key, value, want string }{
		{"location", "fsn1", ""},
		{"location", "", ""},
		{"location", strings.Repeat("é", MaxValueLen), ""},
		{"location", strings.Repeat("é", MaxValueLen+1), "4097 characters long"},
		{"token", "secret://hetzner", ""},
		{"API_TOKEN", "env://API_TOKEN", ""},
		{"password", "vault://kv/ionos#password", ""},
		{"token", "hunter2", "names a credential"},
		{"token", "secret:/hetzner", "not a well-formed secret reference"},
		{"MODE", "secret:/x", ""},
	}
	for _, c := range cases {
		got := CheckValueLen(c.value)
		if got == "" {
			got = CheckCredential(c.key, c.value)
		}
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%q: %.20q: %q, want %q", c.key, c.value, got, c.want)
		}
		if got != "" && c.value != "" && strings.Contains(got, c.value) {
			t.Errorf("%q: the message repeats the value: %q", c.key, got)
		}
	}
}

func TestRangesAndEnums(t *testing.T) {
	if !VCPU.Contains(1) || !VCPU.Contains(4096) || VCPU.Contains(0) || VCPU.Contains(4097) {
		t.Errorf("VCPU = %+v", VCPU)
	}
	if Quota.Max != 9007199254740992 || !Quota.Contains(1<<53) || Quota.Contains(1<<53+1) || Quota.Contains(-1) {
		t.Errorf("Quota = %+v", Quota)
	}
	if got := VCPU.Rule(); got != "a whole number from 1 to 4096 (virtual CPUs)" {
		t.Errorf("VCPU.Rule() = %q", got)
	}
	if got := SiteKinds.Rule(); got != "shared or dedicated" {
		t.Errorf("SiteKinds.Rule() = %q", got)
	}
	v := Networks.Values()
	v[0] = "mutated"
	if !Networks.Has("private") || Networks.Has("mutated") || Networks.Has("") {
		t.Errorf("Networks = %v", Networks.Values())
	}
	for _, b := range []float64{0, 0.1, 1} {
		if !ValidDisruptionBudget(b) {
			t.Errorf("ValidDisruptionBudget(%v) = false", b)
		}
	}
	for _, b := range []float64{-0.01, 1.0001} {
		if ValidDisruptionBudget(b) {
			t.Errorf("ValidDisruptionBudget(%v) = true", b)
		}
	}
}

func TestCheckSecretRef(t *testing.T) {
	has := func(name string) (bool, error) {
		return name == "hetzner" || name == "sec_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5", nil
	}
	cases := []struct {
		value string
		vault bool
		want  string
	}{
		{"fsn1", false, ""},
		{"hunter2", false, ""},
		{"env://TOKEN", false, ""},
		{"secret://hetzner", false, ""},
		{"secret://root/hetzner", false, ""},
		{"secret://sec_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5", false, ""},
		{"secret://nope", false, "tenant root has no secret nope"},
		{"secret://acme/hetzner", false, "names tenant acme's secrets"},
		{"vault://kv/x#token", false, "--vault-addr"},
		{"vault://kv/x#token", true, ""},
	}
	for _, c := range cases {
		got, err := CheckSecretRef("token", c.value, "root", c.vault, has)
		if err != nil || c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("CheckSecretRef(%q, vault %v) = %q, %v; want %q", c.value, c.vault, got, err, c.want)
		}
	}
	boom := errors.New("boom")
	if _, err := CheckSecretRef("token", "secret://x", "root", false, func(string) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("a failed look-up gives %v, want it returned", err)
	}
}

// TestEnvRefs: env:// references are the operator's: only the root tenant's objects hold them,
// and only for the variables --env-ref-allow lets through (none by default). Other values are
// not this rule's business.
func TestEnvRefs(t *testing.T) {
	allowed, err := ParseEnvRefs([]string{"IONOS_", "HCLOUD_TOKEN"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rule  EnvRefs
		value string
		root  bool
		want  string // "" or a word of the message
	}{
		{EnvRefs{}, "secret://x", false, ""},
		{EnvRefs{}, "hunter2", false, ""},
		{EnvRefs{}, "env:/HOME", false, ""}, // not a reference: CheckCredential's business
		{EnvRefs{}, "env://HOME", false, "only the root tenant"},
		{allowed, "env://IONOS_TOKEN", false, "only the root tenant"},
		{EnvRefs{}, "env://IONOS_TOKEN", true, "allows none"},
		{allowed, "env://IONOS_TOKEN", true, ""},
		{allowed, "env://HCLOUD_TOKEN", true, ""},
		{allowed, "env://HOME", true, "IONOS_, HCLOUD_TOKEN"},
		{allowed, "env://ionos_TOKEN", true, "--env-ref-allow"},
	} {
		got := c.rule.Check("token", c.value, c.root)
		if c.want == "" && got != "" || c.want != "" && (!strings.Contains(got, c.want) || !strings.Contains(got, "token")) {
			t.Errorf("%v.Check(%q, root %v) = %q, want %q", c.rule.Allow, c.value, c.root, got, c.want)
		}
	}
	for _, bad := range []string{"", "*", "IONOS-", "1X", "A B"} {
		if _, err := ParseEnvRefs([]string{bad}); err == nil || !strings.Contains(err.Error(), "--env-ref-allow") {
			t.Errorf("ParseEnvRefs(%q) = %v, want an error naming --env-ref-allow", bad, err)
		}
	}
}
