package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodeBody is a Cubelet-shaped register body for node id (the registry's golden body).
func nodeBody(t *testing.T, name, id string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(pkgDir, "..", "nodes", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(b, []byte("10.0.0.7"), []byte(id))
}

// post sends a node-agent call to the test server.
func (c *cliEnv) post(path, token string, body []byte) (int, []byte) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.url+path, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func TestNodesCommands(t *testing.T) {
	eachDatabase(t, func(t *testing.T, c *cliEnv) {
		var site, pool struct{ ID string }
		json.Unmarshal([]byte(c.admin("api", "compute.sites.create", `{"tenantId":"root","kind":"shared","region":"eu-central"}`)), &site)
		json.Unmarshal([]byte(c.admin("api", "compute.pools.create", `{"tenantId":"root","siteId":"`+site.ID+`","class":"vps-host"}`)), &pool)
		var b strings.Builder
		record := func(args ...string) string {
			t.Helper()
			code, out, errOut := c.run("", append(args, "--token-file", c.tokenFile)...)
			fmt.Fprintf(&b, "$ cubefleet %s\nexit %d\n", strings.Join(args, " "), code)
			if out != "" {
				fmt.Fprintf(&b, "stdout:\n%s", out)
			}
			if errOut != "" {
				fmt.Fprintf(&b, "stderr:\n%s", errOut)
			}
			b.WriteString("\n")
			return out
		}
		record("nodes", "list")
		token := strings.TrimSpace(record("nodes", "join-token", "create", "--pool", pool.ID, "--uses", "2", "--ttl", "30m", "--any-ip"))
		if !strings.HasPrefix(token, "cfj_") {
			t.Fatalf("join token %q", token)
		}
		creds := map[string]string{}
		for _, id := range []string{"10.0.0.7", "10.0.0.8"} {
			code, out := c.post("/internal/v1/node-agent/nodes/register", token, nodeBody(t, "register.json", id))
			var reg struct {
				Credential string `json:"node_credential"`
			}
			json.Unmarshal(out, &reg)
			if code != 200 || reg.Credential == "" {
				t.Fatalf("join %s: %d %s", id, code, out)
			}
			creds[id] = reg.Credential
		}
		if code, out := c.post("/internal/v1/node-agent/nodes/10.0.0.7/status", creds["10.0.0.7"], nodeBody(t, "status.json", "10.0.0.7")); code != 200 {
			t.Fatalf("status: %d %s", code, out)
		}
		record("nodes", "list")
		record("nodes", "get", "10.0.0.7")
		record("nodes", "cordon", "10.0.0.7", "--detail", "kernel update")
		record("nodes", "label", "10.0.0.7", "rack=r12", "kubernetes.io/os-")
		record("nodes", "list", "--state", "Ready")
		record("nodes", "delete", "10.0.0.7")
		record("nodes", "delete", "10.0.0.7", "--force")
		record("nodes", "uncordon", "10.0.0.8")
		record("nodes", "get", "10.0.0.7")
		record("nodes", "label", "10.0.0.8", "oops")
		record("nodes", "list", "--state", "Sleeping")
		record("nodes", "join-token", "create", "--pool", "no-such-pool")
		record("nodes", "join-token", "create", "--pool", pool.ID, "--ip", "10.0.0.1", "--any-ip")
		golden(t, "nodes", c.normalize(strings.ReplaceAll(b.String(), token, "<join token>")))

		// nodes list -o json is the API's output.
		var list struct {
			Items []struct {
				ID    string `json:"id"`
				State string `json:"state"`
			} `json:"items"`
			Now int64 `json:"now"`
		}
		if err := json.Unmarshal([]byte(c.admin("nodes", "list", "-o", "json")), &list); err != nil || len(list.Items) != 1 || list.Items[0].ID != "10.0.0.8" {
			t.Errorf("nodes list -o json: %+v %v", list, err)
		}
		// Events reach the log within a second.
		deadline := time.Now().Add(5 * time.Second)
		for {
			out := c.admin("nodes", "events", "10.0.0.7")
			if strings.Contains(out, "node.deleted") {
				if !strings.Contains(out, "node.joined") || !strings.Contains(out, "node.cordoned") {
					t.Errorf("events:\n%s", out)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no node.deleted event:\n%s", out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
