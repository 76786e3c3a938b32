package cubes

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/ionos"
)

// The cloud steps of the fleet workflows (roundtrip up|down, scale apply): each is safe to
// repeat after a crash, and none creates or deletes anything by name. docs/ionos.md says what
// each does ("Roundtrip", its `roundtrip up` and `roundtrip down` tables).

// Cloud is what the fleet workflows ask of the IONOS API (*ionos.Client implements it).
// Writes return the accepted asynchronous request; reads of a missing server are NOT_FOUND
// (*cubefleet.Error).
type Cloud interface {
	CreateCube(ctx context.Context, dcID string, spec ionos.CubeSpec) (ionos.Accepted, error)
	ServersNamed(ctx context.Context, dcID, name string) ([]ionos.Server, error)
	Server(ctx context.Context, dcID, id string) (ionos.Server, error)
	RequestStatus(ctx context.Context, id string) (ionos.RequestState, error)
	SetServerSecurityGroups(ctx context.Context, dcID, id string, ids []string) (ionos.Accepted, error)
	UpdateTargets(ctx context.Context, id string, edit func([]ionos.Target) []ionos.Target) ([]ionos.Target, ionos.Accepted, error)
	DeleteServer(ctx context.Context, dcID, id string) (ionos.Accepted, error)
}

var _ Cloud = (*ionos.Client)(nil)

// IsNotFound reports whether err is a NOT_FOUND *cubefleet.Error (a 404 of the API).
func IsNotFound(err error) bool {
	var ce *cubefleet.Error
	return errors.As(err, &ce) && ce.Code == cubefleet.CodeNotFound
}

// FindCreated looks up the Cube spec names after a create whose outcome is unknown (a kill,
// a timeout, a 5xx): none is (nil, nil), and one new POST may follow; exactly one is read
// again by its id (its listing stands in while that GET answers 404, as while its create is
// queued) and checked against spec (VerifyCube) and returned; several are a CONFLICT
// error listing their ids, and nothing may be created or deleted until a person has looked.
func FindCreated(ctx context.Context, cloud Cloud, dcID string, spec ionos.CubeSpec) (*ionos.Server, error) {
	found, err := cloud.ServersNamed(ctx, dcID, spec.Name)
	if err != nil {
		return nil, err
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		srv, err := cloud.Server(ctx, dcID, found[0].ID)
		if IsNotFound(err) {
			srv, err = found[0], nil // listed, but its create is still queued: the listing is what there is
		}
		if err != nil {
			return nil, err
		}
		if err := VerifyCube(srv, spec); err != nil {
			return nil, err
		}
		return &srv, nil
	}
	ids := make([]string, len(found))
	for i, s := range found {
		ids[i] = s.ID
	}
	return nil, cubefleet.Errorf(cubefleet.CodeConflict, "%d servers are named %s (%s): nothing was created or deleted; delete the ones that should not exist by hand, then rerun",
		len(found), spec.Name, strings.Join(ids, ", "))
}

// VerifyCube checks that srv is the Cube spec describes: its name, type CUBE, its template,
// and a NIC on spec's LAN holding spec's private IP. Errors are CONFLICT, saying what
// differs.
func VerifyCube(srv ionos.Server, spec ionos.CubeSpec) error {
	var bad []string
	if srv.Name != spec.Name {
		bad = append(bad, fmt.Sprintf("name %q, not %q", srv.Name, spec.Name))
	}
	if srv.Type != "CUBE" {
		bad = append(bad, fmt.Sprintf("type %s, not CUBE", srv.Type))
	}
	if spec.TemplateID != "" && srv.TemplateID != spec.TemplateID {
		bad = append(bad, fmt.Sprintf("template %s, not %s", srv.TemplateID, spec.TemplateID))
	}
	if !HasIP(srv, spec.LANID, spec.PrivateIP) {
		bad = append(bad, fmt.Sprintf("no NIC on LAN %d with %s", spec.LANID, spec.PrivateIP))
	}
	if len(bad) > 0 {
		return cubefleet.Errorf(cubefleet.CodeConflict, "server %s is not the Cube this run created: %s; nothing was changed", srv.ID, strings.Join(bad, ", "))
	}
	return nil
}

