// Package nodeapi is the Cube Sandbox node-agent contract, written once: the routes a node calls
// and that readers of the node list call (with the two legacy prefixes), the request bodies
// (RegisterRequest, StatusRequest) with their decoders and the rules a body must follow, the
// answers (NodeSnapshot, SchedulerNode, the legacy `ret` envelope, the CubeOps error body), the
// label rules and the token prefixes (docs/nodes.md: "Wire contract with `cubefleet agent`",
// "Node-agent API" and "Internal nodes API").
//
// `cubefleet agent` (internal/agent) sends what this package declares; the node registry
// (internal/nodes and its packages) and the node simulator (internal/nodes/nodesim) receive and
// answer it. The package holds the contract only: no registry state, no HTTP server. The work
// API between the control plane and the agent joins it when sandboxes land.
package nodeapi

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cubefleet/cubefleet"
)

// The prefixes the node-agent routes are mounted under (docs/nodes.md, "Node-agent API"):
// AgentPrefix is the current one; CubeOps' transient one and CubeMaster's original one are served
// as aliases.
const (
	// AgentPrefix is where a current Cubelet and `cubefleet agent` call (CubeOps' AgentHandler).
	AgentPrefix = "/internal/v1/node-agent"
	// LegacyAgentPrefix is the transient prefix of CubeOps and Cubelet at 22d702b.
	LegacyAgentPrefix = "/internal/node-agent/v1"
	// MetaAgentPrefix is CubeMaster's original prefix (before CubeOps existed).
	MetaAgentPrefix = "/internal/meta"
	// NodesPrefix is the internal nodes API (docs/nodes.md, "Internal nodes API"): GET lists
	// SchedulerNode values.
	NodesPrefix = "/internal/v1/nodes"
)

// CubeMaster's surface (docs/nodes.md, "CubeMaster's routes", the one-click quickcheck's
// control-plane checks): its health route, and its node listing under MetaAgentPrefix, both in the
// `ret` envelope.
const (
	// CubeMasterHealthPath is GET: {"ret":{"ret_code":200,"ret_msg":"ok"}} while the control
	// plane can place sandboxes (the store answers), else 503.
	CubeMasterHealthPath = "/notify/health"
	// MetaNodesPath is GET: {"ret":{...},"data":[NodeSnapshot...]} sorted by node id;
	// MetaNodesPath + RouteNode is GET of one node, {"ret":{...},"data":NodeSnapshot}, 404 in
	// the envelope when unknown. (MetaAgentPrefix also carries the legacy node-agent routes.)
	MetaNodesPath = MetaAgentPrefix + "/nodes"
	// DefaultCubeMasterPort is CubeMaster's port (docs/nodes.md, "CubeMaster's routes": <ip>:8089),
	// where the one-click scripts look for it.
	DefaultCubeMasterPort = 8089
)

// AgentPrefixes lists every prefix the node-agent routes are served under, AgentPrefix first.
var AgentPrefixes = []string{AgentPrefix, LegacyAgentPrefix, MetaAgentPrefix}

// The node-agent routes relative to an agent prefix, as http.ServeMux patterns: the
// {node_id} wildcard is the node's id (docs/nodes.md, "Node-agent API").
const (
	// RouteReadyz is GET: the `ret` envelope, 200 while the control plane can take nodes.
	RouteReadyz = "/readyz"
	// RouteRegister is POST with a RegisterRequest: 200 with a RegisterResponse.
	RouteRegister = "/nodes/register"
	// RouteStatus is POST with a StatusRequest: 200 with a NodeSnapshot, 404 for a node that
	// is not registered.
	RouteStatus = "/nodes/{node_id}/status"
)

// The internal nodes routes relative to NodesPrefix, as http.ServeMux patterns (docs/nodes.md,
// "Internal nodes API"); {key...} is a label key, which may hold a slash (kubernetes.io/arch).
const (
	// RouteNode is GET (one SchedulerNode) and DELETE (the node, with ?force=true to skip the
	// sandbox checks) of one node.
	RouteNode = "/{node_id}"
	// RouteIsolation is PUT (cordon, optional IsolationRequest body) and DELETE (uncordon).
	RouteIsolation = "/{node_id}/isolation"
	// RouteLabels is PUT with a LabelsRequest: the labels are merged into the node's.
	RouteLabels = "/{node_id}/labels"
	// RouteLabel is DELETE of one label.
	RouteLabel = "/{node_id}/labels/{key...}"
)

// The paths a node calls, under AgentPrefix.
const (
	// PathReadyz is GET RouteReadyz under AgentPrefix.
	PathReadyz = AgentPrefix + RouteReadyz
	// PathRegister is POST RouteRegister under AgentPrefix.
	PathRegister = AgentPrefix + RouteRegister
)

// StatusPath is the path of node nodeID's status route (POST RouteStatus under AgentPrefix).
func StatusPath(nodeID string) string { return StatusPathUnder(AgentPrefix, nodeID) }

// StatusPathUnder is the path of node nodeID's status route under prefix, one of
// AgentPrefixes.
func StatusPathUnder(prefix, nodeID string) string { return prefix + "/nodes/" + nodeID + "/status" }

