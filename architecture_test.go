package cubefleet_test

// The architecture's rules (docs/architecture.md, "The rules" and "The package map"), read
// from `go list` and the source tree. A new package needs no edit here: it takes the layer of the
// longest path in layers that holds it, and everything under internal/ that is no other layer's
// is domain.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is this module's path; patterns below are relative to it.
const module = "github.com/cubefleet/cubefleet"

// A layer is one step of "Packages import downward (cli -> client/server -> api -> domain ->
// store)". A package may import packages of its own layer and of every layer with a lower rank;
// client and console share a rank but are different layers, so neither imports the other.
type layer struct {
	name  string
	rank  int
	paths []string // module-relative paths; each holds its subpackages too ("." is the root package alone)
}

// layers is the one table of layers, from the top down.
var layers = []layer{
	{"cmd", 10, []string{"cmd"}},                           // main packages: build the root command and exit with its code
	{"cli", 9, []string{"internal/cli"}},                   // commands, flags, output and exit codes; imported only by cmd
	{"server", 8, []string{"internal/server"}},             // HTTP transport: listeners, TLS, authentication; mounts what the composition root built
	{"controlplane", 7, []string{"internal/controlplane"}}, // the composition root: builds the control plane in order and stops it in order; no domain package imports it
	{"client", 6, []string{"client", "internal/client"}},   // the public API's typed Go client (client), and the CLI's connection resolution
	{"console", 6, []string{"internal/console"}},           // the server-rendered web console
	{"api", 5, []string{"internal/api"}},                   // the method table: permission, input, output and handler of every method
	{"contract", 4, []string{"api"}},                       // the public API's contract: method names, input and output types, error body
	{"domain", 3, []string{"internal"}},                    // everything else under internal/: registry, scheduler, fleet, agent, ...
	{"store", 2, []string{"internal/store"}},               // the database: open, migrate, transactions, leases
	{"vocabulary", 1, []string{"."}},                       // package cubefleet: error codes and ids every layer shares
}

// neverDepends is the one table of packages that never depend on others, not even through a
// third package: each from (a module-relative path, with its subpackages) and each to (an
// import path, with its subpackages).
var neverDepends = []struct{ from, to, why string }{
	{"api", module + "/internal", "the public contract imports nothing under internal/: the wire is its own types, so no change inside the server changes it"},
	{"client", module + "/internal/api", "the public client speaks the contract (package api), not the method table"},
	{"internal/agent", module + "/internal/nodes", "the agent never imports the node registry: both ends of the node contract import its one package"},
	{"internal/nodes", module + "/internal/agent", "the node registry never imports the agent: both ends of the node contract import its one package"},
	{"internal/agent", module + "/internal/store", "the agent holds no database"},
	{"internal/agent", "modernc.org/sqlite", "the agent imports no database driver"},
	{"internal/agent", "github.com/jackc/pgx", "the agent imports no database driver"},
	{"internal/agent", "github.com/lib/pq", "the agent imports no database driver"},
	{"internal/agent", "github.com/mattn/go-sqlite3", "the agent imports no database driver"},
	{"internal/agent", "github.com/go-sql-driver/mysql", "the agent imports no database driver"},
}

// maxSourceLines is the most lines a non-test Go source file may hold.
const maxSourceLines = 800

// pkg is what the rules read of `go list -json`.
type pkg struct {
	ImportPath string
	Name       string
	Doc        string
	GoFiles    []string
	Imports    []string
	Deps       []string
	DepOnly    bool
	Error      *struct{ Err string }
}

// rel returns p's path relative to the module ("." for the root package), or "" outside it.
func rel(p string) string {
	switch {
	case p == module:
		return "."
	case strings.HasPrefix(p, module+"/"):
		return strings.TrimPrefix(p, module+"/")
	}
	return ""
}

// layerOf returns the layer of the module-relative path r: the layer with the longest path
// that is r or holds it. Nothing outside cmd/ and internal/ but the root package is expected.
func layerOf(r string) (layer, bool) {
	var best layer
	n := -1
	for _, l := range layers {
		for _, p := range l.paths {
			if (r == p || p != "." && within(r, p)) && len(p) > n {
				best, n = l, len(p)
			}
		}
	}
	return best, n >= 0
}

