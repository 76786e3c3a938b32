package ionos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	ionoscloud "github.com/ionos-cloud/sdk-go/v6"

	"github.com/cubefleet/cubefleet"
)

// InventorySchema names the inventory document's format; DecodeInventory accepts only it.
const InventorySchema = "cubefleet.ionos.inventory/v1"

// Page sizes of the inventory's lists. Servers use the API's maximum page (a limit of 10,000),
// so a data center of up to 10,000 servers costs one server request.
const (
	serverPageSize = 10000
	listPageSize   = 1000
)

// maxInventoryBytes bounds what DecodeInventory reads (256 MiB).
const maxInventoryBytes = 256 << 20

// Inventory is the JSON document `cubefleet ionos inventory` writes and `cubefleet ionos plan`
// reads: one data center's servers, networks, load balancing and pending requests as seen at
// FetchedAt (Unix milliseconds, UTC). Consistent is false when the data center's version
// changed while the inventory was read (a plan refuses such an inventory). RAM is in MiB
// (the API's "ram", documented as MB), storage in GB (docs/ionos.md, "Inventory").
type Inventory struct {
	Schema                   string                    `json:"schema"`
	FetchedAt                int64                     `json:"fetchedAt"`
	Consistent               bool                      `json:"consistent"`
	Datacenter               Datacenter                `json:"datacenter"`
	Servers                  []Server                  `json:"servers"`
	LANs                     []LAN                     `json:"lans"`
	SecurityGroups           []SecurityGroup           `json:"securityGroups"`
	NATGateways              []NATGateway              `json:"natGateways"`
	ApplicationLoadBalancers []ApplicationLoadBalancer `json:"applicationLoadBalancers"`
	TargetGroups             []TargetGroup             `json:"targetGroups"`
	CubeTemplates            []Template                `json:"cubeTemplates"`
	PendingRequests          []PendingRequest          `json:"pendingRequests"`
}

// Datacenter is the inventoried data center: Version is properties.version when the inventory
// began, VersionAtEnd when it ended; State is metadata.state (AVAILABLE, BUSY, ...).
type Datacenter struct {
	ID                     string `json:"id"`
	Name                   string `json:"name"`
	Location               string `json:"location"`
	Version                int64  `json:"version"`
	VersionAtEnd           int64  `json:"versionAtEnd"`
	State                  string `json:"state"`
	DefaultSecurityGroupID string `json:"defaultSecurityGroupId,omitempty"`
}

// Server is one server: Type is CUBE, ENTERPRISE, VCPU or GPU; Cores in cores, RAMMiB in MiB;
// VMState is properties.vmState (RUNNING, SUSPENDED, SHUTOFF, ...); State is metadata.state;
// TemplateID is a CUBE's template; SecurityGroupIDs are the server-level groups attached.
type Server struct {
	ID               string   `json:"id"`
	Name             string   `json:"name"`
	Type             string   `json:"type"`
	Cores            int      `json:"cores"`
	RAMMiB           int      `json:"ramMiB"`
	VMState          string   `json:"vmState"`
	State            string   `json:"state"`
	TemplateID       string   `json:"templateId,omitempty"`
	AvailabilityZone string   `json:"availabilityZone,omitempty"`
	NICs             []NIC    `json:"nics"`
	SecurityGroupIDs []string `json:"securityGroupIds"`
}

// NIC is one network interface: LANID is the LAN it is on, IPs its IPv4 addresses.
type NIC struct {
	ID    string   `json:"id"`
	Name  string   `json:"name,omitempty"`
	LANID int      `json:"lanId"`
	IPs   []string `json:"ips"`
	State string   `json:"state"`
}

// LAN is one LAN: ID is its positive integer id; IPv4CIDR is the private range (empty for a
// public LAN).
type LAN struct {
	ID       int    `json:"id"`
	Name     string `json:"name"`
	Public   bool   `json:"public"`
	IPv4CIDR string `json:"ipv4CidrBlock,omitempty"`
	State    string `json:"state"`
}

// SecurityGroup is one network security group; Default marks the data center's default group.
type SecurityGroup struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Default     bool   `json:"default,omitempty"`
	State       string `json:"state"`
}

