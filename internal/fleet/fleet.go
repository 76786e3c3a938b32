// Package fleet is fleet as code: it exports a tenant's compute objects as one document, plans
// a document against them (changes, ordered calls, planHash), applies a plan in one
// transaction, records what was applied, and reports drift (fleet spec; issue "Control plane
// and fleet as code").
package fleet

import (
	"embed"

	"github.com/cubefleet/cubefleet/internal/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Module is the fleet module's migrations: `fleet/0001_names` (table fleet_names),
// `fleet/0002_applied` (table fleet_applied) and `fleet/0003_document_hash` (its
// document_hash).
var Module = store.EmbeddedModule("fleet", migrations)
