package ionossim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"time"

	ionoscloud "github.com/ionos-cloud/sdk-go/v6"
)

// This file renders the simulator's state in the SDK's own model types, so that whatever the
// simulator sends is, by construction, what the SDK decodes. Depth follows IONOS's rule for
// the depth parameter: an object rendered at depth d has id, type, href, metadata and
// properties, and entities only when d >= 1, each entity collection rendered at d-1; a
// collection rendered at d lists its items at d-1; an item at -1 is a reference.

const createdBy = "simulator@example.com"

func p(s string) *string { return &s }

// catalogueMeta is the metadata of read-only catalogue entries (templates, images, locations).
func catalogueMeta() Meta {
	t := time.Date(2024, 11, 1, 0, 0, 0, 0, time.UTC)
	return Meta{State: StateAvailable, Created: t, Modified: t}
}

// paging is the offset/limit of a top-level list; embedded collections are not paged.
type paging struct {
	paged         bool
	offset, limit int
}

// window returns the slice bounds of a page over n items.
func (pg paging) window(n int) (int, int) {
	if !pg.paged {
		return 0, n
	}
	lo := min(pg.offset, n)
	return lo, min(lo+pg.limit, n)
}

// renderer holds what every rendered object needs: the base URL for hrefs and the set of
// resources forced BUSY by StickBusy.
type renderer struct {
	base  string
	stuck map[string]bool
	st    *State
}

func (rd renderer) typ(t ionoscloud.Type) *ionoscloud.Type { return &t }

func (rd renderer) meta(id string, m Meta) *ionoscloud.DatacenterElementMetadata {
	state := m.State
	if rd.stuck[id] {
		state = StateBusy
	}
	sum := sha256.Sum256([]byte(id + m.Modified.String() + state))
	return &ionoscloud.DatacenterElementMetadata{
		Etag:                 p(hex.EncodeToString(sum[:16])),
		CreatedDate:          &ionoscloud.IonosTime{Time: m.Created},
		CreatedBy:            p(createdBy),
		CreatedByUserId:      p("00000000-0000-4000-a000-000000000001"),
		LastModifiedDate:     &ionoscloud.IonosTime{Time: m.Modified},
		LastModifiedBy:       p(createdBy),
		LastModifiedByUserId: p("00000000-0000-4000-a000-000000000001"),
		State:                &state,
	}
}

// links returns the pagination links of a page of a list of n items at href.
func (rd renderer) links(href string, pg paging, n int) *ionoscloud.PaginationLinks {
	if !pg.paged {
		return nil
	}
	l := &ionoscloud.PaginationLinks{Self: p(fmt.Sprintf("%s?offset=%d&limit=%d", href, pg.offset, pg.limit))}
	if pg.offset > 0 {
		l.Prev = p(fmt.Sprintf("%s?offset=%d&limit=%d", href, max(pg.offset-pg.limit, 0), pg.limit))
	}
	if pg.offset+pg.limit < n {
		l.Next = p(fmt.Sprintf("%s?offset=%d&limit=%d", href, pg.offset+pg.limit, pg.limit))
	}
	return l
}

func pageFields(pg paging) (*float32, *float32) {
	if !pg.paged {
		return nil, nil
	}
	o, l := float32(pg.offset), float32(pg.limit)
	return &o, &l
}

func (rd renderer) dcHref(dc *Datacenter) string { return rd.base + "/datacenters/" + dc.ID }

// ---- data centers ----

