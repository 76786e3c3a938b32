package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes/nodesim"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestNodesLoad is the registry's load run (opt-in: CUBEFLEET_NODES_LOAD=1; it takes a few
// minutes). A real `cubefleet server` process (built from cmd/cubefleet) on SQLite and on
// PostgreSQL receives CUBEFLEET_NODES_LOAD_NODES (default 10,000) simulated nodes that joined
// with a join token and report every second with their node credential over their own
// keep-alive connection on 127.0.0.1, for CUBEFLEET_NODES_LOAD_DURATION (default 60s). It
// measures the report latency (p50, p99), lost reports (must be 0), the server's resident set
// (peak), GET /internal/v1/nodes under that load, and then the ingestion ceiling (reports/s
// with 64 connections reporting as fast as they are answered). Targets: p99 <= 50 ms,
// 0 lost, RSS <= 500 MB, list <= 100 ms, ceiling >= 20,000/s.
func TestNodesLoad(t *testing.T) {
	if os.Getenv("CUBEFLEET_NODES_LOAD") == "" {
		t.Skip("the node load run is opt-in: CUBEFLEET_NODES_LOAD=1 go test ./internal/server -run TestNodesLoad -v -timeout 30m")
	}
	count := envInt(t, "CUBEFLEET_NODES_LOAD_NODES", 10000)
	duration := envDuration(t, "CUBEFLEET_NODES_LOAD_DURATION", time.Minute)
	bin := buildCubefleet(t)
	dbs := strings.Split(os.Getenv("CUBEFLEET_NODES_LOAD_DB"), ",")
	if dbs[0] == "" {
		dbs = []string{"sqlite", "postgres"}
	}
	for _, kind := range dbs {
		t.Run(kind, func(t *testing.T) {
			dsn := ""
			if kind == "postgres" {
				dsn = storetest.PostgresURL(t)
			}
			loadRun(t, bin, dsn, count, duration)
		})
	}
}

func envInt(t *testing.T, key string, def int) int {
	if v := os.Getenv(key); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return n
	}
	return def
}

func envDuration(t *testing.T, key string, def time.Duration) time.Duration {
	if v := os.Getenv(key); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return d
	}
	return def
}

// buildCubefleet builds cmd/cubefleet into a temporary directory.
func buildCubefleet(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cubefleet")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/cubefleet").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// serverProc is a `cubefleet server --dev` child process.
type serverProc struct {
	url, addr, dataDir, admin string
	pid                       int
	stop                      func() // stops the process (at most once)
}

// startServerProc starts `cubefleet server --dev` from bin on dsn ("" is SQLite in its data
// directory), with extra flags after the others, and stops it when the test ends (or stop).
func startServerProc(t testing.TB, bin, dsn string, extra ...string) *serverProc {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := &serverProc{addr: addr, url: "http://" + addr, dataDir: filepath.Join(t.TempDir(), "data")}
	args := []string{"server", "--dev", "--data-dir", p.dataDir, "--listen", addr, "--log-format", "json",
		"--node-agent-allow-unauthenticated", "127.0.0.0/8", "--drift-every", "-1s"}
	if dsn != "" {
		args = append(args, "--database", dsn)
	}
	args = append(args, extra...)
	logPath := filepath.Join(t.TempDir(), "server.log")
	if keep := os.Getenv("CUBEFLEET_NODES_LOAD_LOG"); keep != "" {
		logPath = keep
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if gogc := os.Getenv("CUBEFLEET_NODES_LOAD_GOGC"); gogc != "" {
		cmd.Env = append(os.Environ(), "GOGC="+gogc)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.pid = cmd.Process.Pid
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			cmd.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
			}
			logFile.Close()
		})
	}
	t.Cleanup(p.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile.Name())
			t.Fatalf("server not ready: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	tok, err := os.ReadFile(filepath.Join(p.dataDir, controlplane.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	p.admin = strings.TrimSpace(string(tok))
	return p
}

