package server

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	"github.com/cubefleet/cubefleet/internal/buildinfo"
)

// TestBuildInfoMetric: /metrics says which build the control plane runs, as
// cubefleet_build_info{goversion,revision,version} 1.
func TestBuildInfoMetric(t *testing.T) {
	e := mustStart(t, nil, nil)
	status, body := e.get("/metrics")
	if status != http.StatusOK {
		t.Fatalf("metrics: %d", status)
	}
	i := buildinfo.Read()
	revision := i.Revision
	if revision == "" {
		revision = "unknown"
	}
	want := fmt.Sprintf(`cubefleet_build_info{goversion=%q,revision=%q,version=%q} 1`, i.GoVersion, revision, i.Version)
	if !bytes.Contains(body, []byte(want)) {
		t.Errorf("metrics lack %s", want)
	}
}
