package ionossim

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/cubefleet/cubefleet"
)

// Resource states (metadata.state) the simulator uses: the values the IONOS Cloud API v6
// reports.
const (
	StateAvailable = "AVAILABLE" // no modification request pending
	StateBusy      = "BUSY"      // a modification request is pending
)

// Server vmState values the simulator uses (a server's metadata.state and properties.vmState).
const (
	VMRunning   = "RUNNING"
	VMShutoff   = "SHUTOFF"
	VMSuspended = "SUSPENDED" // CUBE only
	VMNoState   = "NOSTATE"   // while a server is being provisioned
)

// Request statuses: the metadata.status of GET /requests/{id}/status.
const (
	RequestQueued  = "QUEUED"
	RequestRunning = "RUNNING"
	RequestDone    = "DONE"
	RequestFailed  = "FAILED"
)

// State is the simulator's whole world: what a JSON fixture holds, what LoadState reads and
// SaveState writes. Nil Templates, Images or Locations mean the default catalogue
// (DefaultTemplates, DefaultImages, DefaultLocations). Times are UTC RFC 3339 in JSON.
type State struct {
	Datacenters  []*Datacenter  `json:"datacenters"`
	TargetGroups []*TargetGroup `json:"targetGroups,omitempty"`
	Requests     []*Request     `json:"requests,omitempty"`
	Templates    []*Template    `json:"templates,omitempty"`
	Images       []*Image       `json:"images,omitempty"`
	Locations    []*Location    `json:"locations,omitempty"`
}

// Meta is the metadata every resource carries: State is metadata.state (empty means
// AVAILABLE), Created and Modified are metadata.createdDate and lastModifiedDate (zero means
// "when the state was loaded").
type Meta struct {
	State    string    `json:"state,omitempty"`
	Created  time.Time `json:"createdDate,omitzero"`
	Modified time.Time `json:"lastModifiedDate,omitzero"`
}

// Datacenter is one virtual data center (API: /datacenters/{id}). Version is
// properties.version, incremented on every change. DefaultSecurityGroupID names the group
// new servers get attached (properties.defaultSecurityGroupId); empty means none.
type Datacenter struct {
	ID                     string                     `json:"id"`
	Name                   string                     `json:"name"`
	Description            string                     `json:"description,omitempty"`
	Location               string                     `json:"location"`
	Version                int32                      `json:"version,omitempty"`
	DefaultSecurityGroupID string                     `json:"defaultSecurityGroupId,omitempty"`
	Servers                []*Server                  `json:"servers,omitempty"`
	LANs                   []*LAN                     `json:"lans,omitempty"`
	SecurityGroups         []*SecurityGroup           `json:"securityGroups,omitempty"`
	NATGateways            []*NATGateway              `json:"natGateways,omitempty"`
	ApplicationLBs         []*ApplicationLoadBalancer `json:"applicationLoadBalancers,omitempty"`
	Meta
}

// Server is one server (API: /datacenters/{dc}/servers/{id}). Type is CUBE, ENTERPRISE, VCPU
// or GPU; a CUBE takes Cores and RAMMiB (MiB, the API's "ram" in MB) from its template when
// they are zero in a fixture. VMState empty means RUNNING. SecurityGroupIDs are the
// server-level security groups attached (entities.securitygroups).
type Server struct {
	ID               string    `json:"id"`
	Name             string    `json:"name"`
	Type             string    `json:"type"`
	TemplateUUID     string    `json:"templateUuid,omitempty"`
	Cores            int32     `json:"cores,omitempty"`
	RAMMiB           int32     `json:"ramMiB,omitempty"`
	CPUFamily        string    `json:"cpuFamily,omitempty"`
	AvailabilityZone string    `json:"availabilityZone,omitempty"`
	VMState          string    `json:"vmState,omitempty"`
	SecurityGroupIDs []string  `json:"securityGroupIds,omitempty"`
	NICs             []*NIC    `json:"nics,omitempty"`
	Volumes          []*Volume `json:"volumes,omitempty"`
	Meta
}

