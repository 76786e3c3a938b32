package compute

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/strictjson"
)

// splitObject decodes a JSON object into its fields, by the rules of every API input
// (strictjson: no name twice, at any depth).
func splitObject(in json.RawMessage) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := strictjson.Decode(in, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, cubefleet.Invalid("", "the input must be a JSON object")
	}
	return m, nil
}

func joinObject(m map[string]json.RawMessage) []byte {
	b, _ := json.Marshal(m) // RawMessage values are valid JSON: they came from a decoder
	return b
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// takeString removes field name from m into dst; a missing required field or a non-string is
// INVALID_INPUT.
func takeString(m map[string]json.RawMessage, name string, dst *string, required bool) error {
	raw, ok := m[name]
	delete(m, name)
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if required {
			return cubefleet.Invalid(name, "%s is required", name)
		}
		return nil
	}
	if err := strictjson.Decode(raw, dst); err != nil {
		return cubefleet.Invalid(name, "%s must be a string", name)
	}
	if required && *dst == "" {
		return cubefleet.Invalid(name, "%s is required", name)
	}
	return nil
}

func takeRef(m map[string]json.RawMessage) (Ref, error) {
	var r Ref
	if err := takeString(m, "tenantId", &r.TenantID, true); err != nil {
		return r, err
	}
	if err := takeString(m, "id", &r.ID, true); err != nil {
		return r, err
	}
	if raw, ok := m["revision"]; ok {
		delete(m, "revision")
		var rev int64
		if err := strictjson.Decode(raw, &rev); err != nil || rev < 1 {
			return r, cubefleet.Invalid("revision", "revision is a positive integer")
		}
		r.Revision = &rev
	}
	return r, nil
}
