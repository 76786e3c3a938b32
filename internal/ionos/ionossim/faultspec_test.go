package ionossim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/ionos/ionossim"
)

func TestParseFault(t *testing.T) {
	for _, c := range []struct {
		spec string
		want ionossim.Fault
	}{
		{"POST servers: 504 after-apply", ionossim.Fault{Method: "POST", Target: "servers", Status: 504, Applied: true}},
		{"GET servers/{id}: 404 x3", ionossim.Fault{Method: "GET", Target: "servers/{id}", Status: 404, Times: 3}},
		{"POST servers: 422 if cpuFamily", ionossim.Fault{Method: "POST", Target: "servers", Status: 422, IfField: "cpuFamily"}},
		{"requests: stuck BUSY 10m", ionossim.Fault{Target: "requests", StuckFor: 10 * time.Minute}},
		{"*: 429 x20", ionossim.Fault{Target: "*", Status: 429, Times: 20}},
		{"*: 429 x20 retry-after 2", ionossim.Fault{Target: "*", Status: 429, Times: 20, RetryAfter: "2"}},
		{"  DELETE   servers/{id} :  503  ", ionossim.Fault{Method: "DELETE", Target: "servers/{id}", Status: 503}},
		{"templates: latency 2s x1", ionossim.Fault{Target: "templates", Latency: 2 * time.Second, Times: 1}},
		{"POST datacenters/{id}/servers: fail-request", ionossim.Fault{Method: "POST", Target: "datacenters/{id}/servers", FailRequest: true}},
		{"GET templates: 302", ionossim.Fault{Method: "GET", Target: "templates", Status: 302}},
	} {
		t.Run(c.spec, func(t *testing.T) {
			got, err := ionossim.ParseFault(c.spec)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("ParseFault = %+v, want %+v", got, c.want)
			}
			again, err := ionossim.ParseFault(got.String())
			if err != nil || again != got {
				t.Errorf("ParseFault(%q) = %+v, %v; want it back", got.String(), again, err)
			}
		})
	}
}

func TestParseFaultRefuses(t *testing.T) {
	for _, c := range []struct{ spec, says string }{
		{"", "want [METHOD] TARGET: ACTION"},
		{"POST servers 504", "want [METHOD] TARGET: ACTION"},
		{"FETCH servers: 504", `method "FETCH"`},
		{"POST servers x: 504", "before the colon"},
		{"POST serv ers/..: 504", "before the colon"},
		{"POST ../servers: 504", `target "../servers"`},
		{"POST servers/: 504", "target"},
		{"POST servers:", "no action"},
		{"POST servers: 200", "from 300 to 599"},
		{"POST servers: 600", "from 300 to 599"},
		{"POST servers: teapot", "from 300 to 599"},
		{"POST servers: stuck 10m", `"stuck BUSY DURATION"`},
		{"POST servers: stuck BUSY", "wants a duration"},
		{"POST servers: stuck BUSY -1m", "positive duration"},
		{"POST servers: latency soon", "positive duration"},
		{"POST servers: fail-request after-apply", "goes with a status"},
		{"POST servers: 504 x0", "from 1 to 1000000"},
		{"POST servers: 504 xx", "from 1 to 1000000"},
		{"POST servers: 504 if", "JSON member name"},
		{"POST servers: 504 if a.b", "JSON member name"},
		{"POST servers: 504 retry-after 2", "goes with 429 or 503"},
		{"POST servers: 429 retry-after soon", "whole seconds"},
		{"POST servers: 504 twice", `"twice"`},
		{strings.Repeat("a", 600), "longer than 512"},
	} {
		t.Run(c.spec, func(t *testing.T) {
			_, err := ionossim.ParseFault(c.spec)
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Errorf("ParseFault(%q) = %v, want an error saying %q", c.spec, err, c.says)
			}
		})
	}
}

func FuzzParseFault(f *testing.F) {
	for _, s := range []string{"POST servers: 504 after-apply", "GET servers/{id}: 404 x3", "POST servers: 422 if cpuFamily",
		"requests: stuck BUSY 10m", "*: 429 x20", "*: 503 retry-after 1 x2", "templates: latency 1ms", ": :", "GET :x1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		got, err := ionossim.ParseFault(spec)
		if err != nil {
			return
		}
		again, err := ionossim.ParseFault(got.String())
		if err != nil || again != got {
			t.Fatalf("ParseFault(%q) = %+v; its String %q parses to %+v, %v", spec, got, got.String(), again, err)
		}
	})
}

// call sends method path (below BasePath) with a JSON body (nil: none) to the simulator at url
// and returns the status and body.
func call(t *testing.T, url, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url+ionossim.BasePath+path, rd)
	req.Header.Set("Authorization", "Bearer x")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// TestFaultSpecs runs the faults of docs/ionos.md's examples against a sample data center.
