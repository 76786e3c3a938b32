package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestNodesGetNotReady: a node that reports its Ready condition False says why in its own words,
// and nodes get shows it (text and JSON); once it reports Ready again the words go.
func TestNodesGetNotReady(t *testing.T) {
	c := mustServe(t, "")
	writeFile(t, "fleet.json", `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu"}],"pools":[{"name":"fra-cubes","site":"fra","class":"vps-host"}]}`)
	c.admin("fleet", "apply", "fleet.json", "--tenant", "root", "--yes")
	token := strings.TrimSpace(c.admin("nodes", "join-token", "create", "--pool", "fra-cubes", "--any-ip"))
	code, out := c.post(nodeapi.PathRegister, token, nodeBody(t, "register.json", "10.0.0.7"))
	var reg nodeapi.RegisterResponse
	if err := json.Unmarshal(out, &reg); err != nil || code != 200 {
		t.Fatalf("join: %d %s", code, out)
	}
	report := func(body []byte) {
		t.Helper()
		if code, out := c.post(nodeapi.StatusPath("10.0.0.7"), reg.NodeCredential, body); code != 200 {
			t.Fatalf("status: %d %s", code, out)
		}
	}
	ready := nodeBody(t, "status.json", "10.0.0.7")
	notReady := bytes.Replace(bytes.Replace(bytes.Replace(ready, []byte(`"status": "True"`), []byte(`"status": "False"`), 1),
		[]byte(`"reason": "CubeletReady"`), []byte(`"reason": "SandboxRuntimeUnavailable"`), 1),
		[]byte(`"message": "Cubelet is posting ready status"`),
		[]byte(`"message": "sandbox directory /var/lib/cubefleet/sandboxes in use by process 24288: set CUBEFLEET_SANDBOX_DIR to a directory of this agent's own"`), 1)
	report(notReady)
	transcript := c.transcript("nodes get 10.0.0.7")
	var v struct {
		State           string `json:"state"`
		NotReadyReason  string `json:"notReadyReason"`
		NotReadyMessage string `json:"notReadyMessage"`
	}
	if err := json.Unmarshal([]byte(c.admin("nodes", "get", "10.0.0.7", "-o", "json")), &v); err != nil || v.State != "NotReady" ||
		v.NotReadyReason != "SandboxRuntimeUnavailable" || !strings.Contains(v.NotReadyMessage, "in use by process 24288") {
		t.Errorf("nodes get -o json: %+v %v", v, err)
	}
	report(ready)
	transcript += c.transcript("nodes get 10.0.0.7")
	testkit.Golden(t, "nodes_notready.golden", []byte(transcript))
}
