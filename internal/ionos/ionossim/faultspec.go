package ionossim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The fault grammar of `cubefleet ionos simulate --fault SPEC` (docs/ionos.md lists it):
//
//	SPEC     = [METHOD " "] TARGET ":" ACTION { " " MODIFIER }
//	METHOD   = "GET" | "POST" | "PUT" | "PATCH" | "DELETE"
//	TARGET   = "*" | SEGMENT { "/" SEGMENT }     e.g. servers, servers/{id}, requests/{id}/status
//	ACTION   = STATUS                          answer this HTTP status (300-599) instead
//	         | "stuck BUSY " DURATION          the requests the calls create stay RUNNING that long
//	         | "latency " DURATION             answer that much later
//	         | "fail-request"                  accept the write, end its request FAILED
//	MODIFIER = "after-apply"                   with STATUS: apply the write, then answer STATUS
//	         | "x" COUNT                       affect COUNT calls (default: every call)
//	         | "if " FIELD                     only calls whose JSON body has a member FIELD
//	         | "retry-after " SECONDS          with 429 or 503: the Retry-After header
//
// A TARGET matches the calls whose path below BasePath ends with it, segment by segment, "{id}"
// standing for any one segment; "*" matches every call. With "stuck BUSY" the target "requests"
// stands for every call that creates a request. DURATION is Go's (10m, 1h30m, 500ms).

// maxFaultSpec bounds a fault spec's length (characters).
const maxFaultSpec = 512

// faultMethods are the methods a spec may name.
var faultMethods = map[string]bool{http.MethodGet: true, http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true}

// ParseFault parses spec (the grammar above) into a Fault. Errors name the part of spec that is
// wrong and what would be right.
func ParseFault(spec string) (Fault, error) {
	var f Fault
	if len(spec) > maxFaultSpec {
		return f, fmt.Errorf("fault %q: longer than %d characters", spec[:32]+"...", maxFaultSpec)
	}
	head, rest, ok := strings.Cut(spec, ":")
	if !ok {
		return f, fmt.Errorf("fault %q: want [METHOD] TARGET: ACTION, e.g. \"POST servers: 504 after-apply\"", spec)
	}
	hf := strings.Fields(head)
	switch len(hf) {
	case 1:
		f.Target = hf[0]
	case 2:
		if !faultMethods[hf[0]] {
			return f, fmt.Errorf("fault %q: method %q: want GET, POST, PUT, PATCH or DELETE", spec, hf[0])
		}
		f.Method, f.Target = hf[0], hf[1]
	default:
		return f, fmt.Errorf("fault %q: before the colon want [METHOD] TARGET, e.g. \"GET servers/{id}\"", spec)
	}
	if err := checkTarget(f.Target); err != nil {
		return f, fmt.Errorf("fault %q: %w", spec, err)
	}
	words := strings.Fields(rest)
	if len(words) == 0 {
		return f, fmt.Errorf("fault %q: no action after the colon: want a status (504), \"stuck BUSY 10m\", \"latency 2s\" or \"fail-request\"", spec)
	}
	dur := func(i int, what string) (time.Duration, error) {
		if i >= len(words) {
			return 0, fmt.Errorf("fault %q: %s wants a duration, e.g. 10m", spec, what)
		}
		d, err := time.ParseDuration(words[i])
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("fault %q: %s %q: want a positive duration, e.g. 10m", spec, what, words[i])
		}
		return d, nil
	}
	i := 1
	switch w := words[0]; {
	case w == "stuck":
		if len(words) < 2 || words[1] != "BUSY" {
			return f, fmt.Errorf("fault %q: want \"stuck BUSY DURATION\"", spec)
		}
		d, err := dur(2, "stuck BUSY")
		if err != nil {
			return f, err
		}
		f.StuckFor, i = d, 3
	case w == "latency":
		d, err := dur(1, "latency")
		if err != nil {
			return f, err
		}
		f.Latency, i = d, 2
	case w == "fail-request":
		f.FailRequest = true
	default:
		n, err := strconv.Atoi(w)
		if err != nil || n < 300 || n > 599 {
			return f, fmt.Errorf("fault %q: action %q: want an HTTP status from 300 to 599, \"stuck BUSY DURATION\", \"latency DURATION\" or \"fail-request\"", spec, w)
		}
		f.Status = n
	}
	for ; i < len(words); i++ {
		switch w := words[i]; {
		case w == "after-apply":
			if f.Status == 0 {
				return f, fmt.Errorf("fault %q: after-apply goes with a status, e.g. \"504 after-apply\"", spec)
			}
			f.Applied = true
		case w == "if":
			if i+1 >= len(words) || !validField(words[i+1]) {
				return f, fmt.Errorf("fault %q: if wants a JSON member name, e.g. \"if cpuFamily\"", spec)
			}
			i++
			f.IfField = words[i]
		case w == "retry-after":
			if f.Status != http.StatusTooManyRequests && f.Status != http.StatusServiceUnavailable {
				return f, fmt.Errorf("fault %q: retry-after goes with 429 or 503", spec)
			}
			if i+1 >= len(words) {
				return f, fmt.Errorf("fault %q: retry-after wants seconds, e.g. \"retry-after 2\"", spec)
			}
			n, err := strconv.Atoi(words[i+1])
			if err != nil || n < 0 || n > 86400 {
				return f, fmt.Errorf("fault %q: retry-after %q: want whole seconds, 0 to 86400", spec, words[i+1])
			}
			i++
			f.RetryAfter = strconv.Itoa(n)
		case strings.HasPrefix(w, "x"):
			n, err := strconv.Atoi(w[1:])
			if err != nil || n < 1 || n > 1_000_000 {
				return f, fmt.Errorf("fault %q: %q: want x and a count of calls from 1 to 1000000, e.g. x3", spec, w)
			}
			f.Times = n
		default:
			return f, fmt.Errorf("fault %q: %q: want after-apply, xN, \"if FIELD\" or \"retry-after SECONDS\"", spec, w)
		}
	}
	return f, nil
}