func (rd renderer) datacenter(dc *Datacenter, depth int) ionoscloud.Datacenter {
	href := rd.dcHref(dc)
	out := ionoscloud.Datacenter{Id: p(dc.ID), Type: rd.typ(ionoscloud.DATACENTER), Href: &href}
	if depth < 0 {
		return out
	}
	out.Metadata = rd.meta(dc.ID, dc.Meta)
	v := dc.Version
	out.Properties = &ionoscloud.DatacenterProperties{
		Name: p(dc.Name), Description: p(dc.Description), Location: p(dc.Location), Version: &v,
		Features:          &[]string{"cloud-init", "ssd", "vnf-alb", "vnf-nat"},
		SecAuthProtection: ionoscloud.ToPtr(false),
	}
	if dc.DefaultSecurityGroupID != "" {
		out.Properties.DefaultSecurityGroupId = p(dc.DefaultSecurityGroupID)
	}
	if depth >= 1 {
		var vols []volumeRef
		for _, srv := range dc.Servers {
			for _, v := range srv.Volumes {
				vols = append(vols, volumeRef{srv, v})
			}
		}
		dv := rd.dcVolumes(dc, vols, depth-1, paging{})
		srvs := rd.servers(dc, dc.Servers, depth-1, paging{})
		lans := rd.lans(dc, dc.LANs, depth-1, paging{})
		ngs := rd.natGateways(dc, dc.NATGateways, depth-1, paging{})
		sgs := rd.securityGroups(dc, dc.SecurityGroups, depth-1, paging{})
		out.Entities = &ionoscloud.DataCenterEntities{
			Servers: &srvs, Volumes: &dv, Lans: &lans, Natgateways: &ngs, Securitygroups: &sgs,
			Loadbalancers: &ionoscloud.Loadbalancers{Id: p(dc.ID + "/loadbalancers"), Type: rd.typ(ionoscloud.COLLECTION),
				Href: p(href + "/loadbalancers"), Items: &[]ionoscloud.Loadbalancer{}},
			Networkloadbalancers: &ionoscloud.NetworkLoadBalancers{Id: p(dc.ID + "/networkloadbalancers"), Type: rd.typ(ionoscloud.COLLECTION),
				Href: p(href + "/networkloadbalancers"), Items: &[]ionoscloud.NetworkLoadBalancer{}},
		}
	}
	return out
}

func (rd renderer) datacenters(list []*Datacenter, depth int, pg paging) ionoscloud.Datacenters {
	href := rd.base + "/datacenters"
	lo, hi := pg.window(len(list))
	items := make([]ionoscloud.Datacenter, 0, hi-lo)
	for _, dc := range list[lo:hi] {
		items = append(items, rd.datacenter(dc, depth-1))
	}
	off, lim := pageFields(pg)
	return ionoscloud.Datacenters{Id: p("datacenters"), Type: rd.typ(ionoscloud.COLLECTION), Href: &href,
		Items: &items, Offset: off, Limit: lim, Links: rd.links(href, pg, len(list))}
}

// ---- servers ----

func (rd renderer) serverHref(dc *Datacenter, srv *Server) string {
	return rd.dcHref(dc) + "/servers/" + srv.ID
}

func (rd renderer) server(dc *Datacenter, srv *Server, depth int) ionoscloud.Server {
	href := rd.serverHref(dc, srv)
	out := ionoscloud.Server{Id: p(srv.ID), Type: rd.typ(ionoscloud.SERVER), Href: &href}
	if depth < 0 {
		return out
	}
	out.Metadata = rd.meta(srv.ID, srv.Meta)
	cores, ram := srv.Cores, srv.RAMMiB
	props := &ionoscloud.ServerProperties{
		Name: p(srv.Name), Hostname: p(srv.Name), Type: p(srv.Type), Cores: &cores, Ram: &ram,
		AvailabilityZone: p(srv.AvailabilityZone), VmState: p(srv.VMState),
	}
	if srv.TemplateUUID != "" {
		props.TemplateUuid = p(srv.TemplateUUID)
	}
	if srv.CPUFamily != "" {
		props.CpuFamily = p(srv.CPUFamily)
	}
	if len(srv.Volumes) > 0 {
		v := srv.Volumes[0]
		props.BootVolume = &ionoscloud.ResourceReference{Id: p(v.ID), Type: rd.typ(ionoscloud.VOLUME), Href: p(rd.dcHref(dc) + "/volumes/" + v.ID)}
	}
	out.Properties = props
	if depth >= 1 {
		nics := rd.nics(dc, srv, srv.NICs, depth-1, paging{})
		vols := rd.attachedVolumes(dc, srv, srv.Volumes, depth-1, paging{})
		var sgs []*SecurityGroup
		for _, id := range srv.SecurityGroupIDs {
			if sg := dc.securityGroup(id); sg != nil {
				sgs = append(sgs, sg)
			}
		}
		sgc := rd.securityGroupsAt(dc, href+"/securitygroups", srv.ID+"/securitygroups", sgs, depth-1)
		out.Entities = &ionoscloud.ServerEntities{
			Nics: &nics, Volumes: &vols, Securitygroups: &sgc,
			Cdroms: &ionoscloud.Cdroms{Id: p(srv.ID + "/cdroms"), Type: rd.typ(ionoscloud.COLLECTION), Href: p(href + "/cdroms"), Items: &[]ionoscloud.Image{}},
		}
	}
	return out
}

