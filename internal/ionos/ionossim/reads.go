package ionossim

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	ionoscloud "github.com/ionos-cloud/sdk-go/v6"
)

// call is one API call as the handlers see it.
type call struct {
	r           *http.Request
	base        string // http://host/cloudapi/v6
	body        []byte
	depth       int
	failRequest bool
	stuckFor    time.Duration // Fault.StuckFor of the call: its requests stay RUNNING that long
}

// response is what a handler returns; serveCall writes it after releasing the lock.
type response struct {
	status   int
	body     any
	location string
}

func fail(status int, format string, args ...any) response {
	return response{status: status, body: apiError{HTTPStatus: status,
		Messages: []apiMessage{{ErrorCode: fmt.Sprint(status), Message: fmt.Sprintf(format, args...)}}}}
}

func ok(body any) response { return response{status: http.StatusOK, body: body} }

// accepted is the answer to an asynchronous write: 202, the Location of its request status,
// and body (nil for an empty body).
func accepted(c *call, rq *Request, body any) response {
	return response{status: http.StatusAccepted, body: body, location: c.base + "/requests/" + rq.ID + "/status"}
}

func notFound(kind, id string) response {
	return fail(http.StatusNotFound, "[VDC-3-1] the %s %s does not exist", kind, id)
}

func trimBase(path string) string { return strings.TrimPrefix(path, BasePath) }

func (s *Sim) routes() {
	m := http.NewServeMux()
	h := func(pattern string, fn func(*call) response) {
		method, path, _ := strings.Cut(pattern, " ")
		m.HandleFunc(method+" "+BasePath+path, func(w http.ResponseWriter, r *http.Request) { s.serveCall(w, r, fn) })
	}
	const dc, srv = "/datacenters/{dc}", "/datacenters/{dc}/servers/{srv}"
	const alb = dc + "/applicationloadbalancers/{alb}"
	h("GET /datacenters", s.listDatacenters)
	h("POST /datacenters", s.createDatacenter)
	h("GET "+dc, s.getDatacenter)
	h("DELETE "+dc, s.deleteDatacenter)

	h("GET "+dc+"/servers", s.listServers)
	h("POST "+dc+"/servers", s.createServer)
	h("GET "+srv, s.getServer)
	h("PATCH "+srv, s.patchServer)
	h("PUT "+srv, s.putServer)
	h("DELETE "+srv, s.deleteServer)
	for _, k := range []string{kindSuspend, kindResume, kindStart, kindStop} {
		h("POST "+srv+"/"+k, func(c *call) response { return s.power(c, k) })
	}
	h("PUT "+srv+"/securitygroups", s.putServerSecurityGroups)
	h("GET "+srv+"/nics", s.listNICs)
	h("POST "+srv+"/nics", s.createNIC)
	h("GET "+srv+"/nics/{nic}", s.getNIC)
	h("DELETE "+srv+"/nics/{nic}", s.deleteNIC)
	h("GET "+srv+"/volumes", s.listServerVolumes)
	h("POST "+srv+"/volumes", s.attachVolume)
	h("GET "+srv+"/volumes/{vol}", s.getVolume)
	h("GET "+dc+"/volumes", s.listVolumes)
	h("GET "+dc+"/volumes/{vol}", s.getVolume)

	h("GET "+dc+"/lans", s.listLANs)
	h("POST "+dc+"/lans", s.createLAN)
	h("GET "+dc+"/lans/{lan}", s.getLAN)
	h("DELETE "+dc+"/lans/{lan}", s.deleteLAN)

	h("GET "+dc+"/securitygroups", s.listSecurityGroups)
	h("POST "+dc+"/securitygroups", s.createSecurityGroup)
	h("GET "+dc+"/securitygroups/{sg}", s.getSecurityGroup)
	h("DELETE "+dc+"/securitygroups/{sg}", s.deleteSecurityGroup)

	h("GET "+dc+"/natgateways", s.listNATGateways)
	h("POST "+dc+"/natgateways", s.createNATGateway)
	h("GET "+dc+"/natgateways/{ng}", s.getNATGateway)
	h("DELETE "+dc+"/natgateways/{ng}", s.deleteNATGateway)

	h("GET "+dc+"/applicationloadbalancers", s.listALBs)
	h("POST "+dc+"/applicationloadbalancers", s.createALB)
	h("GET "+alb, s.getALB)
	h("DELETE "+alb, s.deleteALB)
	h("GET "+alb+"/forwardingrules", s.listForwardingRules)
	h("POST "+alb+"/forwardingrules", s.createForwardingRule)
	h("GET "+alb+"/forwardingrules/{rule}", s.getForwardingRule)
	h("DELETE "+alb+"/forwardingrules/{rule}", s.deleteForwardingRule)

	h("GET /targetgroups", s.listTargetGroups)
	h("POST /targetgroups", s.createTargetGroup)
	h("GET /targetgroups/{tg}", s.getTargetGroup)
	h("PATCH /targetgroups/{tg}", s.patchTargetGroup)
	h("PUT /targetgroups/{tg}", s.putTargetGroup)
	h("DELETE /targetgroups/{tg}", s.deleteTargetGroup)

	h("GET /templates", s.listTemplates)
	h("GET /templates/{id}", s.getTemplate)
	h("GET /images", s.listImages)
	h("GET /images/{id}", s.getImage)
	h("GET /locations", s.listLocations)
	h("GET /locations/{region}", s.listLocations)
	h("GET /locations/{region}/{loc}", s.getLocation)
	h("GET /requests", s.listRequests)
	h("GET /requests/{id}", s.getRequest)
	h("GET /requests/{id}/status", s.getRequestStatus)

	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "404", fmt.Sprintf("the simulator serves no %s %s", r.Method, r.URL.Path))
	})
	s.mux = m
}

