// Package servertest runs real control planes for tests: `cubefleet server` in the test's own
// process on 127.0.0.1, serving until the test ends, and a --dev control plane with a pool and an
// administrator's API client for tests of nodes and agents. Only _test.go files import it.
package servertest

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/server"
)

// Start starts a control plane with cfg and serves it until the test ends. An empty
// cfg.Listen is 127.0.0.1:0 and an empty cfg.DataDir a fresh directory of the test's; log nil
// discards the server's log. A failing server.New fails the test; so does an error of Serve,
// at the end.
func Start(tb testing.TB, cfg server.Config, log *slog.Logger) *server.Server {
	tb.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join(tb.TempDir(), "data")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, log)
	if err != nil {
		cancel()
		tb.Fatalf("server.New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return srv
}

// ControlPlane is a --dev control plane with its node-agent routes on their own
// --internal-listen (Server.InternalURL), an API client holding its administrator key, and a
// pool to make join tokens for.
type ControlPlane struct {
	Server *server.Server
	API    *client.Client
	Pool   string // the id of a pool (vps-host, on a shared site in eu-central)
}

// StartControlPlane starts a --dev control plane with cfg (its Listen, InternalListen,
// DataDir and Dev are set here) until the test ends, and creates a site and a pool. caFile is
// the CA the client trusts when cfg serves TLS ("" for none).
func StartControlPlane(tb testing.TB, cfg server.Config, caFile string) *ControlPlane {
	tb.Helper()
	cfg.Listen, cfg.InternalListen, cfg.DataDir, cfg.Dev = "127.0.0.1:0", "127.0.0.1:0", filepath.Join(tb.TempDir(), "data"), true
	srv := Start(tb, cfg, nil)
	api, err := client.Connect(client.Options{URL: srv.URL(), TokenFile: srv.AdminTokenPath(), CAFile: caFile, Getenv: func(string) string { return "" }}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	cp := &ControlPlane{Server: srv, API: api}
	var site, pool struct{ ID string }
	// Inputs point at the outputs before them: they are encoded when their call runs.
	for _, c := range []struct {
		method string
		in     map[string]any
		out    any
	}{
		{"compute.sites.create", map[string]any{"tenantId": "root", "kind": "shared", "region": "eu-central"}, &site},
		{"compute.pools.create", map[string]any{"tenantId": "root", "siteId": &site.ID, "class": "vps-host"}, &pool},
	} {
		if err := api.Call(context.Background(), c.method, c.in, c.out); err != nil {
			tb.Fatalf("%s: %v", c.method, err)
		}
	}
	cp.Pool = pool.ID
	return cp
}

// JoinToken makes a join token for Pool bound to ip (nodes.joinTokens.create) and returns it.
func (cp *ControlPlane) JoinToken(tb testing.TB, ip string) string {
	tb.Helper()
	var join struct{ Token string }
	if err := cp.API.Call(context.Background(), "nodes.joinTokens.create", map[string]any{"pool": cp.Pool, "ip": ip}, &join); err != nil {
		tb.Fatalf("nodes.joinTokens.create: %v", err)
	}
	return join.Token
}