// NATGateway is one NAT gateway with the LANs it serves.
type NATGateway struct {
	ID        string       `json:"id"`
	Name      string       `json:"name"`
	PublicIPs []string     `json:"publicIps"`
	LANs      []GatewayLAN `json:"lans"`
	State     string       `json:"state"`
}

// GatewayLAN is one LAN of a NAT gateway; GatewayIPs are in CIDR form.
type GatewayLAN struct {
	LANID      int      `json:"lanId"`
	GatewayIPs []string `json:"gatewayIps"`
}

// ApplicationLoadBalancer is one ALB with its forwarding rules; PrivateIPs are lbPrivateIps in
// CIDR form on the target LAN.
type ApplicationLoadBalancer struct {
	ID              string           `json:"id"`
	Name            string           `json:"name"`
	ListenerLANID   int              `json:"listenerLanId"`
	TargetLANID     int              `json:"targetLanId"`
	IPs             []string         `json:"ips"`
	PrivateIPs      []string         `json:"privateIps"`
	State           string           `json:"state"`
	ForwardingRules []ForwardingRule `json:"forwardingRules"`
}

// ForwardingRule is one ALB forwarding rule.
type ForwardingRule struct {
	ID           string     `json:"id"`
	Name         string     `json:"name"`
	Protocol     string     `json:"protocol"`
	ListenerIP   string     `json:"listenerIp"`
	ListenerPort int        `json:"listenerPort"`
	HTTPRules    []HTTPRule `json:"httpRules"`
	State        string     `json:"state"`
}

// HTTPRule is one rule of a forwarding rule; TargetGroupID is set for FORWARD rules.
type HTTPRule struct {
	Name          string `json:"name"`
	Type          string `json:"type"`
	TargetGroupID string `json:"targetGroupId,omitempty"`
}

// TargetGroup is one contract-wide target group with its targets.
type TargetGroup struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Algorithm string   `json:"algorithm"`
	Protocol  string   `json:"protocol"`
	Targets   []Target `json:"targets"`
	State     string   `json:"state"`
}

// Target is one target: Port 1..65535, Weight 0..256.
type Target struct {
	IP                 string `json:"ip"`
	Port               int    `json:"port"`
	Weight             int    `json:"weight"`
	HealthCheckEnabled bool   `json:"healthCheckEnabled"`
	MaintenanceEnabled bool   `json:"maintenanceEnabled"`
}

// Template is one CUBE template offered: Cores in cores, RAMMiB in MiB, StorageGB in GB.
type Template struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Cores     int    `json:"cores"`
	RAMMiB    int    `json:"ramMiB"`
	StorageGB int    `json:"storageGB"`
}

// PendingRequest is one QUEUED or RUNNING request whose URL names the data center;
// CreatedAt is Unix milliseconds.
type PendingRequest struct {
	ID        string          `json:"id"`
	Method    string          `json:"method"`
	URL       string          `json:"url"`
	Status    string          `json:"status"`
	CreatedAt int64           `json:"createdAt"`
	Targets   []RequestTarget `json:"targets"`
}

// RequestTarget is one resource a pending request touches; Type is the API's type string.
type RequestTarget struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// uuidPattern matches the canonical textual form of a UUID (any version, either case).
var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// IsUUID reports whether s is a UUID in canonical 8-4-4-4-12 hex form.
func IsUUID(s string) bool { return uuidPattern.MatchString(s) }

