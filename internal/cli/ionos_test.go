package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/ionos"
	"github.com/cubefleet/cubefleet/internal/ionos/ionossim"
)

const ionosTestToken = "cli-test-token-QQSECRETQQ"

// ionosEnv is a simulator with a sample fleet, a token file for it and a private
// configuration matching the fleet plus one empty slot.
type ionosEnv struct {
	sim                     *ionossim.Listener
	dir, token, config, inv string
}

func newIonosEnv(t *testing.T, cubeCount int) ionosEnv {
	t.Helper()
	return newIonosEnvOn(t, cubeCount, ionossim.SampleServerIP)
}

// loopbackIP is the private IP of Cube i of a loopback fleet (newIonosEnvOn): 127.0.0.11
// upwards, where a test runs the Cube's agent or sshd.
func loopbackIP(i int) string { return fmt.Sprintf("127.0.0.%d", 11+i) }

// newIonosEnvOn is newIonosEnv with Cube i's private IP ipOf(i); with loopbackIP, the private
// LAN is 127.0.0.0/8 (the NAT gateway 127.0.0.1, the load balancer 127.0.0.5).
func newIonosEnvOn(t *testing.T, cubeCount int, ipOf func(int) string) ionosEnv {
	t.Helper()
	sim := ionossim.New(ionossim.Options{Authorize: ionossim.AcceptToken(ionosTestToken)})
	world := ionossim.SampleFleet(cubeCount)
	if ipOf(0) != ionossim.SampleServerIP(0) {
		world = ionossim.SampleFleetOn(cubeCount, "127.0.0.0/8", ipOf)
	}
	if err := sim.Load(world); err != nil {
		t.Fatal(err)
	}
	l, err := ionossim.Listen(context.Background(), "127.0.0.1:0", sim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	dir := t.TempDir()
	env := ionosEnv{sim: l, dir: dir, token: filepath.Join(dir, "token.txt"), config: filepath.Join(dir, "config.json"), inv: filepath.Join(dir, "inventory.json")}
	if err := os.WriteFile(env.token, []byte(ionosTestToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &cubes.Config{DatacenterID: ionossim.SampleDatacenterID, PrivateLANID: ionossim.SamplePrivateLAN, MinimumCores: 4,
		MinimumRAMMiB: 8192, MinimumCubes: 1, WorkerSecurityGroupIDs: []string{ionossim.SampleWorkerGroupID}}
	for i := range cubeCount + 1 {
		s := cubes.Slot{Name: fmt.Sprintf("cube-%03d", i), PrivateIP: ipOf(i)}
		if i < cubeCount {
			s.ServerID = ionossim.SampleServerID(i)
		}
		cfg.Slots = append(cfg.Slots, s)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(env.config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return env
}

// runCLI runs the command line and returns the exit code, stdout and stderr.
func runCLI(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := Run(ctx, args, IO{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(k string) string { return env[k] }})
	return code, out.String(), errb.String()
}

func TestIonosInventoryThenPlan(t *testing.T) {
	env := newIonosEnv(t, 3)
	code, out, errOut := runCLI(t, nil, "ionos", "inventory", "--datacenter", ionossim.SampleDatacenterID,
		"--token-file", env.token, "--api-url", env.sim.URL, "--out", env.inv, "--verbose")
	if code != ExitOK {
		t.Fatalf("inventory exit %d: %s", code, errOut)
	}
	st, err := os.Stat(env.inv)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("inventory file: %v mode %v, want 0600", err, st.Mode())
	}
	if !strings.Contains(errOut, "10 HTTP requests") || env.sim.Sim.Total() > 10 {
		t.Errorf("--verbose: %q; simulator counted %d", errOut, env.sim.Sim.Total())
	}
	if !strings.Contains(out, "cube-002") || !strings.Contains(out, "10.7.0.13 (LAN 2)") {
		t.Errorf("summary table lacks the servers:\n%s", out)
	}

	code, out, errOut = runCLI(t, nil, "ionos", "plan", "--config", env.config, "--inventory", env.inv, "--target", "4")
	if code != ExitOK {
		t.Fatalf("plan exit %d: %s\n%s", code, errOut, out)
	}
	for _, want := range []string{"retain", "create", "running; application readiness not verified", "Basic Cube M",
		"Capacity: 4 Cubes, 16 cores, 32768 MiB RAM, 12 worker slots", "Plan accepted"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}

	code, out, _ = runCLI(t, nil, "ionos", "plan", "--config", env.config, "--inventory", env.inv, "--target", "2", "--output", "json")
	var plan cubes.Plan
	if code != ExitOK || json.Unmarshal([]byte(out), &plan) != nil || !plan.Accepted || plan.Slots[2].Action != cubes.Remove {
		t.Errorf("plan -o json: exit %d, %+v\n%s", code, plan, out)
	}

	// A rejected plan exits 1, prints its problems, and names the slot.
	code, out, errOut = runCLI(t, nil, "ionos", "plan", "--config", env.config, "--inventory", env.inv, "--target", "9")
	if code != ExitFailure || !strings.Contains(errOut, "PLAN_BLOCKED") || !strings.Contains(out, "target_out_of_range") {
		t.Errorf("target 9: exit %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = runCLI(t, nil, "ionos", "plan", "--config", env.config, "--inventory", env.inv, "--target", "2", "--max-inventory-age", "1ns")
	if code != ExitFailure || !strings.Contains(errOut, "PLAN_BLOCKED") {
		t.Errorf("stale inventory: exit %d %s", code, errOut)
	}
}

func TestIonosInventoryToStdoutFile(t *testing.T) {
	env := newIonosEnv(t, 1)
	path := filepath.Join(env.dir, "stdout.json")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var errb bytes.Buffer
	getenv := func(k string) string { return map[string]string{ionos.EnvAPIURL: env.sim.URL}[k] }
	code := Run(context.Background(), []string{"ionos", "inventory", "--datacenter", ionossim.SampleDatacenterID, "--token-file", env.token},
		IO{In: strings.NewReader(""), Out: f, Err: &errb, Getenv: getenv})
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("stdout file mode %v, want 0600", st.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	inv, err := ionos.DecodeInventory(bytes.NewReader(data))
	if err != nil || len(inv.Servers) != 1 {
		t.Errorf("stdout document: %v", err)
	}
}

func TestIonosUsageAndRefusals(t *testing.T) {
	env := newIonosEnv(t, 1)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing target", []string{"ionos", "plan", "--config", env.config, "--inventory", env.inv}, ExitUsage, "target"},
		{"bad datacenter", []string{"ionos", "inventory", "--datacenter", "dc1"}, ExitUsage, "UUID"},
		{"bad output", []string{"ionos", "plan", "--config", env.config, "--inventory", env.inv, "--target", "1", "-o", "yaml"}, ExitUsage, "yaml"},
		{"public listen", []string{"ionos", "simulate", "--listen", "0.0.0.0:0"}, ExitUsage, "loopback"},
		{"bad fault", []string{"ionos", "simulate", "--listen", "127.0.0.1:0", "--fault", "POST servers: 200"}, ExitUsage, "--fault: fault \"POST servers: 200\": action \"200\": want an HTTP status from 300 to 599"},
		{"unknown sub-command", []string{"ionos", "destroy"}, ExitUsage, "destroy"},
		{"missing inventory file", []string{"ionos", "plan", "--config", env.config, "--inventory", env.inv, "--target", "1"}, ExitFailure, "--inventory"},
		{"plain http to a remote API", []string{"ionos", "inventory", "--datacenter", ionossim.SampleDatacenterID, "--token-file", env.token,
			"--api-url", "http://api.ionos.com"}, ExitFailure, "loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, nil, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d (want %d), stderr %q lacks %q", code, tc.code, errOut, tc.want)
			}
		})
	}
	// A configuration error lists every path.
	bad := filepath.Join(env.dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"datacenter_id":"x","private_lan_id":0,"slots":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runCLI(t, nil, "ionos", "inventory", "--datacenter", ionossim.SampleDatacenterID, "--token-file", env.token,
		"--api-url", env.sim.URL, "--out", env.inv); code != ExitOK {
		t.Fatal("inventory failed")
	}
	code, _, errOut := runCLI(t, nil, "ionos", "plan", "--config", bad, "--inventory", env.inv, "--target", "1")
	for _, want := range []string{"INVALID_INPUT", "datacenter_id", "private_lan_id", "minimum_cores", "slots"} {
		if code != ExitFailure || !strings.Contains(errOut, want) {
			t.Errorf("bad configuration: exit %d, stderr lacks %q:\n%s", code, want, errOut)
		}
	}
	// A token file readable by others is refused, and the token appears nowhere.
	if err := os.Chmod(env.token, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, nil, "ionos", "inventory", "--datacenter", ionossim.SampleDatacenterID, "--token-file", env.token, "--api-url", env.sim.URL)
	if code != ExitFailure || !strings.Contains(errOut, "mode 0644") {
		t.Errorf("token mode 0644: exit %d %s", code, errOut)
	}
	if strings.Contains(out+errOut, "QQSECRETQQ") {
		t.Error("the token leaked into the output")
	}
}

func TestIonosSimulate(t *testing.T) {
	state := filepath.Join(t.TempDir(), "sim.json")
	serve := func(extra ...string) (url string, stop func() (int, string)) {
		sim := start(t, nil, append([]string{"ionos", "simulate", "--listen", "127.0.0.1:0", "--state", state}, extra...)...)
		url = sim.listening(t, regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`))[1]
		return url, func() (int, string) { code := sim.stop(t); return code, sim.out.String() }
	}
	url, stop := serve("--sample-cubes", "2")
	req, _ := http.NewRequest(http.MethodGet, url+"/cloudapi/v6/datacenters/"+ionossim.SampleDatacenterID+"/servers?depth=1", nil)
	req.Header.Set("Authorization", "Bearer anything")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET servers: %d", resp.StatusCode)
	}
	if code, out := stop(); code != ExitOK || !strings.Contains(out, "Saved") {
		t.Fatalf("simulate exit %d: %s", code, out)
	}
	st, err := os.Stat(state)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v", err, st)
	}
	// A second run loads the saved world (2 servers), not a new sample.
	_, stop = serve("--sample-cubes", "5")
	if _, out := stop(); !strings.Contains(out, ": 2 servers") {
		t.Errorf("second run did not load the saved state:\n%s", out)
	}
}

// TestIonosWhatANewUserTripsOn: an IONOS API that cannot be reached is named with the setting
// that points at it (IONOS_API_URL); an inventory passed as --config (or a configuration as
// --inventory) is recognised and said so; counts of one are singular.
func TestIonosWhatANewUserTripsOn(t *testing.T) {
	env := newIonosEnv(t, 1)
	closed := "http://" + freeLoopback(t) // nothing listens there
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"from IONOS_API_URL", map[string]string{ionos.EnvAPIURL: closed}, nil,
			"cannot reach the IONOS API at " + closed + " (IONOS_API_URL): connect: connection refused"},
		{"from --api-url", nil, []string{"--api-url", closed},
			"cannot reach the IONOS API at " + closed + " (--api-url): connect: connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"ionos", "inventory", "--datacenter", ionossim.SampleDatacenterID, "--token-file", env.token, "--timeout", "2s"}, tc.args...)
			code, _, errOut := runCLI(t, tc.env, args...)
			if code != ExitFailure || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "point "+ionos.EnvAPIURL+" (or --api-url) at") {
				t.Errorf("exit %d, stderr:\n%s\nwant it to contain %q and to say how to point %s at the API", code, errOut, tc.want, ionos.EnvAPIURL)
			}
		})
	}

	code, out, errOut := runCLI(t, nil, "ionos", "inventory", "--datacenter", ionossim.SampleDatacenterID,
		"--token-file", env.token, "--api-url", env.sim.URL, "--out", env.inv)
	if code != ExitOK || !strings.Contains(out, "1 server, 2 LANs, 2 security groups, 1 NAT gateway, 1 load balancer, 1 target group,") {
		t.Errorf("inventory: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = runCLI(t, nil, "ionos", "plan", "--config", env.inv, "--inventory", env.inv, "--target", "1")
	if want := "--config: " + env.inv + " is an inventory (written by cubefleet ionos inventory), not the fleet configuration: pass it as --inventory"; code != ExitFailure || !strings.Contains(errOut, want) {
		t.Errorf("an inventory as --config: exit %d\n%s\nwant %q", code, errOut, want)
	}
	code, _, errOut = runCLI(t, nil, "ionos", "plan", "--config", env.config, "--inventory", env.config, "--target", "1")
	if want := "--inventory: " + env.config + " is a fleet configuration, not an inventory: pass it as --config"; code != ExitFailure || !strings.Contains(errOut, want) {
		t.Errorf("a configuration as --inventory: exit %d\n%s\nwant %q", code, errOut, want)
	}
	sim := start(t, nil, "ionos", "simulate", "--listen", "127.0.0.1:0", "--sample-cubes", "1", "--fault", "GET templates: 503 x2", "--fault", "*: latency 1ms")
	url := sim.listening(t, regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`))[1]
	if out := sim.out.String(); !strings.Contains(out, "(1 data center)") || !strings.Contains(out, ": 1 server\n") ||
		!strings.Contains(out, "  fault: GET templates: 503 x2\n  fault: *: latency 1ms\n") {
		t.Errorf("simulate:\n%s", out)
	}
	for i, want := range []int{503, 503, 200} { // the faults of --fault are in force
		req, _ := http.NewRequest(http.MethodGet, url+ionossim.BasePath+"/templates", nil)
		req.Header.Set("Authorization", "Bearer x")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /templates %d: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
}