func (rd renderer) servers(dc *Datacenter, list []*Server, depth int, pg paging) ionoscloud.Servers {
	href := rd.dcHref(dc) + "/servers"
	lo, hi := pg.window(len(list))
	items := make([]ionoscloud.Server, 0, hi-lo)
	for _, srv := range list[lo:hi] {
		items = append(items, rd.server(dc, srv, depth-1))
	}
	off, lim := pageFields(pg)
	return ionoscloud.Servers{Id: p(dc.ID + "/servers"), Type: rd.typ(ionoscloud.COLLECTION), Href: &href,
		Items: &items, Offset: off, Limit: lim, Links: rd.links(href, pg, len(list))}
}

// ---- NICs and volumes ----

func (rd renderer) nic(dc *Datacenter, srv *Server, n *NIC, depth int) ionoscloud.Nic {
	href := rd.serverHref(dc, srv) + "/nics/" + n.ID
	out := ionoscloud.Nic{Id: p(n.ID), Type: rd.typ(ionoscloud.NIC), Href: &href}
	if depth < 0 {
		return out
	}
	out.Metadata = rd.meta(n.ID, n.Meta)
	lan := n.LAN
	ips := append([]string{}, n.IPs...)
	out.Properties = &ionoscloud.NicProperties{
		Name: p(n.Name), Mac: p(n.MAC), Ips: &ips, Dhcp: ionoscloud.ToPtr(n.DHCP), Lan: &lan,
		FirewallActive: ionoscloud.ToPtr(false), FirewallType: p("INGRESS"), Ipv6Ips: &[]string{},
	}
	if depth >= 1 {
		out.Entities = &ionoscloud.NicEntities{
			Firewallrules: &ionoscloud.FirewallRules{Id: p(n.ID + "/firewallrules"), Type: rd.typ(ionoscloud.COLLECTION), Href: p(href + "/firewallrules"), Items: &[]ionoscloud.FirewallRule{}},
			Securitygroups: &ionoscloud.SecurityGroups{Id: p(n.ID + "/securitygroups"), Type: rd.typ(ionoscloud.COLLECTION), Href: p(href + "/securitygroups"),
				Items: &[]ionoscloud.SecurityGroup{}},
		}
	}
	return out
}

func (rd renderer) nics(dc *Datacenter, srv *Server, list []*NIC, depth int, pg paging) ionoscloud.Nics {
	href := rd.serverHref(dc, srv) + "/nics"
	lo, hi := pg.window(len(list))
	items := make([]ionoscloud.Nic, 0, hi-lo)
	for _, n := range list[lo:hi] {
		items = append(items, rd.nic(dc, srv, n, depth-1))
	}
	off, lim := pageFields(pg)
	return ionoscloud.Nics{Id: p(srv.ID + "/nics"), Type: rd.typ(ionoscloud.COLLECTION), Href: &href,
		Items: &items, Offset: off, Limit: lim, Links: rd.links(href, pg, len(list))}
}

func (rd renderer) volume(dc *Datacenter, srv *Server, v *Volume, depth int) ionoscloud.Volume {
	href := rd.dcHref(dc) + "/volumes/" + v.ID
	out := ionoscloud.Volume{Id: p(v.ID), Type: rd.typ(ionoscloud.VOLUME), Href: &href}
	if depth < 0 {
		return out
	}
	out.Metadata = rd.meta(v.ID, v.Meta)
	size := v.SizeGB
	props := &ionoscloud.VolumeProperties{
		Name: p(v.Name), Type: p(v.Type), Size: &size, LicenceType: p("LINUX"), Bus: p("VIRTIO"),
		BootServer: p(srv.ID), BootOrder: p("AUTO"), AvailabilityZone: p("AUTO"),
	}
	if v.Image != "" {
		props.Image = p(v.Image)
	}
	if v.ImageAlias != "" {
		props.ImageAlias = p(v.ImageAlias)
	}
	out.Properties = props
	return out
}

type volumeRef struct {
	srv *Server
	v   *Volume
}