// Inventory reads data center datacenterID (a UUID) in at most ten HTTP requests whatever its
// server count up to 10,000 (one page each): the data center, its servers at depth 3 (NICs,
// volumes and attached security groups), LANs, security groups, NAT gateways, ALBs at depth 3
// (forwarding rules), the contract's target groups, the templates, the requests of the last 24
// hours whose URL names the data center (kept when QUEUED or RUNNING), and the data center
// again to see whether its version moved. Errors are those of Do; a malformed id is
// INVALID_INPUT.
func (c *Client) Inventory(ctx context.Context, datacenterID string) (*Inventory, error) {
	if !IsUUID(datacenterID) {
		return nil, cubefleet.Invalid("--datacenter", "%q is not a data center UUID", datacenterID)
	}
	api := c.api
	start := c.now().UTC()
	inv := &Inventory{Schema: InventorySchema, FetchedAt: start.UnixMilli()}

	var dc ionoscloud.Datacenter
	if _, err := c.Do(ctx, "get data center "+datacenterID, func(ctx context.Context) (r *ionoscloud.APIResponse, err error) {
		dc, r, err = api.DataCentersApi.DatacentersFindById(ctx, datacenterID).Depth(1).Execute()
		return r, err
	}); err != nil {
		return nil, err
	}
	inv.Datacenter = convertDatacenter(dc)

	servers, err := pages(ctx, c, "list servers", serverPageSize, func(ctx context.Context, off int32) ([]ionoscloud.Server, *ionoscloud.PaginationLinks, *ionoscloud.APIResponse, error) {
		l, r, err := api.ServersApi.DatacentersServersGet(ctx, datacenterID).Depth(3).Offset(off).Limit(serverPageSize).Execute()
		return ionoscloud.ToValueDefault(l.Items), l.Links, r, err
	})
	if err != nil {
		return nil, err
	}
	for _, s := range servers {
		inv.Servers = append(inv.Servers, convertServer(s))
	}

	lans, err := pages(ctx, c, "list LANs", listPageSize, func(ctx context.Context, off int32) ([]ionoscloud.Lan, *ionoscloud.PaginationLinks, *ionoscloud.APIResponse, error) {
		l, r, err := api.LANsApi.DatacentersLansGet(ctx, datacenterID).Depth(1).Offset(off).Limit(listPageSize).Execute()
		return ionoscloud.ToValueDefault(l.Items), l.Links, r, err
	})
	if err != nil {
		return nil, err
	}
	for _, l := range lans {
		inv.LANs = append(inv.LANs, convertLAN(l))
	}

	sgs, err := pages(ctx, c, "list security groups", listPageSize, func(ctx context.Context, off int32) ([]ionoscloud.SecurityGroup, *ionoscloud.PaginationLinks, *ionoscloud.APIResponse, error) {
		l, r, err := api.SecurityGroupsApi.DatacentersSecuritygroupsGet(ctx, datacenterID).Depth(1).Offset(off).Limit(listPageSize).Execute()
		return ionoscloud.ToValueDefault(l.Items), l.Links, r, err
	})
	if err != nil {
		return nil, err
	}
	for _, sg := range sgs {
		g := SecurityGroup{ID: str(sg.Id), State: state(sg.Metadata)}
		if p := sg.Properties; p != nil {
			g.Name, g.Description = str(p.Name), str(p.Description)
		}
		g.Default = g.ID == inv.Datacenter.DefaultSecurityGroupID
		inv.SecurityGroups = append(inv.SecurityGroups, g)
	}

	// The SDK takes no offset or limit for NAT gateways: one request returns them all.
	var ngs ionoscloud.NatGateways
	if _, err := c.Do(ctx, "list NAT gateways", func(ctx context.Context) (r *ionoscloud.APIResponse, err error) {
		ngs, r, err = api.NATGatewaysApi.DatacentersNatgatewaysGet(ctx, datacenterID).Depth(1).Execute()
		return r, err
	}); err != nil {
		return nil, err
	}
	for _, ng := range ionoscloud.ToValueDefault(ngs.Items) {
		inv.NATGateways = append(inv.NATGateways, convertNAT(ng))
	}

	albs, err := pages(ctx, c, "list application load balancers", listPageSize, func(ctx context.Context, off int32) ([]ionoscloud.ApplicationLoadBalancer, *ionoscloud.PaginationLinks, *ionoscloud.APIResponse, error) {
		l, r, err := api.ApplicationLoadBalancersApi.DatacentersApplicationloadbalancersGet(ctx, datacenterID).Depth(3).Offset(off).Limit(listPageSize).Execute()
		return ionoscloud.ToValueDefault(l.Items), l.Links, r, err
	})
	if err != nil {
		return nil, err
	}
	for _, a := range albs {
		inv.ApplicationLoadBalancers = append(inv.ApplicationLoadBalancers, convertALB(a))
	}

	tgs, err := pages(ctx, c, "list target groups", listPageSize, func(ctx context.Context, off int32) ([]ionoscloud.TargetGroup, *ionoscloud.PaginationLinks, *ionoscloud.APIResponse, error) {
		l, r, err := api.TargetGroupsApi.TargetgroupsGet(ctx).Depth(1).Offset(off).Limit(listPageSize).Execute()
		return ionoscloud.ToValueDefault(l.Items), l.Links, r, err
	})
	if err != nil {
		return nil, err
	}
	for _, tg := range tgs {
		inv.TargetGroups = append(inv.TargetGroups, convertTargetGroup(tg))
	}

	var tpls ionoscloud.Templates
	if _, err := c.Do(ctx, "list templates", func(ctx context.Context) (r *ionoscloud.APIResponse, err error) {
		tpls, r, err = api.TemplatesApi.TemplatesGet(ctx).Depth(1).Execute()
		return r, err
	}); err != nil {
		return nil, err
	}
	for _, t := range ionoscloud.ToValueDefault(tpls.Items) {
		p := t.Properties
		if p == nil || len(ionoscloud.ToValueDefault(p.Gpus)) > 0 {
			continue // a template with GPUs is for GPU servers only
		}
		inv.CubeTemplates = append(inv.CubeTemplates, Template{ID: str(t.Id), Name: str(p.Name),
			Cores: int(ionoscloud.ToValueDefault(p.Cores)), RAMMiB: int(ionoscloud.ToValueDefault(p.Ram)), StorageGB: int(ionoscloud.ToValueDefault(p.StorageSize))})
	}

	since := start.Add(-24 * time.Hour).Format(time.DateTime)
	rqs, err := pages(ctx, c, "list requests", listPageSize, func(ctx context.Context, off int32) ([]ionoscloud.Request, *ionoscloud.PaginationLinks, *ionoscloud.APIResponse, error) {
		l, r, err := api.RequestsApi.RequestsGet(ctx).Depth(2).FilterUrl(datacenterID).FilterCreatedAfter(since).Offset(off).Limit(listPageSize).Execute()
		return ionoscloud.ToValueDefault(l.Items), l.Links, r, err
	})
	if err != nil {
		return nil, err
	}
	for _, rq := range rqs {
		if p, ok := convertRequest(rq); ok {
			inv.PendingRequests = append(inv.PendingRequests, p)
		}
	}

	var end ionoscloud.Datacenter
	if _, err := c.Do(ctx, "get data center "+datacenterID, func(ctx context.Context) (r *ionoscloud.APIResponse, err error) {
		end, r, err = api.DataCentersApi.DatacentersFindById(ctx, datacenterID).Depth(0).Execute()
		return r, err
	}); err != nil {
		return nil, err
	}
	if end.Properties != nil {
		inv.Datacenter.VersionAtEnd = int64(ionoscloud.ToValueDefault(end.Properties.Version))
	}
	inv.Consistent = inv.Datacenter.VersionAtEnd == inv.Datacenter.Version
	inv.normalize()
	return inv, nil
}