func TestFaultSpecs(t *testing.T) {
	l, _ := mustStart(t, ionossim.Options{})
	sim := l.Sim
	dc := "/datacenters/" + ionossim.SampleDatacenterID
	tpl := ionossim.DefaultTemplates()[0].ID
	inject := func(spec string) {
		t.Helper()
		f, err := ionossim.ParseFault(spec)
		if err != nil {
			t.Fatal(err)
		}
		sim.ClearFaults()
		sim.InjectFault(f)
	}
	reset := func() {
		t.Helper()
		sim.ClearFaults()
		if err := sim.Load(ionossim.SampleFleet(1)); err != nil {
			t.Fatal(err)
		}
	}
	names := func() []string {
		t.Helper()
		var out []string
		for _, d := range sim.Snapshot().Datacenters {
			for _, s := range d.Servers {
				out = append(out, s.Name)
			}
		}
		return out
	}
	cube := func(name string) any { return cubeBody(name, tpl, 2, "") }

	t.Run("504 after-apply: the create happened", func(t *testing.T) {
		reset()
		inject("POST servers: 504 after-apply")
		if code, body := call(t, l.URL, "POST", dc+"/servers", cube("cube-new")); code != 504 || !strings.Contains(string(body), "simulated fault") {
			t.Fatalf("create: %d %s, want the simulated 504", code, body)
		}
		if got := names(); !slices.Contains(got, "cube-new") {
			t.Errorf("servers %v: the write was not applied", got)
		}
	})
	t.Run("404 x3 on one server's GET only", func(t *testing.T) {
		reset()
		inject("GET servers/{id}: 404 x3")
		srv := dc + "/servers/" + ionossim.SampleServerID(0)
		if code, _ := call(t, l.URL, "GET", dc+"/servers", nil); code != 200 {
			t.Errorf("the server list: %d, want 200 (not a servers/{id} call)", code)
		}
		if code, _ := call(t, l.URL, "GET", srv+"/nics", nil); code != 200 {
			t.Errorf("a server's NICs: %d, want 200 (the path goes on past servers/{id})", code)
		}
		for i := range 3 {
			if code, _ := call(t, l.URL, "GET", srv, nil); code != 404 {
				t.Errorf("GET %d: %d, want 404", i+1, code)
			}
		}
		if code, _ := call(t, l.URL, "GET", srv, nil); code != 200 {
			t.Errorf("GET 4: %d, want 200 after x3", code)
		}
	})
	t.Run("422 if cpuFamily", func(t *testing.T) {
		reset()
		inject("POST servers: 422 if cpuFamily")
		with := cubeBody("with-family", tpl, 2, "")
		with.Properties.CpuFamily = new(string)
		*with.Properties.CpuFamily = "INTEL_SKYLAKE"
		if code, body := call(t, l.URL, "POST", dc+"/servers", with); code != 422 || !strings.Contains(string(body), "simulated fault") {
			t.Errorf("a body with cpuFamily: %d %s, want the simulated 422", code, body)
		}
		if code, body := call(t, l.URL, "POST", dc+"/servers", cube("without")); code != 202 {
			t.Errorf("a body without cpuFamily: %d %s, want 202", code, body)
		}
	})
	t.Run("requests stuck BUSY", func(t *testing.T) {
		reset()
		inject("requests: stuck BUSY 10m")
		code, _ := call(t, l.URL, "POST", dc+"/servers", cube("slow"))
		if code != 202 {
			t.Fatalf("create: %d", code)
		}
		time.Sleep(60 * time.Millisecond) // past the run duration of mustStart (20 ms)
		sim.Advance()
		var found bool
		for _, rq := range sim.Snapshot().Requests {
			if rq.Method == "POST" {
				found = true
				if rq.Status != ionossim.RequestRunning {
					t.Errorf("request %s: %s, want RUNNING for 10m", rq.ID, rq.Status)
				}
			}
		}
		if !found {
			t.Error("no request recorded for the create")
		}
		if code, _ := call(t, l.URL, "GET", "/requests", nil); code != 200 {
			t.Errorf("GET /requests: %d: a stuck fault answers nothing itself", code)
		}
	})
	t.Run("429 x20 on every call", func(t *testing.T) {
		reset()
		inject("*: 429 x20 retry-after 1")
		for i := range 20 {
			path := []string{"/templates", dc + "/servers", "/requests"}[i%3]
			if code, _ := call(t, l.URL, "GET", path, nil); code != 429 {
				t.Fatalf("call %d (%s): %d, want 429", i+1, path, code)
			}
		}
		if code, _ := call(t, l.URL, "GET", "/templates", nil); code != 200 {
			t.Errorf("call 21: %d, want 200", code)
		}
	})
}