// serveCall reads the body, parses depth, runs fn under the lock and writes its response.
func (s *Sim) serveCall(w http.ResponseWriter, r *http.Request, fn func(*call) response) {
	c := &call{r: r, base: "http://" + r.Host + BasePath}
	c.failRequest, _ = r.Context().Value(failRequestKey).(bool)
	c.stuckFor, _ = r.Context().Value(stuckForKey).(time.Duration)
	if r.Body != nil {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, http.StatusRequestEntityTooLarge, "413", "request body larger than 1 MiB")
				return
			}
			writeError(w, http.StatusBadRequest, "400", "cannot read the request body")
			return
		}
		c.body = body
	}
	if len(c.body) > 0 && !strings.Contains(strings.ToLower(r.Header.Get("Content-Type")), "json") {
		writeError(w, http.StatusUnsupportedMediaType, "415", "request bodies must be application/json")
		return
	}
	depth, err := parseDepth(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, "422", err.Error())
		return
	}
	c.depth = depth
	s.mu.Lock()
	resp := fn(c)
	s.mu.Unlock()
	if resp.location != "" {
		w.Header().Set("Location", resp.location)
	}
	if resp.body == nil {
		w.WriteHeader(resp.status)
		return
	}
	writeJSON(w, resp.status, resp.body)
}

func (s *Sim) rd(c *call) renderer { return renderer{base: c.base, stuck: s.stuck, st: s.st} }

// lookups used by the handlers; each returns a 404 response when the resource is absent.

func (s *Sim) dcOf(c *call) (*Datacenter, *response) {
	id := c.r.PathValue("dc")
	if dc := s.st.datacenter(id); dc != nil {
		return dc, nil
	}
	r := notFound("data center", id)
	return nil, &r
}

func (s *Sim) serverOf(c *call) (*Datacenter, *Server, *response) {
	dc, errResp := s.dcOf(c)
	if errResp != nil {
		return nil, nil, errResp
	}
	id := c.r.PathValue("srv")
	if srv := dc.server(id); srv != nil {
		return dc, srv, nil
	}
	r := notFound("server", id)
	return nil, nil, &r
}