// pages fetches every page of a list through Do, limit items at a time, until a page has no
// next link (or, without links, comes back short).
func pages[T any](ctx context.Context, c *Client, op string, limit int32,
	fetch func(ctx context.Context, offset int32) ([]T, *ionoscloud.PaginationLinks, *ionoscloud.APIResponse, error)) ([]T, error) {
	var all []T
	for offset := int32(0); ; offset += limit {
		var (
			page  []T
			links *ionoscloud.PaginationLinks
		)
		if _, err := c.Do(ctx, op, func(ctx context.Context) (r *ionoscloud.APIResponse, err error) {
			page, links, r, err = fetch(ctx, offset)
			return r, err
		}); err != nil {
			return nil, err
		}
		all = append(all, page...)
		more := len(page) >= int(limit)
		if links != nil {
			more = links.Next != nil
		}
		if !more || len(page) == 0 {
			return all, nil
		}
	}
}

func str(p *string) string { return ionoscloud.ToValueDefault(p) }

func state(m *ionoscloud.DatacenterElementMetadata) string {
	if m == nil {
		return ""
	}
	return str(m.State)
}

func convertDatacenter(dc ionoscloud.Datacenter) Datacenter {
	out := Datacenter{ID: str(dc.Id), State: state(dc.Metadata)}
	if p := dc.Properties; p != nil {
		out.Name, out.Location = str(p.Name), str(p.Location)
		out.Version = int64(ionoscloud.ToValueDefault(p.Version))
		out.DefaultSecurityGroupID = str(p.DefaultSecurityGroupId)
	}
	return out
}

