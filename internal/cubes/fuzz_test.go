package cubes_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes"
)

// FuzzDecodeConfig checks that DecodeConfig never panics, refuses with INVALID_INPUT only,
// and that whatever it accepts survives MarshalJSON and a second decode unchanged (and plans
// without panicking).
func FuzzDecodeConfig(f *testing.F) {
	f.Add([]byte(validConfig))
	f.Add([]byte(strings.ReplaceAll(validConfig, `"server_id": null`, `"server_id": "00000000-0000-4000-8000-00000000AB01"`)))
	f.Add([]byte(`{"slots":[{}],"a":{"b":[[[[1]]]]}}`))
	f.Add([]byte(`{"private_lan_id": 1e3, "minimum_cubes": -0, "slots": null}`))
	f.Add([]byte(`{"datacenter_id":"\u0030"}`))
	f.Add([]byte(`[` + strings.Repeat(`[`, 40) + strings.Repeat(`]`, 40) + `]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := cubes.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			if cubefleet.ErrorCode(err) != cubefleet.CodeInvalidInput {
				t.Fatalf("refusal is not INVALID_INPUT: %v", err)
			}
			return
		}
		b, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		again, err := cubes.DecodeConfig(bytes.NewReader(b))
		if err != nil || !reflect.DeepEqual(cfg, again) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, cfg, again)
		}
		_, inv := base()
		cubes.PlanSlots(cfg, inv, cubes.PlanOptions{Target: len(cfg.Slots), Now: now})
	})
}
