package nodehttp_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/nodes/nodestore"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestBroadAllowlistWarns: a registry started with --node-agent-allow-unauthenticated holding a
// network wider than a /8 (0.0.0.0/0, ::/0, 0.0.0.0/7) logs a WARN naming those networks and
// what a caller there can do; /8 and narrower networks start quietly.
func TestBroadAllowlistWarns(t *testing.T) {
	storetest.Each(t, nodetest.Modules, func(t *testing.T, db *store.DB) {
		for _, c := range []struct {
			allow string
			want  string // the networks the warning names; "" for none
		}{
			{"0.0.0.0/0", "0.0.0.0/0"},
			{"::/0", "::/0"},
			{"10.0.0.0/24,0.0.0.0/7", "0.0.0.0/7"},
			{"0.0.0.0/0,::/0", "0.0.0.0/0,::/0"},
			{"10.0.0.0/8", ""},
			{"10.0.0.0/24,fd00::/64", ""},
			{"", ""},
		} {
			allow, err := nodehttp.ParseCIDRs(c.allow)
			if err != nil {
				t.Fatal(err)
			}
			st, err := nodestore.New(nodestore.Config{DB: db})
			if err != nil {
				t.Fatal(err)
			}
			reg, err := nodes.New(context.Background(), nodes.Config{Store: st})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if _, err := nodehttp.New(nodehttp.Config{Registry: reg, Audit: st, DB: db, AllowUnauthenticated: allow,
				Log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}); err != nil {
				t.Fatal(err)
			}
			log := buf.String()
			warned := strings.Contains(log, "level=WARN") && strings.Contains(log, "--node-agent-allow-unauthenticated allows calls without credentials")
			switch {
			case c.want == "" && warned:
				t.Errorf("%q: warned:\n%s", c.allow, log)
			case c.want != "" && (!warned || !strings.Contains(log, "networks="+c.want) || !strings.Contains(log, "register nodes") ||
				!strings.Contains(log, "delete any node")):
				t.Errorf("%q: want a WARN naming %s and what it allows, got:\n%s", c.allow, c.want, log)
			}
		}
	})
}

// TestFormatCIDRs renders an allowlist as the flag takes it.
func TestFormatCIDRs(t *testing.T) {
	if got := nodehttp.FormatCIDRs(nil); got != "none" {
		t.Errorf("FormatCIDRs(nil) = %q", got)
	}
	ps := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("fd00::/64")}
	if got := nodehttp.FormatCIDRs(ps); got != "10.0.0.0/24,fd00::/64" {
		t.Errorf("FormatCIDRs = %q", got)
	}
}
