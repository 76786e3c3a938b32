package document

import (
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Canonical returns d in the canonical JSON form of RFC 8785 (JCS): json.Marshal's encoding of d,
// with object keys sorted by UTF-16 code units, no insignificant whitespace, and strings and
// numbers written one way only. Equal documents give equal bytes, so the result is what plans and
// applied documents hash (specs/fleet-config.md, "Plan"). Canonical does not validate d; it fails
// only when d cannot be encoded at all (a NaN or infinite disruption budget).
func Canonical(d *Document) ([]byte, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("document: canonical form: %w", err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("document: canonical form: %w", err)
	}
	return out, nil
}