// isTestSupport reports whether p is test support: a package named *test (storetest, tlstest,
// agenttest, fleettest, ...) or one whose non-test files import "testing" (internal/testkit).
// Only _test.go files import it, so neither it nor package testing reaches the binary.
func isTestSupport(p pkg) bool {
	return strings.HasSuffix(p.Name, "test") || slices.Contains(p.Imports, "testing")
}

// listPackages returns the module's packages and, with them, every package they depend on.
func listPackages(t *testing.T) (ours []pkg, all map[string]pkg) {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-deps", "-json=ImportPath,Name,Doc,GoFiles,Imports,Deps,DepOnly,Error", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	all = map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		all[p.ImportPath] = p
		if !p.DepOnly {
			if p.Error != nil {
				t.Errorf("%s: %s", p.ImportPath, p.Error.Err)
			}
			ours = append(ours, p)
		}
	}
	if len(ours) < 10 {
		t.Fatalf("go list found %d packages; run the test from the module", len(ours))
	}
	return ours, all
}

// TestImportsGoDownward checks every non-test import between the module's packages against
// layers and neverDepends, and keeps test support out of non-test files. Test files, and test
// support packages, may import what they need.
func TestImportsGoDownward(t *testing.T) {
	ours, all := listPackages(t)
	for _, p := range ours {
		from := rel(p.ImportPath)
		fl, ok := layerOf(from)
		if !ok {
			t.Errorf("%s is in no layer: put it under cmd/ or internal/ (or add its place to layers in architecture_test.go)", p.ImportPath)
			continue
		}
		// Test support is test code: like a _test.go file it may import any layer (a real
		// control plane for the agent's tests), and the rule below keeps it out of the binary.
		testSupport := isTestSupport(p)
		for _, imp := range p.Imports {
			to := rel(imp)
			if to == "" {
				continue
			}
			tl, _ := layerOf(to)
			if !testSupport && tl.name != fl.name && tl.rank >= fl.rank {
				t.Errorf("%s (%s) imports %s (%s): packages import downward only, %s; a %s package imports its own layer and %s",
					short(p.ImportPath), fl.name, short(imp), tl.name, layerChain(), fl.name, below(fl))
			}
			if isTestSupport(all[imp]) && !testSupport {
				t.Errorf("%s imports %s in a non-test file: test support (a package named *test, or one that imports testing: internal/testkit, storetest, fleettest, ...) is imported only by _test.go files", short(p.ImportPath), short(imp))
			}
		}
		for _, rule := range neverDepends {
			if testSupport || !within(from, rule.from) {
				continue
			}
			var chain []string
			for _, dep := range p.Deps {
				if within(dep, rule.to) {
					if c := importChain(all, p.ImportPath, dep); chain == nil || len(c) < len(chain) {
						chain = c
					}
				}
			}
			if chain != nil {
				t.Errorf("%s depends on %s (%s): %s", short(p.ImportPath), short(chain[len(chain)-1]), shortChain(chain), rule.why)
			}
		}
	}
}

// within reports whether path p is dir or one of its subpackages.
func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// short returns p relative to the module when it is the module's.
func short(p string) string {
	if r := rel(p); r != "" && r != "." {
		return r
	}
	return p
}

// shortChain spells an import chain with short names: "internal/agent -> internal/store".
func shortChain(chain []string) string {
	names := make([]string, len(chain))
	for i, p := range chain {
		names[i] = short(p)
	}
	return strings.Join(names, " -> ")
}

// layerChain spells layers top down: "cmd -> cli -> server -> client/console -> ...".
func layerChain() string {
	var steps []string
	for i, l := range layers {
		if i > 0 && layers[i-1].rank == l.rank {
			steps[len(steps)-1] += "/" + l.name
			continue
		}
		steps = append(steps, l.name)
	}
	return strings.Join(steps, " -> ")
}

// below names the layers l may import besides its own.
func below(l layer) string {
	var names []string
	for _, o := range layers {
		if o.rank < l.rank {
			names = append(names, o.name)
		}
	}
	if len(names) == 0 {
		return "nothing else"
	}
	return strings.Join(names, ", ")
}