func (s *Sim) albOf(c *call) (*Datacenter, *ApplicationLoadBalancer, *response) {
	dc, errResp := s.dcOf(c)
	if errResp != nil {
		return nil, nil, errResp
	}
	id := c.r.PathValue("alb")
	if a := dc.alb(id); a != nil {
		return dc, a, nil
	}
	r := notFound("application load balancer", id)
	return nil, nil, &r
}

func pagingOf(c *call) (paging, *response) {
	pg, err := parsePaging(c.r.URL.Query())
	if err != nil {
		r := fail(http.StatusUnprocessableEntity, "%v", err)
		return pg, &r
	}
	return pg, nil
}

// dcPaging returns the data center a list call names and its paging, or the error response.
func (s *Sim) dcPaging(c *call) (*Datacenter, paging, *response) {
	dc, e := s.dcOf(c)
	if e != nil {
		return nil, paging{}, e
	}
	pg, e := pagingOf(c)
	return dc, pg, e
}

// ---- reads ----

func (s *Sim) listDatacenters(c *call) response {
	pg, e := pagingOf(c)
	if e != nil {
		return *e
	}
	return ok(s.rd(c).datacenters(s.st.Datacenters, c.depth, pg))
}

func (s *Sim) getDatacenter(c *call) response {
	dc, e := s.dcOf(c)
	if e != nil {
		return *e
	}
	return ok(s.rd(c).datacenter(dc, c.depth))
}

func (s *Sim) listServers(c *call) response {
	dc, pg, e := s.dcPaging(c)
	if e != nil {
		return *e
	}
	return ok(s.rd(c).servers(dc, dc.Servers, c.depth, pg))
}

func (s *Sim) getServer(c *call) response {
	dc, srv, e := s.serverOf(c)
	if e != nil {
		return *e
	}
	return ok(s.rd(c).server(dc, srv, c.depth))
}

func (s *Sim) listNICs(c *call) response {
	dc, srv, e := s.serverOf(c)
	if e != nil {
		return *e
	}
	pg, e := pagingOf(c)
	if e != nil {
		return *e
	}
	return ok(s.rd(c).nics(dc, srv, srv.NICs, c.depth, pg))
}

func (s *Sim) getNIC(c *call) response {
	dc, srv, e := s.serverOf(c)
	if e != nil {
		return *e
	}
	n := srv.nic(c.r.PathValue("nic"))
	if n == nil {
		return notFound("NIC", c.r.PathValue("nic"))
	}
	return ok(s.rd(c).nic(dc, srv, n, c.depth))
}

func (s *Sim) listServerVolumes(c *call) response {
	dc, srv, e := s.serverOf(c)
	if e != nil {
		return *e
	}
	pg, e := pagingOf(c)
	if e != nil {
		return *e
	}
	return ok(s.rd(c).attachedVolumes(dc, srv, srv.Volumes, c.depth, pg))
}

func (s *Sim) listVolumes(c *call) response {
	dc, pg, e := s.dcPaging(c)
	if e != nil {
		return *e
	}
	var vols []volumeRef
	for _, srv := range dc.Servers {
		for _, v := range srv.Volumes {
			vols = append(vols, volumeRef{srv, v})
		}
	}
	return ok(s.rd(c).dcVolumes(dc, vols, c.depth, pg))
}

func (s *Sim) getVolume(c *call) response {
	dc, e := s.dcOf(c)
	if e != nil {
		return *e
	}
	id := c.r.PathValue("vol")
	for _, srv := range dc.Servers {
		if want := c.r.PathValue("srv"); want != "" && srv.ID != want {
			continue
		}
		if v := srv.volume(id); v != nil {
			return ok(s.rd(c).volume(dc, srv, v, c.depth))
		}
	}
	return notFound("volume", id)
}

func (s *Sim) listLANs(c *call) response {
	dc, pg, e := s.dcPaging(c)
	if e != nil {
		return *e
	}
	return ok(s.rd(c).lans(dc, dc.LANs, c.depth, pg))
}

