package ionossim_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ionoscloud "github.com/ionos-cloud/sdk-go/v6"

	"github.com/cubefleet/cubefleet/internal/ionos/ionossim"
)

const testToken = "sim-test-token"

// mustStart runs a simulator on a free loopback port and returns it with an SDK client
// configured as the SDK needs (hostUrl "http://127.0.0.1:PORT", no slash, no /cloudapi/v6).
func mustStart(tb testing.TB, opts ionossim.Options) (*ionossim.Listener, *ionoscloud.APIClient) {
	tb.Helper()
	if opts.QueueDelay == 0 {
		opts.QueueDelay = time.Millisecond
	}
	if opts.RunDuration == 0 {
		opts.RunDuration = 20 * time.Millisecond
	}
	l, err := ionossim.Listen(context.Background(), "127.0.0.1:0", ionossim.New(opts))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = l.Close() })
	cfg := ionoscloud.NewConfiguration("", "", testToken, l.URL)
	cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	cfg.PollInterval = 5 * time.Millisecond
	cfg.MaxRetries = 1
	return l, ionoscloud.NewAPIClient(cfg)
}

func ctx(tb testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return c
}

func wait(tb testing.TB, api *ionoscloud.APIClient, resp *ionoscloud.APIResponse) {
	tb.Helper()
	loc := resp.Header.Get("Location")
	if loc == "" {
		tb.Fatalf("no Location on %s %s", resp.Method, resp.RequestURL)
	}
	if _, err := api.WaitForRequest(ctx(tb), loc); err != nil {
		tb.Fatalf("wait for %s: %v", loc, err)
	}
}

func must[T any](tb testing.TB) func(v T, r *ionoscloud.APIResponse, err error) (T, *ionoscloud.APIResponse) {
	return func(v T, r *ionoscloud.APIResponse, err error) (T, *ionoscloud.APIResponse) {
		tb.Helper()
		if err != nil {
			tb.Fatalf("%s: %v", r.Operation, err)
		}
		return v, r
	}
}

func statusOf(err error) int {
	var e ionoscloud.GenericOpenAPIError
	if errors.As(err, &e) {
		return e.StatusCode()
	}
	return 0
}

func cubeTemplate(tb testing.TB, api *ionoscloud.APIClient, name string) string {
	tb.Helper()
	tpls, _ := must[ionoscloud.Templates](tb)(api.TemplatesApi.TemplatesGet(ctx(tb)).Depth(1).Execute())
	for _, t := range *tpls.Items {
		if *t.Properties.Name == name {
			return *t.Id
		}
	}
	tb.Fatalf("no template %q", name)
	return ""
}

