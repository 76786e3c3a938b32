package cubes_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/ionos"
	"github.com/cubefleet/cubefleet/internal/ionos/ionossim"
)

// cloudEnv is the simulator on loopback holding SampleFleet(2) and a client for it.
type cloudEnv struct {
	sim    *ionossim.Sim
	client *ionos.Client
	wait   cubes.Wait
}

func newCloudEnv(t *testing.T) cloudEnv {
	t.Helper()
	sim := ionossim.New(ionossim.Options{Authorize: ionossim.AcceptToken("tok"), QueueDelay: time.Millisecond, RunDuration: 20 * time.Millisecond})
	if err := sim.Load(ionossim.SampleFleet(2)); err != nil {
		t.Fatal(err)
	}
	l, err := ionossim.Listen(context.Background(), "127.0.0.1:0", sim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c, err := ionos.New(ionos.Config{APIURL: l.URL, Token: ionos.NewToken("tok"), BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	return cloudEnv{sim: sim, client: c, wait: cubes.Wait{Poll: 5 * time.Millisecond, Budget: 5 * time.Second}}
}

func (e cloudEnv) spec(name string) ionos.CubeSpec {
	return ionos.CubeSpec{Name: name, TemplateID: ionossim.DefaultTemplates()[2].ID, Image: "ubuntu:latest", LANID: ionossim.SamplePrivateLAN,
		PrivateIP: ionossim.SampleServerIP(2), UserData: cubes.CubeUserData(cubes.CubeBoot{ControlPlane: "http://127.0.0.1:1", JoinToken: "cfj_secret",
			NodeIP: ionossim.SampleServerIP(2), AgentBinaryURL: "http://127.0.0.1:1/cubefleet"})}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestCloudCreateWaitAttachDelete creates a Cube with the body CUBE servers need (the
// simulator refuses cpuFamily, cores, ram and a volume size), waits for it through 404s
// while its request runs, attaches the worker group as a union, finds it by name, and
// deletes it by id.
func TestCloudCreateWaitAttachDelete(t *testing.T) {
	e := newCloudEnv(t)
	ctx := ctxT(t)
	dc := ionossim.SampleDatacenterID
	spec := e.spec("cube-r1-2")
	for _, bad := range []string{"cpuFamily", "cores", "ram", "size"} {
		e.sim.InjectFault(ionossim.Fault{Method: "POST", IfField: bad, Status: 599, Times: 1})
	}
	acc, err := e.client.CreateCube(ctx, dc, spec)
	if err != nil || acc.ServerID == "" || acc.RequestID == "" {
		t.Fatalf("create: %+v %v", acc, err)
	}
	e.sim.ClearFaults()
	rq := e.sim.Snapshot().Requests
	var body struct {
		Entities struct {
			Volumes struct {
				Items []struct {
					Properties map[string]any `json:"properties"`
				} `json:"items"`
			} `json:"volumes"`
		} `json:"entities"`
	}
	if err := json.Unmarshal([]byte(rq[len(rq)-1].Body), &body); err != nil || len(body.Entities.Volumes.Items) != 1 {
		t.Fatalf("create body: %v %s", err, rq[len(rq)-1].Body)
	}
	ud, _ := base64.StdEncoding.DecodeString(body.Entities.Volumes.Items[0].Properties["userData"].(string))
	if !strings.HasPrefix(string(ud), "#cloud-config\n") || body.Entities.Volumes.Items[0].Properties["type"] != "DAS" {
		t.Errorf("volume: %v, user data %q", body.Entities.Volumes.Items[0].Properties, ud)
	}

	e.sim.InjectFault(ionossim.Fault{Method: "GET", Target: "servers/{id}", Status: 404, Times: 3})
	srv, err := e.wait.Running(ctx, e.client, dc, acc.ServerID, acc.RequestID)
	if err != nil || srv.VMState != "RUNNING" || cubes.VerifyCube(srv, spec) != nil {
		t.Fatalf("running: %+v %v", srv, err)
	}
	e.sim.ClearFaults()

	for range 2 { // the second attach changes nothing
		if _, err := cubes.AttachGroup(ctx, e.client, e.wait, dc, acc.ServerID, ionossim.SampleWorkerGroupID); err != nil {
			t.Fatal(err)
		}
	}
	srv, _ = e.client.Server(ctx, dc, acc.ServerID)
	if !slices.Equal(srv.SecurityGroupIDs, []string{"22222222-2222-4222-8222-000000000000", ionossim.SampleWorkerGroupID}) {
		t.Errorf("groups after attach: %v (want the default group and the worker group)", srv.SecurityGroupIDs)
	}
	if n := e.sim.Count("PUT", "/cloudapi/v6/datacenters/"+dc+"/servers/"+acc.ServerID+"/securitygroups"); n != 1 {
		t.Errorf("%d PUTs of the groups, want 1", n)
	}

	found, err := cubes.FindCreated(ctx, e.client, dc, spec)
	if err != nil || found == nil || found.ID != acc.ServerID {
		t.Fatalf("find by name: %+v %v", found, err)
	}
	wrong := spec
	wrong.PrivateIP = ionossim.SampleServerIP(9)
	if _, err := cubes.FindCreated(ctx, e.client, dc, wrong); !isCode(err, cubefleet.CodeConflict) {
		t.Errorf("a server of the name with another IP: %v, want CONFLICT", err)
	}
	if none, err := cubes.FindCreated(ctx, e.client, dc, e.spec("cube-r1-9")); none != nil || err != nil {
		t.Errorf("no server of the name: %+v %v", none, err)
	}

	if err := cubes.DeleteCube(ctx, e.client, e.wait, dc, acc.ServerID); err != nil {
		t.Fatal(err)
	}
	if err := cubes.DeleteCube(ctx, e.client, e.wait, dc, acc.ServerID); err != nil {
		t.Errorf("delete again: %v (gone is done)", err)
	}
	if len(e.sim.Snapshot().Datacenters[0].Servers) != 2 {
		t.Errorf("servers after delete: %d, want the 2 of before", len(e.sim.Snapshot().Datacenters[0].Servers))
	}
}

// TestCloudUnknownOutcome: a POST answered 504 after it was applied is not repeated; the
// name finds the one server; two servers of the name are a CONFLICT listing both.
func TestCloudUnknownOutcome(t *testing.T) {
	e := newCloudEnv(t)
	ctx := ctxT(t)
	dc := ionossim.SampleDatacenterID
	f, err := ionossim.ParseFault("POST servers: 504 after-apply")
	if err != nil {
		t.Fatal(err)
	}
	e.sim.InjectFault(f)
	spec := e.spec("cube-r2-2")
	if _, err := e.client.CreateCube(ctx, dc, spec); !errors.Is(err, ionos.ErrOutcomeUnknown) {
		t.Fatalf("create under 504: %v, want ErrOutcomeUnknown", err)
	}
	if n := e.sim.Count("POST", "/cloudapi/v6/datacenters/"+dc+"/servers"); n != 1 {
		t.Errorf("%d POSTs, want exactly 1 (a POST is never repeated)", n)
	}
	e.sim.ClearFaults()
	srv, err := cubes.FindCreated(ctx, e.client, dc, spec)
	if srv == nil || err != nil {
		// The server is listed only once its request is done; wait for it as up does.
		time.Sleep(50 * time.Millisecond)
		srv, err = cubes.FindCreated(ctx, e.client, dc, spec)
	}
	if srv == nil || err != nil {
		t.Fatalf("find after 504: %+v %v", srv, err)
	}
	twin := spec
	twin.PrivateIP = ionossim.SampleServerIP(3)
	if _, err := e.client.CreateCube(ctx, dc, twin); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	_, err = cubes.FindCreated(ctx, e.client, dc, spec)
	if !isCode(err, cubefleet.CodeConflict) || !strings.Contains(err.Error(), srv.ID) || !strings.Contains(err.Error(), "2 servers are named") {
		t.Errorf("two of the name: %v", err)
	}
}

// TestCloudWaitBudget: a request stuck BUSY runs out the wait's budget with an error saying to
// rerun; the rerun, once the request moves, waits on the same request and server.
func TestCloudWaitBudget(t *testing.T) {
	e := newCloudEnv(t)
	ctx := ctxT(t)
	dc := ionossim.SampleDatacenterID
	f, err := ionossim.ParseFault("requests: stuck BUSY 10m")
	if err != nil {
		t.Fatal(err)
	}
	e.sim.InjectFault(f)
	acc, err := e.client.CreateCube(ctx, dc, e.spec("cube-r3-2"))
	if err != nil {
		t.Fatal(err)
	}
	short := e.wait
	short.Budget = 30 * time.Millisecond
	if _, err := short.Running(ctx, e.client, dc, acc.ServerID, acc.RequestID); !isCode(err, cubefleet.CodeDeadlineExceeded) || !strings.Contains(err.Error(), "rerun") {
		t.Fatalf("stuck: %v, want DEADLINE_EXCEEDED saying to rerun", err)
	}
	e.sim.ClearFaults()
	// A stuck request stays stuck (it was created so); the simulator's world is edited as
	// IONOS would finish it.
	st := e.sim.Snapshot()
	for _, rq := range st.Requests {
		rq.Stuck, rq.DoneAt = false, time.Now()
	}
	if err := e.sim.Load(st); err != nil {
		t.Fatal(err)
	}
	if srv, err := e.wait.Running(ctx, e.client, dc, acc.ServerID, acc.RequestID); err != nil || srv.ID != acc.ServerID {
		t.Fatalf("rerun: %+v %v", srv, err)
	}
}

// TestCloudTargets adds a target, takes its weight to 0 and removes it again: the group's
// targets end exactly as they began, and writes happen only when something changes.
func TestCloudTargets(t *testing.T) {
	e := newCloudEnv(t)
	ctx := ctxT(t)
	tg := ionossim.SampleTargetGroupID
	start, err := e.client.TargetGroup(ctx, tg)
	if err != nil {
		t.Fatal(err)
	}
	add := ionos.Target{IP: ionossim.SampleServerIP(2), Port: 8080, Weight: 1, HealthCheckEnabled: true}
	for range 2 {
		if _, err := cubes.AddTarget(ctx, e.client, e.wait, tg, add); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.sim.Count("PUT", "/cloudapi/v6/targetgroups/"+tg); n != 1 {
		t.Errorf("%d PUTs for two adds of one target, want 1", n)
	}
	if err := cubes.SetTargetWeight(ctx, e.client, e.wait, tg, add.IP, add.Port, 0); err != nil {
		t.Fatal(err)
	}
	mid, _ := e.client.TargetGroup(ctx, tg)
	if got := mid.Targets[len(mid.Targets)-1]; got.Weight != 0 || len(mid.Targets) != 3 {
		t.Errorf("after weight 0: %+v", mid.Targets)
	}
	after, err := cubes.RemoveTarget(ctx, e.client, e.wait, tg, add.IP, add.Port)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := e.client.TargetGroup(ctx, tg)
	if !slices.Equal(end.Targets, start.Targets) || !slices.Equal(after, start.Targets) {
		t.Errorf("targets after remove: %+v, want %+v", end.Targets, start.Targets)
	}
	if got := cubes.Origins(end.Targets); !slices.Equal(got, []string{"10.7.0.11:8080", "10.7.0.12:8080"}) {
		t.Errorf("origins %v", got)
	}
}

func isCode(err error, code cubefleet.Code) bool {
	var ce *cubefleet.Error
	return errors.As(err, &ce) && ce.Code == code
}