// NIC is one network interface of a server (API: …/servers/{id}/nics/{nic}). LAN is the LAN
// id (an integer, as in the API's NIC "lan"); IPs are IPv4 addresses.
type NIC struct {
	ID   string   `json:"id"`
	Name string   `json:"name,omitempty"`
	MAC  string   `json:"mac,omitempty"`
	LAN  int32    `json:"lan"`
	IPs  []string `json:"ips,omitempty"`
	DHCP bool     `json:"dhcp,omitempty"`
	Meta
}

// Volume is one volume attached to a server. Type is DAS for a Cube's direct-attached
// storage, else HDD, SSD, "SSD Standard" or "SSD Premium". SizeGB is in GB.
type Volume struct {
	ID         string  `json:"id"`
	Name       string  `json:"name,omitempty"`
	Type       string  `json:"type"`
	SizeGB     float32 `json:"sizeGB,omitempty"`
	Image      string  `json:"image,omitempty"`
	ImageAlias string  `json:"imageAlias,omitempty"`
	Meta
}

// LAN is one LAN of a data center. ID is the API's string form of a positive integer ("1").
// IPv4CIDR is the private range (empty for public LANs; a private LAN without one gets
// 10.7.<id>.0/24).
type LAN struct {
	ID       string `json:"id"`
	Name     string `json:"name,omitempty"`
	Public   bool   `json:"public"`
	IPv4CIDR string `json:"ipv4CidrBlock,omitempty"`
	Meta
}

// SecurityGroup is one network security group of a data center (API:
// /datacenters/{dc}/securitygroups/{id}). The simulator keeps no rules.
type SecurityGroup struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Meta
}

// NATGateway is one NAT gateway (API: /datacenters/{dc}/natgateways/{id}).
type NATGateway struct {
	ID        string       `json:"id"`
	Name      string       `json:"name"`
	PublicIPs []string     `json:"publicIps"`
	LANs      []GatewayLAN `json:"lans,omitempty"`
	Meta
}

// GatewayLAN is one LAN a NAT gateway serves, with its gateway addresses in CIDR form.
type GatewayLAN struct {
	ID         int32    `json:"id"`
	GatewayIPs []string `json:"gatewayIps,omitempty"`
}

// ApplicationLoadBalancer is one ALB (API: /datacenters/{dc}/applicationloadbalancers/{id}).
// ListenerLAN and TargetLAN are LAN ids; PrivateIPs are lbPrivateIps in CIDR form.
type ApplicationLoadBalancer struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	ListenerLAN     int32             `json:"listenerLan"`
	TargetLAN       int32             `json:"targetLan"`
	IPs             []string          `json:"ips,omitempty"`
	PrivateIPs      []string          `json:"lbPrivateIps,omitempty"`
	ForwardingRules []*ForwardingRule `json:"forwardingRules,omitempty"`
	Meta
}

// ForwardingRule is one ALB forwarding rule; only HTTP is accepted.
type ForwardingRule struct {
	ID           string     `json:"id"`
	Name         string     `json:"name"`
	Protocol     string     `json:"protocol"`
	ListenerIP   string     `json:"listenerIp"`
	ListenerPort int32      `json:"listenerPort"`
	HTTPRules    []HTTPRule `json:"httpRules,omitempty"`
	Meta
}

// HTTPRule is one rule of a forwarding rule; TargetGroup is set for type FORWARD.
type HTTPRule struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	TargetGroup string `json:"targetGroup,omitempty"`
}

// TargetGroup is one contract-wide target group (API: /targetgroups/{id}). Its Targets are
// replaced whole on PATCH and PUT, as IONOS does.
type TargetGroup struct {
	ID        string        `json:"id"`
	Name      string        `json:"name"`
	Algorithm string        `json:"algorithm"`
	Protocol  string        `json:"protocol"`
	Targets   []GroupTarget `json:"targets,omitempty"`
	Meta
}

