package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestCoordinatorRender renders origins files through the CLI: the JSON for a good one (to
// stdout and, atomically, to --out), and every refusal people meet (golden file).
func TestCoordinatorRender(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good.txt", "# two Cubes\nhttp://10.7.0.11:8080\nHTTPS://Cube-B.example:443/  # cube-b\n")
	var eleven strings.Builder // an incomplete legacy file: 11 of the default 12
	for i := range 11 {
		fmt.Fprintf(&eleven, "http://10.7.0.%d:8080\n", 11+i)
	}
	legacy := file("legacy.txt", eleven.String())
	dup := file("dup.txt", "http://cube-a:80\nhttp://CUBE-A\n")
	bad := file("bad.txt", "ftp://cube-a\nhttp://cube-b/path\nhttp://cube-c\n")
	empty := file("empty.txt", "# nothing yet\n")

	b := &transcript{t: t}
	record := b.run
	out := record("coordinator", "render", "--origins", good, "--cube-count", "2")
	var c cubes.Coordinator
	if err := json.Unmarshal([]byte(out), &c); err != nil || len(c.Origins) != 2 || len(c.Slots) != 6 || c.Origins[1] != "https://cube-b.example" {
		t.Errorf("render: %+v %v", c, err)
	}
	record("coordinator", "render", "--origins", legacy)
	record("coordinator", "render", "--origins", legacy, "--cube-count", "12")
	record("coordinator", "render", "--origins", dup, "--cube-count", "1")
	record("coordinator", "render", "--origins", bad, "--cube-count", "3")
	record("coordinator", "render", "--origins", empty, "--cube-count", "2")
	record("coordinator", "render", "--origins", good, "--cube-count", "0")
	record("coordinator", "render", "--cube-count", "2")
	testkit.Golden(t, "coordinator_render.golden", []byte(strings.ReplaceAll(b.String(), dir, "$TMP")))

	outFile := filepath.Join(dir, "out", "coordinator.json")
	code, stdout, errOut := runCLI(t, nil, "coordinator", "render", "--origins", good, "--cube-count", "2", "--out", outFile)
	written, err := os.ReadFile(outFile)
	if code != ExitOK || stdout != "" || !strings.Contains(errOut, "2 origins, 6 slots") || err != nil || string(written) != out {
		t.Errorf("--out: exit %d, stdout %q, stderr %q; file %q %v", code, stdout, errOut, written, err)
	}
}