// importChain returns the shortest import path from one package to another (both included).
func importChain(all map[string]pkg, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var chain []string
			for p := to; p != ""; p = prev[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		for _, next := range all[cur].Imports {
			if _, seen := prev[next]; !seen {
				prev[next] = cur
				queue = append(queue, next)
			}
		}
	}
	return []string{from, "...", to}
}

// TestLayerTable checks the table itself and how it classifies packages that exist today and
// those the next issues add.
func TestLayerTable(t *testing.T) {
	_, all := listPackages(t)
	for _, c := range []struct{ path, layer string }{
		{".", "vocabulary"},
		{"cmd/cubefleet", "cmd"},
		{"internal/cli", "cli"},
		{"internal/server", "server"},
		{"internal/client", "client"},
		{"internal/console", "console"},
		{"internal/api", "api"},
		{"internal/controlplane", "controlplane"},
		{"internal/store", "store"},
		{"internal/store/storetest", "store"},
		{"internal/nodes", "domain"},
		{"internal/nodes/nodehttp", "domain"},
		{"internal/nodeapi", "domain"},
		{"internal/agent/hostsetup", "domain"},
		{"internal/scheduler", "domain"},
		{"internal/sandboxes", "domain"},
		{"internal/storage", "domain"}, // a prefix of the name is not a parent
	} {
		if l, _ := layerOf(c.path); l.name != c.layer {
			t.Errorf("layerOf(%q) = %q, want %q", c.path, l.name, c.layer)
		}
	}
	if l, _ := layerOf("api"); l.name != "contract" {
		t.Errorf("layerOf(api) = %q, want contract", l.name)
	}
	if _, ok := layerOf("tools/gen"); ok {
		t.Error("a package outside cmd/ and internal/ has a layer")
	}
	for _, r := range []string{"internal/testkit", "internal/store/storetest", "internal/tlstest", "internal/agent/agenttest", "internal/fleet/fleettest"} {
		if !isTestSupport(all[module+"/"+r]) {
			t.Errorf("%s is not taken for test support", r)
		}
	}
	for _, r := range []string{".", "internal/store", "internal/nodes/nodesim", "internal/ionos/ionossim"} {
		if p, ok := all[path.Join(module, r)]; !ok || isTestSupport(p) {
			t.Errorf("%s is taken for test support (or is missing)", r)
		}
	}
	if got, want := layerChain(), "cmd -> cli -> server -> controlplane -> client/console -> api -> contract -> domain -> store -> vocabulary"; got != want {
		t.Errorf("layerChain() = %q, want %q", got, want)
	}
}

// TestPackageDocs checks that every package with non-test source, test support and main
// packages included, has a package doc comment in the standard form ("Package name ..." or,
// for a main package, "Command name ...").
func TestPackageDocs(t *testing.T) {
	ours, _ := listPackages(t)
	for _, p := range ours {
		if len(p.GoFiles) == 0 {
			continue // only _test.go files: nothing to document
		}
		want := "Package " + p.Name + " "
		if p.Name == "main" {
			want = "Command "
		}
		if !strings.HasPrefix(p.Doc, want) {
			t.Errorf("%s has no package doc comment starting %q: say in one paragraph above the package clause of one file (doc.go, or the package's main file) what the package does", p.ImportPath, want)
		}
	}
}

