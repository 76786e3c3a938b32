package ionos

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	ionoscloud "github.com/ionos-cloud/sdk-go/v6"

	"github.com/cubefleet/cubefleet"
)

// The writes of the fleet workflows (roundtrip up|down, scale apply), each one HTTP request
// besides its retries, plus the reads they verify with. Each write returns the id of the
// asynchronous request IONOS accepted (follow it with RequestStatus); none waits. A POST is
// never repeated by the client (ErrOutcomeUnknown says to look the server up by name first).

// CubeSpec is the create body of one CUBE server as IONOS requires it (ionos-api.md §5): the
// template's UUID, one DAS volume of Image (an image UUID, or an alias such as
// "ubuntu:latest") whose size comes from the template, one NIC on LANID with PrivateIP, and
// UserData, the cloud-init document (plain text; it is sent base64-encoded). No cpuFamily,
// cores, ram or volume size is sent.
type CubeSpec struct {
	Name       string
	TemplateID string
	Image      string
	LANID      int
	PrivateIP  string
	UserData   string
}

// Accepted is a write IONOS accepted: the server it concerns (for a create, the new server's
// id) and RequestID, the asynchronous request that carries it out ("" when the answer named
// none).
type Accepted struct {
	ServerID  string `json:"serverId"`
	RequestID string `json:"requestId"`
}

// validate checks a CubeSpec before it is sent; errors are INVALID_INPUT naming the field.
func (s CubeSpec) validate() error {
	switch {
	case strings.TrimSpace(s.Name) == "" || len(s.Name) > 255:
		return cubefleet.Invalid("name", "a Cube's name must be 1 to 255 characters")
	case !IsUUID(s.TemplateID):
		return cubefleet.Invalid("templateUuid", "%q is not a template UUID", s.TemplateID)
	case strings.TrimSpace(s.Image) == "":
		return cubefleet.Invalid("image", "give an image UUID or an image alias such as ubuntu:latest")
	case s.LANID <= 0:
		return cubefleet.Invalid("lan", "LAN id %d: want a positive integer", s.LANID)
	}
	if a, err := netip.ParseAddr(s.PrivateIP); err != nil || !a.Is4() {
		return cubefleet.Invalid("ips", "%q is not an IPv4 address", s.PrivateIP)
	}
	return nil
}

// requestID is the request id in an accepted answer's Location
// (…/requests/{id}/status), "" when there is none.
func requestID(r *ionoscloud.APIResponse) string {
	if r == nil || r.Response == nil {
		return ""
	}
	loc := strings.TrimSuffix(r.Header.Get("Location"), "/status")
	if i := strings.LastIndex(loc, "/requests/"); i >= 0 {
		return loc[i+len("/requests/"):]
	}
	return ""
}

// CreateCube POSTs one CUBE server to data center dcID. Errors are Do's; one that wraps
// ErrOutcomeUnknown (a 5xx, a timeout) may have created the server: look it up by its name
// (ServersNamed) before anything else, never POST again blindly.
func (c *Client) CreateCube(ctx context.Context, dcID string, spec CubeSpec) (Accepted, error) {
	if err := spec.validate(); err != nil {
		return Accepted{}, err
	}
	vol := ionoscloud.VolumeProperties{Name: ionoscloud.PtrString(spec.Name + "-root"), Type: ionoscloud.PtrString("DAS"),
		UserData: ionoscloud.PtrString(base64.StdEncoding.EncodeToString([]byte(spec.UserData)))}
	if IsUUID(spec.Image) {
		vol.Image = ionoscloud.PtrString(spec.Image)
	} else {
		vol.ImageAlias = ionoscloud.PtrString(spec.Image)
	}
	ips := []string{spec.PrivateIP}
	nic := ionoscloud.Nic{Properties: &ionoscloud.NicProperties{Name: ionoscloud.PtrString("eth0"), Lan: ionoscloud.PtrInt32(int32(spec.LANID)),
		Ips: &ips, Dhcp: ionoscloud.PtrBool(true)}}
	body := ionoscloud.Server{
		Properties: &ionoscloud.ServerProperties{Name: ionoscloud.PtrString(spec.Name), Type: ionoscloud.PtrString("CUBE"),
			TemplateUuid: ionoscloud.PtrString(spec.TemplateID)},
		Entities: &ionoscloud.ServerEntities{
			Volumes: &ionoscloud.AttachedVolumes{Items: &[]ionoscloud.Volume{{Properties: &vol}}},
			Nics:    &ionoscloud.Nics{Items: &[]ionoscloud.Nic{nic}},
		},
	}
	var out Accepted
	_, err := c.Do(ctx, "create server "+spec.Name, func(ctx context.Context) (*ionoscloud.APIResponse, error) {
		s, r, err := c.api.ServersApi.DatacentersServersPost(ctx, dcID).Server(body).Execute()
		out = Accepted{ServerID: str(s.Id), RequestID: requestID(r)}
		return r, err
	})
	if err != nil {
		return Accepted{}, err
	}
	return out, nil
}

