package ionossim

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"

	ionoscloud "github.com/ionos-cloud/sdk-go/v6"
)

// object decodes raw as a JSON object and returns its members, with null members dropped (the
// SDK sends some unset fields as null).
func object(raw []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("expected a JSON object")
	}
	for k, v := range m {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			delete(m, k)
		}
	}
	return m, nil
}

// envelope splits a POST or PUT body {"properties":{…},"entities":{…}} and decodes the
// properties into props.
func envelope(body []byte, props any) (map[string]json.RawMessage, map[string]json.RawMessage, *response) {
	top, err := object(body)
	if err != nil {
		r := fail(http.StatusBadRequest, "[VDC-1-1] the request body is not a JSON object")
		return nil, nil, &r
	}
	raw, ok := top["properties"]
	if !ok {
		r := fail(http.StatusUnprocessableEntity, "[VDC-1-2] the request body needs a properties object")
		return nil, nil, &r
	}
	pm, err := object(raw)
	if err != nil {
		r := fail(http.StatusBadRequest, "[VDC-1-1] properties is not a JSON object")
		return nil, nil, &r
	}
	if err := json.Unmarshal(raw, props); err != nil {
		r := fail(http.StatusBadRequest, "[VDC-1-1] properties do not parse: %v", err)
		return nil, nil, &r
	}
	var em map[string]json.RawMessage
	if raw, ok := top["entities"]; ok {
		if em, err = object(raw); err != nil {
			r := fail(http.StatusBadRequest, "[VDC-1-1] entities is not a JSON object")
			return nil, nil, &r
		}
	}
	return pm, em, nil
}

// patchBody decodes a PATCH body, which IONOS takes as the bare properties object; a body
// wrapped in "properties" is refused, as IONOS refuses it.
func patchBody(body []byte, props any) (map[string]json.RawMessage, *response) {
	m, err := object(body)
	if err != nil {
		r := fail(http.StatusBadRequest, "[VDC-1-1] the request body is not a JSON object")
		return nil, &r
	}
	if _, wrapped := m["properties"]; wrapped {
		r := fail(http.StatusUnprocessableEntity, "[VDC-1-3] a PATCH body is the bare properties object; do not wrap it in \"properties\"")
		return nil, &r
	}
	if err := json.Unmarshal(body, props); err != nil {
		r := fail(http.StatusBadRequest, "[VDC-1-1] the body does not parse: %v", err)
		return nil, &r
	}
	return m, nil
}

// items decodes entities[name].items.
func items(em map[string]json.RawMessage, name string) ([]json.RawMessage, *response) {
	raw, ok := em[name]
	if !ok {
		return nil, nil
	}
	var coll struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &coll); err != nil {
		r := fail(http.StatusBadRequest, "[VDC-1-1] entities.%s is not a collection: %v", name, err)
		return nil, &r
	}
	return coll.Items, nil
}

func val[T any](v *T) T {
	if v == nil {
		var zero T
		return zero
	}
	return *v
}

// ---- data centers ----

func (s *Sim) createDatacenter(c *call) response {
	var props ionoscloud.DatacenterProperties
	if _, _, e := envelope(c.body, &props); e != nil {
		return *e
	}
	if val(props.Location) == "" || !slices.ContainsFunc(s.st.Locations, func(l *Location) bool { return l.ID == val(props.Location) }) {
		return fail(http.StatusUnprocessableEntity, "[VDC-2-1] unknown location %q", val(props.Location))
	}
	now := s.now()
	sg := &SecurityGroup{ID: newUUID(), Name: "Default Security Group", Description: "created with the data center",
		Meta: Meta{State: StateAvailable, Created: now, Modified: now}}
	dc := &Datacenter{ID: newUUID(), Name: val(props.Name), Description: val(props.Description), Location: val(props.Location),
		Version: 1, DefaultSecurityGroupID: sg.ID, SecurityGroups: []*SecurityGroup{sg}, Meta: Meta{Created: now, Modified: now}}
	s.st.Datacenters = append(s.st.Datacenters, dc)
	rq := s.newRequest(c, kindCreate, dc.ID, RequestTarget{Type: "datacenter", ID: dc.ID})
	return accepted(c, rq, s.rd(c).datacenter(dc, max(c.depth, 0)))
}

func (s *Sim) deleteDatacenter(c *call) response {
	dc, e := s.dcOf(c)
	if e != nil {
		return *e
	}
	rq := s.newRequest(c, kindDelete, dc.ID, RequestTarget{Type: "datacenter", ID: dc.ID})
	return accepted(c, rq, nil)
}

// ---- servers ----

