package strictjson

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/cubefleet/cubefleet"
)

type nested struct {
	Max int64 `json:"max"`
}

type input struct {
	TenantID string            `json:"tenantId"`
	Limit    int               `json:"limit"`
	Nested   nested            `json:"nested"`
	List     []nested          `json:"list"`
	Config   map[string]string `json:"config"`
	Raw      json.RawMessage   `json:"raw"`
}

// invalidAt checks that err is INVALID_INPUT at path and that its message holds every word.
func invalidAt(t *testing.T, what string, err error, path string, words ...string) {
	t.Helper()
	var e *cubefleet.Error
	if !errors.As(err, &e) || e.Code != cubefleet.CodeInvalidInput || e.Details["path"] != path {
		t.Errorf("%s = %#v, want INVALID_INPUT at %q", what, err, path)
		return
	}
	for _, w := range words {
		if !strings.Contains(e.Message, w) {
			t.Errorf("%s = %q, want it to say %q", what, e.Message, w)
		}
	}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		data, path string
		ok         bool
		words      []string
	}{
		{`{"tenantId":"root","limit":3}`, "", true, nil},
		{`{"tenantId":"root","raw":{"a":[1,{"b":null}]},"config":{"Token":"a","token":"b"}}`, "", true, nil},
		{`{"tenantId":"root","extra":1}`, "extra", false, []string{"unknown field extra"}},
		{`{"tenantId":5}`, "tenantId", false, []string{"tenantId must be a string"}},
		{`{"limit":1.5}`, "limit", false, []string{"limit must be an integer"}},
		{`{"nested":{"max":"x"}}`, "nested.max", false, nil},
		{`{"list":[{"max":1},{"max":true}]}`, "list[1].max", false, nil},
		{`{"tenantId":"root"} {}`, "", false, nil},
		{`[1]`, "", false, nil},
		{`{`, "", false, nil},
		{``, "", false, nil},
		// Names are matched exactly: a name that differs in case is unknown, and says so.
		{`{"TENANTID":"root"}`, "TENANTID", false, []string{"unknown field TENANTID", "did you mean tenantId", "case"}},
		{`{"nested":{"MAX":1}}`, "nested.MAX", false, []string{"did you mean max"}},
		{`{"list":[{"Max":1}]}`, "list[0].Max", false, []string{"did you mean max"}},
		// A name twice in one object, at any depth, however it is spelled.
		{`{"tenantId":"acme","tenantId":"root"}`, "tenantId", false, []string{"tenantId appears twice in the same object"}},
		{`{"tenantId":"acme","tenant\u0049d":"root"}`, "tenantId", false, []string{"appears twice"}},
		{`{"config":{"a":"1","a":"2"}}`, "config.a", false, []string{"appears twice"}},
		{`{"raw":{"x":[{"k":1,"k":2}]}}`, "raw.x[0].k", false, []string{"appears twice"}},
		{`{"raw":{"0":{"k":1,"k":2}}}`, "raw.0.k", false, []string{"appears twice"}},
		{`{"config":{"a.b":"1","a.b":"2"}}`, `config["a.b"]`, false, []string{"appears twice"}},
		{"{\"tenantId\":\"\xff\"}", "tenantId", false, []string{"UTF-8"}},
	} {
		var v input
		err := Decode([]byte(tc.data), &v)
		if tc.ok {
			if err != nil {
				t.Errorf("Decode(%s) = %v, want ok", tc.data, err)
			}
			continue
		}
		invalidAt(t, "Decode("+tc.data+")", err, tc.path, tc.words...)
	}
}

// TestDecodePart: DecodePart reads the members v has and skips the others, with the same
// rules for names: exact (a skipped name is none of v's in another case), and never twice.
func TestDecodePart(t *testing.T) {
	var v struct {
		TenantID string `json:"tenantId"`
	}
	if err := DecodePart([]byte(`{"tenantId":"acme","other":{"x":1}}`), &v); err != nil || v.TenantID != "acme" {
		t.Fatalf("DecodePart = %v, %+v", err, v)
	}
	// A member it skips may not be one of its own fields in another case.
	invalidAt(t, "DecodePart of TENANTID", DecodePart([]byte(`{"TENANTID":"root"}`), &v), "TENANTID", "did you mean tenantId")
	invalidAt(t, "DecodePart with a duplicate", DecodePart([]byte(`{"tenantId":"acme","tenantId":"root"}`), &v), "tenantId", "twice")
	invalidAt(t, "DecodePart with a nested duplicate", DecodePart([]byte(`{"tenantId":"acme","other":{"x":1,"x":2}}`), &v), "other.x", "twice")
}

// TestRead: Read takes one JSON object from a stream, checks it as it arrives (the names of
// every object, at any depth), and returns its bytes; it stops at the first problem without
// reading the rest.
func TestRead(t *testing.T) {
	for _, tc := range []struct {
		data, want, path string
		ok               bool
	}{
		{` {"a": [1, {"b": "c"}]} `, `{"a": [1, {"b": "c"}]}`, "", true},
		{"", "{}", "", true},
		{" \n\t", "{}", "", true},
		{`{"a":1,"a":2}`, "", "a", false},
		{`{"a":{"b":[{"c":1,"c":1}]}}`, "", "a.b[0].c", false},
		{`[]`, "", "", false},
		{`"x"`, "", "", false},
		{`{"a":1} {"b":2}`, "", "", false},
		{`{"a":1`, "", "", false},
		{`{"a":tru}`, "", "a", false},
	} {
		got, err := Read(iotest.OneByteReader(strings.NewReader(tc.data)), 1<<10, -1)
		if tc.ok {
			if err != nil || string(got) != tc.want {
				t.Errorf("Read(%q) = %q, %v; want %q", tc.data, got, err, tc.want)
			}
			continue
		}
		invalidAt(t, "Read("+tc.data+")", err, tc.path)
	}
}

