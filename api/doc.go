// Package api is the public contract of the cubefleet control plane's API: every method's name,
// the permission it decides and on which scope form, its Input and Output types (documented
// field by field: units, limits, zero values), the error body (ErrorBody), and the OpenAPI
// document rendered from them (OpenAPI).
//
// The API is methods, not resources: POST /api/v1/<method> with a JSON object in and a JSON
// object out, authenticated with `Authorization: Bearer <api key>`. Times are Unix milliseconds
// unless a field says otherwise. Every input that acts on a tenant carries tenantId.
//
// The types here are the wire format and nothing else: the control plane converts between them
// and its own types at its edge, so a change inside the server does not change the wire. The
// package imports nothing of the server (a test holds it to that); the typed Go client
// (package client) and any other program can import it. The error codes are the root package's
// (cubefleet.Code: cubefleet.CodeInvalidInput, ...); a client gets them as *cubefleet.Error.
package api