func (s *Sim) createServer(c *call) response {
	dc, e := s.dcOf(c)
	if e != nil {
		return *e
	}
	var props ionoscloud.ServerProperties
	pm, em, e := envelope(c.body, &props)
	if e != nil {
		return *e
	}
	typ := val(props.Type)
	if typ == "" {
		typ = "ENTERPRISE"
	}
	if !slices.Contains([]string{"CUBE", "ENTERPRISE", "VCPU"}, typ) {
		return fail(http.StatusUnprocessableEntity, "[VDC-5-1] server type %q is not simulated; use CUBE, ENTERPRISE or VCPU", typ)
	}
	if val(props.Name) == "" {
		return fail(http.StatusUnprocessableEntity, "[VDC-5-2] properties.name is required")
	}
	now := s.now()
	srv := &Server{ID: newUUID(), Name: val(props.Name), Type: typ, AvailabilityZone: "AUTO", VMState: VMNoState,
		Meta: Meta{Created: now, Modified: now}}
	if _, has := pm["cpuFamily"]; has && (typ == "CUBE" || typ == "VCPU") {
		return fail(http.StatusUnprocessableEntity, "[VDC-5-1921] the attribute 'cpuFamily' must not be provided for %s servers", typ)
	}
	if typ == "CUBE" {
		_, hasCores := pm["cores"]
		_, hasRAM := pm["ram"]
		if hasCores || hasRAM {
			return fail(http.StatusUnprocessableEntity, "[VDC-5-1922] cores and ram cannot be supplied for a server created from a template")
		}
		if _, has := pm["nicMultiQueue"]; has {
			return fail(http.StatusUnprocessableEntity, "[VDC-5-1923] nicMultiQueue is not allowed for CUBE servers")
		}
		if az := val(props.AvailabilityZone); az != "" && az != "AUTO" {
			return fail(http.StatusUnprocessableEntity, "[VDC-5-1924] availabilityZone must be AUTO for CUBE servers, got %q", az)
		}
		t := s.st.template(val(props.TemplateUuid))
		if t == nil {
			return fail(http.StatusUnprocessableEntity, "[VDC-5-1925] a CUBE needs the templateUuid of a CUBE template, got %q", val(props.TemplateUuid))
		}
		srv.TemplateUUID, srv.Cores, srv.RAMMiB = t.ID, t.Cores, t.RAMMiB
	} else {
		if val(props.Cores) <= 0 || val(props.Ram) <= 0 {
			return fail(http.StatusUnprocessableEntity, "[VDC-5-3] cores and ram are required for %s servers", typ)
		}
		if _, has := pm["templateUuid"]; has {
			return fail(http.StatusUnprocessableEntity, "[VDC-5-4] templateUuid is only for CUBE servers")
		}
		srv.Cores, srv.RAMMiB, srv.CPUFamily = val(props.Cores), val(props.Ram), val(props.CpuFamily)
		if az := val(props.AvailabilityZone); az != "" {
			srv.AvailabilityZone = az
		}
	}

	vols, e := items(em, "volumes")
	if e != nil {
		return *e
	}
	if typ == "CUBE" && len(vols) != 1 {
		return fail(http.StatusUnprocessableEntity, "[VDC-5-1926] a CUBE needs exactly one DAS volume, created in the same request as the server; got %d", len(vols))
	}
	for i, raw := range vols {
		v, e := s.newVolume(c, dc, srv, i, raw)
		if e != nil {
			return *e
		}
		srv.Volumes = append(srv.Volumes, v)
	}
	nics, e := items(em, "nics")
	if e != nil {
		return *e
	}
	var created []*LAN
	for i, raw := range nics {
		n, lan, e := s.newNIC(dc, srv, raw, fmt.Sprintf("entities.nics.items[%d]", i))
		if e != nil {
			dc.LANs = slices.DeleteFunc(dc.LANs, func(l *LAN) bool { return slices.Contains(created, l) })
			return *e
		}
		if lan != nil {
			created = append(created, lan)
		}
		srv.NICs = append(srv.NICs, n)
	}
	if dc.DefaultSecurityGroupID != "" {
		srv.SecurityGroupIDs = []string{dc.DefaultSecurityGroupID}
	}
	dc.Servers = append(dc.Servers, srv)
	targets := []RequestTarget{{Type: "server", ID: srv.ID}}
	for _, v := range srv.Volumes {
		targets = append(targets, RequestTarget{Type: "volume", ID: v.ID})
	}
	for _, n := range srv.NICs {
		targets = append(targets, RequestTarget{Type: "nic", ID: n.ID})
	}
	rq := s.newRequest(c, kindCreate, dc.ID, targets...)
	return accepted(c, rq, s.rd(c).server(dc, srv, max(c.depth, 2)))
}