func convertServer(s ionoscloud.Server) Server {
	out := Server{ID: str(s.Id), State: state(s.Metadata), NICs: []NIC{}, SecurityGroupIDs: []string{}}
	if p := s.Properties; p != nil {
		out.Name, out.Type, out.VMState = str(p.Name), str(p.Type), str(p.VmState)
		out.Cores, out.RAMMiB = int(ionoscloud.ToValueDefault(p.Cores)), int(ionoscloud.ToValueDefault(p.Ram))
		out.TemplateID, out.AvailabilityZone = str(p.TemplateUuid), str(p.AvailabilityZone)
	}
	if e := s.Entities; e != nil {
		if e.Nics != nil {
			for _, n := range ionoscloud.ToValueDefault(e.Nics.Items) {
				nic := NIC{ID: str(n.Id), State: state(n.Metadata), IPs: []string{}}
				if p := n.Properties; p != nil {
					nic.Name, nic.LANID = str(p.Name), int(ionoscloud.ToValueDefault(p.Lan))
					nic.IPs = append(nic.IPs, ionoscloud.ToValueDefault(p.Ips)...)
				}
				out.NICs = append(out.NICs, nic)
			}
		}
		if e.Securitygroups != nil {
			for _, sg := range ionoscloud.ToValueDefault(e.Securitygroups.Items) {
				out.SecurityGroupIDs = append(out.SecurityGroupIDs, str(sg.Id))
			}
		}
	}
	return out
}

func convertLAN(l ionoscloud.Lan) LAN {
	id, _ := strconv.Atoi(str(l.Id))
	out := LAN{ID: id, State: state(l.Metadata)}
	if p := l.Properties; p != nil {
		out.Name, out.Public, out.IPv4CIDR = str(p.Name), ionoscloud.ToValueDefault(p.Public), str(p.Ipv4CidrBlock)
	}
	return out
}

func convertNAT(ng ionoscloud.NatGateway) NATGateway {
	out := NATGateway{ID: str(ng.Id), State: state(ng.Metadata), PublicIPs: []string{}, LANs: []GatewayLAN{}}
	if p := ng.Properties; p != nil {
		out.Name = str(p.Name)
		out.PublicIPs = append(out.PublicIPs, ionoscloud.ToValueDefault(p.PublicIps)...)
		for _, l := range ionoscloud.ToValueDefault(p.Lans) {
			out.LANs = append(out.LANs, GatewayLAN{LANID: int(ionoscloud.ToValueDefault(l.Id)), GatewayIPs: append([]string{}, ionoscloud.ToValueDefault(l.GatewayIps)...)})
		}
	}
	return out
}

func convertALB(a ionoscloud.ApplicationLoadBalancer) ApplicationLoadBalancer {
	out := ApplicationLoadBalancer{ID: str(a.Id), State: state(a.Metadata), IPs: []string{}, PrivateIPs: []string{}, ForwardingRules: []ForwardingRule{}}
	if p := a.Properties; p != nil {
		out.Name = str(p.Name)
		out.ListenerLANID, out.TargetLANID = int(ionoscloud.ToValueDefault(p.ListenerLan)), int(ionoscloud.ToValueDefault(p.TargetLan))
		out.IPs = append(out.IPs, ionoscloud.ToValueDefault(p.Ips)...)
		out.PrivateIPs = append(out.PrivateIPs, ionoscloud.ToValueDefault(p.LbPrivateIps)...)
	}
	if a.Entities != nil && a.Entities.Forwardingrules != nil {
		for _, r := range ionoscloud.ToValueDefault(a.Entities.Forwardingrules.Items) {
			fr := ForwardingRule{ID: str(r.Id), State: state(r.Metadata), HTTPRules: []HTTPRule{}}
			if p := r.Properties; p != nil {
				fr.Name, fr.Protocol, fr.ListenerIP = str(p.Name), str(p.Protocol), str(p.ListenerIp)
				fr.ListenerPort = int(ionoscloud.ToValueDefault(p.ListenerPort))
				for _, h := range ionoscloud.ToValueDefault(p.HttpRules) {
					fr.HTTPRules = append(fr.HTTPRules, HTTPRule{Name: str(h.Name), Type: str(h.Type), TargetGroupID: str(h.TargetGroup)})
				}
			}
			out.ForwardingRules = append(out.ForwardingRules, fr)
		}
	}
	return out
}