// api calls a method as the administrator.
func (p *serverProc) api(t testing.TB, method string, in, out any) {
	t.Helper()
	b, _ := json.Marshal(in)
	req, _ := http.NewRequest("POST", p.url+"/api/v1/"+method, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+p.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", method, resp.StatusCode, body)
	}
	if out != nil {
		json.Unmarshal(body, out)
	}
}

// rss reads a process's resident set and its peak from /proc, in MB.
func rss(pid int) (now, peak float64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		for key, dst := range map[string]*float64{"VmRSS:": &now, "VmHWM:": &peak} {
			if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
				kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
				*dst = float64(kb) / 1024
			}
		}
	}
	return now, peak
}

// metricValue reads one sample from the server's /metrics.
func metricValue(t *testing.T, url, sample string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			v, _ := strconv.ParseFloat(rest, 64)
			return v
		}
	}
	return 0
}

func loadRun(t *testing.T, bin, dsn string, count int, duration time.Duration) {
	ctx := context.Background()
	p := startServerProc(t, bin, dsn)
	_, idle := rss(p.pid)
	var site, pool obj
	p.api(t, "compute.sites.create", map[string]any{"tenantId": "root", "kind": "shared", "region": "eu-central"}, &site)
	p.api(t, "compute.pools.create", map[string]any{"tenantId": "root", "siteId": site.id(), "class": "vps-host"}, &pool)
	var jt contract.JoinTokenCreated
	p.api(t, "nodes.joinTokens.create", map[string]any{"pool": pool.id(), "uses": count, "anyIp": true, "ttlSeconds": 3600}, &jt)
	regBody, err := os.ReadFile(filepath.Join("..", "nodes", "nodetest", "testdata", "register.json"))
	if err != nil {
		t.Fatal(err)
	}
	stBody, _ := os.ReadFile(filepath.Join("..", "nodes", "nodetest", "testdata", "status.json"))
	stBody = bytes.ReplaceAll(stBody, []byte("2026-05-04T10:00:00Z"), []byte("2006-01-02T15:04:05Z"))
	stBody = bytes.ReplaceAll(stBody, []byte("2026-05-04T09:59:59Z"), []byte("2006-01-02T15:04:05Z"))
	start := time.Now()
	nodes, err := nodesim.RegisterAll(ctx, p.addr, nodesim.IDs(count), jt.Token, 64, func(id string) []byte {
		return bytes.ReplaceAll(regBody, []byte("10.0.0.7"), []byte(id))
	})
	if err != nil {
		t.Fatal(err)
	}
	joined := time.Since(start)
	_, joinHWM := rss(p.pid)
	for _, n := range nodes {
		if !strings.HasPrefix(n.Credential, "cfn_") {
			t.Fatalf("node %s joined without a credential", n.ID)
		}
	}
	okBefore := metricValue(t, p.url, `cubefleet_node_reports_total{result="ok"}`)
	hist0 := reportHistogram(t, p.url)

	// While the nodes report: sample the server's memory and list the nodes every 5 s.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var peakRSS float64
	var lists []time.Duration
	var listSize, listed int
	var coldList time.Duration // the first GET: nothing cached yet
	mem := map[string]float64{}
	memAt := time.Now().Add(duration / 2)
	wg.Go(func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				now, _ := rss(p.pid)
				peakRSS = max(peakRSS, now)
				if len(mem) == 0 && time.Now().After(memAt) { // the Go runtime's view, half-way through
					for _, m := range []string{"go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_sys_bytes",
						"go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes", "go_goroutines", "go_memstats_next_gc_bytes"} {
						mem[m] = metricValue(t, p.url, m)
					}
				}
			}
		}
	})
	wg.Go(func() {
		c, err := nodesim.Dial(p.addr)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Second):
			}
			t0 := time.Now()
			status, out, err := c.Do("GET", nodeapi.NodesPrefix, p.admin, nil)
			d := time.Since(t0)
			if err != nil || status != 200 {
				t.Errorf("list: %d %v", status, err)
				continue
			}
			if coldList == 0 {
				coldList = d
			} else {
				lists = append(lists, d)
			}
			listSize, listed = len(out), bytes.Count(out, []byte(`"IP":"`))
		}
	})
	serverCPU0, clientCPU0, stall0 := procCPU(p.pid), selfCPU(), cpuStall()
	res, err := nodesim.Run(ctx, nodesim.Config{Addr: p.addr, Nodes: nodes, Period: time.Second, Duration: duration, Body: nodesim.StatusBody(stBody)})
	serverCPU, clientCPU, stall := procCPU(p.pid)-serverCPU0, selfCPU()-clientCPU0, cpuStall()-stall0
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	runEnd := time.Now()
	serverOK := metricValue(t, p.url, `cubefleet_node_reports_total{result="ok"}`) - okBefore
	serverP99 := histogramQuantile(hist0, reportHistogram(t, p.url), 0.99)
	listBuild := metricValue(t, p.url, "cubefleet_node_list_duration_seconds_sum") / max(1, metricValue(t, p.url, "cubefleet_node_list_duration_seconds_count"))

	// Every node's last report reaches the database within the flush interval.
	time.Sleep(2 * time.Second)
	db, err := openDSN(ctx, dsn, p.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var persisted int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM nodes_status WHERE reported_at >= $1`, runEnd.Add(-3*time.Second).UnixMilli()).Scan(&persisted); err != nil {
		t.Fatal(err)
	}

	// The ingestion ceiling: 64 connections, as fast as the server answers, for 10 s.
	flood := 10 * time.Second
	ok, failed, err := nodesim.Flood(ctx, p.addr, nodes, 64, flood, nodesim.StatusBody(stBody))
	if err != nil {
		t.Fatal(err)
	}
	ceiling := float64(ok) / flood.Seconds()
	_, hwm := rss(p.pid) // includes the flood
	slices.Sort(lists)
	var listMed, listMax time.Duration
	if len(lists) > 0 {
		listMed, listMax = lists[len(lists)/2], lists[len(lists)-1]
	}
	kind := "sqlite"
	if dsn != "" {
		kind = "postgres"
	}
	report := fmt.Sprintf(`node load run (%s): %d nodes joined in %s, reporting every 1s for %s
  reports: sent %d, ok %d (server counted %d), lost %d (of which missed ticks %d), persisted last reports %d/%d
  latency: p50 %s, p99 %s, p99.9 %s, max %s (in the server's handler: p99 <= %s)
  server RSS: idle %.0f MB, peak after the joins %.0f MB, peak while reporting %.0f MB, peak at the end (after the ceiling run) %.0f MB
  GET /internal/v1/nodes (%d nodes, %.1f MB) under load: first (cold) %s, then median %s, max %s over %d calls (server build: mean %s)
  ingestion ceiling: %.0f reports/s (64 connections, %s, %d failed)
  CPU during the run: server %.2f cores, load generator %.2f cores (of %d); runnable tasks waited for a CPU %.0f%% of the time (PSI "some"); server Go memory half-way: heap in use %.0f MB (next GC at %.0f MB), stacks %.0f MB, from the OS %.0f MB (%.0f MB idle, %.0f MB released), %.0f goroutines
`, kind, count, joined.Round(time.Millisecond), duration, res.Sent, res.OK, int64(serverOK), res.Lost, res.Missed, persisted, count,
		res.P50.Round(10*time.Microsecond), res.P99.Round(10*time.Microsecond), res.P999.Round(10*time.Microsecond), res.Max.Round(time.Millisecond), serverP99,
		idle, joinHWM, peakRSS, hwm, listed, float64(listSize)/1e6, coldList.Round(time.Millisecond), listMed.Round(time.Millisecond), listMax.Round(time.Millisecond), len(lists), time.Duration(listBuild*float64(time.Second)).Round(time.Millisecond),
		ceiling, flood, failed, serverCPU/res.Elapsed.Seconds(), clientCPU/res.Elapsed.Seconds(), runtime.NumCPU(), 100*stall.Seconds()/res.Elapsed.Seconds(),
		mem["go_memstats_heap_inuse_bytes"]/1e6, mem["go_memstats_next_gc_bytes"]/1e6, mem["go_memstats_stack_inuse_bytes"]/1e6, mem["go_memstats_sys_bytes"]/1e6,
		mem["go_memstats_heap_idle_bytes"]/1e6, mem["go_memstats_heap_released_bytes"]/1e6, mem["go_goroutines"])
	t.Log(report)
	if out := os.Getenv("CUBEFLEET_NODES_LOAD_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			f.WriteString(report)
			f.Close()
		}
	}
	for _, e := range res.Errors {
		t.Logf("failure: %s", e)
	}
	if res.Lost != 0 || int64(serverOK) < res.OK || persisted != count {
		t.Errorf("lost reports: %d lost, server counted %d of %d, %d/%d last reports persisted", res.Lost, int64(serverOK), res.OK, persisted, count)
	}
	if res.P99 > 50*time.Millisecond {
		t.Errorf("p99 %s > 50 ms", res.P99)
	}
	if max(peakRSS, hwm) > 500 {
		t.Errorf("server RSS %.0f MB > 500 MB", max(peakRSS, hwm))
	}
	if listMax > 100*time.Millisecond {
		t.Errorf("GET /internal/v1/nodes took %s > 100 ms", listMax)
	}
	if ceiling < 20000 {
		t.Errorf("ingestion ceiling %.0f reports/s < 20,000", ceiling)
	}
}

// reportHistogram reads the cumulative buckets of cubefleet_node_report_duration_seconds:
// upper bound (seconds) -> count.
func reportHistogram(t *testing.T, url string) map[float64]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[float64]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), `cubefleet_node_report_duration_seconds_bucket{le="`)
		if !ok {
			continue
		}
		le, count, _ := strings.Cut(rest, `"} `)
		bound, err := strconv.ParseFloat(le, 64)
		if le == "+Inf" {
			bound, err = 1e9, nil
		}
		n, err2 := strconv.ParseFloat(count, 64)
		if err == nil && err2 == nil {
			out[bound] = n
		}
	}
	return out
}

// histogramQuantile returns the upper bound of the bucket holding quantile q of the
// observations made between two readings of a cumulative histogram.
func histogramQuantile(before, after map[float64]float64, q float64) string {
	bounds := make([]float64, 0, len(after))
	for b := range after {
		bounds = append(bounds, b)
	}
	slices.Sort(bounds)
	total := after[1e9] - before[1e9]
	for _, b := range bounds {
		if after[b]-before[b] >= q*total {
			if b == 1e9 {
				return "+Inf"
			}
			return time.Duration(b * float64(time.Second)).String()
		}
	}
	return "?"
}

// procCPU is a process's user and system CPU time in seconds, from /proc.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command (which may hold spaces) start after the last ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // clock ticks (USER_HZ is 100 on Linux)
}

// cpuStall is the machine's total CPU pressure stall time (/proc/pressure/cpu "some"): how long
// runnable tasks waited for a CPU. On a shared machine it says how much of a run's latency is
// other work's.
func cpuStall() time.Duration {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(strings.SplitN(string(b), "\n", 2)[0]) {
		if v, ok := strings.CutPrefix(f, "total="); ok {
			us, _ := strconv.ParseInt(v, 10, 64)
			return time.Duration(us) * time.Microsecond
		}
	}
	return 0
}

// selfCPU is this process's user and system CPU time in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// openDSN opens the server's database for checks (its SQLite file when dsn is "").
func openDSN(ctx context.Context, dsn, dataDir string) (*store.DB, error) {
	if dsn == "" {
		dsn = filepath.Join(dataDir, controlplane.DBFile)
	}
	return store.Open(ctx, dsn)
}