// TestSourceFileLength checks that no non-test Go source file of the module holds more than
// maxSourceLines lines: a longer one holds more than one job; split it along its seams.
func TestSourceFileLength(t *testing.T) {
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != "." && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		n, err := countLines(p)
		if err != nil {
			return err
		}
		if n > maxSourceLines {
			t.Errorf("%s has %d lines, more than %d: split it into files (or packages) with one job each", p, n, maxSourceLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func countLines(name string) (int, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}

// contractRoutes are the route strings of the node-agent contract: written once, in
// internal/nodeapi (its route constants and legacy prefixes); every other package uses the
// constants.
var contractRoutes = []string{`"/internal/v1/node-agent`, `"/internal/node-agent/v1`, `"/internal/meta`, `"/internal/v1/nodes`, `"/notify/health`, `"/nodes/register`, `"/nodes/{node_id}`}

// TestNodeContractRoutesOnce checks that no non-test source outside internal/nodeapi spells a
// route of the node-agent contract.
func TestNodeContractRoutesOnce(t *testing.T) {
	err := filepath.WalkDir("internal", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" || p == filepath.Join("internal", "nodeapi") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, r := range contractRoutes {
			if bytes.Contains(src, []byte(r)) {
				t.Errorf("%s spells the node-agent route %s...: use the constant of internal/nodeapi", p, strings.TrimPrefix(r, `"`))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestArchitectureDocListsEveryPackage checks that docs/architecture.md's package map names
// every package under internal/ (as `internal/...` in backquotes), so the map stays true as
// packages come and go.
func TestArchitectureDocListsEveryPackage(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	ours, _ := listPackages(t)
	for _, p := range ours {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		if !strings.HasPrefix(rel, "internal/") {
			continue
		}
		if !bytes.Contains(doc, []byte("`"+rel+"`")) {
			t.Errorf("docs/architecture.md's package map does not name %s: add a row saying its job and what it may import", rel)
		}
	}
}

// cliImports is the one table of what internal/cli may import of the module besides the root
// package, the contract (api and its subpackages) and the client (client; internal/client, the
// connection resolution). Commands that talk to the control plane speak only the contract;
// the others run a process or a tool of their own through its package.
var cliImports = []struct{ path, why string }{
	{"internal/server", "cubefleet server runs the control plane's transport"},
	{"internal/controlplane", "cubefleet server: the control plane's defaults and flag rules (Default, Parse*), server init; webhooks create --help lists its event types"},
	{"internal/agent", "cubefleet agent runs the node agent"},
	{"internal/agent/envfile", "cubefleet agent: the env file; fleet apply's printed command quotes like it"},
	{"internal/agent/hostinfo", "cubefleet agent check reads the host"},
	{"internal/agent/hostsetup", "cubefleet agent install, check, down"},
	{"internal/agent/driver/microvm", "cubefleet agent image import builds a template's image on the host"},
	{"internal/nodeapi", "the node contract: join token addresses are checked by its rules"},
	{"internal/ionos", "cubefleet ionos talks to the IONOS Cloud API, not to the control plane"},
	{"internal/ionos/ionossim", "cubefleet ionos simulate runs the loopback simulator"},
	{"internal/cubes", "cubefleet ionos plan plans Cube slots locally; coordinator render checks an origins file"},
	{"internal/cubes/journal", "cubefleet roundtrip status reads the scaling workflows' local journals"},
	{"internal/fleetssh", "cubefleet roundtrip check reaches the coordinator and the GPU host over SSH"},
	{"internal/atomicfile", "coordinator render --out writes its file atomically"},
	{"internal/scheduler", "cubefleet scheduler check loads a scheduler configuration file locally"},
	{"internal/scheduler/simulate", "cubefleet scheduler simulate runs the scheduler locally"},
	{"internal/fleet/document", "cubefleet fleet validate and schema check a document locally"},
	{"internal/events", "webhooks create --help: each event type's family wildcard, by the rule subscriptions match with"},
	{"internal/buildinfo", "cubefleet version"},
	{"internal/privatefile", "token and secret files are read with the private-file rules"},
}

// TestCLISpeaksTheContract holds internal/cli to the contract: no import of the module outside
// the root package, api/..., client, internal/client and the cliImports table, and no
// map[string]any (an API input is the contract's type).
func TestCLISpeaksTheContract(t *testing.T) {
	_, all := listPackages(t)
	cli, ok := all[module+"/internal/cli"]
	if !ok {
		t.Fatal("go list found no internal/cli")
	}
	for _, imp := range cli.Imports {
		r := rel(imp)
		if r == "" || r == "." || within(r, "api") || r == "client" || r == "internal/client" {
			continue
		}
		if !slices.ContainsFunc(cliImports, func(c struct{ path, why string }) bool { return c.path == r }) {
			t.Errorf("internal/cli imports %s: commands that talk to the control plane speak only the contract (api) through the client; a command that runs a tool of its own gets a row in cliImports saying why", r)
		}
	}
	for _, f := range cli.GoFiles {
		src, err := os.ReadFile(filepath.Join("internal", "cli", f))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(src, []byte("map[string]any{")) {
			t.Errorf("internal/cli/%s builds a map[string]any: give the API the contract's input type (api.<Method>Input)", f)
		}
	}
}