func convertTargetGroup(tg ionoscloud.TargetGroup) TargetGroup {
	out := TargetGroup{ID: str(tg.Id), State: state(tg.Metadata), Targets: []Target{}}
	if p := tg.Properties; p != nil {
		out.Name, out.Algorithm, out.Protocol = str(p.Name), str(p.Algorithm), str(p.Protocol)
		for _, t := range ionoscloud.ToValueDefault(p.Targets) {
			out.Targets = append(out.Targets, Target{IP: str(t.Ip), Port: int(ionoscloud.ToValueDefault(t.Port)), Weight: int(ionoscloud.ToValueDefault(t.Weight)),
				HealthCheckEnabled: ionoscloud.ToValueDefault(t.HealthCheckEnabled), MaintenanceEnabled: ionoscloud.ToValueDefault(t.MaintenanceEnabled)})
		}
	}
	return out
}

// convertRequest returns rq as a PendingRequest when it is QUEUED or RUNNING.
func convertRequest(rq ionoscloud.Request) (PendingRequest, bool) {
	md := rq.Metadata
	if md == nil || md.RequestStatus == nil || md.RequestStatus.Metadata == nil {
		return PendingRequest{}, false
	}
	sm := md.RequestStatus.Metadata
	status := str(sm.Status)
	if status != ionoscloud.RequestStatusQueued && status != ionoscloud.RequestStatusRunning {
		return PendingRequest{}, false
	}
	out := PendingRequest{ID: str(rq.Id), Status: status, Targets: []RequestTarget{}}
	if md.CreatedDate != nil {
		out.CreatedAt = md.CreatedDate.UnixMilli()
	}
	if p := rq.Properties; p != nil {
		out.Method, out.URL = str(p.Method), str(p.Url)
	}
	for _, t := range ionoscloud.ToValueDefault(sm.Targets) {
		if t.Target != nil {
			out.Targets = append(out.Targets, RequestTarget{ID: str(t.Target.Id), Type: string(ionoscloud.ToValueDefault(t.Target.Type))})
		}
	}
	return out, true
}

// normalize replaces nil lists with empty ones, so the document always has every key.
func (inv *Inventory) normalize() {
	if inv.Servers == nil {
		inv.Servers = []Server{}
	}
	if inv.LANs == nil {
		inv.LANs = []LAN{}
	}
	if inv.SecurityGroups == nil {
		inv.SecurityGroups = []SecurityGroup{}
	}
	if inv.NATGateways == nil {
		inv.NATGateways = []NATGateway{}
	}
	if inv.ApplicationLoadBalancers == nil {
		inv.ApplicationLoadBalancers = []ApplicationLoadBalancer{}
	}
	if inv.TargetGroups == nil {
		inv.TargetGroups = []TargetGroup{}
	}
	if inv.CubeTemplates == nil {
		inv.CubeTemplates = []Template{}
	}
	if inv.PendingRequests == nil {
		inv.PendingRequests = []PendingRequest{}
	}
}

// EncodeInventory writes inv as indented JSON.
func EncodeInventory(w io.Writer, inv *Inventory) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(inv); err != nil {
		return fmt.Errorf("write inventory: %w", err)
	}
	return nil
}

