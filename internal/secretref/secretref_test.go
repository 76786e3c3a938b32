package secretref

import (
	"regexp"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ok   bool
		want Ref
	}{
		{"secret://hetzner", true, Ref{Scheme: "secret", Name: "hetzner"}},
		{"secret://root/sec_01K0000000000000000000000", true, Ref{Scheme: "secret", Tenant: "root", Name: "sec_01K0000000000000000000000"}},
		{"vault://kv/data/hetzner#token", true, Ref{Scheme: "vault", Name: "kv/data/hetzner#token"}},
		{"env://HCLOUD_TOKEN", true, Ref{Scheme: "env", Name: "HCLOUD_TOKEN"}},
		{"secret://", false, Ref{}},
		{"secret://a/b/c", false, Ref{}},
		{"env://1BAD", false, Ref{}},
		{"vault://", false, Ref{}},
		{"vault://a b", false, Ref{}},
		{"s3cr3t-value", false, Ref{}},
		{"https://example.com", false, Ref{}},
	} {
		got, ok := Parse(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
		if IsRef(tc.in) != tc.ok {
			t.Errorf("IsRef(%q) = %v", tc.in, !tc.ok)
		}
	}
}

func TestIsCredentialNameMatchesItsPattern(t *testing.T) {
	re := regexp.MustCompile(CredentialPattern)
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"token", true}, {"apiKey", true}, {"Password", true}, {"location", false},
		{"clientSecret", true}, {"credentials", true}, {"CREDENTIAL_FILE", true},
		{"PIP_INDEX_URL", false}, {"monkey", true}, {"region", false},
	} {
		if got := IsCredentialName(tc.name); got != tc.want {
			t.Errorf("IsCredentialName(%q) = %v, want %v", tc.name, got, tc.want)
		}
		if got := re.MatchString(tc.name); got != tc.want {
			t.Errorf("CredentialPattern on %q = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestEdgeCases(t *testing.T) {
	good := []string{"secret://hetzner", "secret://root/sec_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5", "secret://a.b-c_d",
		"vault://kv/data/x", "vault://kv/data/x#token", "vault://a", "env://TOKEN", "env://_x1"}
	bad := []string{"", "hetzner", "secret://", "secret:///x", "secret://a/b/c", "secret://" + strings.Repeat("a", 64),
		"secret://a b", "vault://", "vault://#f", "vault://a#", "vault://a#b#c", "vault://a b", "vault://a\tb",
		"env://", "env://1X", "env://A-B", "SECRET://x", " secret://x", "secret://x\n"}
	for _, s := range good {
		if !IsRef(s) {
			t.Errorf("IsRef(%q) = false, want true", s)
		}
	}
	for _, s := range bad {
		if IsRef(s) {
			t.Errorf("IsRef(%q) = true, want false", s)
		}
	}
	for key, want := range map[string]bool{"token": true, "apiToken": true, "PASSWORD": true, "clientSecret": true, "apiKey": true,
		"KEYID": true, "credentials": true, "Credential": true, "location": false, "endpoint": false, "region": false, "": false} {
		if got := IsCredentialName(key); got != want {
			t.Errorf("IsCredentialName(%q) = %v, want %v", key, got, want)
		}
	}
}