func (rd renderer) attachedVolumes(dc *Datacenter, srv *Server, list []*Volume, depth int, pg paging) ionoscloud.AttachedVolumes {
	href := rd.serverHref(dc, srv) + "/volumes"
	lo, hi := pg.window(len(list))
	items := make([]ionoscloud.Volume, 0, hi-lo)
	for _, v := range list[lo:hi] {
		items = append(items, rd.volume(dc, srv, v, depth-1))
	}
	off, lim := pageFields(pg)
	return ionoscloud.AttachedVolumes{Id: p(srv.ID + "/volumes"), Type: rd.typ(ionoscloud.COLLECTION), Href: &href,
		Items: &items, Offset: off, Limit: lim, Links: rd.links(href, pg, len(list))}
}

func (rd renderer) dcVolumes(dc *Datacenter, list []volumeRef, depth int, pg paging) ionoscloud.Volumes {
	href := rd.dcHref(dc) + "/volumes"
	lo, hi := pg.window(len(list))
	items := make([]ionoscloud.Volume, 0, hi-lo)
	for _, vr := range list[lo:hi] {
		items = append(items, rd.volume(dc, vr.srv, vr.v, depth-1))
	}
	off, lim := pageFields(pg)
	return ionoscloud.Volumes{Id: p(dc.ID + "/volumes"), Type: rd.typ(ionoscloud.COLLECTION), Href: &href,
		Items: &items, Offset: off, Limit: lim, Links: rd.links(href, pg, len(list))}
}

// ---- LANs ----

func (rd renderer) lan(dc *Datacenter, l *LAN, depth int) ionoscloud.Lan {
	href := rd.dcHref(dc) + "/lans/" + l.ID
	out := ionoscloud.Lan{Id: p(l.ID), Type: rd.typ(ionoscloud.LAN), Href: &href}
	if depth < 0 {
		return out
	}
	out.Metadata = rd.meta(dc.ID+"/lan/"+l.ID, l.Meta)
	props := &ionoscloud.LanProperties{Name: p(l.Name), Public: ionoscloud.ToPtr(l.Public), IpFailover: &[]ionoscloud.IPFailover{}}
	if l.IPv4CIDR != "" {
		props.Ipv4CidrBlock = p(l.IPv4CIDR)
	}
	out.Properties = props
	if depth >= 1 {
		var items []ionoscloud.Nic
		lanID, _ := parseLANID(l.ID)
		for _, srv := range dc.Servers {
			for _, n := range srv.NICs {
				if n.LAN == lanID {
					items = append(items, rd.nic(dc, srv, n, depth-2))
				}
			}
		}
		if items == nil {
			items = []ionoscloud.Nic{}
		}
		out.Entities = &ionoscloud.LanEntities{Nics: &ionoscloud.LanNics{Id: p(l.ID + "/nics"), Type: rd.typ(ionoscloud.COLLECTION), Href: p(href + "/nics"), Items: &items}}
	}
	return out
}

func (rd renderer) lans(dc *Datacenter, list []*LAN, depth int, pg paging) ionoscloud.Lans {
	href := rd.dcHref(dc) + "/lans"
	lo, hi := pg.window(len(list))
	items := make([]ionoscloud.Lan, 0, hi-lo)
	for _, l := range list[lo:hi] {
		items = append(items, rd.lan(dc, l, depth-1))
	}
	off, lim := pageFields(pg)
	return ionoscloud.Lans{Id: p(dc.ID + "/lans"), Type: rd.typ(ionoscloud.COLLECTION), Href: &href,
		Items: &items, Offset: off, Limit: lim, Links: rd.links(href, pg, len(list))}
}

// ---- security groups ----

