package ionossim

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"
	"strconv"

	ionoscloud "github.com/ionos-cloud/sdk-go/v6"
)

// ---- LANs ----

func (s *Sim) createLAN(c *call) response {
	dc, e := s.dcOf(c)
	if e != nil {
		return *e
	}
	var props ionoscloud.LanProperties
	if _, _, e := envelope(c.body, &props); e != nil {
		return *e
	}
	next := int32(1)
	for _, l := range dc.LANs {
		if n, _ := parseLANID(l.ID); n >= next {
			next = n + 1
		}
	}
	now := s.now()
	l := &LAN{ID: strconv.Itoa(int(next)), Name: val(props.Name), Public: val(props.Public), Meta: Meta{Created: now, Modified: now}}
	if !l.Public {
		l.IPv4CIDR = defaultCIDR(l.ID)
		if v := val(props.Ipv4CidrBlock); v != "" && v != "AUTO" {
			pfx, err := netip.ParsePrefix(v)
			if err != nil || !pfx.Addr().Is4() {
				return fail(http.StatusUnprocessableEntity, "[VDC-9-1] ipv4CidrBlock %q is not an IPv4 prefix", v)
			}
			l.IPv4CIDR = pfx.Masked().String()
		}
	}
	dc.LANs = append(dc.LANs, l)
	rq := s.newRequest(c, kindCreate, dc.ID, RequestTarget{Type: "lan", ID: l.ID})
	return accepted(c, rq, s.rd(c).lan(dc, l, c.depth))
}

func (s *Sim) deleteLAN(c *call) response {
	dc, e := s.dcOf(c)
	if e != nil {
		return *e
	}
	l := dc.lan(c.r.PathValue("lan"))
	if l == nil {
		return notFound("LAN", c.r.PathValue("lan"))
	}
	id, _ := parseLANID(l.ID)
	for _, srv := range dc.Servers {
		for _, n := range srv.NICs {
			if n.LAN == id {
				return fail(http.StatusUnprocessableEntity, "[VDC-9-2] LAN %s still has NIC %s of server %s", l.ID, n.ID, srv.ID)
			}
		}
	}
	rq := s.newRequest(c, kindDelete, dc.ID, RequestTarget{Type: "lan", ID: l.ID})
	return accepted(c, rq, nil)
}

// ---- security groups ----

func (s *Sim) createSecurityGroup(c *call) response {
	dc, e := s.dcOf(c)
	if e != nil {
		return *e
	}
	var props ionoscloud.SecurityGroupProperties
	if _, _, e := envelope(c.body, &props); e != nil {
		return *e
	}
	if val(props.Name) == "" {
		return fail(http.StatusUnprocessableEntity, "[VDC-8-2] properties.name is required")
	}
	now := s.now()
	sg := &SecurityGroup{ID: newUUID(), Name: val(props.Name), Description: val(props.Description), Meta: Meta{Created: now, Modified: now}}
	dc.SecurityGroups = append(dc.SecurityGroups, sg)
	rq := s.newRequest(c, kindCreate, dc.ID, RequestTarget{Type: "security-group", ID: sg.ID})
	return accepted(c, rq, s.rd(c).securityGroup(dc, sg, c.depth))
}

func (s *Sim) deleteSecurityGroup(c *call) response {
	dc, e := s.dcOf(c)
	if e != nil {
		return *e
	}
	sg := dc.securityGroup(c.r.PathValue("sg"))
	if sg == nil {
		return notFound("security group", c.r.PathValue("sg"))
	}
	rq := s.newRequest(c, kindDelete, dc.ID, RequestTarget{Type: "security-group", ID: sg.ID})
	return accepted(c, rq, nil)
}

// ---- NAT gateways ----

func (s *Sim) createNATGateway(c *call) response {
	dc, e := s.dcOf(c)
	if e != nil {
		return *e
	}
	var props ionoscloud.NatGatewayProperties
	if _, _, e := envelope(c.body, &props); e != nil {
		return *e
	}
	if val(props.Name) == "" || len(val(props.PublicIps)) == 0 {
		return fail(http.StatusUnprocessableEntity, "[VDC-10-1] properties.name and properties.publicIps are required")
	}
	for _, ip := range val(props.PublicIps) {
		if !validIPv4(ip) {
			return fail(http.StatusUnprocessableEntity, "[VDC-10-2] %q is not an IPv4 address", ip)
		}
	}
	now := s.now()
	ng := &NATGateway{ID: newUUID(), Name: val(props.Name), PublicIPs: val(props.PublicIps), Meta: Meta{Created: now, Modified: now}}
	for _, l := range val(props.Lans) {
		ng.LANs = append(ng.LANs, GatewayLAN{ID: val(l.Id), GatewayIPs: val(l.GatewayIps)})
	}
	dc.NATGateways = append(dc.NATGateways, ng)
	rq := s.newRequest(c, kindCreate, dc.ID, RequestTarget{Type: "natgateway", ID: ng.ID})
	return accepted(c, rq, s.rd(c).natGateway(dc, ng, c.depth))
}

