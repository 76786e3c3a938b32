package cubes_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes"
)

func TestNormaliseOrigin(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://10.7.0.11:8080", "http://10.7.0.11:8080"},
		{"HTTP://Cube-1.Example.COM", "http://cube-1.example.com"},
		{"http://cube-1.example.com:80", "http://cube-1.example.com"},
		{"https://cube-1.example.com:443/", "https://cube-1.example.com"},
		{"https://cube-1.example.com:80", "https://cube-1.example.com:80"},
		{"http://cube:08080", "http://cube:8080"},
		{"http://[FD00::1]:9000", "http://[fd00::1]:9000"},
		{"https://[fd00::1]:443", "https://[fd00::1]"},
	} {
		got, err := cubes.NormaliseOrigin(c.in)
		if err != nil || got != c.want {
			t.Errorf("NormaliseOrigin(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, c := range []struct{ in, says string }{
		{"ftp://cube", "http or https"},
		{"cube:8080", "not an origin"},
		{"10.7.0.11:8080", "not an origin"},
		{"http://", "not an origin"},
		{"http://user:pw@cube", "no user"},
		{"http://cube/path", "no path"},
		{"http://cube?x=1", "no path, query"},
		{"http://cube#f", "no path, query or fragment"},
		{"http://cube:0", "1 to 65535"},
		{"http://cube:70000", "1 to 65535"},
		{"http://cube:", "port is empty"},
		{"http://cu be", "not an origin"},
	} {
		if _, err := cubes.NormaliseOrigin(c.in); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("NormaliseOrigin(%q) = %v, want an error saying %q", c.in, err, c.says)
		}
	}
}

// originsFile lists n origins http://10.7.0.(11+i):8080, with a comment and a blank line.
func originsFile(n int) string {
	var b strings.Builder
	b.WriteString("# the fleet's Cubes\n\n")
	for i := range n {
		fmt.Fprintf(&b, "http://10.7.0.%d:8080  # cube-%03d\n", 11+i, i)
	}
	return b.String()
}

func TestParseOrigins(t *testing.T) {
	c, err := cubes.ParseOrigins([]byte(originsFile(2)), 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"http://10.7.0.11:8080", "http://10.7.0.12:8080"}; !slices.Equal(c.Origins, want) || c.CubeCount != 2 {
		t.Fatalf("origins %v (count %d), want %v", c.Origins, c.CubeCount, want)
	}
	if len(c.Slots) != 6 || c.Slots[3] != (cubes.CoordinatorSlot{Index: 3, Origin: "http://10.7.0.12:8080", Slot: 0}) ||
		c.Slots[5] != (cubes.CoordinatorSlot{Index: 5, Origin: "http://10.7.0.12:8080", Slot: 2}) {
		t.Errorf("slots %+v, want 3 per Cube in order", c.Slots)
	}
	if c, err := cubes.ParseOrigins([]byte(originsFile(12)), cubes.DefaultCubeCount); err != nil || len(c.Slots) != 36 {
		t.Errorf("12 origins at the default count: %d slots, %v", len(c.Slots), err)
	}

	for _, tc := range []struct {
		name, file string
		count      int
		want       []string // "path: part of the message"
	}{
		{"empty", "", 2, []string{"origins: lists no origin"}},
		{"comments only", "# nothing\n\n   # here\n", 2, []string{"origins: lists no origin"}},
		{"an incomplete legacy file at the default count", originsFile(11), cubes.DefaultCubeCount,
			[]string{"origins: lists 11 origins, --cube-count wants exactly 12"}},
		{"one too many", originsFile(3), 2, []string{"origins: lists 3 origins, --cube-count wants exactly 2"}},
		{"duplicates after normalisation", "http://cube-a:80\nHTTP://CUBE-A\nhttps://cube-b\nhttps://cube-b:443/\n", 2,
			[]string{`line 2: "HTTP://CUBE-A" repeats the origin of line 1 (http://cube-a once normalised)`,
				`line 4: "https://cube-b:443/" repeats the origin of line 3`}},
		{"not http(s), all at once", "ftp://a\nhttp://b/x\nhttp://c\n", 3,
			[]string{`line 1: "ftp://a": the scheme must be http or https`, `line 2: "http://b/x": an origin has no path`}},
		{"count out of range", originsFile(1), 0, []string{"cubeCount: must be 1 to"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cubes.ParseOrigins([]byte(tc.file), tc.count)
			var ce *cubefleet.Error
			if !errors.As(err, &ce) || ce.Code != cubefleet.CodeInvalidInput {
				t.Fatalf("ParseOrigins: %v, want INVALID_INPUT", err)
			}
			var got []string
			if fes, ok := ce.Details["errors"].([]cubefleet.FieldError); ok {
				for _, fe := range fes {
					got = append(got, fe.Path+": "+fe.Message)
				}
			} else {
				got = []string{fmt.Sprint(ce.Details["path"]) + ": " + ce.Message}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("errors %q, want %d like %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				path, msg, _ := strings.Cut(w, ": ")
				if !strings.HasPrefix(got[i], path+": ") || !strings.Contains(got[i], msg) {
					t.Errorf("error %d = %q, want %q", i, got[i], w)
				}
			}
		})
	}
}

func FuzzParseOrigins(f *testing.F) {
	f.Add([]byte(originsFile(3)), 3)
	f.Add([]byte("HTTP://A:80\nhttp://a\n"), 2)
	f.Add([]byte("https://[::1]:443 # x\n"), 1)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		c, err := cubes.ParseOrigins(data, n)
		if err != nil {
			return
		}
		if len(c.Origins) != n || len(c.Slots) != cubes.SlotsPerCube*n {
			t.Fatalf("%d origins and %d slots for count %d", len(c.Origins), len(c.Slots), n)
		}
		seen := map[string]bool{}
		for _, o := range c.Origins {
			again, err := cubes.NormaliseOrigin(o)
			if err != nil || again != o || seen[o] {
				t.Fatalf("origin %q: normalises to %q, %v; seen before %v", o, again, err, seen[o])
			}
			seen[o] = true
		}
	})
}
