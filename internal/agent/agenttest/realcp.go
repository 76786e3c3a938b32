package agenttest

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/server"
)

// RealCP is a real control plane (`cubefleet server --dev`) on 127.0.0.1, with its node-agent
// routes on their own --internal-listen (Server.InternalURL), and an API client holding its
// administrator key.
type RealCP struct {
	Server *server.Server
	API    *client.Client
	Pool   string // the ID of a pool to make join tokens for
}

// StartRealCP starts a control plane with cfg (its Listen, InternalListen, DataDir and Dev are
// filled in) until the test ends, and creates a site and a pool. caFile is the CA the client
// trusts when cfg serves TLS ("" for none).
func StartRealCP(t testing.TB, cfg server.Config, caFile string) *RealCP {
	t.Helper()
	cfg.Listen, cfg.InternalListen, cfg.DataDir, cfg.Dev = "127.0.0.1:0", "127.0.0.1:0", filepath.Join(t.TempDir(), "data"), true
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	api, err := client.Connect(client.Options{URL: srv.URL(), TokenFile: srv.AdminTokenPath(), CAFile: caFile, Getenv: func(string) string { return "" }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cp := &RealCP{Server: srv, API: api}
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
		if err := api.Call(ctx, c.method, c.in, c.out); err != nil {
			t.Fatalf("%s: %v", c.method, err)
		}
	}
	cp.Pool = pool.ID
	return cp
}

// JoinToken makes a join token for Pool bound to ip (nodes.joinTokens.create) and returns it.
func (cp *RealCP) JoinToken(t testing.TB, ip string) string {
	t.Helper()
	var join struct{ Token string }
	if err := cp.API.Call(context.Background(), "nodes.joinTokens.create", map[string]any{"pool": cp.Pool, "ip": ip}, &join); err != nil {
		t.Fatalf("nodes.joinTokens.create: %v", err)
	}
	return join.Token
}
