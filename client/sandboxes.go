package client

import (
	"context"
	"iter"

	"github.com/cubefleet/cubefleet/api"
)

// SandboxesService is sandboxes.* (sandboxes:<verb> on tenant/<tenantId>).
type SandboxesService struct{ c *Client }

// Create runs sandboxes.create: with in.Async the sandbox at once, else as it is once it runs
// or ended, or when in.WaitSeconds passed. Past the tenant's quota it is RESOURCE_EXHAUSTED
// with a Retry-After (RetryAfter).
func (s *SandboxesService) Create(ctx context.Context, in api.SandboxCreateInput) (api.Sandbox, error) {
	return call[api.Sandbox](ctx, s.c, "sandboxes.create", in)
}

// Get runs sandboxes.get.
func (s *SandboxesService) Get(ctx context.Context, in api.TenantSandboxRef) (api.Sandbox, error) {
	return call[api.Sandbox](ctx, s.c, "sandboxes.get", in)
}

// List runs sandboxes.list: one page, newest first.
func (s *SandboxesService) List(ctx context.Context, in api.SandboxListInput) (api.SandboxList, error) {
	return call[api.SandboxList](ctx, s.c, "sandboxes.list", in)
}

// All iterates over every sandbox List finds from in (in.Cursor is ignored).
func (s *SandboxesService) All(ctx context.Context, in api.SandboxListInput) iter.Seq2[api.Sandbox, error] {
	return pages(ctx, func(ctx context.Context, cursor string) ([]api.Sandbox, string, error) {
		in.Cursor = cursor
		p, err := s.List(ctx, in)
		return p.Items, p.NextCursor, err
	})
}

// Wait runs sandboxes.wait, one long poll of at most in.TimeoutSeconds (default 30, at most
// 300): the sandbox as it is when it got where in.Until says (Done) or the timeout passed.
// Ending ctx ends the poll at once with ctx's error.
func (s *SandboxesService) Wait(ctx context.Context, in api.SandboxWaitInput) (api.SandboxWaitOutput, error) {
	return call[api.SandboxWaitOutput](ctx, s.c, "sandboxes.wait", in)
}

// WaitEnded polls sandboxes.wait until the sandbox has ended and answers it then, or ctx's
// error when ctx ends first (bound the wait with a context deadline).
func (s *SandboxesService) WaitEnded(ctx context.Context, tenantID, id string) (api.Sandbox, error) {
	for {
		out, err := s.Wait(ctx, api.SandboxWaitInput{TenantID: tenantID, ID: id, Until: "ended", TimeoutSeconds: 300})
		if err != nil {
			return api.Sandbox{}, err
		}
		if out.Done {
			return out.Sandbox, nil
		}
		if err := ctx.Err(); err != nil {
			return api.Sandbox{}, err
		}
	}
}

// Delete runs sandboxes.delete: stop it if it runs and forget it.
func (s *SandboxesService) Delete(ctx context.Context, in api.TenantSandboxRef) (api.Sandbox, error) {
	return call[api.Sandbox](ctx, s.c, "sandboxes.delete", in)
}

// Logs runs sandboxes.logs: the sandbox's output from in's offsets (with in.Follow, a long poll
// that waits for more while it runs).
func (s *SandboxesService) Logs(ctx context.Context, in api.SandboxLogsInput) (api.SandboxLogs, error) {
	return call[api.SandboxLogs](ctx, s.c, "sandboxes.logs", in)
}
