package cubefleet_test

// The recipes of the README and docs/ that a new user pastes as they are: read from the
// Markdown, so a recipe that drifts back into a trap fails here. (They were also run by hand on
// loopback; the commands they use have tests of their own.)

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// shellBlocks returns the ```sh blocks of the Markdown file path, from the first one after the
// heading `from` (all of the file when from is "") to the next heading of the same level.
func shellBlocks(t *testing.T, path, from string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if from != "" {
		i := strings.Index(text, from+"\n")
		if i < 0 {
			t.Fatalf("%s has no heading %q", path, from)
		}
		text = text[i+len(from):]
		level := from[:strings.Index(from, " ")+1]
		if j := strings.Index(text, "\n"+level); j >= 0 {
			text = text[:j]
		}
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(text, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// commands joins a block's continued lines and drops comments: one command per element.
func commands(block string) []string {
	var out []string
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		if i := strings.Index(line, "  #"); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// TestREADMECIKeyIsKeptPrivateAndUsed: the README's CI recipe writes the key it creates under
// .private/ (git-ignored, made with a private umask), and every fleet command after it uses that
// key: without --token-file the CLI falls back to ./.cubefleet/admin.token, the administrator's.
func TestREADMECIKeyIsKeptPrivateAndUsed(t *testing.T) {
	var recipe []string
	for _, b := range shellBlocks(t, "README.md", "") {
		if strings.Contains(b, "keys create") {
			recipe = commands(b)
		}
	}
	if recipe == nil {
		t.Fatal("the README has no CI recipe (a block with keys create)")
	}
	keyFile := ""
	for _, cmd := range recipe {
		if strings.Contains(cmd, "keys create") {
			m := regexp.MustCompile(`> (\S+)$`).FindStringSubmatch(cmd)
			if m == nil || !strings.HasPrefix(m[1], ".private/") {
				t.Fatalf("the CI recipe writes its key to %v, want a file under .private/: %s", m, cmd)
			}
			keyFile = m[1]
			continue
		}
		if keyFile == "" {
			if strings.Contains(cmd, "cubefleet ") && !strings.Contains(cmd, "mkdir") {
				t.Errorf("a command before the key exists: %s", cmd)
			}
			if strings.Contains(cmd, "mkdir") && !strings.Contains(cmd, "umask 077") {
				t.Errorf("the .private directory is made without umask 077: %s", cmd)
			}
			continue
		}
		if strings.Contains(cmd, "cubefleet ") && !strings.Contains(cmd, "--token-file "+keyFile) {
			t.Errorf("a command after the key was made does not use it (it would use the administrator's key): %s", cmd)
		}
	}
	ignore, err := os.ReadFile(".gitignore")
	if err != nil || !regexp.MustCompile(`(?m)^/?\.private/$`).Match(ignore) {
		t.Errorf(".gitignore does not ignore .private/ (%v)", err)
	}
}

// TestQuickStartsWaitForTheServer: the README's "Running it yourself" and docs/agent.md's two-node
// demo start a --dev server in the background; each waits for it (and its key) for a bounded
// time before the first command that needs it, never with a loop that runs forever, and the
// demo takes the server's port from one variable.
func TestQuickStartsWaitForTheServer(t *testing.T) {
	waits := regexp.MustCompile(`^for i in \$\(seq \d+\); do \S*cubefleet tenants list > /dev/null 2>&1 && break; sleep [0-9.]+; done$`)
	check := func(t *testing.T, cmds []string) {
		started := false
		for _, cmd := range cmds {
			switch {
			case strings.HasPrefix(cmd, "until ") || strings.HasPrefix(cmd, "while "):
				t.Errorf("a loop without a bound: %s", cmd)
			case strings.Contains(cmd, "server --dev") && strings.HasSuffix(cmd, "&"):
				started = true
			case started && waits.MatchString(cmd):
				return
			case started && strings.Contains(cmd, "cubefleet "):
				t.Fatalf("a command runs before the wait for the server: %s", cmd)
			}
		}
		t.Errorf("no bounded wait for the server after it starts (want a line matching %s)", waits)
	}
	t.Run("README", func(t *testing.T) {
		check(t, commands(strings.Join(shellBlocks(t, "README.md", "## Running it yourself"), "\n")))
	})
	t.Run("docs/agent.md", func(t *testing.T) {
		blocks := shellBlocks(t, "docs/agent.md", "## Two nodes on one host (a demo)")
		cmds := commands(strings.Join(blocks, "\n"))
		check(t, cmds)
		ports := 0
		for _, cmd := range cmds {
			if regexp.MustCompile(`^port=\d+$`).MatchString(cmd) {
				ports++
			} else if strings.Contains(cmd, ":3010") {
				t.Errorf("a port written out instead of $port: %s", cmd)
			}
		}
		if ports != 1 {
			t.Errorf("%d port= lines, want one", ports)
		}
		if all := strings.Join(blocks, "\n"); !strings.Contains(all, "did not come up") {
			t.Error("the demo does not say when the control plane did not come up")
		}
		if data, _ := os.ReadFile("docs/agent.md"); !strings.Contains(string(data), "First stop any control plane you started before") {
			t.Error("the demo does not say to stop a control plane already running")
		}
	})
}

// TestDemoScript runs the README's first set-up command, scripts/demo.sh, on a free loopback
// port: it must end well (exit 0), print the sandbox's output, stop the agent with its sandboxes,
// and leave no sandbox process of its own behind.
func TestDemoScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the whole demo")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("the demo needs curl")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cmd := exec.Command("bash", filepath.Join("scripts", "demo.sh"))
	cmd.Env = append(os.Environ(), "CUBEFLEET_DEMO_PORT="+port)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/demo.sh: %v\n%s", err, out)
	}
	for _, want := range []string{"8 to create, 0 to update, 0 to delete, 0 unchanged.", "6 x 7 = 42", "Stopped the agent", "Demo finished"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
	// Its sandboxes lived under the demo's temporary directory, now removed: none may run on.
	m := regexp.MustCompile(`Stopped \d+ sandbox(?:es)? in (\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("the demo does not say where it stopped its sandboxes:\n%s", out)
	}
	// A sandbox's supervisor keeps its log and output files open: a process with one of them
	// open (or working there) is a sandbox that outlived the demo.
	links, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	cwds, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, l := range append(links, cwds...) {
		if to, err := os.Readlink(l); err == nil && strings.HasPrefix(to, string(m[1])) {
			t.Errorf("a process still holds the demo's sandbox directory: %s -> %s", l, to)
		}
	}
}