// GroupTarget is one target of a target group: Port 1..65535, Weight 0..256.
type GroupTarget struct {
	IP                 string `json:"ip"`
	Port               int32  `json:"port"`
	Weight             int32  `json:"weight"`
	HealthCheckEnabled bool   `json:"healthCheckEnabled,omitempty"`
	MaintenanceEnabled bool   `json:"maintenanceEnabled,omitempty"`
}

// Request is one asynchronous write (API: /requests/{id}). It is QUEUED until StartAt,
// RUNNING until DoneAt, then DONE, or FAILED when Fail is set. A Stuck request stays RUNNING
// and keeps its targets BUSY. Kind says what completion does to the Targets: create, delete,
// update, suspend, resume, start or stop; the first target is the resource the request is
// about. Message is metadata.message.
type Request struct {
	ID           string          `json:"id"`
	Method       string          `json:"method"`
	URL          string          `json:"url"`
	Body         string          `json:"body,omitempty"`
	Kind         string          `json:"kind"`
	DatacenterID string          `json:"datacenterId,omitempty"`
	Targets      []RequestTarget `json:"targets,omitempty"`
	Status       string          `json:"status"`
	Message      string          `json:"message,omitempty"`
	Created      time.Time       `json:"createdDate"`
	StartAt      time.Time       `json:"startAt"`
	DoneAt       time.Time       `json:"doneAt"`
	Stuck        bool            `json:"stuck,omitempty"`
	Fail         bool            `json:"fail,omitempty"`
}

// RequestTarget is one resource a request touches; Type is the API's type string
// ("server", "nic", "lan", ...).
type RequestTarget struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// Template is one CUBE template (API: /templates/{id}): Cores in cores, RAMMiB in MiB,
// StorageGB in GB. GPU templates are not simulated.
type Template struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Cores     int32  `json:"cores"`
	RAMMiB    int32  `json:"ramMiB"`
	StorageGB int32  `json:"storageGB"`
}

// Image is one public image (API: /images/{id}) with its aliases such as "ubuntu:latest".
type Image struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Location string   `json:"location"`
	Aliases  []string `json:"aliases,omitempty"`
	SizeGB   float32  `json:"sizeGB"`
}

// Location is one IONOS location such as "de/fra" (API: /locations/{region}/{id}).
type Location struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// DefaultTemplates returns the CUBE templates in the sizes IONOS offers (Basic Cube XS..XL and
// Memory Cube S..XL; cores, RAM in MiB, DAS storage in GB). The ids are the simulator's own.
func DefaultTemplates() []*Template {
	sizes := []struct {
		name              string
		cores, ram, store int32
	}{
		{"Basic Cube XS", 1, 2048, 60},
		{"Basic Cube S", 2, 4096, 120},
		{"Basic Cube M", 4, 8192, 240},
		{"Basic Cube L", 8, 16384, 480},
		{"Basic Cube XL", 16, 32768, 960},
		{"Memory Cube S", 2, 8192, 120},
		{"Memory Cube M", 4, 16384, 240},
		{"Memory Cube L", 8, 32768, 480},
		{"Memory Cube XL", 16, 65536, 960},
	}
	out := make([]*Template, len(sizes))
	for i, s := range sizes {
		out[i] = &Template{
			ID:   fmt.Sprintf("00000000-0000-4000-8000-%012d", 100+i),
			Name: s.name, Cores: s.cores, RAMMiB: s.ram, StorageGB: s.store,
		}
	}
	return out
}

// DefaultLocations returns the locations the simulator knows (ids such as "de/fra").
func DefaultLocations() []*Location {
	return []*Location{
		{ID: "de/fra", Name: "frankfurt"}, {ID: "de/fra/2", Name: "frankfurt"},
		{ID: "de/txl", Name: "berlin"}, {ID: "es/vit", Name: "logrono"},
		{ID: "fr/par", Name: "paris"}, {ID: "gb/lhr", Name: "london"},
		{ID: "gb/bhx", Name: "worcester"}, {ID: "us/las", Name: "lasvegas"},
		{ID: "us/ewr", Name: "newark"}, {ID: "us/mci", Name: "kansascity"},
	}
}

