package ionossim

import (
	"slices"
	"time"
)

// Request kinds: what completing a request does to its targets.
const (
	kindCreate  = "create"
	kindDelete  = "delete"
	kindUpdate  = "update"
	kindSuspend = "suspend"
	kindResume  = "resume"
	kindStart   = "start"
	kindStop    = "stop"
)

// newRequest records an asynchronous write by the call c, marks its targets and data center
// BUSY and bumps the data center's version. Callers hold s.mu.
func (s *Sim) newRequest(c *call, kind, dcID string, targets ...RequestTarget) *Request {
	now := s.now()
	start := now.Add(max(s.opts.QueueDelay, 0))
	run := max(s.opts.RunDuration, 0)
	if c.stuckFor > 0 {
		run = c.stuckFor
	}
	rq := &Request{
		ID: newUUID(), Method: c.r.Method, URL: c.base + trimBase(c.r.URL.Path), Body: string(c.body),
		Kind: kind, DatacenterID: dcID, Targets: targets, Status: RequestQueued,
		Created: now, StartAt: start, DoneAt: start.Add(run), Fail: c.failRequest,
	}
	s.st.Requests = append(s.st.Requests, rq)
	for _, t := range targets {
		if m := s.meta(dcID, t); m != nil {
			m.State, m.Modified = StateBusy, now
		}
	}
	if dc := s.st.datacenter(dcID); dc != nil {
		dc.State, dc.Modified = StateBusy, now
		dc.Version++
	}
	return rq
}

func (s *Sim) stuckRequest(rq *Request) bool {
	if rq.Stuck || s.stuck[rq.DatacenterID] {
		return true
	}
	for _, t := range rq.Targets {
		if s.stuck[t.ID] {
			return true
		}
	}
	return false
}

func pending(rq *Request) bool { return rq.Status == RequestQueued || rq.Status == RequestRunning }

// advanceLocked moves requests to now; callers hold s.mu. It returns the servers that reached
// RUNNING.
func (s *Sim) advanceLocked(now time.Time) []runningEvent {
	var events []runningEvent
	for _, rq := range s.st.Requests {
		if !pending(rq) || now.Before(rq.StartAt) {
			continue
		}
		if s.stuckRequest(rq) || now.Before(rq.DoneAt) {
			rq.Status = RequestRunning
			continue
		}
		events = append(events, s.finish(rq, now)...)
	}
	return events
}

// finish completes rq (DONE, or FAILED when rq.Fail) and applies its effect.
func (s *Sim) finish(rq *Request, now time.Time) []runningEvent {
	ok := !rq.Fail
	if ok {
		rq.Status = RequestDone
	} else {
		rq.Status = RequestFailed
		if rq.Message == "" {
			rq.Message = "simulated failure of a " + rq.Kind + " request"
		}
	}
	var events []runningEvent
	release := func() {
		for _, t := range rq.Targets {
			if m := s.meta(rq.DatacenterID, t); m != nil && !s.targetPending(t.ID) {
				m.State, m.Modified = StateAvailable, now
			}
		}
	}
	setVM := func(state string) {
		if len(rq.Targets) == 0 || rq.Targets[0].Type != "server" {
			return
		}
		dc := s.st.datacenter(rq.DatacenterID)
		if dc == nil {
			return
		}
		if srv := dc.server(rq.Targets[0].ID); srv != nil {
			srv.VMState, srv.Modified = state, now
			if state == VMRunning {
				events = append(events, runningEvent{dc: dc.ID, srv: copyServer(srv)})
			}
		}
	}
	switch {
	case rq.Kind == kindCreate && ok:
		release()
		setVM(VMRunning)
	case rq.Kind == kindCreate:
		s.remove(rq.DatacenterID, rq.Targets[0])
		release()
	case rq.Kind == kindDelete && ok:
		s.remove(rq.DatacenterID, rq.Targets[0])
		release()
	case rq.Kind == kindSuspend && ok:
		release()
		setVM(VMSuspended)
	case (rq.Kind == kindResume || rq.Kind == kindStart) && ok:
		release()
		setVM(VMRunning)
	case rq.Kind == kindStop && ok:
		release()
		setVM(VMShutoff)
	default:
		release()
	}
	if dc := s.st.datacenter(rq.DatacenterID); dc != nil {
		dc.Version++
		dc.Modified = now
		if !s.datacenterPending(dc.ID) {
			dc.State = StateAvailable
		}
	}
	return events
}

func (s *Sim) targetPending(id string) bool {
	for _, rq := range s.st.Requests {
		if pending(rq) && slices.ContainsFunc(rq.Targets, func(t RequestTarget) bool { return t.ID == id }) {
			return true
		}
	}
	return false
}