// NodePath is the path of one node on the internal nodes API: GET answers its SchedulerNode,
// DELETE deletes it.
func NodePath(nodeID string) string { return NodesPrefix + "/" + nodeID }

// IsolationPath is the path of node nodeID's isolation (PUT cordons, DELETE uncordons).
func IsolationPath(nodeID string) string { return NodePath(nodeID) + "/isolation" }

// LabelsPath is the path of node nodeID's labels (PUT merges a LabelsRequest).
func LabelsPath(nodeID string) string { return NodePath(nodeID) + "/labels" }

// LabelPath is the path of node nodeID's label key (DELETE removes it).
func LabelPath(nodeID, key string) string { return LabelsPath(nodeID) + "/" + key }

// Token prefixes: the credentials a node sends as `Authorization: Bearer <token>` (docs/nodes.md,
// "Auth"). Secret scanners find leaked tokens by them; the control plane stores only their
// SHA-256. A call without the header is a stock Cubelet's, accepted only from the networks the
// operator allows.
const (
	// JoinTokenPrefix starts a join token: single-use by default, short-lived, bound to an
	// address; it registers a new node once.
	JoinTokenPrefix = "cfj_"
	// CredentialPrefix starts a node credential: issued once, in the answer to a registration
	// with a join token (RegisterResponse.NodeCredential); the node's agent sends it on every
	// call from then on.
	CredentialPrefix = "cfn_"
)

// InstanceType is what every Cubelet and `cubefleet agent` report as instance_type (docs/nodes.md,
// "Node-agent API").
const InstanceType = "cubebox"

// Ret is the legacy CubeMaster envelope's `ret` object (docs/nodes.md, "Node-agent API"): RetCode
// 200 means success. RetCode is a pointer so that a reader can tell an envelope without a code
// (which Cubelet's rule accepts) from one with a code other than 200 (which it refuses).
type Ret struct {
	RetCode *int   `json:"ret_code"`
	RetMsg  string `json:"ret_msg"`
}

// RetReply is an answer in the legacy envelope: readyz answers
// {"ret":{"ret_code":200,"ret_msg":"ok"}} while the control plane can take nodes.
type RetReply struct {
	Ret Ret `json:"ret"`
}

// NewRetReply returns the envelope with code and msg.
func NewRetReply(code int, msg string) RetReply {
	return RetReply{Ret: Ret{RetCode: &code, RetMsg: msg}}
}

// DecodeReply applies Cubelet's acceptance rule to the body of a 2xx answer (docs/nodes.md,
// "Node-agent API"): it must decode as a JSON object, and a `ret` object in it with a ret_code must
// carry 200. It returns the object's members. Errors say which rule the body broke.
func DecodeReply(body []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, errors.New("the reply is not a JSON object")
	}
	if r, ok := m["ret"]; ok {
		var ret Ret
		if err := json.Unmarshal(r, &ret); err == nil && ret.RetCode != nil && *ret.RetCode != 200 {
			return nil, fmt.Errorf("ret_code %d: %s", *ret.RetCode, ret.RetMsg)
		}
	}
	return m, nil
}

// ErrorBody is the body of every error answer of the node-agent and internal nodes routes: CubeOps'
// {"error":"<message>"} (handler/common.go@4765fcd, docs/nodes.md, "Node-agent API") plus
// cubefleet's error code, e.g. {"error":"node 10.0.0.7 not found","code":"NOT_FOUND"}. The status
// is cubefleet.HTTPStatus(Code), except CodeSandboxCheckFailed's 502.
type ErrorBody struct {
	Error string         `json:"error"`
	Code  cubefleet.Code `json:"code,omitempty"`
}

// CodeSandboxCheckFailed is the code of the internal delete route's one answer outside
// cubefleet.HTTPStatus: 502, as upstream answers ErrSandboxCheckFailed (docs/nodes.md, "Internal
// nodes API"), when a node that is not Ready is deleted without force=true (its sandbox count
// cannot be trusted). The public API (nodes.delete) answers the same refusal 409 CONFLICT.
const CodeSandboxCheckFailed cubefleet.Code = "SANDBOX_CHECK_FAILED"

// IsolationRequest is the optional body of PUT RouteIsolation (docs/nodes.md, "Internal nodes
// API"): Detail says why, at most MaxDetailRunes runes without control characters (CheckText).
type IsolationRequest struct {
	Detail string `json:"detail"`
}

// LabelsRequest is the body of PUT RouteLabels (docs/nodes.md, "Internal nodes API"): Labels are
// merged into the node's; the reserved label is refused (403), the merged set must pass CheckLabels
// (400).
type LabelsRequest struct {
	Labels map[string]string `json:"labels"`
}

// MetaNodes is the answer of GET MetaNodesPath: the envelope and every node's NodeSnapshot.
type MetaNodes struct {
	Ret  Ret            `json:"ret"`
	Data []NodeSnapshot `json:"data"`
}

// MetaNode is the answer of GET MetaNodesPath + RouteNode: the envelope and the node's
// NodeSnapshot.
type MetaNode struct {
	Ret  Ret          `json:"ret"`
	Data NodeSnapshot `json:"data"`
}
