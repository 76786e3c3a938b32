package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestIAMDocListsEveryPermission checks docs/iam.md's permission table against the catalogue
// (`cubefleet keys permissions`): every permission appears, spelled out or as
// `prefix:a|b|c`, except the compute:<kind>:<verb> family, which one row describes.
func TestIAMDocListsEveryPermission(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(testkit.PackageDir(), "..", "..", "docs", "iam.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		cell := strings.ReplaceAll(m[1], `\|`, "|")
		i := strings.LastIndex(cell, ":")
		for _, verb := range strings.Split(cell[i+1:], "|") {
			documented[cell[:i+1]+verb] = true
		}
	}
	family := regexp.MustCompile(`^compute:(sites|providerAccounts|pools|ownerQuotas|offers|flavors|sandboxTemplates):`)
	for _, p := range iam.Catalogue() {
		if !documented[p.Permission] && !family.MatchString(p.Permission) {
			t.Errorf("docs/iam.md's permission table does not list %s (%s on %s)", p.Permission, strings.Join(p.Methods, ", "), p.Scope)
		}
	}
}
