package sandboxes

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// liveOutput holds the output of running sandboxes as their agents send it (the work API's
// output route), for sandboxes.logs with follow: each stream at most --result-max-bytes and the
// cut marker, so its memory is bounded by twice that per running sandbox of this replica's
// agents. A sandbox's entry goes with its end (its stored result then answers). Safe for
// concurrent use. An entry no chunk reached for liveIdle is dropped when another sandbox's first
// chunk arrives (a sandbox whose end another replica recorded).
type liveOutput struct {
	mu    sync.Mutex
	boxes map[string]*liveBox
}

// liveIdle is how long a live entry stays without a chunk before it may be dropped: 10 minutes.
// A sandbox quiet for longer that writes again starts a new entry from that chunk.
const liveIdle = 10 * time.Minute

// liveBox is the output of one running sandbox; touched is when its last chunk arrived, in Unix
// milliseconds.
type liveBox struct {
	node           string
	stdout, stderr liveStream
	touched        int64
}

// liveStream is the part of an output stream this replica holds: data from byte offset base.
// base is above 0 when this replica heard the sandbox's agent only from the middle of its run.
type liveStream struct {
	base int64
	data []byte
}

// add appends chunk, which starts at byte offset off of the stream, keeping at most limit
// bytes: a chunk already held changes nothing, and one past a gap replaces what is held.
func (l *liveStream) add(off int64, chunk []byte, limit int64) bool {
	end := l.base + int64(len(l.data))
	switch {
	case off+int64(len(chunk)) <= end && off >= l.base:
		return false // held already
	case off > end || off < l.base:
		l.base, l.data = off, nil
		end = off
	}
	chunk = chunk[end-off:]
	room := limit - int64(len(l.data))
	if room <= 0 {
		return false
	}
	if int64(len(chunk)) > room {
		chunk = chunk[:room]
	}
	l.data = append(l.data, chunk...)
	return len(chunk) > 0
}

// from returns the bytes from offset off (from base when off is before it) and the offset
// they start at.
func (l *liveStream) from(off int64) ([]byte, int64) {
	if off < l.base {
		off = l.base
	}
	end := l.base + int64(len(l.data))
	if off >= end {
		return nil, off
	}
	return append([]byte(nil), l.data[off-l.base:]...), off
}

// drop forgets sandbox id's live output.
func (lo *liveOutput) drop(id string) {
	lo.mu.Lock()
	delete(lo.boxes, id)
	lo.mu.Unlock()
}

// SandboxOutput implements the work API's output route: it keeps a chunk of the output of
// running sandbox id on node for sandboxes.logs (Follow). Errors: NOT_FOUND when the control
// plane runs no such sandbox on node, or it has ended (its final event carries its result).
func (s *Service) SandboxOutput(ctx context.Context, node, id string, out *nodeapi.SandboxOutput) error {
	limit := s.cfg.ResultMaxBytes + int64(nodeapi.MaxTruncationMarkerLen)
	s.live.mu.Lock()
	b := s.live.boxes[id]
	s.live.mu.Unlock()
	if b == nil {
		r, err := load(ctx, s.db, id)
		if err != nil {
			return err
		}
		if r == nil || r.NodeID != node || r.State.Final() {
			return cubefleet.Errorf(cubefleet.CodeNotFound, "node %s runs no sandbox %s of this control plane", node, id)
		}
		s.live.mu.Lock()
		if s.live.boxes == nil {
			s.live.boxes = map[string]*liveBox{}
		}
		if b = s.live.boxes[id]; b == nil {
			for other, ob := range s.live.boxes {
				if s.now()-ob.touched > liveIdle.Milliseconds() {
					delete(s.live.boxes, other)
				}
			}
			b = &liveBox{node: node}
			s.live.boxes[id] = b
		}
		s.live.mu.Unlock()
	}
	if b.node != node {
		return cubefleet.Errorf(cubefleet.CodeNotFound, "node %s runs no sandbox %s of this control plane", node, id)
	}
	s.live.mu.Lock()
	b.touched = s.now()
	changed := b.stdout.add(out.StdoutOffset, out.Stdout, limit)
	changed = b.stderr.add(out.StderrOffset, out.Stderr, limit) || changed
	s.live.mu.Unlock()
	if changed {
		s.hub.changed(id)
	}
	return nil
}

