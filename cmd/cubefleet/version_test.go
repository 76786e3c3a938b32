package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestVersionOfAStampedBuild builds cubefleet with a version and a revision stamped at link
// time (how a release is built where the toolchain records no VCS information) and checks that
// every place that tells the version says it: `cubefleet version` and `--version`, the control
// plane's cubefleet_build_info metric, and the version an agent reports to the node registry.
func TestVersionOfAStampedBuild(t *testing.T) {
	const version, revision = "v1.2.3-e2e", "0123456789abcdef0123456789abcdef01234567"
	dir := t.TempDir()
	bin := filepath.Join(dir, "cubefleet")
	pkg := "github.com/cubefleet/cubefleet/internal/buildinfo"
	if out, err := exec.Command("go", "build", "-o", bin,
		"-ldflags", "-X "+pkg+".version="+version+" -X "+pkg+".revision="+revision, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if want := "cubefleet version " + version + " (revision 0123456789ab)\n"; err != nil || string(out) != want {
		t.Errorf("cubefleet --version = %q (%v), want %q", out, err, want)
	}
	out, err = exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "cubefleet "+version+"\nrevision   "+revision+"\n") {
		t.Errorf("cubefleet version:\n%s(%v)", out, err)
	}

	// A control plane and one agent on loopback, both this binary.
	addr := freeAddr(t)
	c := &cluster{t: t, bin: bin, url: "http://" + addr, dataDir: filepath.Join(dir, "data")}
	startChild(t, "server", filepath.Join(dir, "server.log"), bin, "server", "--dev", "--data-dir", c.dataDir, "--listen", addr)
	testkit.WaitFor(t, 30*time.Second, "the server to answer GET /readyz with 200", func() bool {
		resp, err := http.Get(c.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	resp, err := http.Get(c.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf(`revision=%q,version=%q} 1`, revision, version); !strings.Contains(string(metrics), "cubefleet_build_info{") || !strings.Contains(string(metrics), want) {
		t.Errorf("metrics lack cubefleet_build_info{...%s", want)
	}

	if err := os.WriteFile(filepath.Join(dir, "fleet.json"), []byte(`{"version":1,"sites":[{"name":"lab","kind":"shared","region":"local"}],`+
		`"pools":[{"name":"demo","site":"lab","class":"vps-host"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c.ok("fleet", "apply", filepath.Join(dir, "fleet.json"), "--tenant", "root", "--yes")
	const nodeIP = "127.0.0.41"
	token := c.ok("nodes", "join-token", "create", "--pool", "demo", "--ip", nodeIP)
	writeFile(t, filepath.Join(dir, "node.token"), token, 0o600)
	health := net.JoinHostPort(nodeIP, fmt.Sprint(freePort(t, netip.MustParseAddr(nodeIP))))
	writeFile(t, filepath.Join(dir, "node.env"), strings.Join([]string{
		"ONE_CLICK_DEPLOY_ROLE=compute",
		"CUBE_SANDBOX_NODE_IP=" + nodeIP,
		"ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR=" + addr,
		"CUBE_S3_ENDPOINT=" + c.url,
		"CUBE_S3_ACCESS_KEY_ID=demo",
		"CUBE_S3_SECRET_ACCESS_KEY=demo",
		"CUBEFLEET_ALLOW_LOOPBACK=1",
		"CUBEFLEET_RUNTIME=process",
		"CUBEFLEET_AGENT_LISTEN=" + health,
		"CUBEFLEET_AGENT_STATE_DIR=" + filepath.Join(dir, "state"),
		"CUBEFLEET_JOIN_TOKEN_FILE=" + filepath.Join(dir, "node.token"),
	}, "\n")+"\n", 0o600)
	startChild(t, "agent", filepath.Join(dir, "agent.log"), bin, "agent", "run", "--env-file", filepath.Join(dir, "node.env"))
	var node nodes.View
	testkit.WaitFor(t, 30*time.Second, "the agent's node to be registered with its versions", func() bool {
		out, _, code := c.run("", "", "api", "nodes.get", `{"nodeId":"`+nodeIP+`"}`)
		return code == 0 && json.Unmarshal([]byte(out), &node) == nil && len(node.Versions) > 0
	})
	if v := node.Versions[0]; v.Component != "cubefleet-agent" || v.Version != version || v.Commit != revision {
		t.Errorf("the agent reports %+v, want cubefleet-agent %s at %s", v, version, revision)
	}
}
