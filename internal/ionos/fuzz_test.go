package ionos_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/ionos"
)

func sampleInventory() *ionos.Inventory {
	return &ionos.Inventory{
		Schema: ionos.InventorySchema, FetchedAt: 1767225600000, Consistent: true,
		Datacenter: ionos.Datacenter{ID: "11111111-1111-4111-8111-111111111111", Name: "fleet", Location: "de/fra", Version: 3, VersionAtEnd: 3, State: "AVAILABLE"},
		Servers: []ionos.Server{{ID: "5a000000-0000-4000-8000-000000000000", Name: "cube-000", Type: "CUBE", Cores: 4, RAMMiB: 8192,
			VMState: "RUNNING", State: "AVAILABLE", TemplateID: "t", NICs: []ionos.NIC{{ID: "n", LANID: 2, IPs: []string{"10.7.0.11"}, State: "AVAILABLE"}},
			SecurityGroupIDs: []string{"g"}}},
		LANs:           []ionos.LAN{{ID: 2, Name: "workers", IPv4CIDR: "10.7.0.0/16", State: "AVAILABLE"}},
		SecurityGroups: []ionos.SecurityGroup{{ID: "g", Name: "workers", State: "AVAILABLE"}},
		NATGateways:    []ionos.NATGateway{{ID: "n1", Name: "nat", PublicIPs: []string{"203.0.113.5"}, LANs: []ionos.GatewayLAN{{LANID: 2, GatewayIPs: []string{"10.7.0.1/16"}}}}},
		ApplicationLoadBalancers: []ionos.ApplicationLoadBalancer{{ID: "a", Name: "alb", ListenerLANID: 1, TargetLANID: 2, IPs: []string{}, PrivateIPs: []string{},
			ForwardingRules: []ionos.ForwardingRule{{ID: "r", Name: "https", Protocol: "HTTP", ListenerPort: 443, HTTPRules: []ionos.HTTPRule{{Name: "f", Type: "FORWARD", TargetGroupID: "tg"}}}}}},
		TargetGroups:    []ionos.TargetGroup{{ID: "tg", Name: "cubes", Targets: []ionos.Target{{IP: "10.7.0.11", Port: 8080, Weight: 1}}}},
		CubeTemplates:   []ionos.Template{{ID: "t", Name: "Basic Cube M", Cores: 4, RAMMiB: 8192, StorageGB: 240}},
		PendingRequests: []ionos.PendingRequest{{ID: "q", Method: "POST", Status: "QUEUED", CreatedAt: 1, Targets: []ionos.RequestTarget{{ID: "x", Type: "server"}}}},
	}
}

// FuzzDecodeInventory checks that DecodeInventory never panics, refuses with INVALID_INPUT
// only, and that whatever it accepts survives EncodeInventory and a second decode unchanged.
func FuzzDecodeInventory(f *testing.F) {
	var buf bytes.Buffer
	if err := ionos.EncodeInventory(&buf, sampleInventory()); err != nil {
		f.Fatal(err)
	}
	good := buf.String()
	f.Add([]byte(good))
	f.Add([]byte(strings.Replace(good, `"lanId": 2`, `"lanId": 0`, 1)))
	f.Add([]byte(strings.Replace(good, `"schema"`, `"extra": 1, "schema"`, 1)))
	f.Add([]byte(good + "{}"))
	f.Add([]byte(`{"schema":"cubefleet.ionos.inventory/v1","fetchedAt":1,"datacenter":{"id":"d"},"servers":null}`))
	f.Add([]byte(`{"fetchedAt": 1e400}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := ionos.DecodeInventory(bytes.NewReader(data))
		if err != nil {
			if cubefleet.ErrorCode(err) != cubefleet.CodeInvalidInput {
				t.Fatalf("refusal is not INVALID_INPUT: %v", err)
			}
			return
		}
		var out bytes.Buffer
		if err := ionos.EncodeInventory(&out, inv); err != nil {
			t.Fatal(err)
		}
		again, err := ionos.DecodeInventory(&out)
		if err != nil || !reflect.DeepEqual(inv, again) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, inv, again)
		}
	})
}

func TestDecodeInventoryRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := ionos.EncodeInventory(&buf, sampleInventory()); err != nil {
		t.Fatal(err)
	}
	inv, err := ionos.DecodeInventory(&buf)
	if err != nil || !reflect.DeepEqual(inv, sampleInventory()) {
		t.Fatalf("%v\n%+v", err, inv)
	}
	for name, doc := range map[string]string{
		"wrong schema": `{"schema":"v0","fetchedAt":1,"datacenter":{"id":"d"}}`,
		"unknown key":  `{"schema":"cubefleet.ionos.inventory/v1","fetchedAt":1,"datacenter":{"id":"d"},"x":1}`,
		"bad LAN":      `{"schema":"cubefleet.ionos.inventory/v1","fetchedAt":1,"datacenter":{"id":"d"},"lans":[{"id":0}]}`,
		"trailing":     `{"schema":"cubefleet.ionos.inventory/v1","fetchedAt":1,"datacenter":{"id":"d"}} []`,
		"wrong type":   `{"schema":"cubefleet.ionos.inventory/v1","fetchedAt":"now","datacenter":{"id":"d"}}`,
	} {
		if _, err := ionos.DecodeInventory(strings.NewReader(doc)); cubefleet.ErrorCode(err) != cubefleet.CodeInvalidInput {
			t.Errorf("%s: %v, want INVALID_INPUT", name, err)
		}
	}
}
