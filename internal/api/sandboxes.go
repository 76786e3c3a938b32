package api

import (
	"context"
	"encoding/base64"
	"time"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
)

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
	r.Register(Method{Name: "sandboxes.create", Composite: true, Handle: Typed(d.sandboxesCreate)})
	r.Register(Method{Name: "sandboxes.get", Handle: Typed(d.sandboxesGet)})
	r.Register(Method{Name: "sandboxes.list", Handle: Typed(d.sandboxesList)})
	r.Register(Method{Name: "sandboxes.wait", Handle: Typed(d.sandboxesWait)})
	r.Register(Method{Name: "sandboxes.delete", Composite: true, Handle: Typed(d.sandboxesDelete)})
	r.Register(Method{Name: "sandboxes.logs", Handle: Typed(d.sandboxesLogs)})
}

// sandboxAnswer is a sandbox as the contract shows it.
func sandboxAnswer(s sandboxes.Sandbox, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return sandboxFrom(s), nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// sandboxesCreate is the handler of sandboxes.create.
func (d *deps) sandboxesCreate(ctx context.Context, c *Call, in contract.SandboxCreateInput) (any, error) {
	if d.sandboxes == nil {
		return nil, noSandboxes
	}
	wait, err := waitBound("waitSeconds", in.WaitSeconds, sandboxes.DefaultCreateWait)
	if err != nil {
		return nil, err
	}
	row := c.AuditEntry()
	s, err := d.sandboxes.Create(ctx, sandboxes.CreateInput{TenantID: in.TenantID, Template: in.Template, Command: in.Command, Env: in.Env,
		TimeoutSeconds: in.TimeoutSeconds, TerminationGraceSeconds: in.TerminationGraceSeconds, Labels: in.Labels, NodeSelector: in.NodeSelector, CreatedBy: c.Principal.ID, Audit: &row})
	if err != nil {
		return nil, err
	}
	if in.Async {
		return sandboxFrom(s), nil
	}
	Idle(ctx) // the wait holds no work slot
	got, _, err := d.sandboxes.Wait(ctx, in.TenantID, s.ID, true, wait)
	if err != nil {
		return sandboxFrom(s), nil // created: answer what the create made (a wait cut short loses nothing)
	}
	return sandboxFrom(got), nil
}

// sandboxesGet is the handler of sandboxes.get.
func (d *deps) sandboxesGet(ctx context.Context, c *Call, in contract.TenantSandboxRef) (any, error) {
	if d.sandboxes == nil {
		return nil, noSandboxes
	}
	return sandboxAnswer(d.sandboxes.Get(ctx, in.TenantID, in.ID))
}

// sandboxesList is the handler of sandboxes.list.
func (d *deps) sandboxesList(ctx context.Context, c *Call, in contract.SandboxListInput) (any, error) {
	if d.sandboxes == nil {
		return nil, noSandboxes
	}
	items, next, err := d.sandboxes.List(ctx, sandboxes.ListInput{TenantID: in.TenantID, State: sandboxes.State(in.State), Node: in.Node,
		Template: in.Template, Warm: in.Warm, Limit: in.Limit, Cursor: in.Cursor})
	if err != nil {
		return nil, err
	}
	if items == nil {
		items = []sandboxes.Sandbox{}
	}
	return contract.SandboxList{Items: sliceOf(items, sandboxFrom), NextCursor: next}, nil
}

// sandboxesWait is the handler of sandboxes.wait.
func (d *deps) sandboxesWait(ctx context.Context, c *Call, in contract.SandboxWaitInput) (any, error) {
	if d.sandboxes == nil {
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
	s, done, err := d.sandboxes.Wait(ctx, in.TenantID, in.ID, in.Until == "running", wait)
	if err != nil {
		return nil, err
	}
	return contract.SandboxWaitOutput{Sandbox: sandboxFrom(s), Done: done}, nil
}

// sandboxesDelete is the handler of sandboxes.delete.
func (d *deps) sandboxesDelete(ctx context.Context, c *Call, in contract.TenantSandboxRef) (any, error) {
	if d.sandboxes == nil {
		return nil, noSandboxes
	}
	row := c.AuditEntry()
	return sandboxAnswer(d.sandboxes.Delete(ctx, in.TenantID, in.ID, &row))
}

// sandboxesLogs is the handler of sandboxes.logs.
func (d *deps) sandboxesLogs(ctx context.Context, c *Call, in contract.SandboxLogsInput) (any, error) {
	if d.sandboxes == nil {
		return nil, noSandboxes
	}
	if in.Encoding != "" && in.Encoding != "text" && in.Encoding != "base64" {
		return nil, cubefleet.Invalid("encoding", "encoding is text (the default) or base64")
	}
	wait, err := waitBound("timeoutSeconds", in.TimeoutSeconds, 30*time.Second)
	if err != nil {
		return nil, err
	}
	if !in.Follow {
		wait = 0
	}
	s, out, err := d.sandboxes.Follow(ctx, in.TenantID, in.ID, sandboxes.Offsets{Stdout: in.StdoutOffset, Stderr: in.StderrOffset}, wait)
	if err != nil {
		return nil, err
	}
	l := contract.SandboxLogs{ID: s.ID, State: contract.SandboxState(s.State), Final: out.Final, Encoding: "text", Stdout: string(out.Stdout), Stderr: string(out.Stderr),
		StdoutTruncated: out.StdoutTruncated, StderrTruncated: out.StderrTruncated,
		NextStdoutOffset: out.StdoutOffset + int64(len(out.Stdout)), NextStderrOffset: out.StderrOffset + int64(len(out.Stderr))}
	if s.Result != nil {
		l.ExitCode = s.Result.ExitCode
	}
	if in.Encoding == "base64" {
		l.Encoding, l.Stdout, l.Stderr = "base64", b64(out.Stdout), b64(out.Stderr)
	}
	return l, nil
}