// DefaultImages returns, for every default location, public Ubuntu and Debian images with the
// aliases "ubuntu:latest", "ubuntu:24.04", "ubuntu:22.04" and "debian:latest".
func DefaultImages() []*Image {
	var out []*Image
	for i, loc := range DefaultLocations() {
		out = append(out,
			&Image{ID: fmt.Sprintf("00000000-0000-4000-9000-%06d%06d", i, 1), Name: "ubuntu-24.04-server-cloudimg-amd64", Location: loc.ID, Aliases: []string{"ubuntu:latest", "ubuntu:24.04"}, SizeGB: 3.5},
			&Image{ID: fmt.Sprintf("00000000-0000-4000-9000-%06d%06d", i, 2), Name: "ubuntu-22.04-server-cloudimg-amd64", Location: loc.ID, Aliases: []string{"ubuntu:22.04"}, SizeGB: 3.5},
			&Image{ID: fmt.Sprintf("00000000-0000-4000-9000-%06d%06d", i, 3), Name: "debian-12-genericcloud-amd64", Location: loc.ID, Aliases: []string{"debian:latest"}, SizeGB: 2},
		)
	}
	return out
}

// DecodeState reads a JSON fixture strictly (unknown fields are errors) and fills defaults:
// empty states become AVAILABLE, empty vmStates RUNNING, zero times now, CUBE sizes from
// their template, private LANs without a range 10.7.<id>.0/24, and a nil catalogue the
// default one. It returns an error naming the first problem.
func DecodeState(r io.Reader, now time.Time) (*State, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var st State
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("decode simulator state: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decode simulator state: trailing data after the JSON document")
	}
	if err := st.normalise(now); err != nil {
		return nil, err
	}
	return &st, nil
}

// EncodeState writes st as indented JSON.
func EncodeState(w io.Writer, st *State) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(st); err != nil {
		return fmt.Errorf("encode simulator state: %w", err)
	}
	return nil
}

func (m *Meta) fill(now time.Time) {
	if m.State == "" {
		m.State = StateAvailable
	}
	if m.Created.IsZero() {
		m.Created = now
	}
	if m.Modified.IsZero() {
		m.Modified = m.Created
	}
	m.Created = m.Created.UTC()
	m.Modified = m.Modified.UTC()
}

// normalise fills defaults and checks what the simulator relies on (ids present, LAN ids
// integers, CUBE templates known).
func (st *State) normalise(now time.Time) error {
	if st.Templates == nil {
		st.Templates = DefaultTemplates()
	}
	if st.Images == nil {
		st.Images = DefaultImages()
	}
	if st.Locations == nil {
		st.Locations = DefaultLocations()
	}
	seen := map[string]bool{}
	id := func(kind, v string) error {
		if v == "" {
			return fmt.Errorf("simulator state: %s has no id", cubefleet.Article(kind))
		}
		if seen[v] {
			return fmt.Errorf("simulator state: id %s is used twice", v)
		}
		seen[v] = true
		return nil
	}
	for _, dc := range st.Datacenters {
		if err := id("datacenter", dc.ID); err != nil {
			return err
		}
		dc.fill(now)
		for _, l := range dc.LANs {
			if _, err := parseLANID(l.ID); err != nil {
				return fmt.Errorf("simulator state: data center %s: %w", dc.ID, err)
			}
			if !l.Public && l.IPv4CIDR == "" {
				l.IPv4CIDR = defaultCIDR(l.ID)
			}
			l.fill(now)
		}
		for _, sg := range dc.SecurityGroups {
			if err := id("security group", sg.ID); err != nil {
				return err
			}
			sg.fill(now)
		}
		for _, srv := range dc.Servers {
			if err := id("server", srv.ID); err != nil {
				return err
			}
			srv.fill(now)
			if srv.VMState == "" {
				srv.VMState = VMRunning
			}
			if srv.AvailabilityZone == "" {
				srv.AvailabilityZone = "AUTO"
			}
			if srv.Type == "" {
				srv.Type = "CUBE"
			}
			if srv.Type == "CUBE" {
				t := st.template(srv.TemplateUUID)
				if t == nil {
					return fmt.Errorf("simulator state: CUBE server %s: unknown template %q", srv.ID, srv.TemplateUUID)
				}
				if srv.Cores == 0 {
					srv.Cores = t.Cores
				}
				if srv.RAMMiB == 0 {
					srv.RAMMiB = t.RAMMiB
				}
			}
			for _, n := range srv.NICs {
				if err := id("nic", n.ID); err != nil {
					return err
				}
				n.fill(now)
			}
			for _, v := range srv.Volumes {
				if err := id("volume", v.ID); err != nil {
					return err
				}
				v.fill(now)
			}
		}
		for _, ng := range dc.NATGateways {
			if err := id("NAT gateway", ng.ID); err != nil {
				return err
			}
			ng.fill(now)
		}
		for _, alb := range dc.ApplicationLBs {
			if err := id("application load balancer", alb.ID); err != nil {
				return err
			}
			alb.fill(now)
			for _, fr := range alb.ForwardingRules {
				if err := id("forwarding rule", fr.ID); err != nil {
					return err
				}
				fr.fill(now)
			}
		}
	}
	for _, tg := range st.TargetGroups {
		if err := id("target group", tg.ID); err != nil {
			return err
		}
		tg.fill(now)
	}
	for _, rq := range st.Requests {
		if err := id("request", rq.ID); err != nil {
			return err
		}
		if rq.Created.IsZero() {
			rq.Created = now
		}
		if rq.Status == "" {
			rq.Status = RequestQueued
		}
	}
	return nil
}