// ServersNamed lists the servers of data center dcID named exactly name (NICs and attached
// security groups included), in one request.
func (c *Client) ServersNamed(ctx context.Context, dcID, name string) ([]Server, error) {
	all, err := pages(ctx, c, "list servers", serverPageSize, func(ctx context.Context, off int32) ([]ionoscloud.Server, *ionoscloud.PaginationLinks, *ionoscloud.APIResponse, error) {
		l, r, err := c.api.ServersApi.DatacentersServersGet(ctx, dcID).Depth(3).Offset(off).Limit(serverPageSize).Execute()
		return ionoscloud.ToValueDefault(l.Items), l.Links, r, err
	})
	if err != nil {
		return nil, err
	}
	var out []Server
	for _, s := range all {
		if s.Properties != nil && str(s.Properties.Name) == name {
			out = append(out, convertServer(s))
		}
	}
	return out, nil
}

// Server reads server id of data center dcID with its NICs and attached security groups.
// Errors: NOT_FOUND (a *cubefleet.Error) when there is no such server, which is also the
// answer while the server's create request is QUEUED or RUNNING.
func (c *Client) Server(ctx context.Context, dcID, id string) (Server, error) {
	var out Server
	_, err := c.Do(ctx, "get server "+id, func(ctx context.Context) (*ionoscloud.APIResponse, error) {
		s, r, err := c.api.ServersApi.DatacentersServersFindById(ctx, dcID, id).Depth(3).Execute()
		out = convertServer(s)
		return r, err
	})
	return out, err
}

// RequestState is an asynchronous request's status: QUEUED, RUNNING, DONE or FAILED, and the
// API's message.
type RequestState struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// RequestStatus reads the status of request id (GET /requests/{id}/status).
func (c *Client) RequestStatus(ctx context.Context, id string) (RequestState, error) {
	var out RequestState
	_, err := c.Do(ctx, "request status "+id, func(ctx context.Context) (*ionoscloud.APIResponse, error) {
		s, r, err := c.api.RequestsApi.RequestsStatusGet(ctx, id).Execute()
		if s.Metadata != nil {
			out = RequestState{Status: str(s.Metadata.Status), Message: str(s.Metadata.Message)}
		}
		return r, err
	})
	return out, err
}

// SetServerSecurityGroups replaces the security groups attached to server id with ids (a PUT
// of the whole list: pass the union of what is attached and what should be).
func (c *Client) SetServerSecurityGroups(ctx context.Context, dcID, id string, ids []string) (Accepted, error) {
	list := slices.Clone(ids)
	var out Accepted
	_, err := c.Do(ctx, "attach security groups to server "+id, func(ctx context.Context) (*ionoscloud.APIResponse, error) {
		_, r, err := c.api.SecurityGroupsApi.DatacentersServersSecuritygroupsPut(ctx, dcID, id).Securitygroups(ionoscloud.ListOfIds{Ids: &list}).Execute()
		out = Accepted{ServerID: id, RequestID: requestID(r)}
		return r, err
	})
	return out, err
}