// newVolume validates the volume item i of a server POST.
func (s *Sim) newVolume(c *call, dc *Datacenter, srv *Server, i int, raw json.RawMessage) (*Volume, *response) {
	var vp ionoscloud.VolumeProperties
	pm, _, e := envelope(raw, &vp)
	if e != nil {
		return nil, e
	}
	now := s.now()
	v := &Volume{ID: newUUID(), Name: val(vp.Name), Type: val(vp.Type), Meta: Meta{Created: now, Modified: now}}
	_, hasSize := pm["size"]
	if srv.Type == "CUBE" {
		if v.Type != "DAS" {
			r := fail(http.StatusUnprocessableEntity, "[VDC-6-1] a CUBE volume must be of type DAS, got %q", v.Type)
			return nil, &r
		}
		if hasSize {
			r := fail(http.StatusUnprocessableEntity, "[VDC-6-2] the size of a CUBE's DAS volume comes from its template; do not give size")
			return nil, &r
		}
		v.SizeGB = float32(s.st.template(srv.TemplateUUID).StorageGB)
	} else {
		if v.Type == "DAS" {
			r := fail(http.StatusUnprocessableEntity, "[VDC-6-3] DAS volumes exist only with CUBE servers")
			return nil, &r
		}
		if val(vp.Size) <= 0 {
			r := fail(http.StatusUnprocessableEntity, "[VDC-6-4] entities.volumes.items[%d].properties.size is required", i)
			return nil, &r
		}
		v.SizeGB = val(vp.Size)
	}
	switch {
	case val(vp.Image) != "":
		if !slices.ContainsFunc(s.st.Images, func(img *Image) bool { return img.ID == val(vp.Image) }) {
			r := fail(http.StatusUnprocessableEntity, "[VDC-6-5] unknown image %q", val(vp.Image))
			return nil, &r
		}
		v.Image = val(vp.Image)
	case val(vp.ImageAlias) != "":
		alias := val(vp.ImageAlias)
		i := slices.IndexFunc(s.st.Images, func(img *Image) bool {
			return img.Location == dc.Location && slices.Contains(img.Aliases, alias)
		})
		if i < 0 {
			r := fail(http.StatusUnprocessableEntity, "[VDC-6-6] image alias %q is not offered in %s", alias, dc.Location)
			return nil, &r
		}
		v.Image, v.ImageAlias = s.st.Images[i].ID, alias
	case srv.Type == "CUBE":
		r := fail(http.StatusUnprocessableEntity, "[VDC-6-7] a CUBE's DAS volume needs image or imageAlias")
		return nil, &r
	}
	if v.Name == "" {
		v.Name = srv.Name + "-volume-" + strconv.Itoa(i)
	}
	return v, nil
}

// newNIC validates a NIC body and allocates its addresses; it returns the LAN it created
// implicitly, if any (a NIC on an unknown LAN id creates a private LAN, as IONOS does).
func (s *Sim) newNIC(dc *Datacenter, srv *Server, raw json.RawMessage, path string) (*NIC, *LAN, *response) {
	var np ionoscloud.NicProperties
	if _, _, e := envelope(raw, &np); e != nil {
		return nil, nil, e
	}
	if val(np.Lan) <= 0 {
		r := fail(http.StatusUnprocessableEntity, "[VDC-7-1] %s.properties.lan must be a positive LAN id", path)
		return nil, nil, &r
	}
	now := s.now()
	lanID := strconv.Itoa(int(val(np.Lan)))
	var createdLAN *LAN
	lan := dc.lan(lanID)
	if lan == nil {
		lan = &LAN{ID: lanID, Name: "LAN " + lanID, IPv4CIDR: defaultCIDR(lanID), Meta: Meta{State: StateAvailable, Created: now, Modified: now}}
		dc.LANs = append(dc.LANs, lan)
		createdLAN = lan
	}
	s.nextMAC++
	n := &NIC{ID: newUUID(), Name: val(np.Name), LAN: val(np.Lan), DHCP: np.Dhcp == nil || *np.Dhcp,
		MAC:  fmt.Sprintf("02:01:%02x:%02x:%02x:%02x", byte(s.nextMAC>>24), byte(s.nextMAC>>16), byte(s.nextMAC>>8), byte(s.nextMAC)),
		Meta: Meta{Created: now, Modified: now}}
	used := s.usedIPs(dc, lan)
	for _, ip := range val(np.Ips) {
		if !validIPv4(ip) {
			r := fail(http.StatusUnprocessableEntity, "[VDC-7-2] %s: %q is not an IPv4 address", path, ip)
			return nil, nil, &r
		}
		if used[ip] {
			r := fail(http.StatusUnprocessableEntity, "[VDC-7-3] %s: address %s is already in use on LAN %s", path, ip, lan.ID)
			return nil, nil, &r
		}
		if !lan.Public && lan.IPv4CIDR != "" {
			pfx, err := netip.ParsePrefix(lan.IPv4CIDR)
			if err == nil && !pfx.Contains(netip.MustParseAddr(ip)) {
				r := fail(http.StatusUnprocessableEntity, "[VDC-7-4] %s: address %s is outside LAN %s's range %s", path, ip, lan.ID, lan.IPv4CIDR)
				return nil, nil, &r
			}
		}
		used[ip] = true
		n.IPs = append(n.IPs, ip)
	}
	if len(n.IPs) == 0 {
		ip, e := s.allocate(lan, used)
		if e != nil {
			return nil, nil, e
		}
		n.IPs = []string{ip}
	}
	if n.Name == "" {
		n.Name = srv.Name + "-nic-" + lan.ID
	}
	return n, createdLAN, nil
}

