package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/ionos/ionossim"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// cubeFleet is a control plane with the simulator's first cubeCount Cubes registered in a pool
// (by their private IPs) and Ready, and a profile naming both: the example profile with the control plane's
// URL, pool and key, and the simulator's token file.
type cubeFleet struct {
	*cliEnv
	ionos   ionosEnv
	profile string         // the profile's path
	fields  map[string]any // what it holds (writeProfile writes it)
}

func newCubeFleet(t *testing.T, c *cliEnv, cubeCount int) cubeFleet {
	t.Helper()
	return newCubeFleetOn(t, c, cubeCount, ionossim.SampleServerIP)
}

// newCubeFleetOn is newCubeFleet with Cube i's private IP ipOf(i) (newIonosEnvOn).
func newCubeFleetOn(t *testing.T, c *cliEnv, cubeCount int, ipOf func(int) string) cubeFleet {
	t.Helper()
	env := newIonosEnvOn(t, cubeCount, ipOf)
	var site, pool struct{ ID string }
	json.Unmarshal([]byte(c.admin("api", "compute.sites.create", `{"tenantId":"root","kind":"shared","region":"eu-central"}`)), &site)
	json.Unmarshal([]byte(c.admin("api", "compute.pools.create", `{"tenantId":"root","siteId":"`+site.ID+`","class":"vps-host"}`)), &pool)
	token := strings.TrimSpace(c.admin("nodes", "join-token", "create", "--pool", pool.ID, "--uses", "100", "--any-ip"))
	for i := range cubeCount {
		ip := ipOf(i)
		code, out := c.post(nodeapi.PathRegister, token, nodeBody(t, "register.json", ip))
		var reg nodeapi.RegisterResponse
		if err := json.Unmarshal(out, &reg); code != 200 || err != nil {
			t.Fatalf("register cube %d: %d %s", i, code, out)
		}
		if code, out := c.post(nodeapi.StatusPath(ip), reg.NodeCredential, nodeBody(t, "status.json", ip)); code != 200 {
			t.Fatalf("cube %d reports: %d %s", i, code, out)
		}
	}
	var profile map[string]any
	if err := json.Unmarshal([]byte(readExample(t, "ionos-fleet-profile.example.json")), &profile); err != nil {
		t.Fatal(err)
	}
	profile["control_plane"] = map[string]any{"url": c.url, "pool": pool.ID, "api_key_file": c.tokenFile}
	profile["ionos_token_file"] = env.token
	f := cubeFleet{cliEnv: c, ionos: env, profile: filepath.Join(env.dir, "profile.json"), fields: profile}
	f.writeProfile(t)
	return f
}

// writeProfile writes f.fields as the profile the commands read.
func (f cubeFleet) writeProfile(t *testing.T) {
	t.Helper()
	b, err := json.Marshal(f.fields)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.profile, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// readExample reads a file of examples/.
func readExample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testkit.PackageDir(), "..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// record runs the CLI against the fleet and records it in b (the simulator's URL and the
// temporary directories replaced).
func (f cubeFleet) record(b *strings.Builder, args ...string) string {
	f.t.Helper()
	args = append(args, "--profile", f.profile, "--config", f.ionos.config, "--api-url", f.ionos.sim.URL)
	code, out, errOut := f.run("", args...)
	fmt.Fprintf(b, "$ cubefleet %s\nexit %d\n", strings.Join(args[:len(args)-6], " "), code)
	norm := func(s string) string {
		return strings.ReplaceAll(strings.ReplaceAll(f.normalize(s), f.ionos.dir, "$IONOS"), f.ionos.sim.URL, "$IONOS_URL")
	}
	if out != "" {
		b.WriteString("stdout:\n" + norm(out))
	}
	if errOut != "" {
		b.WriteString("stderr:\n" + norm(errOut))
	}
	b.WriteString("\n")
	return out
}

// TestScalePlan plans a 4-Cube fleet (one empty slot) down to 2, up to 5, and below the
// minimum, from a fresh inventory through the simulator and the control plane's members
// (golden file).
func TestScalePlan(t *testing.T) {
	eachDatabase(t, func(t *testing.T, c *cliEnv) {
		f := newCubeFleet(t, c, 4)
		var b strings.Builder
		f.record(&b, "scale", "plan", "--target-cubes", "2")
		f.record(&b, "scale", "plan", "--target-cubes", "4")
		f.record(&b, "scale", "plan", "--target-cubes", "5")
		f.record(&b, "scale", "plan", "--target-cubes", "0")
		f.record(&b, "scale", "plan", "--target-cubes", "6")
		f.record(&b, "scale", "plan")
		var plan cubes.ScalePlan
		if err := json.Unmarshal([]byte(f.record(&strings.Builder{}, "scale", "plan", "--target-cubes", "1", "-o", "json")), &plan); err != nil {
			t.Fatal(err)
		}
		var deleted []string
		for _, s := range plan.Steps {
			if s.Do == cubes.StepDeleteServer {
				deleted = append(deleted, s.ServerID)
			}
		}
		// cube-000 is the runtime source: it stays; the others go, the highest slot first.
		if want := []string{ionossim.SampleServerID(3), ionossim.SampleServerID(2), ionossim.SampleServerID(1)}; strings.Join(deleted, " ") != strings.Join(want, " ") {
			t.Errorf("deletes %v, want %v", deleted, want)
		}
		for _, s := range plan.Slots[:4] {
			if !s.Registered {
				t.Errorf("slot %d not matched to its node", s.Index)
			}
		}
		testkit.Golden(t, "scale_plan.golden", []byte(b.String()))
	})
}
