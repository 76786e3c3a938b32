package document

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestPatternsMatchTheirRegexps: the hand-written matchers Validate uses accept exactly what the
// patterns the JSON Schema publishes accept.
func TestPatternsMatchTheirRegexps(t *testing.T) {
	pairs := []struct {
		pattern string
		match   func(string) bool
	}{
		{namePattern, isName},
		{regionPattern, isRegion},
		{gpuModelPattern, isGPUModel},
		{configKeyPattern, isConfigKey},
		{resourcePattern, isResource},
		{envNamePattern, isEnvName},
		{siteRefPattern, isSiteRef},
		{poolRefPattern, isPoolRef},
	}
	alphabet := []string{"a", "z", "A", "Z", "0", "9", ".", "_", "-", "/", ":", " ", "é", "\x00", "\n", "K"}
	// Every string of up to 3 characters of the alphabet, and random ones around each length limit.
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
			first := alphabet[rng.IntN(len(alphabet))]
			b.WriteString(first)
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
	inputs = append(inputs, "site_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5", "pool_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5", "site_01JQ3ZK4Y6M8N9P0Q1R2S3T4VU", "pool_01jq3zk4y6m8n9p0q1r2s3t4v5")
	for _, pair := range pairs {
		re := regexp.MustCompile(pair.pattern)
		for _, s := range inputs {
			if got, want := pair.match(s), re.MatchString(s); got != want {
				t.Errorf("%s: matcher(%q) = %v, regexp = %v", pair.pattern, s, got, want)
			}
		}
	}
}
