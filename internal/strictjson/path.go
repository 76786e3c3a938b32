package strictjson

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Paths name a place in a JSON value the way details.path does (docs/server.md, "API
// conventions"): `pools[0].offers[1].quota.gpu`. A name that is empty or holds characters
// other than letters, digits, '_' and '-' is written quoted in brackets, `quota["gpu.l40s"]`,
// so every path reads back unambiguously. A name longer than any valid name (256 bytes) is cut
// to its first 64 bytes and "…", so an error never carries megabytes of input.

const (
	maxPathKey = 256
	cutPathKey = 64
)

// Member returns the path of the member name of the object at path ("" is the whole value).
func Member(path, name string) string {
	if len(name) > maxPathKey {
		name = strings.ToValidUTF8(name[:cutPathKey], "") + "…"
	}
	if needsQuote(name) {
		return path + "[" + quoteName(name) + "]"
	}
	if path == "" {
		return name
	}
	return path + "." + name
}

// Index returns the path of element i of the array at path.
func Index(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

func needsQuote(name string) bool {
	if name == "" {
		return true
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return true
		}
	}
	return false
}

// quoteName returns name as a JSON string, without escaping '<', '>' and '&'.
func quoteName(name string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(name) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}
