package cli

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/server"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestNodesCordonReasonAndDeleteGolden: nodes cordon takes --reason as drain does; deleting a
// node that went silent (Lost) and is not cordoned says the exact commands, and delete --force
// cordons it first (an audited nodes.cordon call with the --reason) and then deletes it.
func TestNodesCordonReasonAndDeleteGolden(t *testing.T) {
	var clock atomic.Int64
	clock.Store(testNow().UnixMilli())
	c := mustServe(t, "", func(cfg *server.Config) { cfg.Now = func() time.Time { return time.UnixMilli(clock.Load()).UTC() } })
	var site, pool struct{ ID string }
	json.Unmarshal([]byte(c.admin("api", "compute.sites.create", `{"tenantId":"root","kind":"shared","region":"eu-central"}`)), &site)
	json.Unmarshal([]byte(c.admin("api", "compute.pools.create", `{"tenantId":"root","siteId":"`+site.ID+`","class":"vps-host"}`)), &pool)
	token := strings.TrimSpace(c.admin("nodes", "join-token", "create", "--pool", pool.ID, "--uses", "2", "--any-ip"))
	for _, id := range []string{"10.0.0.7", "10.0.0.8"} {
		if code, out := c.post(nodeapi.PathRegister, token, nodeBody(t, "register.json", id)); code != 200 {
			t.Fatalf("join %s: %d %s", id, code, out)
		}
	}
	clock.Add((10 * time.Minute).Milliseconds()) // both go silent: Lost
	testkit.WaitFor(t, 10*time.Second, "both nodes Lost", func() bool {
		return strings.Count(c.admin("nodes", "list", "--state", "lost"), "Lost") == 2
	})
	out := c.transcript(
		"nodes delete 10.0.0.7",
		"nodes cordon 10.0.0.7 --reason decommissioned",
	)
	var n nodes.View
	json.Unmarshal([]byte(c.admin("api", "nodes.get", `{"nodeId":"10.0.0.7"}`)), &n)
	if !n.Cordoned || n.CordonDetail != "decommissioned" {
		t.Errorf("after nodes cordon --reason: cordoned %v, detail %q", n.Cordoned, n.CordonDetail)
	}
	out += c.transcript(
		"nodes delete 10.0.0.7",
		"nodes delete 10.0.0.7 --force",
		"nodes delete 10.0.0.8 --force --reason rack-gone",
	)
	var left struct{ Items []nodes.View }
	json.Unmarshal([]byte(c.admin("api", "nodes.list", "{}")), &left)
	out += "nodes left: " + strings.Join(func() []string {
		var ids []string
		for _, v := range left.Items {
			ids = append(ids, v.ID+" ("+v.CordonDetail+")")
		}
		return ids
	}(), ", ") + "\n\naudit:\n"
	var audit struct {
		Items []struct {
			Method string `json:"method"`
			Target string `json:"target"`
		} `json:"items"`
	}
	json.Unmarshal([]byte(c.admin("audit", "list", "--output", "json")), &audit)
	for _, row := range audit.Items {
		if strings.HasPrefix(row.Method, "nodes.") {
			out += row.Method + " " + row.Target + "\n"
		}
	}
	testkit.Golden(t, "nodes_delete.golden", []byte(c.normalize(out)))
}