// WriteInventoryFile writes inv to path with mode 0600, atomically (a temporary file in the
// same directory renamed over path), whatever mode an older file at path had.
func WriteInventoryFile(path string, inv *Inventory) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".inventory-*.json") // mode 0600
	if err != nil {
		return fmt.Errorf("write inventory %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // fails harmlessly once renamed
	if err := EncodeInventory(f, inv); err != nil {
		f.Close()
		return fmt.Errorf("write inventory %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write inventory %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write inventory %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write inventory %s: %w", path, err)
	}
	return nil
}

// DecodeInventory reads an inventory document strictly: one JSON object of InventorySchema,
// no unknown keys, no trailing data, at most 256 MiB, ids present, LAN ids positive, sizes
// and ports within range. Errors are INVALID_INPUT with the JSON path of the first problem
// (e.g. "servers[3].nics[0].lanId").
func DecodeInventory(r io.Reader) (*Inventory, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxInventoryBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	if len(data) > maxInventoryBytes {
		return nil, cubefleet.Invalid("", "the inventory is larger than %d MiB", maxInventoryBytes>>20)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var inv Inventory
	if err := dec.Decode(&inv); err != nil {
		return nil, decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, cubefleet.Invalid("", "trailing data after the inventory document")
	}
	if err := inv.validate(); err != nil {
		return nil, err
	}
	inv.normalize()
	return &inv, nil
}

// IsInventory reports whether data is a JSON object of InventorySchema, what Inventory writes,
// whatever else it holds. A quick look for messages (a configuration passed where an inventory
// belongs is told apart), not a check: DecodeInventory checks.
func IsInventory(data []byte) bool {
	var head struct {
		Schema string `json:"schema"`
	}
	return json.Unmarshal(data, &head) == nil && head.Schema == InventorySchema
}

func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var synErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return cubefleet.Invalid(typeErr.Field, "expected %s, got JSON %s", typeErr.Type, typeErr.Value)
	case errors.As(err, &synErr):
		return cubefleet.Invalid("", "not valid JSON at byte %d: %v", synErr.Offset, err)
	}
	return cubefleet.Invalid("", "%v", err)
}

func (inv *Inventory) validate() error {
	var errs []cubefleet.FieldError
	bad := func(path, format string, args ...any) {
		errs = append(errs, cubefleet.FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if inv.Schema != InventorySchema {
		bad("schema", "must be %q, got %q", InventorySchema, inv.Schema)
	}
	if inv.FetchedAt <= 0 {
		bad("fetchedAt", "must be a positive Unix time in milliseconds")
	}
	if inv.Datacenter.ID == "" {
		bad("datacenter.id", "is required")
	}
	for i, s := range inv.Servers {
		p := fmt.Sprintf("servers[%d]", i)
		if s.ID == "" {
			bad(p+".id", "is required")
		}
		if s.Cores < 0 || s.RAMMiB < 0 {
			bad(p, "cores and ramMiB must not be negative")
		}
		for j, n := range s.NICs {
			if n.LANID <= 0 {
				bad(fmt.Sprintf("%s.nics[%d].lanId", p, j), "must be a positive LAN id")
			}
		}
	}
	for i, l := range inv.LANs {
		if l.ID <= 0 {
			bad(fmt.Sprintf("lans[%d].id", i), "must be a positive LAN id")
		}
	}
	for i, sg := range inv.SecurityGroups {
		if sg.ID == "" {
			bad(fmt.Sprintf("securityGroups[%d].id", i), "is required")
		}
	}
	for i, t := range inv.CubeTemplates {
		if t.ID == "" || t.Cores <= 0 || t.RAMMiB <= 0 {
			bad(fmt.Sprintf("cubeTemplates[%d]", i), "needs an id and positive cores and ramMiB")
		}
	}
	for i, tg := range inv.TargetGroups {
		for j, t := range tg.Targets {
			if t.Port < 1 || t.Port > 65535 || t.Weight < 0 || t.Weight > 256 {
				bad(fmt.Sprintf("targetGroups[%d].targets[%d]", i, j), "port must be 1..65535 and weight 0..256")
			}
		}
	}
	if len(errs) > 0 {
		return cubefleet.InvalidAll(errs)
	}
	return nil
}

// Datacenters lists every data center the token sees (id, name, location, version, state),
// for finding one by its name. Errors are the client's (see Do).
func (c *Client) Datacenters(ctx context.Context) ([]Datacenter, error) {
	dcs, err := pages(ctx, c, "list data centers", listPageSize, func(ctx context.Context, off int32) ([]ionoscloud.Datacenter, *ionoscloud.PaginationLinks, *ionoscloud.APIResponse, error) {
		l, r, err := c.api.DataCentersApi.DatacentersGet(ctx).Depth(1).Offset(off).Limit(listPageSize).Execute()
		return ionoscloud.ToValueDefault(l.Items), l.Links, r, err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Datacenter, 0, len(dcs))
	for _, dc := range dcs {
		out = append(out, convertDatacenter(dc))
	}
	return out, nil
}