func (rd renderer) securityGroup(dc *Datacenter, sg *SecurityGroup, depth int) ionoscloud.SecurityGroup {
	href := rd.dcHref(dc) + "/securitygroups/" + sg.ID
	out := ionoscloud.SecurityGroup{Id: p(sg.ID), Type: rd.typ(ionoscloud.SECURITY_GROUP), Href: &href}
	if depth < 0 {
		return out
	}
	out.Metadata = rd.meta(sg.ID, sg.Meta)
	out.Properties = &ionoscloud.SecurityGroupProperties{Name: p(sg.Name), Description: p(sg.Description)}
	if depth >= 1 {
		var members []*Server
		for _, srv := range dc.Servers {
			for _, id := range srv.SecurityGroupIDs {
				if id == sg.ID {
					members = append(members, srv)
				}
			}
		}
		srvs := rd.servers(dc, members, depth-1, paging{})
		srvs.Id, srvs.Href = p(sg.ID+"/servers"), p(href+"/servers")
		out.Entities = &ionoscloud.SecurityGroupEntities{
			Rules:   &ionoscloud.FirewallRules{Id: p(sg.ID + "/rules"), Type: rd.typ(ionoscloud.COLLECTION), Href: p(href + "/rules"), Items: &[]ionoscloud.FirewallRule{}},
			Nics:    &ionoscloud.Nics{Id: p(sg.ID + "/nics"), Type: rd.typ(ionoscloud.COLLECTION), Href: p(href + "/nics"), Items: &[]ionoscloud.Nic{}},
			Servers: &srvs,
		}
	}
	return out
}

func (rd renderer) securityGroups(dc *Datacenter, list []*SecurityGroup, depth int, pg paging) ionoscloud.SecurityGroups {
	href := rd.dcHref(dc) + "/securitygroups"
	lo, hi := pg.window(len(list))
	items := make([]ionoscloud.SecurityGroup, 0, hi-lo)
	for _, sg := range list[lo:hi] {
		items = append(items, rd.securityGroup(dc, sg, depth-1))
	}
	off, lim := pageFields(pg)
	return ionoscloud.SecurityGroups{Id: p(dc.ID + "/securitygroups"), Type: rd.typ(ionoscloud.COLLECTION), Href: &href,
		Items: &items, Offset: off, Limit: lim, Links: rd.links(href, pg, len(list))}
}

// securityGroupsAt renders an embedded collection of groups (a server's attached groups).
func (rd renderer) securityGroupsAt(dc *Datacenter, href, id string, list []*SecurityGroup, depth int) ionoscloud.SecurityGroups {
	items := make([]ionoscloud.SecurityGroup, 0, len(list))
	for _, sg := range list {
		items = append(items, rd.securityGroup(dc, sg, depth-1))
	}
	return ionoscloud.SecurityGroups{Id: &id, Type: rd.typ(ionoscloud.COLLECTION), Href: &href, Items: &items}
}

// ---- NAT gateways ----

func (rd renderer) natGateway(dc *Datacenter, ng *NATGateway, depth int) ionoscloud.NatGateway {
	href := rd.dcHref(dc) + "/natgateways/" + ng.ID
	out := ionoscloud.NatGateway{Id: p(ng.ID), Type: rd.typ(ionoscloud.NATGATEWAY), Href: &href}
	if depth < 0 {
		return out
	}
	out.Metadata = rd.meta(ng.ID, ng.Meta)
	pub := append([]string{}, ng.PublicIPs...)
	lans := make([]ionoscloud.NatGatewayLanProperties, 0, len(ng.LANs))
	for _, l := range ng.LANs {
		id := l.ID
		gw := append([]string{}, l.GatewayIPs...)
		lans = append(lans, ionoscloud.NatGatewayLanProperties{Id: &id, GatewayIps: &gw})
	}
	out.Properties = &ionoscloud.NatGatewayProperties{Name: p(ng.Name), PublicIps: &pub, Lans: &lans}
	if depth >= 1 {
		out.Entities = &ionoscloud.NatGatewayEntities{
			Rules: &ionoscloud.NatGatewayRules{Id: p(ng.ID + "/rules"), Type: rd.typ(ionoscloud.COLLECTION), Href: p(href + "/rules"), Items: &[]ionoscloud.NatGatewayRule{}},
		}
	}
	return out
}

func (rd renderer) natGateways(dc *Datacenter, list []*NATGateway, depth int, pg paging) ionoscloud.NatGateways {
	href := rd.dcHref(dc) + "/natgateways"
	lo, hi := pg.window(len(list))
	items := make([]ionoscloud.NatGateway, 0, hi-lo)
	for _, ng := range list[lo:hi] {
		items = append(items, rd.natGateway(dc, ng, depth-1))
	}
	off, lim := pageFields(pg)
	return ionoscloud.NatGateways{Id: p(dc.ID + "/natgateways"), Type: rd.typ(ionoscloud.COLLECTION), Href: &href,
		Items: &items, Offset: off, Limit: lim, Links: rd.links(href, pg, len(list))}
}

