package controlplane

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestMembersOf checks the static membership's node ids: the hosts of the origins, nil for no
// membership, and an error naming an origin without a host.
func TestMembersOf(t *testing.T) {
	for _, c := range []struct {
		origins []string
		want    []string // sorted; nil: no membership
		err     string
	}{
		{origins: nil, want: nil},
		{origins: []string{}, want: []string{}},
		{origins: []string{"http://127.0.0.1:9999", "https://node-b.example:9999", "http://127.0.0.1:8089"}, want: []string{"127.0.0.1", "node-b.example"}},
		{origins: []string{"http://127.0.0.1:9999", "no-host"}, err: `membership: "no-host" is not an origin`},
	} {
		got, err := MembersOf(c.origins)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("MembersOf(%q) = %v, want error %q", c.origins, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("MembersOf(%q): %v", c.origins, err)
		}
		if (got == nil) != (c.want == nil) {
			t.Errorf("MembersOf(%q) = %v, want %v", c.origins, got, c.want)
			continue
		}
		if ids := slices.Sorted(maps.Keys(got)); !slices.Equal(ids, c.want) && len(ids)+len(c.want) > 0 {
			t.Errorf("MembersOf(%q) = %v, want %v", c.origins, ids, c.want)
		}
	}
}