func cubeBody(name, tpl string, lan int32, ip string) ionoscloud.Server {
	nic := ionoscloud.NicProperties{Name: ionoscloud.PtrString(name + "-eth0"), Lan: &lan}
	if ip != "" {
		nic.Ips = &[]string{ip}
	}
	return ionoscloud.Server{
		Properties: &ionoscloud.ServerProperties{Name: &name, Type: ionoscloud.PtrString("CUBE"), TemplateUuid: &tpl,
			AvailabilityZone: ionoscloud.PtrString("AUTO")},
		Entities: &ionoscloud.ServerEntities{
			Volumes: &ionoscloud.AttachedVolumes{Items: &[]ionoscloud.Volume{{Properties: &ionoscloud.VolumeProperties{
				Name: ionoscloud.PtrString(name + "-root"), Type: ionoscloud.PtrString("DAS"), ImageAlias: ionoscloud.PtrString("ubuntu:latest"),
				SshKeys: &[]string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample"}}}}},
			Nics: &ionoscloud.Nics{Items: &[]ionoscloud.Nic{{Properties: &nic}}},
		},
	}
}

// world creates, through the SDK on an empty simulator, a data center in de/fra with a public
// LAN 1, a private LAN 2 and a worker security group.
func world(tb testing.TB, api *ionoscloud.APIClient) (dcID, sgID string) {
	tb.Helper()
	c := ctx(tb)
	dc, r := must[ionoscloud.Datacenter](tb)(api.DataCentersApi.DatacentersPost(c).Datacenter(ionoscloud.DatacenterPost{
		Properties: &ionoscloud.DatacenterPropertiesPost{Name: ionoscloud.PtrString("fleet"), Location: ionoscloud.PtrString("de/fra")}}).Execute())
	wait(tb, api, r)
	for _, public := range []bool{true, false} {
		_, r := must[ionoscloud.Lan](tb)(api.LANsApi.DatacentersLansPost(c, *dc.Id).Lan(ionoscloud.Lan{
			Properties: &ionoscloud.LanProperties{Public: ionoscloud.ToPtr(public)}}).Execute())
		wait(tb, api, r)
	}
	sg, r := must[ionoscloud.SecurityGroup](tb)(api.SecurityGroupsApi.DatacentersSecuritygroupsPost(c, *dc.Id).SecurityGroup(ionoscloud.SecurityGroupRequest{
		Properties: &ionoscloud.SecurityGroupProperties{Name: ionoscloud.PtrString("workers")}}).Execute())
	wait(tb, api, r)
	return *dc.Id, *sg.Id
}

func TestCreateCubeOnEmptySimulator(t *testing.T) {
	var mu sync.Mutex
	var running []string
	// The clock stands still while the test looks at the server's request in flight (however
	// slow the machine, it is still pending then), and runs again before the test waits for it.
	var frozen atomic.Pointer[time.Time]
	now := func() time.Time {
		if at := frozen.Load(); at != nil {
			return *at
		}
		return time.Now()
	}
	l, api := mustStart(t, ionossim.Options{Authorize: ionossim.AcceptToken(testToken), Now: now, OnRunning: func(dc string, srv ionossim.Server) {
		mu.Lock()
		running = append(running, srv.Name)
		mu.Unlock()
	}})
	dcID, sgID := world(t, api)
	c := ctx(t)
	tpl := cubeTemplate(t, api, "Basic Cube M")

	at := time.Now()
	frozen.Store(&at)
	srv, r := must[ionoscloud.Server](t)(api.ServersApi.DatacentersServersPost(c, dcID).Server(cubeBody("cube-01", tpl, 2, "")).Execute())
	if r.StatusCode != http.StatusAccepted || *srv.Metadata.State != "BUSY" {
		t.Fatalf("POST server: status %d state %s, want 202 BUSY", r.StatusCode, *srv.Metadata.State)
	}
	if len(*srv.Entities.Volumes.Items) != 1 || len(*srv.Entities.Nics.Items) != 1 {
		t.Fatalf("POST answer lacks the new volume and NIC ids: %+v", srv.Entities)
	}
	// While the request runs the data center and the server are BUSY and the request is listed.
	rqs, _ := must[ionoscloud.Requests](t)(api.RequestsApi.RequestsGet(c).Depth(2).FilterUrl(dcID).Execute())
	if n := len(*rqs.Items); n == 0 || *(*rqs.Items)[0].Metadata.RequestStatus.Metadata.Status == "DONE" {
		t.Fatalf("the server's request is not listed as pending: %d items", n)
	}
	frozen.Store(nil)
	wait(t, api, r)

	got, _ := must[ionoscloud.Server](t)(api.ServersApi.DatacentersServersFindById(c, dcID, *srv.Id).Depth(3).Execute())
	p := got.Properties
	if *p.VmState != "RUNNING" || *got.Metadata.State != "AVAILABLE" || *p.Cores != 4 || *p.Ram != 8192 || *p.Type != "CUBE" {
		t.Errorf("server after DONE: vmState %s state %s cores %d ram %d type %s", *p.VmState, *got.Metadata.State, *p.Cores, *p.Ram, *p.Type)
	}
	nic := (*got.Entities.Nics.Items)[0]
	if *nic.Properties.Lan != 2 || len(*nic.Properties.Ips) != 1 || !strings.HasPrefix((*nic.Properties.Ips)[0], "10.7.2.") {
		t.Errorf("NIC: lan %d ips %v, want an address of 10.7.2.0/24 on LAN 2", *nic.Properties.Lan, *nic.Properties.Ips)
	}
	vol := (*got.Entities.Volumes.Items)[0]
	if *vol.Properties.Type != "DAS" || *vol.Properties.Size != 240 {
		t.Errorf("volume: type %s size %v, want DAS 240", *vol.Properties.Type, *vol.Properties.Size)
	}
	// A new server gets the data center's default group, which is not the worker group.
	sgs := *got.Entities.Securitygroups.Items
	if len(sgs) != 1 || *sgs[0].Id == sgID {
		t.Fatalf("security groups after create: %d, want only the default group", len(sgs))
	}
	// PUT replaces the whole list.
	_, r = must[ionoscloud.SecurityGroups](t)(api.SecurityGroupsApi.DatacentersServersSecuritygroupsPut(c, dcID, *srv.Id).
		Securitygroups(ionoscloud.ListOfIds{Ids: &[]string{sgID}}).Execute())
	wait(t, api, r)
	got, _ = must[ionoscloud.Server](t)(api.ServersApi.DatacentersServersFindById(c, dcID, *srv.Id).Depth(2).Execute())
	if sgs := *got.Entities.Securitygroups.Items; len(sgs) != 1 || *sgs[0].Id != sgID {
		t.Errorf("after PUT securitygroups: %v, want exactly the worker group", sgs)
	}

	// Suspend and resume; start and stop are refused on a CUBE.
	_, err := api.ServersApi.DatacentersServersStopPost(c, dcID, *srv.Id).Execute()
	if statusOf(err) != http.StatusUnprocessableEntity {
		t.Errorf("stop on a CUBE: %v, want 422", err)
	}
	r, err = api.ServersApi.DatacentersServersSuspendPost(c, dcID, *srv.Id).Execute()
	if err != nil {
		t.Fatal(err)
	}
	wait(t, api, r)
	got, _ = must[ionoscloud.Server](t)(api.ServersApi.DatacentersServersFindById(c, dcID, *srv.Id).Execute())
	if *got.Properties.VmState != "SUSPENDED" {
		t.Errorf("after suspend: %s", *got.Properties.VmState)
	}
	r, err = api.ServersApi.DatacentersServersResumePost(c, dcID, *srv.Id).Execute()
	if err != nil {
		t.Fatal(err)
	}
	wait(t, api, r)
	mu.Lock()
	if strings.Join(running, ",") != "cube-01,cube-01" {
		t.Errorf("OnRunning calls: %v, want cube-01 twice (create, resume)", running)
	}
	mu.Unlock()

	// DELETE is asynchronous; the server is gone once the request is DONE.
	r, err = api.ServersApi.DatacentersServersDelete(c, dcID, *srv.Id).Execute()
	if err != nil || r.StatusCode != http.StatusAccepted {
		t.Fatalf("delete: %v %d", err, r.StatusCode)
	}
	wait(t, api, r)
	if _, _, err := api.ServersApi.DatacentersServersFindById(c, dcID, *srv.Id).Execute(); statusOf(err) != http.StatusNotFound {
		t.Errorf("GET after delete: %v, want 404", err)
	}
	if n := l.Sim.Count("POST", "/cloudapi/v6/datacenters/"+dcID+"/servers"); n != 1 {
		t.Errorf("simulator counted %d POST servers, want 1", n)
	}
}

func TestCubeRulesRejected(t *testing.T) {
	_, api := mustStart(t, ionossim.Options{})
	dcID, _ := world(t, api)
	c := ctx(t)
	tpl := cubeTemplate(t, api, "Basic Cube S")
	for _, tc := range []struct {
		name string
		edit func(*ionoscloud.Server)
		want string
	}{
		{"cpuFamily", func(s *ionoscloud.Server) { s.Properties.CpuFamily = ionoscloud.PtrString("INTEL_SKYLAKE") }, "VDC-5-1921"},
		{"empty cpuFamily", func(s *ionoscloud.Server) { s.Properties.CpuFamily = ionoscloud.PtrString("") }, "VDC-5-1921"},
		{"cores", func(s *ionoscloud.Server) { s.Properties.Cores = ionoscloud.PtrInt32(2) }, "cores and ram"},
		{"ram", func(s *ionoscloud.Server) { s.Properties.Ram = ionoscloud.PtrInt32(4096) }, "cores and ram"},
		{"zone", func(s *ionoscloud.Server) { s.Properties.AvailabilityZone = ionoscloud.PtrString("ZONE_1") }, "AUTO"},
		{"volume size", func(s *ionoscloud.Server) {
			(*s.Entities.Volumes.Items)[0].Properties.Size = ionoscloud.ToPtr[float32](100)
		}, "size"},
		{"no volume", func(s *ionoscloud.Server) { s.Entities.Volumes = nil }, "exactly one DAS volume"},
		{"HDD volume", func(s *ionoscloud.Server) {
			(*s.Entities.Volumes.Items)[0].Properties.Type = ionoscloud.PtrString("HDD")
		}, "DAS"},
		{"unknown template", func(s *ionoscloud.Server) { s.Properties.TemplateUuid = ionoscloud.PtrString("nope") }, "template"},
		{"unknown alias", func(s *ionoscloud.Server) {
			(*s.Entities.Volumes.Items)[0].Properties.ImageAlias = ionoscloud.PtrString("windows:latest")
		}, "alias"},
		{"address outside the LAN", func(s *ionoscloud.Server) {
			(*s.Entities.Nics.Items)[0].Properties.Ips = &[]string{"192.168.1.9"}
		}, "outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := cubeBody("cube-x", tpl, 2, "")
			tc.edit(&body)
			_, r, err := api.ServersApi.DatacentersServersPost(c, dcID).Server(body).Execute()
			if statusOf(err) != http.StatusUnprocessableEntity || !strings.Contains(string(r.Payload), tc.want) {
				t.Errorf("got %v (%s), want 422 mentioning %q", err, r.Payload, tc.want)
			}
		})
	}
	srvs, _ := must[ionoscloud.Servers](t)(api.ServersApi.DatacentersServersGet(c, dcID).Execute())
	if n := len(*srvs.Items); n != 0 {
		t.Errorf("%d servers exist after refused creates", n)
	}
	// A Cube gets no volume after creation.
	srv, r := must[ionoscloud.Server](t)(api.ServersApi.DatacentersServersPost(c, dcID).Server(cubeBody("cube-y", tpl, 2, "")).Execute())
	wait(t, api, r)
	_, _, err := api.ServersApi.DatacentersServersVolumesPost(c, dcID, *srv.Id).Volume(ionoscloud.Volume{
		Properties: &ionoscloud.VolumeProperties{Type: ionoscloud.PtrString("DAS")}}).Execute()
	if statusOf(err) != http.StatusUnprocessableEntity {
		t.Errorf("attach a volume to a CUBE: %v, want 422", err)
	}
	// A second NIC with an address already in use on the LAN is refused.
	used := (*srv.Entities.Nics.Items)[0].Properties.Ips
	_, _, err = api.NetworkInterfacesApi.DatacentersServersNicsPost(c, dcID, *srv.Id).Nic(ionoscloud.Nic{
		Properties: &ionoscloud.NicProperties{Lan: ionoscloud.PtrInt32(2), Ips: used}}).Execute()
	if statusOf(err) != http.StatusUnprocessableEntity {
		t.Errorf("NIC with a used address: %v, want 422", err)
	}
}

func TestTargetGroupsReplacedWhole(t *testing.T) {
	_, api := mustStart(t, ionossim.Options{})
	c := ctx(t)
	target := func(ip string) ionoscloud.TargetGroupTarget {
		return ionoscloud.TargetGroupTarget{Ip: &ip, Port: ionoscloud.PtrInt32(8080), Weight: ionoscloud.PtrInt32(1)}
	}
	tg, r := must[ionoscloud.TargetGroup](t)(api.TargetGroupsApi.TargetgroupsPost(c).TargetGroup(ionoscloud.TargetGroup{
		Properties: &ionoscloud.TargetGroupProperties{Name: ionoscloud.PtrString("pool"), Algorithm: ionoscloud.PtrString("ROUND_ROBIN"),
			Protocol: ionoscloud.PtrString("HTTP"), Targets: &[]ionoscloud.TargetGroupTarget{target("10.7.2.11"), target("10.7.2.12")}}}).Execute())
	wait(t, api, r)

	// PATCH takes the bare properties; the targets list replaces the old one whole.
	_, r = must[ionoscloud.TargetGroup](t)(api.TargetGroupsApi.TargetgroupsPatch(c, *tg.Id).TargetGroupProperties(ionoscloud.TargetGroupProperties{
		Targets: &[]ionoscloud.TargetGroupTarget{target("10.7.2.13")}}).Execute())
	wait(t, api, r)
	got, _ := must[ionoscloud.TargetGroup](t)(api.TargetGroupsApi.TargetgroupsFindByTargetGroupId(c, *tg.Id).Execute())
	if ts := *got.Properties.Targets; len(ts) != 1 || *ts[0].Ip != "10.7.2.13" || *got.Properties.Name != "pool" {
		t.Errorf("after PATCH: name %s targets %v, want pool with only 10.7.2.13", *got.Properties.Name, ts)
	}
	// A PATCH body wrapped in "properties" is refused (sent raw: the SDK cannot send it).
	req, _ := http.NewRequest(http.MethodPatch, api.GetConfig().Servers[0].URL+"/targetgroups/"+*tg.Id,
		strings.NewReader(`{"properties":{"name":"x"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("PATCH wrapped in properties: %d, want 422", resp.StatusCode)
	}
	// PUT replaces everything: no targets given means none.
	_, r = must[ionoscloud.TargetGroup](t)(api.TargetGroupsApi.TargetgroupsPut(c, *tg.Id).TargetGroup(ionoscloud.TargetGroupPut{
		Properties: &ionoscloud.TargetGroupProperties{Name: ionoscloud.PtrString("pool2"), Algorithm: ionoscloud.PtrString("RANDOM"),
			Protocol: ionoscloud.PtrString("HTTP")}}).Execute())
	wait(t, api, r)
	got, _ = must[ionoscloud.TargetGroup](t)(api.TargetGroupsApi.TargetgroupsFindByTargetGroupId(c, *tg.Id).Execute())
	if len(*got.Properties.Targets) != 0 || *got.Properties.Algorithm != "RANDOM" {
		t.Errorf("after PUT: %v", got.Properties)
	}
	r, err = api.TargetGroupsApi.TargetGroupsDelete(c, *tg.Id).Execute()
	if err != nil {
		t.Fatal(err)
	}
	wait(t, api, r)
}

func TestNetworkResourcesWriteAndRead(t *testing.T) {
	_, api := mustStart(t, ionossim.Options{})
	dcID, sgID := world(t, api)
	c := ctx(t)
	ng, r := must[ionoscloud.NatGateway](t)(api.NATGatewaysApi.DatacentersNatgatewaysPost(c, dcID).NatGateway(ionoscloud.NatGateway{
		Properties: &ionoscloud.NatGatewayProperties{Name: ionoscloud.PtrString("nat"), PublicIps: &[]string{"203.0.113.5"},
			Lans: &[]ionoscloud.NatGatewayLanProperties{{Id: ionoscloud.PtrInt32(2), GatewayIps: &[]string{"10.7.2.1/24"}}}}}).Execute())
	wait(t, api, r)
	tg, r := must[ionoscloud.TargetGroup](t)(api.TargetGroupsApi.TargetgroupsPost(c).TargetGroup(ionoscloud.TargetGroup{
		Properties: &ionoscloud.TargetGroupProperties{Name: ionoscloud.PtrString("pool"), Algorithm: ionoscloud.PtrString("ROUND_ROBIN"),
			Protocol: ionoscloud.PtrString("HTTP")}}).Execute())
	wait(t, api, r)
	alb, r := must[ionoscloud.ApplicationLoadBalancer](t)(api.ApplicationLoadBalancersApi.DatacentersApplicationloadbalancersPost(c, dcID).
		ApplicationLoadBalancer(ionoscloud.ApplicationLoadBalancer{Properties: &ionoscloud.ApplicationLoadBalancerProperties{
			Name: ionoscloud.PtrString("alb"), ListenerLan: ionoscloud.PtrInt32(1), TargetLan: ionoscloud.PtrInt32(2),
			Ips: &[]string{"203.0.113.9"}, LbPrivateIps: &[]string{"10.7.2.50/24"}}}).Execute())
	wait(t, api, r)
	_, r = must[ionoscloud.ApplicationLoadBalancerForwardingRule](t)(api.ApplicationLoadBalancersApi.
		DatacentersApplicationloadbalancersForwardingrulesPost(c, dcID, *alb.Id).ApplicationLoadBalancerForwardingRule(
		ionoscloud.ApplicationLoadBalancerForwardingRule{Properties: &ionoscloud.ApplicationLoadBalancerForwardingRuleProperties{
			Name: ionoscloud.PtrString("https"), Protocol: ionoscloud.PtrString("HTTP"), ListenerIp: ionoscloud.PtrString("203.0.113.9"),
			ListenerPort: ionoscloud.PtrInt32(443), HttpRules: &[]ionoscloud.ApplicationLoadBalancerHttpRule{{
				Name: ionoscloud.PtrString("to-pool"), Type: ionoscloud.PtrString("FORWARD"), TargetGroup: tg.Id}}}}).Execute())
	wait(t, api, r)

	albs, _ := must[ionoscloud.ApplicationLoadBalancers](t)(api.ApplicationLoadBalancersApi.DatacentersApplicationloadbalancersGet(c, dcID).Depth(3).Execute())
	rules := *(*albs.Items)[0].Entities.Forwardingrules.Items
	if len(rules) != 1 || *(*rules[0].Properties.HttpRules)[0].TargetGroup != *tg.Id {
		t.Errorf("ALB at depth 3 lacks its forwarding rule to the target group: %+v", rules)
	}
	ngs, _ := must[ionoscloud.NatGateways](t)(api.NATGatewaysApi.DatacentersNatgatewaysGet(c, dcID).Depth(1).Execute())
	if len(*ngs.Items) != 1 || *(*(*ngs.Items)[0].Properties.Lans)[0].Id != 2 {
		t.Errorf("NAT gateways: %+v", ngs.Items)
	}
	// Deletes of each kind.
	for _, del := range []func() (*ionoscloud.APIResponse, error){
		api.ApplicationLoadBalancersApi.DatacentersApplicationloadbalancersDelete(c, dcID, *alb.Id).Execute,
		api.NATGatewaysApi.DatacentersNatgatewaysDelete(c, dcID, *ng.Id).Execute,
		api.SecurityGroupsApi.DatacentersSecuritygroupsDelete(c, dcID, sgID).Execute,
		api.LANsApi.DatacentersLansDelete(c, dcID, "1").Execute,
		api.TargetGroupsApi.TargetGroupsDelete(c, *tg.Id).Execute,
	} {
		r, err := del()
		if err != nil {
			t.Fatal(err)
		}
		wait(t, api, r)
	}
	dc, _ := must[ionoscloud.Datacenter](t)(api.DataCentersApi.DatacentersFindById(c, dcID).Depth(2).Execute())
	if n := len(*dc.Entities.Lans.Items); n != 1 {
		t.Errorf("LANs after deleting LAN 1: %d, want 1", n)
	}
	if n := len(*dc.Entities.Natgateways.Items); n != 0 {
		t.Errorf("NAT gateways after delete: %d", n)
	}
	r, err := api.DataCentersApi.DatacentersDelete(c, dcID).Execute()
	if err != nil {
		t.Fatal(err)
	}
	wait(t, api, r)
	if _, _, err := api.DataCentersApi.DatacentersFindById(c, dcID).Execute(); statusOf(err) != http.StatusNotFound {
		t.Errorf("data center after delete: %v", err)
	}
}

func TestDepthAndPaging(t *testing.T) {
	l, api := mustStart(t, ionossim.Options{})
	if err := l.Sim.Load(ionossim.SampleFleet(25)); err != nil {
		t.Fatal(err)
	}
	c := ctx(t)
	dcID := ionossim.SampleDatacenterID
	for _, tc := range []struct {
		depth                 int32
		props, entities, nics bool
	}{
		{0, false, false, false}, {1, true, false, false}, {2, true, true, false}, {3, true, true, true},
	} {
		srvs, _ := must[ionoscloud.Servers](t)(api.ServersApi.DatacentersServersGet(c, dcID).Depth(tc.depth).Execute())
		s := (*srvs.Items)[0]
		props, ents := s.Properties != nil, s.Entities != nil
		nics := ents && (*s.Entities.Nics.Items)[0].Properties != nil
		if props != tc.props || ents != tc.entities || nics != tc.nics {
			t.Errorf("servers?depth=%d: properties %v entities %v nic properties %v, want %v %v %v",
				tc.depth, props, ents, nics, tc.props, tc.entities, tc.nics)
		}
	}
	srvs, _ := must[ionoscloud.Servers](t)(api.ServersApi.DatacentersServersGet(c, dcID).Depth(1).Offset(20).Limit(10).Execute())
	if n := len(*srvs.Items); n != 5 || srvs.Links.Next != nil || srvs.Links.Prev == nil || *srvs.Offset != 20 {
		t.Errorf("offset 20 limit 10 of 25: %d items, links %+v", n, srvs.Links)
	}
	srvs, _ = must[ionoscloud.Servers](t)(api.ServersApi.DatacentersServersGet(c, dcID).Depth(1).Offset(0).Limit(10).Execute())
	if srvs.Links.Next == nil || srvs.Links.Prev != nil {
		t.Errorf("first page links: %+v", srvs.Links)
	}
	if _, _, err := api.ServersApi.DatacentersServersGet(c, dcID).Limit(10001).Execute(); statusOf(err) != http.StatusUnprocessableEntity {
		t.Errorf("limit 10001: %v, want 422", err)
	}
	// Templates at depth 0 are references; at depth 1 they carry cores, RAM and storage.
	tpls, _ := must[ionoscloud.Templates](t)(api.TemplatesApi.TemplatesGet(c).Execute())
	if (*tpls.Items)[0].Properties != nil {
		t.Error("templates?depth=0 carry properties")
	}
	dc, _ := must[ionoscloud.Datacenter](t)(api.DataCentersApi.DatacentersFindById(c, dcID).Depth(4).Execute())
	if n := len(*dc.Entities.Servers.Items); n != 25 || (*(*dc.Entities.Servers.Items)[0].Entities.Nics.Items)[0].Properties == nil {
		t.Errorf("datacenter?depth=4: %d servers, NIC properties missing", n)
	}
}

func TestTimestampsAreUTCWithZ(t *testing.T) {
	l, _ := mustStart(t, ionossim.Options{})
	if err := l.Sim.Load(ionossim.SampleFleet(1)); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, l.URL+"/cloudapi/v6/datacenters/11111111-1111-4111-8111-111111111111/servers?depth=3", nil)
	req.Header.Set("Authorization", "Bearer x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	stamps := regexp.MustCompile(`"(createdDate|lastModifiedDate)":"([^"]*)"`).FindAllStringSubmatch(string(body), -1)
	if len(stamps) == 0 {
		t.Fatal("no timestamps")
	}
	for _, m := range stamps {
		if !strings.HasSuffix(m[2], "Z") || strings.Contains(m[2], "+") {
			t.Errorf("%s = %q, want UTC with Z", m[1], m[2])
		}
	}
}

func TestAuthAndUnknownRoutes(t *testing.T) {
	l, api := mustStart(t, ionossim.Options{Authorize: ionossim.AcceptToken("right")})
	_, _, err := api.DataCentersApi.DatacentersGet(ctx(t)).Execute()
	if statusOf(err) != http.StatusUnauthorized {
		t.Errorf("wrong token: %v, want 401", err)
	}
	resp, err := http.Get(l.URL + "/cloudapi/v6/nothing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, l.URL+"/cloudapi/v6/nothing", nil)
	req.Header.Set("Authorization", "Bearer right")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("unknown route: %d %s, want a JSON 404", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestFaults(t *testing.T) {
	l, api := mustStart(t, ionossim.Options{})
	if err := l.Sim.Load(ionossim.SampleFleet(2)); err != nil {
		t.Fatal(err)
	}
	c := ctx(t)
	dcID := ionossim.SampleDatacenterID
	path := "/datacenters/" + dcID + "/servers"

	l.Sim.InjectFault(ionossim.Fault{Method: "GET", Path: path, Status: 429, RetryAfter: "7", Times: 1})
	_, r, err := api.ServersApi.DatacentersServersGet(c, dcID).Execute()
	if statusOf(err) != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "7" {
		t.Errorf("429 fault: %v, Retry-After %q", err, r.Header.Get("Retry-After"))
	}
	if _, _, err := api.ServersApi.DatacentersServersGet(c, dcID).Execute(); err != nil {
		t.Errorf("after Times: 1 the fault should be spent: %v", err)
	}
	if n := l.Sim.Count("GET", "/cloudapi/v6"+path); n != 2 {
		t.Errorf("count %d, want 2", n)
	}

	// A server stuck BUSY keeps its requests RUNNING.
	srvID := ionossim.SampleServerID(0)
	l.Sim.StickBusy(srvID)
	r, err = api.ServersApi.DatacentersServersSuspendPost(c, dcID, srvID).Execute()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	st, _, err := api.GetRequestStatus(c, r.Header.Get("Location"))
	if err != nil || *st.Metadata.Status != "RUNNING" {
		t.Errorf("stuck request: %v %v, want RUNNING", err, st.Metadata.Status)
	}
	got, _ := must[ionoscloud.Server](t)(api.ServersApi.DatacentersServersFindById(c, dcID, srvID).Execute())
	if *got.Metadata.State != "BUSY" {
		t.Errorf("stuck server state %s", *got.Metadata.State)
	}
	l.Sim.ClearFaults()
	wait(t, api, r)

	// A failed request rolls a create back.
	l.Sim.InjectFault(ionossim.Fault{Method: "POST", Path: "/datacenters/", FailRequest: true, Times: 1})
	tpl := ionossim.DefaultTemplates()[0].ID
	srv, r, err := api.ServersApi.DatacentersServersPost(c, dcID).Server(cubeBody("doomed", tpl, 2, "")).Execute()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.WaitForRequest(c, r.Header.Get("Location")); err == nil || !strings.Contains(err.Error(), "failed") {
		t.Errorf("WaitForRequest on a failed request: %v", err)
	}
	if _, _, err := api.ServersApi.DatacentersServersFindById(c, dcID, *srv.Id).Execute(); statusOf(err) != http.StatusNotFound {
		t.Errorf("server of a failed create: %v, want 404", err)
	}

	// A redirect is answered as configured; latency delays.
	l.Sim.InjectFault(ionossim.Fault{Path: "/templates", Status: http.StatusFound, Latency: 30 * time.Millisecond, Times: 1})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodGet, l.URL+"/cloudapi/v6/templates", nil)
	req.Header.Set("Authorization", "Bearer x")
	start := time.Now()
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") == "" || time.Since(start) < 30*time.Millisecond {
		t.Errorf("redirect fault: %d %q after %s", resp.StatusCode, resp.Header.Get("Location"), time.Since(start))
	}
}

func TestStateRoundTrip(t *testing.T) {
	l, api := mustStart(t, ionossim.Options{})
	world(t, api)
	var buf bytes.Buffer
	if err := l.Sim.SaveState(&buf); err != nil {
		t.Fatal(err)
	}
	sim2 := ionossim.New(ionossim.Options{})
	if err := sim2.LoadState(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := sim2.SaveState(&again); err != nil {
		t.Fatal(err)
	}
	if buf.String() != again.String() {
		t.Errorf("state changed in a save/load/save round trip:\n%s\n---\n%s", buf.String(), again.String())
	}
	if err := sim2.LoadState(strings.NewReader(`{"datacenters":[],"bogus":1}`)); err == nil {
		t.Error("unknown key in a fixture accepted")
	}
}

func TestListenRefusesNonLoopback(t *testing.T) {
	if _, err := ionossim.Listen(context.Background(), "0.0.0.0:0", ionossim.New(ionossim.Options{})); !errors.Is(err, ionossim.ErrNotLoopback) {
		t.Errorf("Listen on 0.0.0.0: %v, want ErrNotLoopback", err)
	}
}