// ---- application load balancers ----

func (rd renderer) albHref(dc *Datacenter, a *ApplicationLoadBalancer) string {
	return rd.dcHref(dc) + "/applicationloadbalancers/" + a.ID
}

func (rd renderer) alb(dc *Datacenter, a *ApplicationLoadBalancer, depth int) ionoscloud.ApplicationLoadBalancer {
	href := rd.albHref(dc, a)
	out := ionoscloud.ApplicationLoadBalancer{Id: p(a.ID), Type: rd.typ(ionoscloud.APPLICATIONLOADBALANCER), Href: &href}
	if depth < 0 {
		return out
	}
	out.Metadata = rd.meta(a.ID, a.Meta)
	ll, tl := a.ListenerLAN, a.TargetLAN
	ips := append([]string{}, a.IPs...)
	priv := append([]string{}, a.PrivateIPs...)
	out.Properties = &ionoscloud.ApplicationLoadBalancerProperties{Name: p(a.Name), ListenerLan: &ll, TargetLan: &tl,
		Ips: &ips, LbPrivateIps: &priv, CentralLogging: ionoscloud.ToPtr(false)}
	if depth >= 1 {
		rules := rd.forwardingRules(dc, a, a.ForwardingRules, depth-1, paging{})
		out.Entities = &ionoscloud.ApplicationLoadBalancerEntities{Forwardingrules: &rules}
	}
	return out
}

func (rd renderer) albs(dc *Datacenter, list []*ApplicationLoadBalancer, depth int, pg paging) ionoscloud.ApplicationLoadBalancers {
	href := rd.dcHref(dc) + "/applicationloadbalancers"
	lo, hi := pg.window(len(list))
	items := make([]ionoscloud.ApplicationLoadBalancer, 0, hi-lo)
	for _, a := range list[lo:hi] {
		items = append(items, rd.alb(dc, a, depth-1))
	}
	off, lim := pageFields(pg)
	return ionoscloud.ApplicationLoadBalancers{Id: p(dc.ID + "/applicationloadbalancers"), Type: rd.typ(ionoscloud.COLLECTION), Href: &href,
		Items: &items, Offset: off, Limit: lim, Links: rd.links(href, pg, len(list))}
}

func (rd renderer) forwardingRule(dc *Datacenter, a *ApplicationLoadBalancer, r *ForwardingRule, depth int) ionoscloud.ApplicationLoadBalancerForwardingRule {
	href := rd.albHref(dc, a) + "/forwardingrules/" + r.ID
	out := ionoscloud.ApplicationLoadBalancerForwardingRule{Id: p(r.ID), Type: rd.typ(ionoscloud.FORWARDING_RULE), Href: &href}
	if depth < 0 {
		return out
	}
	out.Metadata = rd.meta(r.ID, r.Meta)
	port := r.ListenerPort
	rules := make([]ionoscloud.ApplicationLoadBalancerHttpRule, 0, len(r.HTTPRules))
	for _, h := range r.HTTPRules {
		hr := ionoscloud.ApplicationLoadBalancerHttpRule{Name: p(h.Name), Type: p(h.Type)}
		if h.TargetGroup != "" {
			hr.TargetGroup = p(h.TargetGroup)
		}
		rules = append(rules, hr)
	}
	out.Properties = &ionoscloud.ApplicationLoadBalancerForwardingRuleProperties{Name: p(r.Name), Protocol: p(r.Protocol),
		ListenerIp: p(r.ListenerIP), ListenerPort: &port, ClientTimeout: ionoscloud.PtrInt32(50000), HttpRules: &rules}
	return out
}

func (rd renderer) forwardingRules(dc *Datacenter, a *ApplicationLoadBalancer, list []*ForwardingRule, depth int, pg paging) ionoscloud.ApplicationLoadBalancerForwardingRules {
	href := rd.albHref(dc, a) + "/forwardingrules"
	lo, hi := pg.window(len(list))
	items := make([]ionoscloud.ApplicationLoadBalancerForwardingRule, 0, hi-lo)
	for _, r := range list[lo:hi] {
		items = append(items, rd.forwardingRule(dc, a, r, depth-1))
	}
	off, lim := pageFields(pg)
	return ionoscloud.ApplicationLoadBalancerForwardingRules{Id: p(a.ID + "/forwardingrules"), Type: rd.typ(ionoscloud.COLLECTION), Href: &href,
		Items: &items, Offset: off, Limit: lim, Links: rd.links(href, pg, len(list))}
}

