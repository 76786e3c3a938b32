package cubefleet

import (
	"errors"
	"fmt"
	"testing"
)

func TestHTTPStatus(t *testing.T) {
	for _, c := range []struct {
		code Code
		want int
	}{
		{CodeInvalidInput, 400}, {CodeUnauthenticated, 401}, {CodeForbidden, 403}, {CodeNotFound, 404},
		{CodeConflict, 409}, {CodeConfigDrift, 409}, {CodePayloadTooLarge, 413}, {CodePlanBlocked, 422},
		{CodeResourceExhausted, 429}, {CodeUnsupported, 501}, {CodeUnavailable, 503}, {CodeInternal, 500},
		{CodeFleetDrifted, 500}, {CodeDeadlineExceeded, 500}, {"NO_SUCH_CODE", 500},
	} {
		if got := HTTPStatus(c.code); got != c.want {
			t.Errorf("HTTPStatus(%s) = %d, want %d", c.code, got, c.want)
		}
	}
}

// TestWireCodes checks that WireCodes lists exactly the codes of the status table, by status,
// and none of the CLI-only codes.
func TestWireCodes(t *testing.T) {
	got := fmt.Sprint(WireCodes())
	want := "[INVALID_INPUT UNAUTHENTICATED FORBIDDEN NOT_FOUND CONFIG_DRIFT CONFLICT PAYLOAD_TOO_LARGE PLAN_BLOCKED RESOURCE_EXHAUSTED INTERNAL UNSUPPORTED UNAVAILABLE]"
	if got != want {
		t.Errorf("WireCodes() = %s, want %s", got, want)
	}
}

func TestErrorCode(t *testing.T) {
	wrapped := fmt.Errorf("apply: %w", Invalid("pools[0].name", "bad"))
	for _, c := range []struct {
		err  error
		want Code
	}{
		{nil, ""},
		{errors.New("disk on fire"), CodeInternal},
		{wrapped, CodeInvalidInput},
		{Errorf(CodeNotFound, "no pool %s", "x"), CodeNotFound},
	} {
		if got := ErrorCode(c.err); got != c.want {
			t.Errorf("ErrorCode(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	if !IsCode(wrapped, CodeInvalidInput) || IsCode(nil, CodeInternal) {
		t.Error("IsCode disagrees with ErrorCode")
	}
}

func TestInvalidAll(t *testing.T) {
	err := InvalidAll([]FieldError{{Path: "a", Message: "x"}, {Path: "b", Message: "y"}})
	if err.Message != "a: x (and 1 more)" || err.Details["path"] != "a" {
		t.Fatalf("got %q %v", err.Message, err.Details)
	}
}

func TestIDs(t *testing.T) {
	id := NewID("pool")
	if !IsID(id, "pool") || IsID(id, "site") || !IsID(id, "") {
		t.Fatalf("IsID disagrees with NewID for %s", id)
	}
	first, again := DerivedID("pool", "k", "p"), DerivedID("pool", "k", "p")
	if first != again || first == DerivedID("pool", "k", "q") {
		t.Fatal("DerivedID is not a function of key and caller")
	}
}

func TestArticle(t *testing.T) {
	for in, want := range map[string]string{
		"pool": "a pool", "ownerQuota": "an ownerQuota", "offer": "an offer", "sandboxTemplate": "a sandboxTemplate",
		"application load balancer": "an application load balancer", "NAT gateway": "a NAT gateway", "": "",
	} {
		if got := Article(in); got != want {
			t.Errorf("Article(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 nodes"}, {1, "1 node"}, {2, "2 nodes"}, {1000, "1000 nodes"}} {
		if got := Count(c.n, "node", "nodes"); got != c.want {
			t.Errorf("Count(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

// TestErrorIsCode is the rule table of errors.Is on codes: an *Error (wrapped or not) matches
// its own code and no other; a plain error matches none.
func TestErrorIsCode(t *testing.T) {
	nf := Errorf(CodeNotFound, "no pool p")
	for _, c := range []struct {
		err  error
		code Code
		want bool
	}{
		{nf, CodeNotFound, true},
		{fmt.Errorf("get: %w", nf), CodeNotFound, true},
		{nf, CodeConflict, false},
		{errors.New("NOT_FOUND"), CodeNotFound, false},
		{Invalid("name", "bad"), CodeInvalidInput, true},
	} {
		if got := errors.Is(c.err, c.code); got != c.want {
			t.Errorf("errors.Is(%v, %s) = %v, want %v", c.err, c.code, got, c.want)
		}
	}
	if !errors.Is(nf, Errorf(CodeNotFound, "no pool p")) || errors.Is(nf, Errorf(CodeNotFound, "other")) {
		t.Error("an *Error matches an *Error of the same code and message only")
	}
}