func (s *Sim) getLAN(c *call) response {
	dc, e := s.dcOf(c)
	if e != nil {
		return *e
	}
	l := dc.lan(c.r.PathValue("lan"))
	if l == nil {
		return notFound("LAN", c.r.PathValue("lan"))
	}
	return ok(s.rd(c).lan(dc, l, c.depth))
}

func (s *Sim) listSecurityGroups(c *call) response {
	dc, pg, e := s.dcPaging(c)
	if e != nil {
		return *e
	}
	return ok(s.rd(c).securityGroups(dc, dc.SecurityGroups, c.depth, pg))
}

func (s *Sim) getSecurityGroup(c *call) response {
	dc, e := s.dcOf(c)
	if e != nil {
		return *e
	}
	sg := dc.securityGroup(c.r.PathValue("sg"))
	if sg == nil {
		return notFound("security group", c.r.PathValue("sg"))
	}
	return ok(s.rd(c).securityGroup(dc, sg, c.depth))
}

func (s *Sim) listNATGateways(c *call) response {
	dc, e := s.dcOf(c)
	if e != nil {
		return *e
	}
	// The SDK takes no offset or limit for NAT gateways: the whole list, no offset.
	return ok(s.rd(c).natGateways(dc, dc.NATGateways, c.depth, paging{}))
}

func (s *Sim) getNATGateway(c *call) response {
	dc, e := s.dcOf(c)
	if e != nil {
		return *e
	}
	ng := dc.natGateway(c.r.PathValue("ng"))
	if ng == nil {
		return notFound("NAT gateway", c.r.PathValue("ng"))
	}
	return ok(s.rd(c).natGateway(dc, ng, c.depth))
}

func (s *Sim) listALBs(c *call) response {
	dc, pg, e := s.dcPaging(c)
	if e != nil {
		return *e
	}
	return ok(s.rd(c).albs(dc, dc.ApplicationLBs, c.depth, pg))
}

func (s *Sim) getALB(c *call) response {
	dc, a, e := s.albOf(c)
	if e != nil {
		return *e
	}
	return ok(s.rd(c).alb(dc, a, c.depth))
}

func (s *Sim) listForwardingRules(c *call) response {
	dc, a, e := s.albOf(c)
	if e != nil {
		return *e
	}
	return ok(s.rd(c).forwardingRules(dc, a, a.ForwardingRules, c.depth, paging{}))
}

func (s *Sim) getForwardingRule(c *call) response {
	dc, a, e := s.albOf(c)
	if e != nil {
		return *e
	}
	r := a.rule(c.r.PathValue("rule"))
	if r == nil {
		return notFound("forwarding rule", c.r.PathValue("rule"))
	}
	return ok(s.rd(c).forwardingRule(dc, a, r, c.depth))
}

func (s *Sim) listTargetGroups(c *call) response {
	pg, e := pagingOf(c)
	if e != nil {
		return *e
	}
	return ok(s.rd(c).targetGroups(s.st.TargetGroups, c.depth, pg))
}

func (s *Sim) getTargetGroup(c *call) response {
	tg := s.st.targetGroup(c.r.PathValue("tg"))
	if tg == nil {
		return notFound("target group", c.r.PathValue("tg"))
	}
	return ok(s.rd(c).targetGroup(tg, c.depth))
}

func (s *Sim) listTemplates(c *call) response {
	rd := s.rd(c)
	items := make([]ionoscloud.Template, 0, len(s.st.Templates))
	for _, t := range s.st.Templates {
		items = append(items, rd.template(t, c.depth-1))
	}
	return ok(ionoscloud.Templates{Id: p("templates"), Type: rd.typ(ionoscloud.COLLECTION), Href: p(c.base + "/templates"), Items: &items})
}

func (s *Sim) getTemplate(c *call) response {
	t := s.st.template(c.r.PathValue("id"))
	if t == nil {
		return notFound("template", c.r.PathValue("id"))
	}
	return ok(s.rd(c).template(t, c.depth))
}

