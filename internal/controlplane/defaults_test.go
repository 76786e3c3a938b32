package controlplane

import (
	"slices"
	"testing"

	"github.com/cubefleet/cubefleet/internal/compute"
)

// TestParseModules checks --modules: core is always on, vps-templates needs vps, and an unknown
// module is an error.
func TestParseModules(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", nil, false},
		{DefaultModules, nil, false},
		{"core", []string{compute.ModuleVPS, compute.ModuleTemplates}, false},
		{"core,vps", []string{compute.ModuleTemplates}, false},
		{"vps", []string{compute.ModuleTemplates}, false},
		{"core,vps-templates", nil, true},
		{"core,gpu", nil, true},
	} {
		got, err := ParseModules(c.in)
		if (err != nil) != c.wantErr {
			t.Errorf("ParseModules(%q) error %v, want error %v", c.in, err, c.wantErr)
			continue
		}
		var keys []string
		for k := range got {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, c.want) {
			t.Errorf("ParseModules(%q) = %v, want %v", c.in, keys, c.want)
		}
	}
}
