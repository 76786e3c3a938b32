package main_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/fleet/fleettest"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// BenchmarkServerApplyRSS applies the document at the limits (5,000 objects) through the HTTP
// API of a real `cubefleet server` process and reports the seconds the apply took and the
// server's peak resident set size (VmHWM) in MB. Target: <= 2 s and <= 200 MB. The document's
// provider accounts read env://IONOS_TOKEN, so the server runs with --env-ref-allow IONOS_.
func BenchmarkServerApplyRSS(b *testing.B) {
	doc := fleettest.LimitsDocument()
	for _, db := range []string{"sqlite", "postgres"} {
		b.Run(db, func(b *testing.B) {
			var peak float64
			for range b.N {
				b.StopTimer()
				dsn := ""
				if db == "postgres" {
					dsn = storetest.PostgresURL(b)
				}
				c := startServerB(b, dsn, "--env-ref-allow", "IONOS_")
				body := []byte(`{"tenantId":"root","config":` + string(doc) + `}`)
				token, err := os.ReadFile(c.dataDir + "/admin.token")
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				req, _ := http.NewRequest(http.MethodPost, c.url+"/api/v1/fleet.apply", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
				start := time.Now()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("apply: %s: %s", resp.Status, answer)
				}
				b.ReportMetric(time.Since(start).Seconds(), "apply-s")
				b.StopTimer()
				peak = max(peak, vmHWM(b, c.pid))
				c.stop()
			}
			b.ReportMetric(peak, "peak-RSS-MB")
		})
	}
}

// vmHWM reads a process's peak resident set size from /proc, in MB.
func vmHWM(b *testing.B, pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				b.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	b.Fatal("no VmHWM")
	return 0
}