func (s *Sim) deleteNATGateway(c *call) response {
	dc, e := s.dcOf(c)
	if e != nil {
		return *e
	}
	ng := dc.natGateway(c.r.PathValue("ng"))
	if ng == nil {
		return notFound("NAT gateway", c.r.PathValue("ng"))
	}
	rq := s.newRequest(c, kindDelete, dc.ID, RequestTarget{Type: "natgateway", ID: ng.ID})
	return accepted(c, rq, nil)
}

// ---- application load balancers ----

func (s *Sim) createALB(c *call) response {
	dc, e := s.dcOf(c)
	if e != nil {
		return *e
	}
	var props ionoscloud.ApplicationLoadBalancerProperties
	if _, _, e := envelope(c.body, &props); e != nil {
		return *e
	}
	if val(props.Name) == "" || val(props.ListenerLan) <= 0 || val(props.TargetLan) <= 0 {
		return fail(http.StatusUnprocessableEntity, "[VDC-11-1] properties.name, listenerLan and targetLan are required")
	}
	now := s.now()
	a := &ApplicationLoadBalancer{ID: newUUID(), Name: val(props.Name), ListenerLAN: val(props.ListenerLan), TargetLAN: val(props.TargetLan),
		IPs: val(props.Ips), PrivateIPs: val(props.LbPrivateIps), Meta: Meta{Created: now, Modified: now}}
	dc.ApplicationLBs = append(dc.ApplicationLBs, a)
	rq := s.newRequest(c, kindCreate, dc.ID, RequestTarget{Type: "applicationloadbalancer", ID: a.ID})
	return accepted(c, rq, s.rd(c).alb(dc, a, c.depth))
}

func (s *Sim) deleteALB(c *call) response {
	dc, a, e := s.albOf(c)
	if e != nil {
		return *e
	}
	rq := s.newRequest(c, kindDelete, dc.ID, RequestTarget{Type: "applicationloadbalancer", ID: a.ID})
	return accepted(c, rq, nil)
}

func (s *Sim) createForwardingRule(c *call) response {
	dc, a, e := s.albOf(c)
	if e != nil {
		return *e
	}
	var props ionoscloud.ApplicationLoadBalancerForwardingRuleProperties
	if _, _, e := envelope(c.body, &props); e != nil {
		return *e
	}
	if val(props.Name) == "" || val(props.Protocol) != "HTTP" || !validIPv4(val(props.ListenerIp)) ||
		val(props.ListenerPort) < 1 || val(props.ListenerPort) > 65535 {
		return fail(http.StatusUnprocessableEntity, "[VDC-11-2] a forwarding rule needs name, protocol HTTP, an IPv4 listenerIp and a listenerPort in 1..65535")
	}
	now := s.now()
	r := &ForwardingRule{ID: newUUID(), Name: val(props.Name), Protocol: "HTTP", ListenerIP: val(props.ListenerIp),
		ListenerPort: val(props.ListenerPort), Meta: Meta{Created: now, Modified: now}}
	for i, h := range val(props.HttpRules) {
		hr := HTTPRule{Name: val(h.Name), Type: val(h.Type), TargetGroup: val(h.TargetGroup)}
		if !slices.Contains([]string{"FORWARD", "STATIC", "REDIRECT"}, hr.Type) {
			return fail(http.StatusUnprocessableEntity, "[VDC-11-3] httpRules[%d].type must be FORWARD, STATIC or REDIRECT", i)
		}
		if hr.Type == "FORWARD" && s.st.targetGroup(hr.TargetGroup) == nil {
			return fail(http.StatusUnprocessableEntity, "[VDC-11-4] httpRules[%d].targetGroup %q does not exist", i, hr.TargetGroup)
		}
		if hr.Type != "FORWARD" && hr.TargetGroup != "" {
			return fail(http.StatusUnprocessableEntity, "[VDC-11-5] httpRules[%d].targetGroup is only valid for FORWARD", i)
		}
		r.HTTPRules = append(r.HTTPRules, hr)
	}
	a.ForwardingRules = append(a.ForwardingRules, r)
	rq := s.newRequest(c, kindCreate, dc.ID, RequestTarget{Type: "forwarding-rule", ID: r.ID}, RequestTarget{Type: "applicationloadbalancer", ID: a.ID})
	return accepted(c, rq, s.rd(c).forwardingRule(dc, a, r, c.depth))
}

func (s *Sim) deleteForwardingRule(c *call) response {
	dc, a, e := s.albOf(c)
	if e != nil {
		return *e
	}
	r := a.rule(c.r.PathValue("rule"))
	if r == nil {
		return notFound("forwarding rule", c.r.PathValue("rule"))
	}
	rq := s.newRequest(c, kindDelete, dc.ID, RequestTarget{Type: "forwarding-rule", ID: r.ID}, RequestTarget{Type: "applicationloadbalancer", ID: a.ID})
	return accepted(c, rq, nil)
}

