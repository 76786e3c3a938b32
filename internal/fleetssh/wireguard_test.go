package fleetssh_test

import (
	"net/netip"
	"testing"

	"github.com/cubefleet/cubefleet/internal/fleetssh"
)

const peerA = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg="

func TestAllowedIPs(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      map[netip.Prefix]string
		bad       bool
	}{
		{name: "none", out: "", want: map[netip.Prefix]string{}},
		{name: "peers", out: peerA + "\t10.7.0.11/32 10.8.0.0/24\n" + peerA[:42] + "A=\t(none)\n",
			want: map[netip.Prefix]string{netip.MustParsePrefix("10.7.0.11/32"): peerA, netip.MustParsePrefix("10.8.0.0/24"): peerA}},
		{name: "no tab", out: peerA + " 10.7.0.11/32\n", bad: true},
		{name: "short key", out: "abc=\t10.7.0.11/32\n", bad: true},
		{name: "not a prefix", out: peerA + "\t10.7.0.11\n", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fleetssh.AllowedIPs(tc.out)
			if tc.bad != (err != nil) {
				t.Fatalf("err %v", err)
			}
			if !tc.bad && len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for p, k := range tc.want {
				if got[p] != k {
					t.Errorf("%s: %q, want %q", p, got[p], k)
				}
			}
		})
	}
}

func FuzzAllowedIPs(f *testing.F) {
	f.Add(peerA + "\t10.7.0.11/32 fd00::1/128\n")
	f.Add("\t\n(none)\n")
	f.Fuzz(func(t *testing.T, out string) {
		peers, err := fleetssh.AllowedIPs(out)
		if err != nil {
			return
		}
		for p, k := range peers {
			if !p.IsValid() || p != p.Masked() || len(k) != 44 {
				t.Fatalf("%v -> %q", p, k)
			}
		}
	})
}
