package api

import (
	"context"
	"encoding/base64"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
)

// SandboxCreateInput is the input of sandboxes.create: the tenant's template (id or name), the
// command as argv (absent: a sandbox that idles until its timeout or a delete, running
// ["sleep","2147483647"]), env laid over the template's (secret://
// references are resolved only on the way to the sandbox), timeoutSeconds (0 to 604800, 0:
// none), terminationGraceSeconds (the time between SIGTERM and SIGKILL when it is stopped:
// deleted, timed out, evicted by a drain's deadline or agent down; 1 to 3600, absent: its
// template's, default 10), the sandbox's labels and the labels its node must carry (nodeSelector). With async the
// answer comes at once (state pending, or starting once placed); otherwise the create waits
// until the sandbox runs or ends, at most waitSeconds (default 30, at most 300), and answers
// it as it is then.
type SandboxCreateInput struct {
	TenantID       string            `json:"tenantId"`
	Template       string            `json:"template"`
	Command        []string          `json:"command,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	TimeoutSeconds int64             `json:"timeoutSeconds,omitempty"`
	// TerminationGraceSeconds: see above.
	TerminationGraceSeconds int64             `json:"terminationGraceSeconds,omitempty"`
	Labels                  map[string]string `json:"labels,omitempty"`
	NodeSelector            map[string]string `json:"nodeSelector,omitempty"`
	Async                   bool              `json:"async,omitempty"`
	WaitSeconds             int64             `json:"waitSeconds,omitempty"`
}

// TenantSandboxRef names one of a tenant's sandboxes (sbx_...).
type TenantSandboxRef struct {
	TenantID string `json:"tenantId"`
	ID       string `json:"id"`
}

// SandboxListInput is the input of sandboxes.list: state (pending, starting, running, exited,
// failed, killed, lost), node (a node id), template (id or name) narrow the list; warm lists
// the idle sandboxes of the tenant's warm pools instead; limit 1-1000 (default 100); cursor the
// previous page's nextCursor. Newest first.
type SandboxListInput struct {
	TenantID string `json:"tenantId"`
	State    string `json:"state,omitempty"`
	Node     string `json:"node,omitempty"`
	Template string `json:"template,omitempty"`
	Warm     bool   `json:"warm,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	Cursor   string `json:"cursor,omitempty"`
}

// SandboxList is a page of sandboxes, newest first; nextCursor is absent on the last page.
type SandboxList struct {
	Items      []sandboxes.Sandbox `json:"items"`
	NextCursor string              `json:"nextCursor,omitempty"`
}

// SandboxWaitInput is the input of sandboxes.wait: wait until the sandbox has ended (until
// "ended", the default) or runs or has ended (until "running"), at most timeoutSeconds (default
// 30, at most 300).
type SandboxWaitInput struct {
	TenantID       string `json:"tenantId"`
	ID             string `json:"id"`
	Until          string `json:"until,omitempty"`
	TimeoutSeconds int64  `json:"timeoutSeconds,omitempty"`
}

// SandboxWaitOutput is the sandbox as it was when the wait ended; done says whether it got
// where the wait was for (false: the timeout passed first).
type SandboxWaitOutput struct {
	sandboxes.Sandbox
	Done bool `json:"done"`
}

// SandboxLogsInput is the input of sandboxes.logs: encoding "text" (default; bytes that are
// not UTF-8 become U+FFFD) or "base64" (the exact bytes).
type SandboxLogsInput struct {
	TenantID string `json:"tenantId"`
	ID       string `json:"id"`
	Encoding string `json:"encoding,omitempty"`
}

// SandboxLogs is a sandbox's captured output: each stream at most --result-max-bytes and, when
// cut, the marker line "[cubefleet: output truncated after N bytes]". final is false while the
// sandbox has not ended: output reaches the control plane with the sandbox's end.
type SandboxLogs struct {
	ID              string          `json:"id"`
	State           sandboxes.State `json:"state"`
	Final           bool            `json:"final"`
	Encoding        string          `json:"encoding"`
	Stdout          string          `json:"stdout"`
	Stderr          string          `json:"stderr"`
	StdoutTruncated bool            `json:"stdoutTruncated,omitempty"`
	StderrTruncated bool            `json:"stderrTruncated,omitempty"`
	ExitCode        *int            `json:"exitCode,omitempty"`
}

// noSandboxes is the answer of a deployment without sandboxes (no Service: the vps-templates
// module is off).
var noSandboxes = cubefleet.Errorf(cubefleet.CodeUnsupported, "this deployment does not run sandboxes: they need the vps and vps-templates modules")

// waitBound turns seconds (0: def) into a wait, at most sandboxes.MaxWait; a negative or larger
// value is INVALID_INPUT naming path.
func waitBound(path string, seconds int64, def time.Duration) (time.Duration, error) {
	if seconds < 0 || seconds > int64(sandboxes.MaxWait/time.Second) {
		return 0, cubefleet.Invalid(path, "%s is 0 (the default, %s) to %d", path, def, int64(sandboxes.MaxWait/time.Second))
	}
	if seconds == 0 {
		return def, nil
	}
	return time.Duration(seconds) * time.Second, nil
}