// checkTarget checks a fault's target: "*" or slash-separated segments of letters, digits, '-'
// and '_', or "{id}".
func checkTarget(t string) error {
	if t == "*" {
		return nil
	}
	for _, seg := range strings.Split(t, "/") {
		if seg == "{id}" {
			continue
		}
		if seg == "" || strings.IndexFunc(seg, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
		}) >= 0 {
			return fmt.Errorf("target %q: want \"*\" or path segments such as servers/{id} (letters, digits, - and _, or {id})", t)
		}
	}
	return nil
}

// validField reports whether s can name a JSON member in a spec.
func validField(s string) bool {
	return s != "" && len(s) <= 64 && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_')
	}) < 0
}

// String renders f in the fault grammar (ParseFault(f.String()) gives f back for a parsed f).
func (f Fault) String() string {
	var b strings.Builder
	if f.Method != "" {
		b.WriteString(f.Method + " ")
	}
	target := f.Target
	if target == "" {
		target = "*"
	}
	b.WriteString(target + ":")
	switch {
	case f.StuckFor > 0:
		b.WriteString(" stuck BUSY " + f.StuckFor.String())
	case f.Latency > 0 && f.Status == 0:
		b.WriteString(" latency " + f.Latency.String())
	case f.FailRequest:
		b.WriteString(" fail-request")
	default:
		b.WriteString(" " + strconv.Itoa(f.Status))
	}
	if f.Applied {
		b.WriteString(" after-apply")
	}
	if f.RetryAfter != "" {
		b.WriteString(" retry-after " + f.RetryAfter)
	}
	if f.IfField != "" {
		b.WriteString(" if " + f.IfField)
	}
	if f.Times > 0 {
		b.WriteString(" x" + strconv.Itoa(f.Times))
	}
	return b.String()
}

// matchesTarget reports whether path (below BasePath) ends with target, segment by segment
// ("{id}" matches any segment; "" and "*" match every path).
func matchesTarget(target, path string) bool {
	if target == "" || target == "*" {
		return true
	}
	want := strings.Split(target, "/")
	got := strings.Split(strings.Trim(path, "/"), "/")
	if len(got) < len(want) {
		return false
	}
	got = got[len(got)-len(want):]
	for i, w := range want {
		if w != "{id}" && w != got[i] {
			return false
		}
	}
	return true
}

// hasMember reports whether the JSON document body has an object member named field at any
// depth.
func hasMember(body []byte, field string) bool {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == field || walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}
