package secretref

import "testing"

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
		{"secret://Root/x", false, Ref{}},
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
	}
}

func TestCredentialNames(t *testing.T) {
	for _, tc := range []struct {
		key  string
		conf bool
		env  bool
	}{
		{"token", true, true}, {"apiKey", true, true}, {"Password", true, true}, {"location", false, false},
		{"clientSecret", true, true}, {"credentials", true, true}, {"CREDENTIAL_FILE", false, true},
		{"PIP_INDEX_URL", false, false}, {"monkey", true, true},
	} {
		if got := CredentialConfigKey(tc.key); got != tc.conf {
			t.Errorf("CredentialConfigKey(%q) = %v", tc.key, got)
		}
		if got := CredentialEnvName(tc.key); got != tc.env {
			t.Errorf("CredentialEnvName(%q) = %v", tc.key, got)
		}
	}
}