// HasIP reports whether srv has a NIC on LAN lanID holding ip.
func HasIP(srv ionos.Server, lanID int, ip string) bool {
	return slices.ContainsFunc(srv.NICs, func(n ionos.NIC) bool { return n.LANID == lanID && slices.Contains(n.IPs, ip) })
}

// Wait is how the workflows wait for the cloud: Poll between reads, at most Budget in all
// (each wait has its own budget); Now and Sleep are the clock (nil: the wall clock);
// Progress, when set, receives one line per change seen.
type Wait struct {
	Poll     time.Duration
	Budget   time.Duration
	Now      func() time.Time
	Sleep    func(ctx context.Context, d time.Duration) error
	Progress func(line string)
}

func (w Wait) now() time.Time {
	if w.Now == nil {
		return time.Now()
	}
	return w.Now()
}

func (w Wait) sleep(ctx context.Context, d time.Duration) error {
	if w.Sleep != nil {
		return w.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (w Wait) say(format string, args ...any) {
	if w.Progress != nil {
		w.Progress(fmt.Sprintf(format, args...))
	}
}

// ErrRequestFailed is wrapped by the error of a wait whose request ended FAILED: IONOS
// rolled the write back.
var ErrRequestFailed = ionos.ErrRequestFailed

// Running waits until the create request requestID ("" when unknown, as after a resume that
// found the server by name) is DONE and server serverID is RUNNING and AVAILABLE, and returns
// it. A 404 on the server while its request is QUEUED or RUNNING is not an error. A request
// that ends FAILED is an error wrapping ErrRequestFailed. When the budget runs out it returns
// a DEADLINE_EXCEEDED error that says to rerun: the rerun waits on the same request and
// server.
func (w Wait) Running(ctx context.Context, cloud Cloud, dcID, serverID, requestID string) (ionos.Server, error) {
	deadline := w.now().Add(w.Budget)
	last := ""
	for {
		pending := false
		if requestID != "" {
			st, err := cloud.RequestStatus(ctx, requestID)
			if err != nil {
				return ionos.Server{}, err
			}
			switch st.Status {
			case "FAILED":
				return ionos.Server{}, &cubefleet.Error{Code: cubefleet.CodeConflict, Err: ErrRequestFailed,
					Message: fmt.Sprintf("IONOS request %s creating server %s FAILED: %s", requestID, serverID, st.Message)}
			case "DONE":
			default:
				pending = true
			}
			if s := "request " + st.Status; s != last {
				w.say("server %s: request %s %s", serverID, requestID, st.Status)
				last = s
			}
		}
		if !pending {
			srv, err := cloud.Server(ctx, dcID, serverID)
			switch {
			case err == nil && srv.VMState == "RUNNING" && srv.State == "AVAILABLE":
				return srv, nil
			case err == nil:
				if s := srv.VMState + "/" + srv.State; s != last {
					w.say("server %s: %s, %s", serverID, srv.VMState, srv.State)
					last = s
				}
			case !IsNotFound(err):
				return ionos.Server{}, err
			}
		}
		if !w.now().Before(deadline) {
			return ionos.Server{}, cubefleet.Errorf(cubefleet.CodeDeadlineExceeded,
				"server %s is not RUNNING after %s (request %s): rerun the command; it resumes waiting on the same request and server", serverID, w.Budget, orDash(requestID))
		}
		if err := w.sleep(ctx, w.Poll); err != nil {
			return ionos.Server{}, err
		}
	}
}

// Request waits until request id is DONE; FAILED is an error wrapping ErrRequestFailed, and
// a budget that runs out a DEADLINE_EXCEEDED error that says to rerun. An empty id (nothing
// was written) returns at once.
func (w Wait) Request(ctx context.Context, cloud Cloud, what, id string) error {
	if id == "" {
		return nil
	}
	deadline := w.now().Add(w.Budget)
	for {
		st, err := cloud.RequestStatus(ctx, id)
		if err != nil {
			return err
		}
		switch st.Status {
		case "DONE":
			return nil
		case "FAILED":
			return &cubefleet.Error{Code: cubefleet.CodeConflict, Err: ErrRequestFailed, Message: fmt.Sprintf("IONOS request %s (%s) FAILED: %s", id, what, st.Message)}
		}
		if !w.now().Before(deadline) {
			return cubefleet.Errorf(cubefleet.CodeDeadlineExceeded, "IONOS request %s (%s) is still %s after %s: rerun the command; it checks the result before writing again", id, what, st.Status, w.Budget)
		}
		if err := w.sleep(ctx, w.Poll); err != nil {
			return err
		}
	}
}

// AttachGroup attaches security group groupID to server serverID: a PUT of the union of the
// groups attached now and groupID, then a wait for its request. A group already attached
// is left alone (changed false, no write).
func AttachGroup(ctx context.Context, cloud Cloud, w Wait, dcID, serverID, groupID string) (changed bool, err error) {
	srv, err := cloud.Server(ctx, dcID, serverID)
	if err != nil {
		return false, err
	}
	if slices.Contains(srv.SecurityGroupIDs, groupID) {
		return false, nil
	}
	acc, err := cloud.SetServerSecurityGroups(ctx, dcID, serverID, append(slices.Clone(srv.SecurityGroupIDs), groupID))
	if err != nil {
		return false, err
	}
	return true, w.Request(ctx, cloud, "attach security group "+groupID+" to server "+serverID, acc.RequestID)
}

// Origin is one ALB target address, "ip:port".
func Origin(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }

// Origins lists targets as "ip:port", in their order.
func Origins(targets []ionos.Target) []string {
	out := make([]string, 0, len(targets))
	for _, t := range targets {
		out = append(out, Origin(t.IP, t.Port))
	}
	return out
}

// AddTarget makes t a target of group groupID (replacing a target of the same ip and port)
// and waits for the write; a group that already has exactly t is not written. It returns the
// group's targets as they were before.
func AddTarget(ctx context.Context, cloud Cloud, w Wait, groupID string, t ionos.Target) ([]ionos.Target, error) {
	before, acc, err := cloud.UpdateTargets(ctx, groupID, func(ts []ionos.Target) []ionos.Target {
		i := slices.IndexFunc(ts, func(x ionos.Target) bool { return x.IP == t.IP && x.Port == t.Port })
		if i >= 0 {
			ts[i] = t
			return ts
		}
		return append(ts, t)
	})
	if err != nil {
		return nil, err
	}
	return before, w.Request(ctx, cloud, "add "+Origin(t.IP, t.Port)+" to target group "+groupID, acc.RequestID)
}

// SetTargetWeight sets the weight of the target ip:port of group groupID (0: no new traffic
// reaches it) and waits for the write; a group without that target, or with that weight
// already, is not written.
func SetTargetWeight(ctx context.Context, cloud Cloud, w Wait, groupID, ip string, port, weight int) error {
	_, acc, err := cloud.UpdateTargets(ctx, groupID, func(ts []ionos.Target) []ionos.Target {
		for i := range ts {
			if ts[i].IP == ip && ts[i].Port == port {
				ts[i].Weight = weight
			}
		}
		return ts
	})
	if err != nil {
		return err
	}
	return w.Request(ctx, cloud, fmt.Sprintf("weight %d for %s in target group %s", weight, Origin(ip, port), groupID), acc.RequestID)
}

// RemoveTarget removes exactly the target ip:port from group groupID, leaving every other
// target as it is, waits for the write, and returns the group's targets after it. A group
// without that target is not written.
func RemoveTarget(ctx context.Context, cloud Cloud, w Wait, groupID, ip string, port int) ([]ionos.Target, error) {
	var after []ionos.Target
	_, acc, err := cloud.UpdateTargets(ctx, groupID, func(ts []ionos.Target) []ionos.Target {
		after = slices.DeleteFunc(ts, func(x ionos.Target) bool { return x.IP == ip && x.Port == port })
		return after
	})
	if err != nil {
		return nil, err
	}
	return after, w.Request(ctx, cloud, "remove "+Origin(ip, port)+" from target group "+groupID, acc.RequestID)
}

// DeleteCube deletes exactly server serverID (never by name), waits for the request, and
// confirms the server is gone (a GET answered 404). A server already gone is no error.
func DeleteCube(ctx context.Context, cloud Cloud, w Wait, dcID, serverID string) error {
	acc, err := cloud.DeleteServer(ctx, dcID, serverID)
	if err != nil {
		return err
	}
	if err := w.Request(ctx, cloud, "delete server "+serverID, acc.RequestID); err != nil {
		return err
	}
	if _, err := cloud.Server(ctx, dcID, serverID); !IsNotFound(err) {
		if err == nil {
			return cubefleet.Errorf(cubefleet.CodeConflict, "server %s still exists after its delete request %s was DONE: rerun to check again", serverID, orDash(acc.RequestID))
		}
		return err
	}
	return nil
}

// CubeBoot is what a new Cube's cloud-init needs to join the fleet: the control plane's URL
// and the pool's one-time JoinToken (a secret), the Cube's private NodeIP, the URL its
// cubefleet binary is downloaded from, extra agent settings (KEY=VALUE lines of the agent's
// env file, such as CUBE_S3_ENDPOINT) and the Cube's WireGuard private key (a secret; "" for
// none).
type CubeBoot struct {
	ControlPlane        string
	JoinToken           string
	NodeIP              string
	AgentBinaryURL      string
	AgentEnv            []string
	WireGuardPrivateKey string
}

// Where cloud-init puts the files of a new Cube (CubeUserData).
const (
	BootJoinTokenFile = "/etc/cubefleet/join.token"
	BootAgentEnvFile  = "/etc/cubefleet/agent.env"
	BootWireGuardKey  = "/etc/wireguard/cubefleet.key"
)

// CubeUserData is the cloud-init document (#cloud-config) of a new Cube: write_files puts the
// join token (0600), the agent's env file (0600: role compute, the control plane, the node
// IP, the join token file, then b.AgentEnv) and the WireGuard private key (0600), each
// base64-encoded; runcmd downloads cubefleet to /usr/local/bin and runs `cubefleet agent
// install`, which starts the agent. It carries secrets: never log it.
func CubeUserData(b CubeBoot) string {
	env := append([]string{"ONE_CLICK_DEPLOY_ROLE=compute", "CUBEFLEET_CONTROL_PLANE=" + b.ControlPlane,
		"CUBE_SANDBOX_NODE_IP=" + b.NodeIP, "CUBEFLEET_JOIN_TOKEN_FILE=" + BootJoinTokenFile}, b.AgentEnv...)
	files := [][2]string{{BootJoinTokenFile, b.JoinToken + "\n"}, {BootAgentEnvFile, strings.Join(env, "\n") + "\n"}}
	if b.WireGuardPrivateKey != "" {
		files = append(files, [2]string{BootWireGuardKey, b.WireGuardPrivateKey + "\n"})
	}
	var s strings.Builder
	s.WriteString("#cloud-config\nwrite_files:\n")
	for _, f := range files {
		fmt.Fprintf(&s, "  - path: %s\n    permissions: '0600'\n    encoding: b64\n    content: %s\n", f[0], base64.StdEncoding.EncodeToString([]byte(f[1])))
	}
	fmt.Fprintf(&s, "runcmd:\n  - [curl, -fsSL, -o, /usr/local/bin/cubefleet, %q]\n  - [chmod, '0755', /usr/local/bin/cubefleet]\n  - [/usr/local/bin/cubefleet, agent, install, --env-file, %s]\n",
		b.AgentBinaryURL, BootAgentEnvFile)
	return s.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