// ---- target groups ----

// setTargetGroup validates props and applies them to tg; whole is true for POST and PUT, where
// name, algorithm and protocol are required and targets are replaced even when absent.
func setTargetGroup(tg *TargetGroup, pm map[string]json.RawMessage, props ionoscloud.TargetGroupProperties, whole bool) *response {
	if whole && (val(props.Name) == "" || val(props.Algorithm) == "" || val(props.Protocol) == "") {
		r := fail(http.StatusUnprocessableEntity, "[VDC-12-1] name, algorithm and protocol are required")
		return &r
	}
	algorithms := []string{"ROUND_ROBIN", "LEAST_CONNECTION", "RANDOM", "SOURCE_IP"}
	if a := val(props.Algorithm); a != "" && !slices.Contains(algorithms, a) {
		r := fail(http.StatusUnprocessableEntity, "[VDC-12-2] algorithm must be one of %v, got %q", algorithms, a)
		return &r
	}
	if p := val(props.Protocol); p != "" && p != "HTTP" {
		r := fail(http.StatusUnprocessableEntity, "[VDC-12-3] protocol must be HTTP, got %q", p)
		return &r
	}
	var targets []GroupTarget
	for i, t := range val(props.Targets) {
		gt := GroupTarget{IP: val(t.Ip), Port: val(t.Port), Weight: 1, HealthCheckEnabled: t.HealthCheckEnabled == nil || *t.HealthCheckEnabled,
			MaintenanceEnabled: val(t.MaintenanceEnabled)}
		if t.Weight != nil {
			gt.Weight = *t.Weight
		}
		if !validIPv4(gt.IP) || gt.Port < 1 || gt.Port > 65535 || gt.Weight < 0 || gt.Weight > 256 {
			// IONOS does not say which target is wrong; the simulator does.
			r := fail(http.StatusUnprocessableEntity, "[VDC-12-4] targets[%d] needs an IPv4 ip, a port in 1..65535 and a weight in 0..256", i)
			return &r
		}
		targets = append(targets, gt)
	}
	if n := val(props.Name); n != "" {
		tg.Name = n
	}
	if a := val(props.Algorithm); a != "" {
		tg.Algorithm = a
	}
	if p := val(props.Protocol); p != "" {
		tg.Protocol = p
	}
	if _, has := pm["targets"]; has || whole {
		tg.Targets = targets
	}
	return nil
}

func (s *Sim) createTargetGroup(c *call) response {
	var props ionoscloud.TargetGroupProperties
	pm, _, e := envelope(c.body, &props)
	if e != nil {
		return *e
	}
	now := s.now()
	tg := &TargetGroup{ID: newUUID(), Meta: Meta{Created: now, Modified: now}}
	if e := setTargetGroup(tg, pm, props, true); e != nil {
		return *e
	}
	s.st.TargetGroups = append(s.st.TargetGroups, tg)
	rq := s.newRequest(c, kindCreate, "", RequestTarget{Type: "target-group", ID: tg.ID})
	return accepted(c, rq, s.rd(c).targetGroup(tg, c.depth))
}

func (s *Sim) patchTargetGroup(c *call) response {
	tg := s.st.targetGroup(c.r.PathValue("tg"))
	if tg == nil {
		return notFound("target group", c.r.PathValue("tg"))
	}
	var props ionoscloud.TargetGroupProperties
	pm, e := patchBody(c.body, &props)
	if e != nil {
		return *e
	}
	next := *tg
	if e := setTargetGroup(&next, pm, props, false); e != nil {
		return *e
	}
	*tg = next
	rq := s.newRequest(c, kindUpdate, "", RequestTarget{Type: "target-group", ID: tg.ID})
	return accepted(c, rq, s.rd(c).targetGroup(tg, c.depth))
}

func (s *Sim) putTargetGroup(c *call) response {
	tg := s.st.targetGroup(c.r.PathValue("tg"))
	if tg == nil {
		return notFound("target group", c.r.PathValue("tg"))
	}
	var props ionoscloud.TargetGroupProperties
	pm, _, e := envelope(c.body, &props)
	if e != nil {
		return *e
	}
	next := *tg
	if e := setTargetGroup(&next, pm, props, true); e != nil {
		return *e
	}
	*tg = next
	rq := s.newRequest(c, kindUpdate, "", RequestTarget{Type: "target-group", ID: tg.ID})
	return accepted(c, rq, s.rd(c).targetGroup(tg, c.depth))
}

func (s *Sim) deleteTargetGroup(c *call) response {
	tg := s.st.targetGroup(c.r.PathValue("tg"))
	if tg == nil {
		return notFound("target group", c.r.PathValue("tg"))
	}
	rq := s.newRequest(c, kindDelete, "", RequestTarget{Type: "target-group", ID: tg.ID})
	return accepted(c, rq, nil)
}
