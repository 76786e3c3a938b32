package server

import "github.com/cubefleet/cubefleet/internal/sandboxes"

// Sandboxes returns the server's sandboxes (nil when the deployment runs none).
func (s *Server) Sandboxes() *sandboxes.Service { return s.sys.Sandboxes }
