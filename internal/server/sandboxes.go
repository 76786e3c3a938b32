package server

import (
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
)

// work is the work API the node routes serve: the sandboxes, or none.
func (s *Server) work() (nodehttp.Work, int64) {
	if s.sys.Sandboxes == nil {
		return nil, 0
	}
	return s.sys.Sandboxes, nodehttp.MaxEventBytesFor(s.sys.Sandboxes.ResultMaxBytes())
}

// Sandboxes returns the server's sandboxes (nil when the deployment runs none).
func (s *Server) Sandboxes() *sandboxes.Service { return s.sys.Sandboxes }