func (s *Sim) usedIPs(dc *Datacenter, lan *LAN) map[string]bool {
	used := map[string]bool{}
	id, _ := parseLANID(lan.ID)
	for _, srv := range dc.Servers {
		for _, n := range srv.NICs {
			if n.LAN == id || lan.Public {
				for _, ip := range n.IPs {
					used[ip] = true
				}
			}
		}
	}
	return used
}

// allocate picks a free address: on a private LAN the next free host of its range from .11,
// on a public LAN one of 203.0.113.0/24 (TEST-NET-3) the simulator has not handed out.
func (s *Sim) allocate(lan *LAN, used map[string]bool) (string, *response) {
	if lan.Public {
		for range 254 {
			s.nextIP++
			ip := fmt.Sprintf("203.0.113.%d", s.nextIP%254+1)
			if !used[ip] {
				return ip, nil
			}
		}
	} else if pfx, err := netip.ParsePrefix(lan.IPv4CIDR); err == nil && pfx.Addr().Is4() {
		base := pfx.Masked().Addr().As4()
		size := uint32(1) << (32 - pfx.Bits())
		start := binary.BigEndian.Uint32(base[:])
		for off := uint32(11); off+1 < size; off++ {
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], start+off)
			ip := netip.AddrFrom4(b).String()
			if !used[ip] {
				return ip, nil
			}
		}
	}
	r := fail(http.StatusUnprocessableEntity, "[VDC-7-5] no free address on LAN %s", lan.ID)
	return "", &r
}

func (s *Sim) patchServer(c *call) response {
	dc, srv, e := s.serverOf(c)
	if e != nil {
		return *e
	}
	var props ionoscloud.ServerProperties
	pm, e := patchBody(c.body, &props)
	if e != nil {
		return *e
	}
	return s.updateServer(c, dc, srv, pm, props)
}

func (s *Sim) putServer(c *call) response {
	dc, srv, e := s.serverOf(c)
	if e != nil {
		return *e
	}
	var props ionoscloud.ServerProperties
	pm, _, e := envelope(c.body, &props)
	if e != nil {
		return *e
	}
	return s.updateServer(c, dc, srv, pm, props)
}

// updateServer applies a PATCH or PUT: a name change for any server, cores and RAM for
// non-CUBE servers; a CUBE's size, template and CPU family are fixed.
func (s *Sim) updateServer(c *call, dc *Datacenter, srv *Server, pm map[string]json.RawMessage, props ionoscloud.ServerProperties) response {
	if srv.Type == "CUBE" {
		for _, k := range []string{"cores", "ram", "cpuFamily", "templateUuid", "type"} {
			if _, has := pm[k]; has {
				return fail(http.StatusUnprocessableEntity, "[VDC-5-1927] %s of a CUBE server cannot be changed; replace the server", k)
			}
		}
		if srv.VMState == VMSuspended {
			return fail(http.StatusUnprocessableEntity, "[VDC-5-1928] a suspended CUBE cannot be updated; resume it first")
		}
	} else {
		if v := val(props.Cores); v > 0 {
			srv.Cores = v
		}
		if v := val(props.Ram); v > 0 {
			srv.RAMMiB = v
		}
	}
	if n := val(props.Name); n != "" {
		srv.Name = n
	}
	rq := s.newRequest(c, kindUpdate, dc.ID, RequestTarget{Type: "server", ID: srv.ID})
	return accepted(c, rq, s.rd(c).server(dc, srv, c.depth))
}

