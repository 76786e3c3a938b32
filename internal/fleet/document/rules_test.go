package document

import (
	"regexp"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/fieldrules"
)

// TestRefMatchersMatchTheirRegexps: isSiteRef and isPoolRef, which Validate runs, accept exactly
// what the patterns the JSON Schema publishes accept. (The rule table's own patterns are checked
// in package fieldrules.)
func TestRefMatchersMatchTheirRegexps(t *testing.T) {
	pairs := []struct {
		pattern string
		match   func(string) bool
	}{
		{siteRefPattern, isSiteRef},
		{poolRefPattern, isPoolRef},
	}
	inputs := []string{"", "fra", "vps-fra", "a", strings.Repeat("a", 63), strings.Repeat("a", 64), "Fra", "fra/x", "-fra", "fra ",
		"site_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5", "pool_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5", "site_01JQ3ZK4Y6M8N9P0Q1R2S3T4VU",
		"pool_01jq3zk4y6m8n9p0q1r2s3t4v5", "pool_01JQ3ZK4Y6M8N9P0Q1R2S3T4V", "pool_01JQ3ZK4Y6M8N9P0Q1R2S3T4V55", "flv_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5",
		"pool_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5\n", "site_01JQ3ZK4Y6M8N9P0Q1R2S3T4IL"}
	for _, pair := range pairs {
		re := regexp.MustCompile(pair.pattern)
		for _, s := range inputs {
			if got, want := pair.match(s), re.MatchString(s); got != want {
				t.Errorf("%s: matcher(%q) = %v, regexp = %v", pair.pattern, s, got, want)
			}
		}
		if err := fieldrules.Portable(pair.pattern); err != nil {
			t.Error(err)
		}
	}
}