// Offsets are byte offsets in a sandbox's stdout and stderr: where sandboxes.logs resumes.
type Offsets struct {
	Stdout, Stderr int64
}

// Follow returns the output of tenant's sandbox id from offsets from: the stored result once it
// ended, else what its agent sent so far. With wait above 0 and nothing new from from while the
// sandbox runs, it waits up to wait (at most MaxWait) for more or for its end (but not after
// EndWaits). Output's StdoutOffset and StderrOffset say where the returned bytes start (later
// than asked when this replica holds only a later part). Errors: NOT_FOUND, INVALID_INPUT for
// a negative offset, or ctx's.
func (s *Service) Follow(ctx context.Context, tenant, id string, from Offsets, wait time.Duration) (Sandbox, Output, error) {
	if from.Stdout < 0 {
		return Sandbox{}, Output{}, cubefleet.Invalid("stdoutOffset", "stdoutOffset is a byte offset: 0 or more")
	}
	if from.Stderr < 0 {
		return Sandbox{}, Output{}, cubefleet.Invalid("stderrOffset", "stderrOffset is a byte offset: 0 or more")
	}
	deadline := time.NewTimer(min(max(wait, 0), MaxWait))
	defer deadline.Stop()
	poll := time.NewTicker(500 * time.Millisecond) // a change on another replica
	defer poll.Stop()
	for {
		woken, cancel := s.hub.watchSandbox(id)
		sbx, out, err := s.output(ctx, tenant, id, from)
		if err != nil || out.Final || len(out.Stdout) > 0 || len(out.Stderr) > 0 || wait <= 0 {
			cancel()
			return sbx, out, err
		}
		select {
		case <-woken:
		case <-poll.C:
		case <-deadline.C:
			cancel()
			return sbx, out, nil
		case <-s.hub.ending:
			cancel()
			return sbx, out, nil
		case <-ctx.Done():
			cancel()
			return Sandbox{}, Output{}, ctx.Err()
		}
		cancel()
	}
}

// output is Follow's answer without waiting.
func (s *Service) output(ctx context.Context, tenant, id string, from Offsets) (Sandbox, Output, error) {
	r, err := s.visible(ctx, tenant, id)
	if err != nil {
		return Sandbox{}, Output{}, err
	}
	out := Output{StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated, Final: r.State.Final(), Stdout: []byte{}, Stderr: []byte{}}
	if !out.Final {
		s.live.mu.Lock()
		if b := s.live.boxes[r.ID]; b != nil {
			out.Stdout, out.StdoutOffset = b.stdout.from(from.Stdout)
			out.Stderr, out.StderrOffset = b.stderr.from(from.Stderr)
		} else {
			out.StdoutOffset, out.StderrOffset = from.Stdout, from.Stderr
		}
		s.live.mu.Unlock()
		return r.view(), out, nil
	}
	s.live.drop(r.ID) // ended, maybe recorded by another replica
	if r.StdoutBytes > 0 || r.StderrBytes > 0 {
		err := s.db.QueryRowContext(ctx, `SELECT stdout, stderr FROM sandboxes_output WHERE sandbox_id = $1`, r.ID).Scan(&out.Stdout, &out.Stderr)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return Sandbox{}, Output{}, fmt.Errorf("read the output of %s: %w", id, err)
		}
	}
	out.Stdout, out.StdoutOffset = tail(out.Stdout, from.Stdout)
	out.Stderr, out.StderrOffset = tail(out.Stderr, from.Stderr)
	return r.view(), out, nil
}

// tail returns b from offset off (empty past its end) and the offset it starts at.
func tail(b []byte, off int64) ([]byte, int64) {
	if off >= int64(len(b)) {
		return []byte{}, off
	}
	return b[off:], off
}