// TestReadLimit: more than limit bytes is PAYLOAD_TOO_LARGE, and Read stops reading there.
func TestReadLimit(t *testing.T) {
	body := `{"a":"` + strings.Repeat("x", 100) + `"}`
	if _, err := Read(strings.NewReader(body), int64(len(body)), int64(len(body))); err != nil {
		t.Fatalf("a body of exactly the limit: %v", err)
	}
	r := &countingReader{r: strings.NewReader(body + strings.Repeat(" ", 1<<20))}
	_, err := Read(r, 64, -1)
	if !cubefleet.IsCode(err, cubefleet.CodePayloadTooLarge) {
		t.Fatalf("Read over the limit = %v, want PAYLOAD_TOO_LARGE", err)
	}
	if r.n > 64<<10 {
		t.Fatalf("Read read %d bytes of a stream over its 64-byte limit", r.n)
	}
}

// TestReadStopsEarly: a body that goes wrong early is refused without the rest being read.
func TestReadStopsEarly(t *testing.T) {
	r := &countingReader{r: io.MultiReader(strings.NewReader(`{"a":1,"a":`), strings.NewReader(strings.Repeat(" ", 4<<20)))}
	_, err := Read(r, 8<<20, -1)
	invalidAt(t, "Read of an early duplicate", err, "a", "twice")
	if r.n > 1<<20 {
		t.Fatalf("Read read %d bytes after the duplicate", r.n)
	}
}

// TestReadPassesReaderErrors: an error of the reader (a deadline, a budget) comes back as it
// is, for the caller to answer.
func TestReadPassesReaderErrors(t *testing.T) {
	boom := errors.New("boom")
	_, err := Read(io.MultiReader(strings.NewReader(`{"a":`), iotest.ErrReader(boom)), 1<<10, -1)
	if !errors.Is(err, boom) {
		t.Fatalf("Read = %v, want the reader's error", err)
	}
}

// TestReadLongToken: a string longer than MaxToken is refused once MaxToken of it has arrived,
// within a body limit that would take it.
func TestReadLongToken(t *testing.T) {
	r := &countingReader{r: io.MultiReader(strings.NewReader(`{"a":[1,{"b":"`), strings.NewReader(strings.Repeat("x", 4*MaxToken)))}
	_, err := Read(r, 8*MaxToken, -1)
	invalidAt(t, "Read of a long string", err, "a[1].b", "longer than")
	if r.n > MaxToken+4*chunk {
		t.Fatalf("Read read %d bytes of a long string", r.n)
	}
	if _, err := Read(strings.NewReader(`{"a":"`+strings.Repeat("x", MaxToken-100)+`"}`), 8*MaxToken, -1); err != nil {
		t.Fatalf("a string just under MaxToken: %v", err)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestPaths(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Member("", "pools"), "pools"},
		{Index(Member("", "pools"), 3), "pools[3]"},
		{Member("pools[3]", "quota"), "pools[3].quota"},
		{Member("quota", "gpu.l40s"), `quota["gpu.l40s"]`},
		{Member("", ""), `[""]`},
		{Member("a", strings.Repeat("k", 300)), `a["` + strings.Repeat("k", 64) + `…"]`},
	} {
		if tc.got != tc.want {
			t.Errorf("path %q, want %q", tc.got, tc.want)
		}
	}
}

// TestDecodeAll: every member that does not decode is reported, in order, and the others are
// decoded; what is not a JSON object is one error, as Decode's.
func TestDecodeAll(t *testing.T) {
	for _, c := range []struct {
		name, data string
		paths      []string
		want       input // what decoded
	}{
		{"valid", `{"tenantId":"acme","limit":3}`, nil, input{TenantID: "acme", Limit: 3}},
		{"one wrong type", `{"tenantId":"acme","limit":"3"}`, []string{"limit"}, input{TenantID: "acme"}},
		{"two wrong types and an unknown name", `{"limit":"x","tenantId":7,"tenantID":"a","nested":{"max":1}}`, []string{"limit", "tenantId", "tenantID"}, input{}},
		{"a nested problem", `{"nested":{"max":"1"},"limit":2}`, []string{"nested.max"}, input{Limit: 2}},
		{"not JSON: Decode's one error", `{"limit":`, []string{"limit"}, input{}},
		{"duplicate name: Decode's one error", `{"limit":1,"limit":2}`, []string{"limit"}, input{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got input
			err := DecodeAll([]byte(c.data), &got)
			var paths []string
			if err != nil {
				e, ok := err.(*cubefleet.Error)
				if !ok || e.Code != cubefleet.CodeInvalidInput {
					t.Fatalf("%v, want INVALID_INPUT", err)
				}
				for _, fe := range e.Details["errors"].([]cubefleet.FieldError) {
					paths = append(paths, fe.Path)
				}
			}
			if strings.Join(paths, ",") != strings.Join(c.paths, ",") {
				t.Errorf("paths %v (%v), want %v", paths, err, c.paths)
			}
			if strings.Contains(c.name, "Decode's one error") {
				return
			}
			if got.TenantID != c.want.TenantID || got.Limit != c.want.Limit {
				t.Errorf("decoded %+v, want %+v", got, c.want)
			}
		})
	}
}