func (s *Sim) listImages(c *call) response {
	rd := s.rd(c)
	items := make([]ionoscloud.Image, 0, len(s.st.Images))
	for _, img := range s.st.Images {
		items = append(items, rd.image(img, c.depth-1))
	}
	return ok(ionoscloud.Images{Id: p("images"), Type: rd.typ(ionoscloud.COLLECTION), Href: p(c.base + "/images"), Items: &items})
}

func (s *Sim) getImage(c *call) response {
	for _, img := range s.st.Images {
		if img.ID == c.r.PathValue("id") {
			return ok(s.rd(c).image(img, c.depth))
		}
	}
	return notFound("image", c.r.PathValue("id"))
}

func (s *Sim) listLocations(c *call) response {
	rd := s.rd(c)
	region := c.r.PathValue("region")
	items := make([]ionoscloud.Location, 0, len(s.st.Locations))
	for _, l := range s.st.Locations {
		if region == "" || strings.HasPrefix(l.ID, region+"/") {
			items = append(items, rd.location(l, c.depth-1))
		}
	}
	href := c.base + "/locations"
	if region != "" {
		href += "/" + region
	}
	return ok(ionoscloud.Locations{Id: p("locations"), Type: rd.typ(ionoscloud.COLLECTION), Href: &href, Items: &items})
}

func (s *Sim) getLocation(c *call) response {
	id := c.r.PathValue("region") + "/" + c.r.PathValue("loc")
	for _, l := range s.st.Locations {
		if l.ID == id {
			return ok(s.rd(c).location(l, c.depth))
		}
	}
	return notFound("location", id)
}

// listRequests serves GET /requests with IONOS's filters for it: filter.status and
// filter.createdAfter/createdBefore always, the "contains" filters (url, method, body,
// createdBy) only when depth > 0. Newest first.
func (s *Sim) listRequests(c *call) response {
	pg, e := pagingOf(c)
	if e != nil {
		return *e
	}
	q := c.r.URL.Query()
	var after, before time.Time
	for key, dst := range map[string]*time.Time{"filter.createdAfter": &after, "filter.createdBefore": &before} {
		if v := q.Get(key); v != "" {
			t, err := time.ParseInLocation(time.DateTime, v, time.UTC)
			if err != nil {
				return fail(http.StatusUnprocessableEntity, "%s must be yyyy-MM-dd HH:mm:ss, got %q", key, v)
			}
			*dst = t
		}
	}
	contains := func(field, want string) bool {
		return want == "" || c.depth == 0 || strings.Contains(strings.ToLower(field), strings.ToLower(want))
	}
	var list []*Request
	for _, rq := range slices.Backward(s.st.Requests) {
		if st := q.Get("filter.status"); st != "" && !strings.EqualFold(st, rq.Status) {
			continue
		}
		if (!after.IsZero() && !rq.Created.After(after)) || (!before.IsZero() && !rq.Created.Before(before)) {
			continue
		}
		if !contains(rq.URL, q.Get("filter.url")) || !contains(rq.Method, q.Get("filter.method")) ||
			!contains(rq.Body, q.Get("filter.body")) || !contains(createdBy, q.Get("filter.createdBy")) {
			continue
		}
		list = append(list, rq)
	}
	return ok(s.rd(c).requests(list, c.depth, pg))
}

func (s *Sim) request(id string) *Request {
	for _, rq := range s.st.Requests {
		if rq.ID == id {
			return rq
		}
	}
	return nil
}

func (s *Sim) getRequest(c *call) response {
	rq := s.request(c.r.PathValue("id"))
	if rq == nil {
		return notFound("request", c.r.PathValue("id"))
	}
	return ok(s.rd(c).request(rq, c.depth))
}

func (s *Sim) getRequestStatus(c *call) response {
	rq := s.request(c.r.PathValue("id"))
	if rq == nil {
		return notFound("request", c.r.PathValue("id"))
	}
	return ok(s.rd(c).requestStatus(rq, 0))
}
