package server

import (
	"context"

	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
)

// newNodeRoutes builds the node-agent and internal nodes routes on the registry (API keys on
// the internal nodes routes are checked by iam, and audit rows carry the request id); they
// serve the sandboxes' work API when the deployment runs sandboxes.
func (s *Server) newNodeRoutes() error {
	work, maxEvent := s.work()
	routes, err := nodehttp.New(nodehttp.Config{
		Work:                 work,
		MaxEventBytes:        maxEvent,
		Registry:             s.sys.Nodes,
		Audit:                s.sys.NodeStore,
		DB:                   s.db,
		AllowUnauthenticated: s.cfg.NodeAgentAllowUnauthenticated,
		Authenticate: func(ctx context.Context, token string) (*iam.Principal, error) {
			return s.authenticateKey(ctx, token, "internal-nodes", "")
		},
		RequestID: RequestID,
		Now:       s.cfg.Now,
		Log:       s.log,
	})
	if err != nil {
		return err
	}
	s.nodeHTTP = routes
	return nil
}
