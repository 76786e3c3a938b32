// Package fleettext is the words a fleet plan and its drift are shown with, in the CLI (`cubefleet
// fleet plan`, `fleet status`) and in the web console's Fleet page alike: the plan notation of a
// change and a field's value. Every function reads the contract's types (package api).
package fleettext

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cubefleet/cubefleet/api"
)

// maxLineValue bounds a value shown in a change line, in characters.
const maxLineValue = 120

// ChangeLine renders one change in the plan notation the CLI and the console share:
// `+ kind name` (create), `~ kind name (field: from -> to, ...)` (update, values as compact
// JSON cut at 120 characters), `- kind name` (delete), `! kind name: blocked: why`. It returns
// "" for an unchanged change that is not blocked.
func ChangeLine(c api.FleetChange) string {
	var line string
	switch c.Action {
	case api.FleetActionCreate:
		line = "+ " + c.Kind + " " + c.Name
	case api.FleetActionUpdate:
		line = "~ " + c.Kind + " " + c.Name
		var parts []string
		for _, f := range c.Fields {
			part := f
			for _, d := range c.Diffs {
				if d.Field == f {
					part = fmt.Sprintf("%s: %s -> %s", f, ShortValue(d.From), ShortValue(d.To))
				}
			}
			parts = append(parts, part)
		}
		if len(parts) > 0 {
			line += " (" + strings.Join(parts, ", ") + ")"
		}
	case api.FleetActionDelete:
		line = "- " + c.Kind + " " + c.Name
	default:
		if !c.Blocked {
			return ""
		}
		line = "= " + c.Kind + " " + c.Name
	}
	if c.Blocked {
		line = "! " + line[2:] + ": blocked: " + c.Note
	}
	return line
}

// KindChanges are the change lines of one kind.
type KindChanges struct {
	Kind  string
	Lines []string
}

// ByKind groups the lines of changes by kind, kinds in the order they first appear.
func ByKind(changes []api.FleetChange) []KindChanges {
	var out []KindChanges
	index := map[string]int{}
	for _, c := range changes {
		line := ChangeLine(c)
		if line == "" {
			continue
		}
		i, ok := index[c.Kind]
		if !ok {
			i = len(out)
			index[c.Kind] = i
			out = append(out, KindChanges{Kind: c.Kind})
		}
		out[i].Lines = append(out[i].Lines, line)
	}
	return out
}

// ShortValue renders a field's value v (a FieldDiff's From or To) as compact JSON (null for an
// empty value), cut at 120 characters with an ellipsis: how the CLI and the console show it.
func ShortValue(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	s := strings.TrimSuffix(b.String(), "\n")
	if r := []rune(s); len(r) > maxLineValue {
		s = string(r[:maxLineValue-1]) + "…"
	}
	return s
}
