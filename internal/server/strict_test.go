package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/api"
)

// errDetail reads an error body's code, message and details.path.
func errDetail(t *testing.T, body []byte) (code cubefleet.Code, msg, path string) {
	t.Helper()
	var b struct {
		Error struct {
			Code    cubefleet.Code `json:"code"`
			Message string         `json:"message"`
			Details struct {
				Path string `json:"path"`
			} `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	return b.Error.Code, b.Error.Message, b.Error.Details.Path
}

// TestEveryMethodRefusesAmbiguousBodies walks the method table: a body that names a member
// twice (at any depth, however it is escaped) or spells a field in another case is
// INVALID_INPUT at that place, before anything is decided or done, so a proxy that reads the
// first of two names never sees another request than the one the server would run.
func TestEveryMethodRefusesAmbiguousBodies(t *testing.T) {
	eachServer(t, func(t *testing.T, e *testEnv) {
		for _, m := range e.srv.api.Methods() {
			t.Run(m.Name, func(t *testing.T) {
				e := e.sub(t)
				unknown := "did you mean tenantId"
				if m.Scope == api.OnRoot { // its input has no tenantId
					unknown = "unknown field TENANTID"
				}
				for _, c := range []struct{ body, path, says string }{
					{`{"tenantId":"acme","tenantId":"root"}`, "tenantId", "appears twice"},
					{`{"tenantId":"acme","tenant\u0049d":"root"}`, "tenantId", "appears twice"},
					{`{"tenantId":"root","x":{"a":1,"a":2}}`, "x.a", "appears twice"},
					{`{"TENANTID":"root"}`, "TENANTID", unknown},
				} {
					status, body := e.post(e.admin, m.Name, c.body)
					code, msg, path := errDetail(t, body)
					if status != http.StatusBadRequest || code != cubefleet.CodeInvalidInput || path != c.path || !strings.Contains(msg, c.says) {
						t.Errorf("%s: %d %s, want 400 INVALID_INPUT at %s saying %q", c.body, status, body, c.path, c.says)
					}
				}
			})
		}
		var n int
		if err := e.db.QueryRow(`SELECT count(*) FROM compute_objects`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d objects (%v) after refused bodies, want 0", n, err)
		}
	})
}

// TestNestedFieldCaseIsExact: a field of a nested input in another case is an unknown field,
// with the field it resembles.
func TestNestedFieldCaseIsExact(t *testing.T) {
	e := mustStart(t, nil, nil)
	status, body := e.post(e.admin, "compute.sandboxTemplates.create", `{"tenantId":"root","name":"t","poolId":"x","flavorId":"y","imageId":"i","warm":{"MIN":1,"max":2}}`)
	code, msg, path := errDetail(t, body)
	if status != http.StatusBadRequest || code != cubefleet.CodeInvalidInput || path != "warm.MIN" || !strings.Contains(msg, "did you mean min") {
		t.Fatalf("warm.MIN: %d %s, want INVALID_INPUT at warm.MIN", status, body)
	}
}
