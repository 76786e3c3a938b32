package api

import "github.com/cubefleet/cubefleet"

// ErrorBody is the body of every error answer: its HTTP status is the code's
// (cubefleet.HTTPStatus), e.g. `{"error":{"code":"INVALID_INPUT","message":"...","details":{"path":"pools[0].name"}}}`.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the error itself.
type ErrorDetail struct {
	// Code is one of the wire codes (cubefleet.WireCodes): INVALID_INPUT 400, UNAUTHENTICATED
	// 401, FORBIDDEN 403, NOT_FOUND 404, CONFLICT and CONFIG_DRIFT 409, PAYLOAD_TOO_LARGE 413,
	// PLAN_BLOCKED 422, RESOURCE_EXHAUSTED 429, INTERNAL 500, UNSUPPORTED 501, UNAVAILABLE 503.
	Code cubefleet.Code `json:"code"`
	// Message says what went wrong and how to fix it; it is safe to show and never holds a
	// secret or an internal detail.
	Message string `json:"message"`
	// Details is machine-readable context. For INVALID_INPUT: path (the first problem's JSON
	// path, e.g. pools[0].offers[1].quota.gpu) and errors (every problem in order, each
	// {path, message}). Absent when there is none.
	Details map[string]any `json:"details,omitempty"`
}
