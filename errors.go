// Package cubefleet holds the vocabulary every part of cubefleet shares: the error codes of the
// public API and the shape of object ids. Domain packages return *Error values (or wrap them);
// the HTTP layer maps each code to its status once (see ../shared/DESIGN.md, "Public API
// conventions").
package cubefleet

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Code is an error code of the public API. The list only grows; codes cross the wire.
type Code string

// The error codes of the public API, with the HTTP status each maps to.
const (
	CodeInvalidInput      Code = "INVALID_INPUT"      // 400, with Details["path"]
	CodeUnauthenticated   Code = "UNAUTHENTICATED"    // 401
	CodeForbidden         Code = "FORBIDDEN"          // 403, audited
	CodeNotFound          Code = "NOT_FOUND"          // 404
	CodeConflict          Code = "CONFLICT"           // 409
	CodeConfigDrift       Code = "CONFIG_DRIFT"       // 409: the fleet moved since the plan
	CodePlanBlocked       Code = "PLAN_BLOCKED"       // 422
	CodePayloadTooLarge   Code = "PAYLOAD_TOO_LARGE"  // 413
	CodeResourceExhausted Code = "RESOURCE_EXHAUSTED" // 429
	CodeUnsupported       Code = "UNSUPPORTED"        // 501
	CodeUnavailable       Code = "UNAVAILABLE"        // 503, with Retry-After: the control plane's database cannot be reached now
	CodeInternal          Code = "INTERNAL"           // 500, never with internal details
	CodeFleetDrifted      Code = "FLEET_DRIFTED"      // CLI only: --fail-on-drift found drift (exit 1)
	CodeDeadlineExceeded  Code = "DEADLINE_EXCEEDED"  // CLI only: a --wait ran out of its --timeout (exit 1)
)

// httpStatus is the one table from error code to HTTP status (../shared/DESIGN.md, "Public API
// conventions"): the public API and the node routes both answer with it.
var httpStatus = map[Code]int{
	CodeInvalidInput:      http.StatusBadRequest,
	CodeUnauthenticated:   http.StatusUnauthorized,
	CodeForbidden:         http.StatusForbidden,
	CodeNotFound:          http.StatusNotFound,
	CodeConflict:          http.StatusConflict,
	CodeConfigDrift:       http.StatusConflict,
	CodePayloadTooLarge:   http.StatusRequestEntityTooLarge,
	CodePlanBlocked:       http.StatusUnprocessableEntity,
	CodeResourceExhausted: http.StatusTooManyRequests,
	CodeUnsupported:       http.StatusNotImplemented,
	CodeUnavailable:       http.StatusServiceUnavailable,
	CodeInternal:          http.StatusInternalServerError,
}

// HTTPStatus returns the HTTP status an error code is answered with: 400, 401, 403, 404, 409,
// 413, 422, 429, 501, 503, or 500 for INTERNAL and for a code the table does not hold (the CLI-only
// codes FLEET_DRIFTED and DEADLINE_EXCEEDED never cross the wire).
func HTTPStatus(code Code) int {
	if s, ok := httpStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// WireCodes returns the codes the public API answers with (those of the HTTPStatus table),
// ordered by status, then code. The CLI-only codes are not among them.
func WireCodes() []Code {
	out := make([]Code, 0, len(httpStatus))
	for c := range httpStatus {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Code) int {
		return cmp.Or(cmp.Compare(httpStatus[a], httpStatus[b]), cmp.Compare(a, b))
	})
	return out
}

// FieldError is one problem with one input field: Path is a JSON path in the style
// `pools[0].offers[1].quota.gpu`, Message says what is wrong and how to fix it.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Error is an error with a public code. Message is safe to show to the caller; Details carries
// machine-readable context (for INVALID_INPUT: "path" and "errors"). Err, when set, is the
// underlying cause; it is never shown to the caller.
type Error struct {
	Code    Code
	Message string
	Details map[string]any
	Err     error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether e carries the code target is (errors.Is(err, cubefleet.CodeNotFound)), or
// is an *Error with the same code and message.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Code:
		return e.Code == t
	case *Error:
		return t != nil && e.Code == t.Code && e.Message == t.Message
	}
	return false
}

// Error returns the code itself, so that a Code is an error value errors.Is matches an *Error
// against: errors.Is(err, cubefleet.CodeResourceExhausted).
func (c Code) Error() string { return string(c) }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns an INVALID_INPUT error for one field at path.
func Invalid(path, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	return InvalidAll([]FieldError{{Path: path, Message: msg}})
}

// InvalidAll returns one INVALID_INPUT error that reports every problem in errs, in order:
// Details["path"] is the first path and Details["errors"] the whole list. errs must not be empty.
func InvalidAll(errs []FieldError) *Error {
	msg := errs[0].Path + ": " + errs[0].Message
	if errs[0].Path == "" {
		msg = errs[0].Message
	}
	if len(errs) > 1 {
		msg = fmt.Sprintf("%s (and %d more)", msg, len(errs)-1)
	}
	return &Error{
		Code:    CodeInvalidInput,
		Message: msg,
		Details: map[string]any{"path": errs[0].Path, "errors": errs},
	}
}

// ErrorCode returns the code of the first *Error in err's chain, CodeInternal for any other
// non-nil error, and "" for nil.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// IsCode reports whether err carries code.
func IsCode(err error, code Code) bool { return err != nil && ErrorCode(err) == code }

// Count renders n with the singular or the plural form of a noun, for messages and pages
// that count things: "1 node", "0 nodes", "2 deliveries".
func Count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// Article returns noun with its indefinite article, for messages that name a kind ("a pool",
// "an ownerQuota", "an offer"): "an" before a vowel letter, else "a". "" stays "".
func Article(noun string) string {
	if noun == "" {
		return ""
	}
	if strings.ContainsRune("aeiouAEIOU", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}
