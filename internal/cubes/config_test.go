package cubes_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes"
)

const validConfig = `{
  "datacenter_id": "00000000-0000-4000-8000-000000000001",
  "private_lan_id": 2,
  "minimum_cores": 4,
  "minimum_ram_mb": 8192,
  "minimum_cubes": 1,
  "protected_server_ids": ["00000000-0000-4000-8000-000000000009"],
  "worker_security_group_ids": ["00000000-0000-4000-8000-000000000003"],
  "slots": [
    {"name": "cube-0", "private_ip": "10.7.0.11", "server_id": "00000000-0000-4000-8000-000000000100"},
    {"name": "cube-1", "private_ip": "10.7.0.12", "server_id": null}
  ]
}`

func TestDecodeConfig(t *testing.T) {
	cfg, err := cubes.DecodeConfig(strings.NewReader(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	want := &cubes.Config{DatacenterID: dcID, PrivateLANID: 2, MinimumCores: 4, MinimumRAMMiB: 8192, MinimumCubes: 1,
		ProtectedServerIDs: []string{protectedP}, WorkerSecurityGroupIDs: []string{workerSG},
		Slots: []cubes.Slot{{Name: "cube-0", PrivateIP: "10.7.0.11", ServerID: srvID(0)}, {Name: "cube-1", PrivateIP: "10.7.0.12"}}}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("decoded %+v\nwant %+v", cfg, want)
	}
	// MarshalJSON writes what DecodeConfig reads.
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := cubes.DecodeConfig(strings.NewReader(string(b)))
	if err != nil || !reflect.DeepEqual(again, cfg) {
		t.Errorf("round trip: %v\n%s", err, b)
	}
	// Upper-case UUIDs are accepted and normalized.
	up, err := cubes.DecodeConfig(strings.NewReader(strings.Replace(validConfig, "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-0000000000AB", 1)))
	if err != nil || up.DatacenterID != "00000000-0000-4000-8000-0000000000ab" {
		t.Errorf("upper-case UUID: %v %q", err, up.DatacenterID)
	}
}

func TestDecodeConfigErrors(t *testing.T) {
	edit := func(old, new string) string {
		if !strings.Contains(validConfig, old) {
			t.Fatalf("%q not in the valid configuration", old)
		}
		return strings.Replace(validConfig, old, new, 1)
	}
	for _, tc := range []struct {
		name  string
		doc   string
		paths []string // every path reported, in order
	}{
		{"not JSON", `{"datacenter_id":`, []string{"datacenter_id"}},
		{"not an object", `[1,2]`, []string{""}},
		{"trailing data", validConfig + `{}`, []string{""}},
		{"duplicate key", edit(`"private_lan_id": 2,`, `"private_lan_id": 2, "private_lan_id": 3,`), []string{"private_lan_id"}},
		{"unknown key", edit(`"minimum_cubes": 1,`, `"minimum_cubes": 1, "region": "de",`), []string{"region"}},
		{"missing keys", `{"slots": [{"name": "a", "private_ip": "10.0.0.1", "server_id": null}]}`,
			[]string{"datacenter_id", "private_lan_id", "minimum_cores", "minimum_ram_mb", "minimum_cubes", "protected_server_ids"}},
		{"bad UUID", edit(`"00000000-0000-4000-8000-000000000001"`, `"dc-1"`), []string{"datacenter_id"}},
		{"UUID as a number", edit(`"00000000-0000-4000-8000-000000000001"`, `17`), []string{"datacenter_id"}},
		{"LAN id zero", edit(`"private_lan_id": 2`, `"private_lan_id": 0`), []string{"private_lan_id"}},
		{"LAN id fraction", edit(`"private_lan_id": 2`, `"private_lan_id": 2.5`), []string{"private_lan_id"}},
		{"LAN id exponent", edit(`"private_lan_id": 2`, `"private_lan_id": 2e0`), []string{"private_lan_id"}},
		{"LAN id string", edit(`"private_lan_id": 2`, `"private_lan_id": "2"`), []string{"private_lan_id"}},
		{"negative cores", edit(`"minimum_cores": 4`, `"minimum_cores": -4`), []string{"minimum_cores"}},
		{"huge RAM", edit(`"minimum_ram_mb": 8192`, `"minimum_ram_mb": 99999999999999999999`), []string{"minimum_ram_mb"}},
		{"minimum_cubes zero", edit(`"minimum_cubes": 1`, `"minimum_cubes": 0`), []string{"minimum_cubes"}},
		{"minimum_cubes above the slots", edit(`"minimum_cubes": 1`, `"minimum_cubes": 3`), []string{"minimum_cubes"}},
		{"empty worker groups", edit(`["00000000-0000-4000-8000-000000000003"]`, `[]`), []string{"worker_security_group_ids"}},
		{"null worker groups", edit(`["00000000-0000-4000-8000-000000000003"]`, `null`), []string{"worker_security_group_ids"}},
		{"worker group twice", edit(`["00000000-0000-4000-8000-000000000003"]`, `["00000000-0000-4000-8000-000000000003","00000000-0000-4000-8000-000000000003"]`),
			[]string{"worker_security_group_ids[1]"}},
		{"bad protected id", edit(`["00000000-0000-4000-8000-000000000009"]`, `["x", "00000000-0000-4000-8000-000000000009"]`), []string{"protected_server_ids[0]"}},
		{"no slots", edit(`"slots": [`, `"slots": [], "x": [`), []string{"x", "slots"}},
		{"slot IPv6", edit(`"10.7.0.12"`, `"fd00::12"`), []string{"slots[1].private_ip"}},
		{"slot IP with prefix", edit(`"10.7.0.12"`, `"10.7.0.12/24"`), []string{"slots[1].private_ip"}},
		{"slot IP leading zero", edit(`"10.7.0.12"`, `"10.7.0.012"`), []string{"slots[1].private_ip"}},
		{"slot without server_id", edit(`, "server_id": null}`, `}`), []string{"slots[1].server_id"}},
		{"slot unknown key", edit(`"server_id": null}`, `"server_id": null, "zone": 1}`), []string{"slots[1].zone"}},
		{"slot bad server id", edit(`"server_id": null`, `"server_id": "nope"`), []string{"slots[1].server_id"}},
		{"slot bad name", edit(`"name": "cube-1"`, `"name": "cube 1!"`), []string{"slots[1].name"}},
		{"slot not an object", edit(`{"name": "cube-1", "private_ip": "10.7.0.12", "server_id": null}`, `"cube-1"`), []string{"slots[1]"}},
		{"many at once", edit(`"private_lan_id": 2`, `"private_lan_id": -1, "bogus": true`), []string{"private_lan_id", "bogus"}},
		{"several problems", edit(`"minimum_ram_mb": 8192`, `"minimum_ram_mb": 0.5, "bogus": true`),
			[]string{"minimum_ram_mb", "bogus"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cubes.DecodeConfig(strings.NewReader(tc.doc))
			if cubefleet.ErrorCode(err) != cubefleet.CodeInvalidInput {
				t.Fatalf("got %v, want INVALID_INPUT", err)
			}
			var e *cubefleet.Error
			errors.As(err, &e)
			var paths []string
			for _, fe := range e.Details["errors"].([]cubefleet.FieldError) {
				paths = append(paths, fe.Path)
			}
			for _, want := range tc.paths {
				if !slices.Contains(paths, want) {
					t.Errorf("paths %v lack %q (%v)", paths, want, err)
				}
			}
		})
	}
}