func (s *Sim) datacenterPending(id string) bool {
	for _, rq := range s.st.Requests {
		if pending(rq) && rq.DatacenterID == id {
			return true
		}
	}
	return false
}

// meta returns the metadata of the resource t in data center dcID, nil when it is gone.
func (s *Sim) meta(dcID string, t RequestTarget) *Meta {
	if t.Type == "target-group" {
		if tg := s.st.targetGroup(t.ID); tg != nil {
			return &tg.Meta
		}
		return nil
	}
	dc := s.st.datacenter(dcID)
	if dc == nil {
		return nil
	}
	switch t.Type {
	case "datacenter":
		return &dc.Meta
	case "server":
		if srv := dc.server(t.ID); srv != nil {
			return &srv.Meta
		}
	case "nic":
		for _, srv := range dc.Servers {
			if n := srv.nic(t.ID); n != nil {
				return &n.Meta
			}
		}
	case "volume":
		for _, srv := range dc.Servers {
			if v := srv.volume(t.ID); v != nil {
				return &v.Meta
			}
		}
	case "lan":
		if l := dc.lan(t.ID); l != nil {
			return &l.Meta
		}
	case "security-group":
		if sg := dc.securityGroup(t.ID); sg != nil {
			return &sg.Meta
		}
	case "natgateway":
		if ng := dc.natGateway(t.ID); ng != nil {
			return &ng.Meta
		}
	case "applicationloadbalancer":
		if a := dc.alb(t.ID); a != nil {
			return &a.Meta
		}
	case "forwarding-rule":
		for _, a := range dc.ApplicationLBs {
			if r := a.rule(t.ID); r != nil {
				return &r.Meta
			}
		}
	}
	return nil
}

// remove deletes the resource t from data center dcID (or the contract, for target groups
// and data centers).
func (s *Sim) remove(dcID string, t RequestTarget) {
	switch t.Type {
	case "target-group":
		s.st.TargetGroups = slices.DeleteFunc(s.st.TargetGroups, func(tg *TargetGroup) bool { return tg.ID == t.ID })
		return
	case "datacenter":
		s.st.Datacenters = slices.DeleteFunc(s.st.Datacenters, func(dc *Datacenter) bool { return dc.ID == t.ID })
		return
	}
	dc := s.st.datacenter(dcID)
	if dc == nil {
		return
	}
	switch t.Type {
	case "server":
		dc.Servers = slices.DeleteFunc(dc.Servers, func(srv *Server) bool { return srv.ID == t.ID })
	case "nic":
		for _, srv := range dc.Servers {
			srv.NICs = slices.DeleteFunc(srv.NICs, func(n *NIC) bool { return n.ID == t.ID })
		}
	case "volume":
		for _, srv := range dc.Servers {
			srv.Volumes = slices.DeleteFunc(srv.Volumes, func(v *Volume) bool { return v.ID == t.ID })
		}
	case "lan":
		dc.LANs = slices.DeleteFunc(dc.LANs, func(l *LAN) bool { return l.ID == t.ID })
	case "security-group":
		dc.SecurityGroups = slices.DeleteFunc(dc.SecurityGroups, func(sg *SecurityGroup) bool { return sg.ID == t.ID })
		for _, srv := range dc.Servers {
			srv.SecurityGroupIDs = slices.DeleteFunc(srv.SecurityGroupIDs, func(id string) bool { return id == t.ID })
		}
		if dc.DefaultSecurityGroupID == t.ID {
			dc.DefaultSecurityGroupID = ""
		}
	case "natgateway":
		dc.NATGateways = slices.DeleteFunc(dc.NATGateways, func(ng *NATGateway) bool { return ng.ID == t.ID })
	case "applicationloadbalancer":
		dc.ApplicationLBs = slices.DeleteFunc(dc.ApplicationLBs, func(a *ApplicationLoadBalancer) bool { return a.ID == t.ID })
	case "forwarding-rule":
		for _, a := range dc.ApplicationLBs {
			a.ForwardingRules = slices.DeleteFunc(a.ForwardingRules, func(r *ForwardingRule) bool { return r.ID == t.ID })
		}
	}
}

// copyServer returns a deep copy of srv for hooks.
func copyServer(srv *Server) Server {
	out := *srv
	out.SecurityGroupIDs = slices.Clone(srv.SecurityGroupIDs)
	out.NICs = make([]*NIC, len(srv.NICs))
	for i, n := range srv.NICs {
		c := *n
		c.IPs = slices.Clone(n.IPs)
		out.NICs[i] = &c
	}
	out.Volumes = make([]*Volume, len(srv.Volumes))
	for i, v := range srv.Volumes {
		c := *v
		out.Volumes[i] = &c
	}
	return out
}