// ---- target groups ----

func (rd renderer) targetGroup(tg *TargetGroup, depth int) ionoscloud.TargetGroup {
	href := rd.base + "/targetgroups/" + tg.ID
	out := ionoscloud.TargetGroup{Id: p(tg.ID), Type: rd.typ(ionoscloud.TARGET_GROUP), Href: &href}
	if depth < 0 {
		return out
	}
	out.Metadata = rd.meta(tg.ID, tg.Meta)
	targets := make([]ionoscloud.TargetGroupTarget, 0, len(tg.Targets))
	for _, t := range tg.Targets {
		port, weight := t.Port, t.Weight
		targets = append(targets, ionoscloud.TargetGroupTarget{Ip: p(t.IP), Port: &port, Weight: &weight, ProxyProtocol: p("none"),
			HealthCheckEnabled: ionoscloud.ToPtr(t.HealthCheckEnabled), MaintenanceEnabled: ionoscloud.ToPtr(t.MaintenanceEnabled)})
	}
	out.Properties = &ionoscloud.TargetGroupProperties{Name: p(tg.Name), Algorithm: p(tg.Algorithm), Protocol: p(tg.Protocol),
		ProtocolVersion: p("HTTP1"), Targets: &targets}
	return out
}

func (rd renderer) targetGroups(list []*TargetGroup, depth int, pg paging) ionoscloud.TargetGroups {
	href := rd.base + "/targetgroups"
	lo, hi := pg.window(len(list))
	items := make([]ionoscloud.TargetGroup, 0, hi-lo)
	for _, tg := range list[lo:hi] {
		items = append(items, rd.targetGroup(tg, depth-1))
	}
	off, lim := pageFields(pg)
	return ionoscloud.TargetGroups{Id: p("targetgroups"), Type: rd.typ(ionoscloud.COLLECTION), Href: &href,
		Items: &items, Offset: off, Limit: lim, Links: rd.links(href, pg, len(list))}
}

// ---- catalogue ----

func (rd renderer) template(t *Template, depth int) ionoscloud.Template {
	href := rd.base + "/templates/" + t.ID
	out := ionoscloud.Template{Id: p(t.ID), Type: rd.typ(ionoscloud.TEMPLATE), Href: &href}
	if depth < 0 {
		return out
	}
	out.Metadata = rd.meta(t.ID, catalogueMeta())
	cores, ram, storage := float32(t.Cores), float32(t.RAMMiB), float32(t.StorageGB)
	out.Properties = &ionoscloud.TemplateProperties{Name: p(t.Name), Cores: &cores, Ram: &ram, StorageSize: &storage,
		StorageType: p("DAS"), Category: p("CUBE")}
	return out
}

func (rd renderer) image(img *Image, depth int) ionoscloud.Image {
	href := rd.base + "/images/" + img.ID
	out := ionoscloud.Image{Id: p(img.ID), Type: rd.typ(ionoscloud.IMAGE), Href: &href}
	if depth < 0 {
		return out
	}
	out.Metadata = rd.meta(img.ID, catalogueMeta())
	size := img.SizeGB
	aliases := append([]string{}, img.Aliases...)
	out.Properties = &ionoscloud.ImageProperties{Name: p(img.Name), Location: p(img.Location), Size: &size,
		LicenceType: p("LINUX"), ImageType: p("HDD"), Public: ionoscloud.ToPtr(true), ImageAliases: &aliases, CloudInit: p("V1")}
	return out
}

func (rd renderer) location(l *Location, depth int) ionoscloud.Location {
	href := rd.base + "/locations/" + l.ID
	out := ionoscloud.Location{Id: p(l.ID), Type: rd.typ(ionoscloud.LOCATION), Href: &href}
	if depth < 0 {
		return out
	}
	out.Metadata = rd.meta(l.ID, catalogueMeta())
	var aliases []string
	for _, img := range rd.st.Images {
		if img.Location == l.ID {
			aliases = append(aliases, img.Aliases...)
		}
	}
	out.Properties = &ionoscloud.LocationProperties{Name: p(l.Name), Features: &[]string{"SSD", "cloud-init"}, ImageAliases: &aliases}
	return out
}

