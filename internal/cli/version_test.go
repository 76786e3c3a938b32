package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/buildinfo"
)

// TestVersion: `cubefleet version` prints this binary's build information (module version, VCS
// revision, module, Go version; JSON with --output json), and `cubefleet --version` one line.
func TestVersion(t *testing.T) {
	info := buildinfo.Read()
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Run(context.Background(), args, IO{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(string) string { return "" }})
		return code, out.String(), errb.String()
	}
	if code, out, errOut := run("version"); code != 0 || out != info.Text()+"\n" {
		t.Errorf("cubefleet version: exit %d\n%s%s\nwant:\n%s", code, out, errOut, info.Text())
	}
	if code, out, errOut := run("--version"); code != 0 || out != "cubefleet version "+info.String()+"\n" {
		t.Errorf("cubefleet --version: exit %d %q %q, want %q", code, out, errOut, "cubefleet version "+info.String())
	}
	code, out, _ := run("version", "-o", "json")
	var got buildinfo.Info
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got != info {
		t.Errorf("cubefleet version -o json: exit %d %s (%v), want %+v", code, out, err, info)
	}
	if code, _, errOut := run("version", "extra"); code != ExitUsage {
		t.Errorf("cubefleet version extra: exit %d %s, want a usage error", code, errOut)
	}
}
