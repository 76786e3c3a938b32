package document

import (
	"errors"
	"testing"

	"github.com/cubefleet/cubefleet"
)

// FuzzDecode: Decode never panics; it accepts a document or reports INVALID_INPUT with at most
// 200 problems and one "...and N more"; an accepted document re-encodes and re-decodes to itself.
func FuzzDecode(f *testing.F) {
	for _, fx := range allFixtures(f) {
		if len(fx.json) < 4096 {
			f.Add([]byte(fx.json))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Decode(data)
		if err != nil {
			var e *cubefleet.Error
			if !errors.As(err, &e) || e.Code != cubefleet.CodeInvalidInput {
				t.Fatalf("Decode error = %v, want INVALID_INPUT", err)
			}
			list, ok := e.Details["errors"].([]cubefleet.FieldError)
			if !ok || len(list) == 0 || len(list) > maxErrors+1 || e.Details["path"] != list[0].Path {
				t.Fatalf("malformed details: %#v", e.Details)
			}
			if d != nil {
				t.Fatalf("Decode returned a document with its error")
			}
			return
		}
		if errs := d.Validate(); len(errs) != 0 {
			t.Fatalf("Decode accepted a document Validate rejects: %+v", errs)
		}
		roundTrip(t, d)
	})
}