// registerSandboxesMethods registers sandboxes.* (permission sandboxes:<verb> on
// tenant/<id>): create, get and wait (sandboxes:get), list, delete, logs.
func registerSandboxesMethods(r *Registry, d *deps) {
	svc := d.sandboxes
	r.Register(Method{
		Name: "sandboxes.create", Summary: "Create a sandbox of a template: placed on a node and run by its agent (async: answer at once; else wait until it runs or ends, up to waitSeconds)",
		Write: true, Composite: true, Permission: "sandboxes:create", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in SandboxCreateInput) (any, error) {
			if svc == nil {
				return nil, noSandboxes
			}
			wait, err := waitBound("waitSeconds", in.WaitSeconds, sandboxes.DefaultCreateWait)
			if err != nil {
				return nil, err
			}
			row := c.AuditEntry()
			s, err := svc.Create(ctx, sandboxes.CreateInput{TenantID: in.TenantID, Template: in.Template, Command: in.Command, Env: in.Env,
				TimeoutSeconds: in.TimeoutSeconds, TerminationGraceSeconds: in.TerminationGraceSeconds, Labels: in.Labels, NodeSelector: in.NodeSelector, CreatedBy: c.Principal.ID, Audit: &row})
			if err != nil || in.Async {
				return s, err
			}
			Idle(ctx) // the wait holds no work slot
			got, _, err := svc.Wait(ctx, in.TenantID, s.ID, true, wait)
			if err != nil {
				return s, nil // created: answer what the create made (a wait cut short loses nothing)
			}
			return got, nil
		}),
		Input: SandboxCreateInput{}, Output: sandboxes.Sandbox{},
	})
	r.Register(Method{
		Name: "sandboxes.get", Summary: "Get a sandbox: its state, every state it reached with when and why, and its result once it ended",
		Permission: "sandboxes:get", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in TenantSandboxRef) (any, error) {
			if svc == nil {
				return nil, noSandboxes
			}
			return svc.Get(ctx, in.TenantID, in.ID)
		}),
		Input: TenantSandboxRef{}, Output: sandboxes.Sandbox{},
	})
	r.Register(Method{
		Name: "sandboxes.list", Summary: "List a tenant's sandboxes, newest first (by state, node, template; warm: the idle sandboxes of its warm pools)",
		Permission: "sandboxes:list", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in SandboxListInput) (any, error) {
			if svc == nil {
				return nil, noSandboxes
			}
			items, next, err := svc.List(ctx, sandboxes.ListInput{TenantID: in.TenantID, State: sandboxes.State(in.State), Node: in.Node,
				Template: in.Template, Warm: in.Warm, Limit: in.Limit, Cursor: in.Cursor})
			if err != nil {
				return nil, err
			}
			if items == nil {
				items = []sandboxes.Sandbox{}
			}
			return SandboxList{Items: items, NextCursor: next}, nil
		}),
		Input: SandboxListInput{}, Output: SandboxList{},
	})
	r.Register(Method{
		Name: "sandboxes.wait", Summary: "Wait until a sandbox has ended (or, with until running, runs), up to timeoutSeconds; answers it as it is then, with done",
		Permission: "sandboxes:get", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in SandboxWaitInput) (any, error) {
			if svc == nil {
				return nil, noSandboxes
			}
			if in.Until != "" && in.Until != "ended" && in.Until != "running" {
				return nil, cubefleet.Invalid("until", "until is ended (the default) or running")
			}
			wait, err := waitBound("timeoutSeconds", in.TimeoutSeconds, sandboxes.DefaultCreateWait)
			if err != nil {
				return nil, err
			}
			Idle(ctx) // a long poll: it holds no work slot
			s, done, err := svc.Wait(ctx, in.TenantID, in.ID, in.Until == "running", wait)
			if err != nil {
				return nil, err
			}
			return SandboxWaitOutput{Sandbox: s, Done: done}, nil
		}),
		Input: SandboxWaitInput{}, Output: SandboxWaitOutput{},
	})
	r.Register(Method{
		Name: "sandboxes.delete", Summary: "Delete a sandbox: stop it if it runs (SIGTERM, then SIGKILL after its grace) and forget it, with its result",
		Write: true, Composite: true, Permission: "sandboxes:delete", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in TenantSandboxRef) (any, error) {
			if svc == nil {
				return nil, noSandboxes
			}
			row := c.AuditEntry()
			return svc.Delete(ctx, in.TenantID, in.ID, &row)
		}),
		Input: TenantSandboxRef{}, Output: sandboxes.Sandbox{},
	})
	r.Register(Method{
		Name: "sandboxes.logs", Summary: "Get a sandbox's output (stdout and stderr, each cut at --result-max-bytes with a marker) once it ended",
		Permission: "sandboxes:logs", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in SandboxLogsInput) (any, error) {
			if svc == nil {
				return nil, noSandboxes
			}
			if in.Encoding != "" && in.Encoding != "text" && in.Encoding != "base64" {
				return nil, cubefleet.Invalid("encoding", "encoding is text (the default) or base64")
			}
			s, out, err := svc.Logs(ctx, in.TenantID, in.ID)
			if err != nil {
				return nil, err
			}
			l := SandboxLogs{ID: s.ID, State: s.State, Final: out.Final, Encoding: "text", Stdout: string(out.Stdout), Stderr: string(out.Stderr),
				StdoutTruncated: out.StdoutTruncated, StderrTruncated: out.StderrTruncated}
			if s.Result != nil {
				l.ExitCode = s.Result.ExitCode
			}
			if in.Encoding == "base64" {
				l.Encoding, l.Stdout, l.Stderr = "base64", b64(out.Stdout), b64(out.Stderr)
			}
			return l, nil
		}),
		Input: SandboxLogsInput{}, Output: SandboxLogs{},
	})
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
