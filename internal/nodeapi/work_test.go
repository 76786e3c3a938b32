package nodeapi

import (
	"errors"
	"testing"
)

func TestProof(t *testing.T) {
	key := CredentialKey("cfn_secret")
	body := []byte(`{"assignments":[]}`)
	p := Proof(key, "nonce-0123456789abcdef", "10.0.0.7", body)
	if err := VerifyProof(key, "nonce-0123456789abcdef", "10.0.0.7", body, p); err != nil {
		t.Fatalf("a proof does not verify: %v", err)
	}
	for name, c := range map[string]struct {
		key          []byte
		nonce, node  string
		body, header string
	}{
		"other credential": {CredentialKey("cfn_other"), "nonce-0123456789abcdef", "10.0.0.7", string(body), p},
		"replayed nonce":   {key, "nonce-fedcba9876543210", "10.0.0.7", string(body), p},
		"other node":       {key, "nonce-0123456789abcdef", "10.0.0.8", string(body), p},
		"altered body":     {key, "nonce-0123456789abcdef", "10.0.0.7", `{"assignments":[{}]}`, p},
		"no proof":         {key, "nonce-0123456789abcdef", "10.0.0.7", string(body), ""},
		"other version":    {key, "nonce-0123456789abcdef", "10.0.0.7", string(body), "v2" + p[2:]},
	} {
		if err := VerifyProof(c.key, c.nonce, c.node, []byte(c.body), c.header); !errors.Is(err, ErrBadProof) {
			t.Errorf("%s: VerifyProof = %v, want ErrBadProof", name, err)
		}
	}
}

func TestValidNonce(t *testing.T) {
	for s, want := range map[string]bool{
		"0123456789abcdef": true, "0123456789abcde": false, "0123456789abcdef+": false,
		"AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZaz09-_":  true,
		"AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZaz09-_AZaz09-_x": false,
	} {
		if ValidNonce(s) != want {
			t.Errorf("ValidNonce(%q) = %v", s, !want)
		}
	}
}

func TestWorkPaths(t *testing.T) {
	if got := WorkPath("10.0.0.7"); got != AgentPrefix+"/nodes/10.0.0.7/work" {
		t.Errorf("WorkPath = %s", got)
	}
	if got := SandboxEventPath("10.0.0.7", "sbx_1"); got != AgentPrefix+"/nodes/10.0.0.7/sandboxes/sbx_1/events" {
		t.Errorf("SandboxEventPath = %s", got)
	}
}