func (s *Sim) deleteServer(c *call) response {
	dc, srv, e := s.serverOf(c)
	if e != nil {
		return *e
	}
	rq := s.newRequest(c, kindDelete, dc.ID, RequestTarget{Type: "server", ID: srv.ID})
	return accepted(c, rq, nil)
}

// power serves suspend, resume (CUBE only) and start, stop (not for CUBE), as IONOS allows them.
func (s *Sim) power(c *call, kind string) response {
	dc, srv, e := s.serverOf(c)
	if e != nil {
		return *e
	}
	cube := srv.Type == "CUBE"
	switch kind {
	case kindSuspend, kindResume:
		if !cube {
			return fail(http.StatusUnprocessableEntity, "[VDC-5-1930] %s is only for CUBE servers", kind)
		}
		want := VMRunning
		if kind == kindResume {
			want = VMSuspended
		}
		if srv.VMState != want {
			return fail(http.StatusUnprocessableEntity, "[VDC-5-1931] cannot %s a CUBE in vmState %s", kind, srv.VMState)
		}
	default:
		if cube {
			return fail(http.StatusUnprocessableEntity, "[VDC-5-1932] you cannot use %s on a CUBE server; use suspend or resume", kind)
		}
	}
	rq := s.newRequest(c, kind, dc.ID, RequestTarget{Type: "server", ID: srv.ID})
	return accepted(c, rq, nil)
}

// putServerSecurityGroups replaces the server's attached groups with {"ids":[…]}.
func (s *Sim) putServerSecurityGroups(c *call) response {
	dc, srv, e := s.serverOf(c)
	if e != nil {
		return *e
	}
	m, err := object(c.body)
	if err != nil {
		return fail(http.StatusBadRequest, "[VDC-1-1] the request body is not a JSON object")
	}
	raw, has := m["ids"]
	if !has {
		return fail(http.StatusUnprocessableEntity, "[VDC-8-1] the body needs ids, the list of security group ids")
	}
	var ids []string
	if err := json.Unmarshal(raw, &ids); err != nil {
		return fail(http.StatusBadRequest, "[VDC-1-1] ids must be a list of strings")
	}
	var groups []*SecurityGroup
	for _, id := range ids {
		sg := dc.securityGroup(id)
		if sg == nil {
			return notFound("security group", id)
		}
		if !slices.Contains(groups, sg) {
			groups = append(groups, sg)
		}
	}
	srv.SecurityGroupIDs = srv.SecurityGroupIDs[:0:0]
	for _, sg := range groups {
		srv.SecurityGroupIDs = append(srv.SecurityGroupIDs, sg.ID)
	}
	rq := s.newRequest(c, kindUpdate, dc.ID, RequestTarget{Type: "server", ID: srv.ID})
	href := s.rd(c).serverHref(dc, srv) + "/securitygroups"
	return accepted(c, rq, s.rd(c).securityGroupsAt(dc, href, srv.ID+"/securitygroups", groups, max(c.depth, 1)))
}

func (s *Sim) createNIC(c *call) response {
	dc, srv, e := s.serverOf(c)
	if e != nil {
		return *e
	}
	n, _, e := s.newNIC(dc, srv, c.body, "nic")
	if e != nil {
		return *e
	}
	srv.NICs = append(srv.NICs, n)
	rq := s.newRequest(c, kindCreate, dc.ID, RequestTarget{Type: "nic", ID: n.ID}, RequestTarget{Type: "server", ID: srv.ID})
	return accepted(c, rq, s.rd(c).nic(dc, srv, n, c.depth))
}

func (s *Sim) deleteNIC(c *call) response {
	dc, srv, e := s.serverOf(c)
	if e != nil {
		return *e
	}
	n := srv.nic(c.r.PathValue("nic"))
	if n == nil {
		return notFound("NIC", c.r.PathValue("nic"))
	}
	rq := s.newRequest(c, kindDelete, dc.ID, RequestTarget{Type: "nic", ID: n.ID}, RequestTarget{Type: "server", ID: srv.ID})
	return accepted(c, rq, nil)
}

// attachVolume refuses what IONOS refuses: storage for a CUBE exists only from its creation.
func (s *Sim) attachVolume(c *call) response {
	_, srv, e := s.serverOf(c)
	if e != nil {
		return *e
	}
	if srv.Type == "CUBE" {
		return fail(http.StatusUnprocessableEntity, "[VDC-6-8] a CUBE cannot be given a volume after creation; DAS exists only from the server's create request")
	}
	return fail(http.StatusNotImplemented, "the simulator does not attach volumes to %s servers", srv.Type)
}
