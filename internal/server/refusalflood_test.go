package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/store"
)

// TestNodeRefusalFlood runs a real `cubefleet server` process that accepts no node-agent call
// without credentials, and floods its node-agent status route from 8 peers (127.0.0.2 to
// 127.0.0.9), one connection each, every call naming another node in the path. Before the
// fix each call wrote an audit row (6,700 rows a second); now each peer costs one row at once
// and one a minute with the count, and the rows still count every refused call, the last
// window's written when the server stops. CUBEFLEET_REFUSAL_FLOOD=70s floods for longer and
// reports the rows written a minute.
func TestNodeRefusalFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a server process")
	}
	const peers = 8
	flood := envDuration(t, "CUBEFLEET_REFUSAL_FLOOD", 3*time.Second)
	p := startServerProc(t, buildCubefleet(t), "", "--node-agent-allow-unauthenticated", "")
	body, err := os.ReadFile(filepath.Join("..", "nodes", "nodetest", "testdata", "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	var refused, other atomic.Int64
	ctx, stop := context.WithTimeout(t.Context(), flood)
	defer stop()
	var wg sync.WaitGroup
	for i := range peers {
		local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))}
		client := &http.Client{Transport: &http.Transport{
			DialContext:         (&net.Dialer{LocalAddr: local}).DialContext,
			MaxIdleConnsPerHost: 1,
		}}
		wg.Go(func() {
			defer client.CloseIdleConnections()
			for n := 0; ctx.Err() == nil; n++ {
				path := nodeapi.StatusPath(fmt.Sprintf("10.%d.%d.%d", i, n/256%256, n%256))
				req, _ := http.NewRequestWithContext(ctx, "POST", p.url+path, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					continue // the flood's end
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusUnauthorized {
					refused.Add(1)
				} else {
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	p.stop()
	if other.Load() != 0 || refused.Load() == 0 {
		t.Fatalf("%d calls refused 401, %d answered otherwise; want all refused", refused.Load(), other.Load())
	}
	db, err := store.Open(t.Context(), filepath.Join(p.dataDir, "cubefleet.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, calls int64
	if err := db.QueryRow(`SELECT count(*), coalesce(sum(call_count), 0) FROM audit_log WHERE method LIKE 'node-agent%' AND outcome <> 'ok'`).Scan(&rows, &calls); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d peers for %s: %d calls refused (%.0f a second), %d audit rows (%.1f a minute) counting %d calls",
		peers, flood, refused.Load(), float64(refused.Load())/flood.Seconds(), rows, float64(rows)/flood.Minutes(), calls)
	if most := int64(peers * (int(flood/time.Minute) + 2)); rows > most {
		t.Errorf("%d audit rows for %d refused calls from %d peers in %s, want at most %d (one per peer at once, then one a minute)", rows, refused.Load(), peers, flood, most)
	}
	// A peer's last call may be refused (and counted) after the flood's end cut its answer off.
	if calls < refused.Load() || calls > refused.Load()+peers {
		t.Errorf("the audit rows count %d refused calls, want %d (up to %d more cut off at the end)", calls, refused.Load(), peers)
	}
}