// TargetGroup reads target group id with its targets.
func (c *Client) TargetGroup(ctx context.Context, id string) (TargetGroup, error) {
	tg, err := c.targetGroup(ctx, id)
	return convertTargetGroup(tg), err
}

func (c *Client) targetGroup(ctx context.Context, id string) (ionoscloud.TargetGroup, error) {
	var tg ionoscloud.TargetGroup
	_, err := c.Do(ctx, "get target group "+id, func(ctx context.Context) (r *ionoscloud.APIResponse, err error) {
		tg, r, err = c.api.TargetGroupsApi.TargetgroupsFindByTargetGroupId(ctx, id).Depth(1).Execute()
		return r, err
	})
	return tg, err
}

// UpdateTargets reads target group id, passes its targets to edit and, when edit changes
// them, PUTs the group with every other property as read and the edited targets (IONOS
// replaces a group's targets whole). It returns the targets as they were before and the
// accepted write (RequestID "" when nothing changed). Two requests when something changes,
// one otherwise.
func (c *Client) UpdateTargets(ctx context.Context, id string, edit func([]Target) []Target) ([]Target, Accepted, error) {
	raw, err := c.targetGroup(ctx, id)
	if err != nil {
		return nil, Accepted{}, err
	}
	before := convertTargetGroup(raw).Targets
	after := edit(slices.Clone(before))
	if slices.Equal(before, after) {
		return before, Accepted{}, nil
	}
	if raw.Properties == nil {
		return nil, Accepted{}, cubefleet.Errorf(cubefleet.CodeInternal, "IONOS API: target group %s has no properties", id)
	}
	props := *raw.Properties
	targets := make([]ionoscloud.TargetGroupTarget, 0, len(after))
	for _, t := range after {
		targets = append(targets, ionoscloud.TargetGroupTarget{Ip: ionoscloud.PtrString(t.IP), Port: ionoscloud.PtrInt32(int32(t.Port)),
			Weight: ionoscloud.PtrInt32(int32(t.Weight)), HealthCheckEnabled: ionoscloud.PtrBool(t.HealthCheckEnabled),
			MaintenanceEnabled: ionoscloud.PtrBool(t.MaintenanceEnabled)})
	}
	props.Targets = &targets
	var out Accepted
	_, err = c.Do(ctx, "update target group "+id, func(ctx context.Context) (*ionoscloud.APIResponse, error) {
		_, r, err := c.api.TargetGroupsApi.TargetgroupsPut(ctx, id).TargetGroup(ionoscloud.TargetGroupPut{Properties: &props}).Execute()
		out = Accepted{RequestID: requestID(r)}
		return r, err
	})
	return before, out, err
}

// DeleteServer deletes exactly server id of data center dcID (never by name). A server that
// is already gone (404) is no error: RequestID is then "".
func (c *Client) DeleteServer(ctx context.Context, dcID, id string) (Accepted, error) {
	if !IsUUID(id) {
		return Accepted{}, cubefleet.Invalid("serverId", "%q is not a server UUID", id)
	}
	out := Accepted{ServerID: id}
	_, err := c.Do(ctx, "delete server "+id, func(ctx context.Context) (*ionoscloud.APIResponse, error) {
		r, err := c.api.ServersApi.DatacentersServersDelete(ctx, dcID, id).Execute()
		if r.SafeStatusCode() != http.StatusNotFound {
			out.RequestID = requestID(r)
		}
		return r, err
	})
	return out, err
}

// String is the write for people: "server S, request R".
func (a Accepted) String() string {
	return fmt.Sprintf("server %s, request %s", orDash(a.ServerID), orDash(a.RequestID))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
