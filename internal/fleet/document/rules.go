package document

import (
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
)

// The document's own limits (docs/fleet-document.md). Every rule it shares with
// the compute API (patterns, lengths, counts, ranges, enumerations) is read from package
// fieldrules, by Validate and by Schema alike, so the three cannot drift apart.
const (
	version   = 1
	maxDepth  = 32  // nesting of arrays and objects Decode accepts
	maxErrors = 200 // problems Decode lists before "...and N more"
	// schemaKey is the one top-level key Decode reads and ignores: "$schema", the address of the
	// document's JSON Schema (SchemaID), for editors. Its value must be a string.
	schemaKey = "$schema"
)

// The patterns of the document's own strings, a site or pool reference: a name, or the id of an
// object fleet did not create. Like the table's, they are anchored and portable
// (fieldrules.Portable), so the JSON Schema states them exactly.
var (
	siteRefPattern = refPattern("site")
	poolRefPattern = refPattern("pool")
)

// refPattern is the pattern of a name or an id with prefix (cubefleet.IsID).
func refPattern(prefix string) string {
	name := strings.TrimSuffix(strings.TrimPrefix(fieldrules.Name.Pattern(), "^"), "$")
	return "^(" + name + "|" + prefix + `_[0-9A-HJKMNP-TV-Z]{26})$`
}

// nameRule is the rule of names in words.
var nameRule = fieldrules.Name.Rule()

// isName reports whether s is a document name.
func isName(s string) bool { return fieldrules.Name.Match(s) }

// isSiteRef reports whether s names a site: a name or a site id.
func isSiteRef(s string) bool { return isName(s) || cubefleet.IsID(s, "site") }

// isPoolRef reports whether s names a pool: a name or a pool id.
func isPoolRef(s string) bool { return isName(s) || cubefleet.IsID(s, "pool") }
