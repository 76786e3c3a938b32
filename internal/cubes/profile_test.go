package cubes_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/ionos"
	"github.com/cubefleet/cubefleet/internal/ionos/ionossim"
)

const exampleProfile = "../../examples/ionos-fleet-profile.example.json"

func readExampleProfile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(exampleProfile)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestProfileExample: the shipped example decodes with its values and the defaults.
func TestProfileExample(t *testing.T) {
	p, err := cubes.DecodeProfile(strings.NewReader(readExampleProfile(t)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Datacenter != "fleet" || p.PrivateLANID != 2 || p.PublicLANID != 1 || p.SlotsPerCube != 3 || p.DrainDeadline != 30*time.Minute ||
		p.ControlPlane.URL != "https://cubefleet.example:3010" || p.Coordinator.Port != 22 || p.GPUWireGuard.Interface != "wg0" ||
		p.GPUWireGuard.Port != 22 || p.RuntimeSourceCube != "cube-000" || len(p.BaselineCubes) != 2 || p.TokenFile != cubes.DefaultTokenFile {
		t.Errorf("example profile: %+v", p)
	}
	// The optional keys have their defaults when left out.
	trimmed := strings.NewReplacer(`"slots_per_cube": 3,`, "", `"drain_deadline": "30m",`, "", `,
  "ionos_token_file": ".private/ionos-api-token.txt"`, "").Replace(readExampleProfile(t))
	p, err = cubes.DecodeProfile(strings.NewReader(trimmed))
	if err != nil || p.SlotsPerCube != cubes.SlotsPerCube || p.DrainDeadline != cubes.DefaultDrainDeadline || p.TokenFile != cubes.DefaultTokenFile {
		t.Errorf("defaults: %+v %v", p, err)
	}
	withConf := strings.Replace(readExampleProfile(t), `"interface": "wg0"`, `"interface": "wg0", "config_file": "/etc/wireguard/fleet.conf"`, 1)
	if p, err = cubes.DecodeProfile(strings.NewReader(withConf)); err != nil || p.GPUWireGuard.ConfigFile != "/etc/wireguard/fleet.conf" {
		t.Errorf("gpu_wireguard.config_file: %+v %v", p, err)
	}
}

// fieldPaths returns the paths of an INVALID_INPUT error's field errors.
func fieldPaths(t *testing.T, err error) map[string]string {
	t.Helper()
	var ce *cubefleet.Error
	if !errors.As(err, &ce) || ce.Code != cubefleet.CodeInvalidInput {
		t.Fatalf("%v: want INVALID_INPUT", err)
	}
	out := map[string]string{}
	fes, _ := ce.Details["errors"].([]cubefleet.FieldError)
	for _, fe := range fes {
		out[fe.Path] = fe.Message
	}
	if len(fes) == 0 {
		out[ce.Details["path"].(string)] = ce.Message
	}
	return out
}

// TestProfileRefusals: every problem of a profile is reported at once, each at its JSON path.
func TestProfileRefusals(t *testing.T) {
	bad := strings.NewReplacer(
		`"datacenter": "fleet"`, `"datacenter": ""`,
		`"private_lan_id": 2`, `"private_lan_id": 0`,
		`"target_groups": ["cubes"]`, `"target_groups": ["cubes", "cubes"]`,
		`"url": "https://cubefleet.example:3010"`, `"url": "ftp://cubefleet.example"`,
		`"port": 22`, `"port": 70000`,
		`"interface": "wg0"`, `"interface": 7, "config_file": "wg0.conf"`,
		`"baseline_cubes": ["cube-000", "cube-001"]`, `"baseline_cubes": ["cube-000", "worker-1"]`,
		`"runtime_source_cube": "cube-000"`, `"runtime_source_cube": "cube-009"`,
		`"slots_per_cube": 3`, `"slots_per_cube": 65`,
		`"drain_deadline": "30m"`, `"drain_deadline": "forever"`,
		`"image": "ubuntu:latest",`, `"image": "ubuntu:latest", "color": "blue",`,
		`"nat_gateway": "nat",`, ``,
	).Replace(readExampleProfile(t))
	_, err := cubes.DecodeProfile(strings.NewReader(bad))
	got := fieldPaths(t, err)
	for path, says := range map[string]string{
		"datacenter":                "must not be empty",
		"private_lan_id":            "positive integer",
		"target_groups[1]":          "listed twice",
		"control_plane.url":         "http(s) URL",
		"coordinator.port":          "no larger than 65535",
		"gpu_wireguard.interface":   "must be a string",
		"gpu_wireguard.config_file": "want an absolute path",
		"baseline_cubes[1]":         `does not start with cube_name_prefix "cube-"`,
		"runtime_source_cube":       "not one of baseline_cubes",
		"slots_per_cube":            "no larger than 64",
		"drain_deadline":            "want a duration",
		"color":                     "unknown key",
		"nat_gateway":               "is required",
	} {
		if !strings.Contains(got[path], says) {
			t.Errorf("%s: %q, want it to say %q", path, got[path], says)
		}
	}
	if len(got) != 13 {
		t.Errorf("%d errors, want 13: %v", len(got), got)
	}
	if _, err := cubes.DecodeProfile(strings.NewReader(`{"datacenter": "a", "datacenter": "b"}`)); err == nil || !strings.Contains(err.Error(), "datacenter") {
		t.Errorf("a duplicate key: %v", err)
	}
	if _, err := cubes.DecodeProfile(strings.NewReader(`[]`)); err == nil {
		t.Error("a list was accepted as a profile")
	}
}

// TestDiscover finds every IONOS object of the example profile by its name through the API
// (the simulator's sample fleet), and reports names that match none or several, with what it
// found.
func TestDiscover(t *testing.T) {
	l, err := ionossim.Listen(context.Background(), "127.0.0.1:0", ionossim.New(ionossim.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := l.Sim.Load(ionossim.SampleFleet(2)); err != nil {
		t.Fatal(err)
	}
	c, err := ionos.New(ionos.Config{APIURL: l.URL, Token: ionos.NewToken("t")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := cubes.DecodeProfile(strings.NewReader(readExampleProfile(t)))
	if err != nil {
		t.Fatal(err)
	}
	dcs, err := c.Datacenters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dcID, err := cubes.DiscoverDatacenter(p, dcs)
	if err != nil || dcID != ionossim.SampleDatacenterID {
		t.Fatalf("data center: %q %v", dcID, err)
	}
	inv, err := c.Inventory(ctx, dcID)
	if err != nil {
		t.Fatal(err)
	}
	d, err := cubes.Discover(p, inv)
	if err != nil {
		t.Fatal(err)
	}
	if d.PrivateLANID != 2 || d.WorkerSecurityGroupID != ionossim.SampleWorkerGroupID || len(d.TargetGroupIDs) != 1 ||
		d.TargetGroupIDs[0] != ionossim.SampleTargetGroupID || d.RuntimeSourceServerID != ionossim.SampleServerID(0) ||
		d.BaselineServerIDs["cube-001"] != ionossim.SampleServerID(1) || d.TemplateID == "" || d.NATGatewayID == "" || d.ApplicationLoadBalancerID == "" {
		t.Errorf("discovered %+v", d)
	}

	// Names that match none, or several.
	p.Datacenter = "prod"
	if _, err := cubes.DiscoverDatacenter(p, dcs); err == nil || !strings.Contains(err.Error(), `no data center is named "prod" (found: "fleet")`) {
		t.Errorf("an unknown data center: %v", err)
	}
	p.Template, p.NATGateway, p.BaselineCubes, p.PrivateLANID = "Basic Cube Z", "gw", []string{"cube-000", "cube-007"}, 3
	inv.SecurityGroups = append(inv.SecurityGroups, ionos.SecurityGroup{ID: "other", Name: "workers"})
	_, err = cubes.Discover(p, inv)
	got := fieldPaths(t, err)
	for path, says := range map[string]string{
		"template":              `no CUBE template is named "Basic Cube Z" (found: "Basic Cube L", `,
		"nat_gateway":           `no NAT gateway is named "gw" (found: "nat")`,
		"baseline_cubes[1]":     `no server is named "cube-007" (found: "cube-000", "cube-001")`,
		"private_lan_id":        `LAN "workers" has id 2, not 3`,
		"worker_security_group": `2 security groups are named "workers" (` + ionossim.SampleWorkerGroupID + `, other)`,
	} {
		if !strings.Contains(got[path], says) {
			t.Errorf("%s: %q, want it to say %q", path, got[path], says)
		}
	}
	if len(got) != 5 {
		t.Errorf("%d errors, want 5: %v", len(got), got)
	}
}

// FuzzDecodeProfile checks that DecodeProfile never panics and refuses with INVALID_INPUT only.
func FuzzDecodeProfile(f *testing.F) {
	b, err := os.ReadFile(exampleProfile)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"coordinator": [], "ssh": {"key_file": 1}, "drain_deadline": 5}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := cubes.DecodeProfile(strings.NewReader(string(data)))
		if err != nil && !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) {
			t.Fatalf("DecodeProfile: %v, want INVALID_INPUT", err)
		}
	})
}