// ---- requests ----

func (rd renderer) requestStatus(rq *Request, depth int) ionoscloud.RequestStatus {
	href := rd.base + "/requests/" + rq.ID + "/status"
	out := ionoscloud.RequestStatus{Id: p(rq.ID), Type: rd.typ(ionoscloud.REQUEST_STATUS), Href: &href}
	if depth < 0 {
		return out
	}
	msg := rq.Message
	if msg == "" {
		msg = requestMessage(rq.Status)
	}
	targets := make([]ionoscloud.RequestTarget, 0, len(rq.Targets))
	for _, t := range rq.Targets {
		targets = append(targets, ionoscloud.RequestTarget{
			Target: &ionoscloud.ResourceReference{Id: p(t.ID), Type: rd.typ(ionoscloud.Type(t.Type)), Href: p(rd.targetHref(rq, t))},
			Status: p(rq.Status),
		})
	}
	sum := sha256.Sum256([]byte(rq.ID + rq.Status))
	out.Metadata = &ionoscloud.RequestStatusMetadata{Status: p(rq.Status), Message: &msg,
		Etag: p(hex.EncodeToString(sum[:16])), Targets: &targets}
	return out
}

func (rd renderer) targetHref(rq *Request, t RequestTarget) string {
	switch t.Type {
	case "datacenter":
		return rd.base + "/datacenters/" + t.ID
	case "target-group":
		return rd.base + "/targetgroups/" + t.ID
	}
	return rd.base + "/datacenters/" + rq.DatacenterID
}

func requestMessage(status string) string {
	switch status {
	case RequestQueued:
		return "Request has been queued"
	case RequestRunning:
		return "Request is being processed"
	case RequestDone:
		return "Request has been successfully executed"
	default:
		return "Request has failed"
	}
}

func (rd renderer) request(rq *Request, depth int) ionoscloud.Request {
	href := rd.base + "/requests/" + rq.ID
	out := ionoscloud.Request{Id: p(rq.ID), Type: rd.typ(ionoscloud.REQUEST), Href: &href}
	if depth < 0 {
		return out
	}
	sum := sha256.Sum256([]byte(rq.ID))
	st := rd.requestStatus(rq, depth-1)
	out.Metadata = &ionoscloud.RequestMetadata{CreatedDate: &ionoscloud.IonosTime{Time: rq.Created}, CreatedBy: p(createdBy),
		Etag: p(hex.EncodeToString(sum[:16])), RequestStatus: &st}
	headers := map[string]string{"Content-Type": "application/json"}
	out.Properties = &ionoscloud.RequestProperties{Method: p(rq.Method), Url: p(rq.URL), Body: p(rq.Body), Headers: &headers}
	return out
}

func (rd renderer) requests(list []*Request, depth int, pg paging) ionoscloud.Requests {
	href := rd.base + "/requests"
	lo, hi := pg.window(len(list))
	items := make([]ionoscloud.Request, 0, hi-lo)
	for _, rq := range list[lo:hi] {
		// A request listed below depth 2 is only a reference ("if depth < 2, the requests
		// basically arrive empty", as IONOS documents the depth of /requests).
		d := depth - 1
		if d < 1 {
			d = -1
		}
		items = append(items, rd.request(rq, d))
	}
	off, lim := pageFields(pg)
	return ionoscloud.Requests{Id: p("requests"), Type: rd.typ(ionoscloud.COLLECTION), Href: &href,
		Items: &items, Offset: off, Limit: lim, Links: rd.links(href, pg, len(list))}
}

// parsePaging reads offset and limit (IONOS's paging: offset >= 0, limit 1..10000, default
// 1000).
func parsePaging(q url.Values) (paging, error) {
	pg := paging{paged: true, offset: 0, limit: 1000}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return pg, fmt.Errorf("offset must be a non-negative integer, got %q", v)
		}
		pg.offset = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return pg, fmt.Errorf("limit must be an integer in 1..10000, got %q", v)
		}
		pg.limit = n
	}
	return pg, nil
}

// parseDepth reads depth (0..10, default 0).
func parseDepth(q url.Values) (int, error) {
	v := q.Get("depth")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 10 {
		return 0, fmt.Errorf("depth must be an integer in 0..10, got %q", v)
	}
	return n, nil
}