func (st *State) template(id string) *Template {
	for _, t := range st.Templates {
		if t.ID == id {
			return t
		}
	}
	return nil
}

func (st *State) datacenter(id string) *Datacenter {
	for _, dc := range st.Datacenters {
		if dc.ID == id {
			return dc
		}
	}
	return nil
}

func (st *State) targetGroup(id string) *TargetGroup {
	for _, tg := range st.TargetGroups {
		if tg.ID == id {
			return tg
		}
	}
	return nil
}

func (dc *Datacenter) server(id string) *Server {
	for _, s := range dc.Servers {
		if s.ID == id {
			return s
		}
	}
	return nil
}

func (dc *Datacenter) lan(id string) *LAN {
	for _, l := range dc.LANs {
		if l.ID == id {
			return l
		}
	}
	return nil
}

func (dc *Datacenter) securityGroup(id string) *SecurityGroup {
	for _, sg := range dc.SecurityGroups {
		if sg.ID == id {
			return sg
		}
	}
	return nil
}

func (dc *Datacenter) natGateway(id string) *NATGateway {
	for _, ng := range dc.NATGateways {
		if ng.ID == id {
			return ng
		}
	}
	return nil
}

func (dc *Datacenter) alb(id string) *ApplicationLoadBalancer {
	for _, a := range dc.ApplicationLBs {
		if a.ID == id {
			return a
		}
	}
	return nil
}

func (s *Server) nic(id string) *NIC {
	for _, n := range s.NICs {
		if n.ID == id {
			return n
		}
	}
	return nil
}

func (s *Server) volume(id string) *Volume {
	for _, v := range s.Volumes {
		if v.ID == id {
			return v
		}
	}
	return nil
}

func (a *ApplicationLoadBalancer) rule(id string) *ForwardingRule {
	for _, r := range a.ForwardingRules {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// parseLANID parses a LAN id, a positive integer in string form.
func parseLANID(s string) (int32, error) {
	var n int32
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || n <= 0 || fmt.Sprint(n) != s {
		return 0, fmt.Errorf("LAN id %q is not a positive integer", s)
	}
	return n, nil
}

func defaultCIDR(lanID string) string {
	n, _ := parseLANID(lanID)
	return fmt.Sprintf("10.7.%d.0/24", n%256)
}

// newUUID returns a random version-4 UUID in canonical lowercase form.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// validIPv4 reports whether s is a dotted-quad IPv4 address.
func validIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}
