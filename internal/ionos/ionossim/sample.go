package ionossim

import (
	"fmt"
	"net/netip"
	"time"
)

// Identities of the SampleFleet world.
const (
	SampleDatacenterID  = "11111111-1111-4111-8111-111111111111"
	SampleWorkerGroupID = "22222222-2222-4222-8222-222222222222"
	SampleTargetGroupID = "33333333-3333-4333-8333-333333333333"
	SamplePrivateLAN    = 2 // the private LAN id; LAN 1 is public
)

// SampleServerID returns the id of SampleFleet's server i (0-based).
func SampleServerID(i int) string { return fmt.Sprintf("5a000000-0000-4000-8000-%012d", i) }

// SampleServerIP returns the private address of SampleFleet's server i: 10.7.0.11 upwards in
// 10.7.0.0/16.
func SampleServerIP(i int) string {
	n := 11 + i
	return fmt.Sprintf("10.7.%d.%d", n/256, n%256)
}

// SampleFleet returns a world for tests, benchmarks and demos: data center SampleDatacenterID
// ("fleet", de/fra) with public LAN 1 and private LAN 2 (10.7.0.0/16); its default security
// group and the worker group SampleWorkerGroupID; n running "Basic Cube M" servers named
// cube-000, cube-001, … (SampleServerID, SampleServerIP) with a DAS volume, a NIC on LAN 2 and
// the worker group attached; a NAT gateway for LAN 2; an ALB forwarding to target group
// SampleTargetGroupID, which lists every Cube on port 8080. All resources are AVAILABLE.
func SampleFleet(n int) *State {
	created := time.Date(2025, 1, 6, 9, 0, 0, 0, time.UTC)
	meta := Meta{State: StateAvailable, Created: created, Modified: created}
	tpl := DefaultTemplates()[2] // Basic Cube M
	dc := &Datacenter{
		ID: SampleDatacenterID, Name: "fleet", Location: "de/fra", Version: 1,
		DefaultSecurityGroupID: "22222222-2222-4222-8222-000000000000",
		LANs: []*LAN{{ID: "1", Name: "public", Public: true, Meta: meta},
			{ID: "2", Name: "workers", IPv4CIDR: "10.7.0.0/16", Meta: meta}},
		SecurityGroups: []*SecurityGroup{
			{ID: "22222222-2222-4222-8222-000000000000", Name: "Default Security Group", Meta: meta},
			{ID: SampleWorkerGroupID, Name: "workers", Description: "Coordinator to Cube workers", Meta: meta}},
		NATGateways: []*NATGateway{{ID: "44444444-4444-4444-8444-444444444444", Name: "nat", PublicIPs: []string{"203.0.113.5"},
			LANs: []GatewayLAN{{ID: SamplePrivateLAN, GatewayIPs: []string{"10.7.0.1/16"}}}, Meta: meta}},
		ApplicationLBs: []*ApplicationLoadBalancer{{ID: "55555555-5555-4555-8555-555555555555", Name: "alb", ListenerLAN: 1,
			TargetLAN: SamplePrivateLAN, IPs: []string{"203.0.113.9"}, PrivateIPs: []string{"10.7.0.5/16"}, Meta: meta,
			ForwardingRules: []*ForwardingRule{{ID: "66666666-6666-4666-8666-666666666666", Name: "https", Protocol: "HTTP",
				ListenerIP: "203.0.113.9", ListenerPort: 443, Meta: meta,
				HTTPRules: []HTTPRule{{Name: "to-cubes", Type: "FORWARD", TargetGroup: SampleTargetGroupID}}}}}},
		Meta: meta,
	}
	tg := &TargetGroup{ID: SampleTargetGroupID, Name: "cubes", Algorithm: "ROUND_ROBIN", Protocol: "HTTP", Meta: meta}
	for i := range n {
		dc.Servers = append(dc.Servers, &Server{
			ID: SampleServerID(i), Name: fmt.Sprintf("cube-%03d", i), Type: "CUBE", TemplateUUID: tpl.ID,
			Cores: tpl.Cores, RAMMiB: tpl.RAMMiB, AvailabilityZone: "AUTO", VMState: VMRunning,
			SecurityGroupIDs: []string{SampleWorkerGroupID},
			NICs: []*NIC{{ID: fmt.Sprintf("5b000000-0000-4000-8000-%012d", i), Name: "eth0", LAN: SamplePrivateLAN,
				MAC: fmt.Sprintf("02:01:00:%02x:%02x:%02x", byte(i>>16), byte(i>>8), byte(i)), IPs: []string{SampleServerIP(i)}, DHCP: true, Meta: meta}},
			Volumes: []*Volume{{ID: fmt.Sprintf("5c000000-0000-4000-8000-%012d", i), Name: fmt.Sprintf("cube-%03d-root", i),
				Type: "DAS", SizeGB: float32(tpl.StorageGB), ImageAlias: "ubuntu:latest", Meta: meta}},
			Meta: meta,
		})
		tg.Targets = append(tg.Targets, GroupTarget{IP: SampleServerIP(i), Port: 8080, Weight: 1, HealthCheckEnabled: true})
	}
	return &State{Datacenters: []*Datacenter{dc}, TargetGroups: []*TargetGroup{tg}}
}

// SampleFleetOn is SampleFleet with server i's private address ipOf(i) on a private LAN of
// cidr (its NAT gateway and load balancer at the LAN's first and fifth addresses): tests that
// run each Cube's agent or sshd on a loopback address pass "127.0.0.0/8".
func SampleFleetOn(n int, cidr string, ipOf func(int) string) *State {
	st := SampleFleet(n)
	p := netip.MustParsePrefix(cidr).Masked()
	at := func(k int) string {
		a := p.Addr()
		for range k {
			a = a.Next()
		}
		return fmt.Sprintf("%s/%d", a, p.Bits())
	}
	dc := st.Datacenters[0]
	dc.LANs[1].IPv4CIDR = p.String()
	dc.NATGateways[0].LANs[0].GatewayIPs = []string{at(1)}
	dc.ApplicationLBs[0].PrivateIPs = []string{at(5)}
	for i, s := range dc.Servers {
		s.NICs[0].IPs = []string{ipOf(i)}
		st.TargetGroups[0].Targets[i].IP = ipOf(i)
	}
	return st
}
