package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// OutputEvery is how often the agent looks for new output of its running sandboxes and sends
// it to the control plane (the work API's output route): 100 ms.
const OutputEvery = 100 * time.Millisecond

// streamed is what the control plane accepted of one sandbox's output streams, in bytes.
type streamed struct{ stdout, stderr int64 }

// streamOutput sends, every OutputEvery until ctx is done, the output the node's running
// sandboxes wrote since it last looked (as their driver captured it: the first OutputLimitBytes
// of each stream and the cut marker), in chunks of at most nodeapi.MaxOutputChunk per stream.
// It reads one sandbox's output at a time, so its memory is bounded by one sandbox's captured
// output. A chunk the control plane does not accept is sent again at the next look; a sandbox's
// final event carries its whole output all the same, so live output is best effort.
func (a *Agent) streamOutput(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-a.registered:
	}
	sent := map[string]*streamed{}
	tick := time.NewTicker(OutputEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if a.run.drv == nil {
			continue
		}
		live := map[string]bool{}
		for _, id := range a.run.live() {
			live[id] = true
			s := sent[id]
			if s == nil {
				s = &streamed{}
				sent[id] = s
			}
			if err := a.sendOutput(ctx, id, s); err != nil && ctx.Err() == nil {
				a.log.Debug("live output not accepted; sent again at the next look", "sandbox", id, "error", err.Error())
			}
		}
		for id := range sent {
			if !live[id] {
				delete(sent, id)
			}
		}
	}
}

// sendOutput sends what sandbox id wrote past s, chunk by chunk, and moves s on as the control
// plane accepts them.
func (a *Agent) sendOutput(ctx context.Context, id string, s *streamed) error {
	out, err := a.run.drv.Output(ctx, id)
	if err != nil {
		return err
	}
	for int64(len(out.Stdout)) > s.stdout || int64(len(out.Stderr)) > s.stderr {
		chunk := nodeapi.SandboxOutput{StdoutOffset: s.stdout, StderrOffset: s.stderr,
			Stdout: part(out.Stdout, s.stdout), Stderr: part(out.Stderr, s.stderr)}
		if err := a.postOutput(ctx, id, &chunk); statusCode(err) == http.StatusNotFound {
			s.stdout, s.stderr = int64(len(out.Stdout)), int64(len(out.Stderr)) // not the control plane's to show
			return nil
		} else if err != nil {
			return err
		}
		s.stdout += int64(len(chunk.Stdout))
		s.stderr += int64(len(chunk.Stderr))
	}
	return nil
}

// part returns at most nodeapi.MaxOutputChunk bytes of b from offset off.
func part(b []byte, off int64) []byte {
	if off >= int64(len(b)) {
		return nil
	}
	b = b[off:]
	return b[:min(len(b), nodeapi.MaxOutputChunk)]
}

// postOutput sends one chunk and returns nil once the control plane accepted it with a valid
// proof.
func (a *Agent) postOutput(ctx context.Context, id string, chunk *nodeapi.SandboxOutput) error {
	token, isCredential := a.credential()
	if !isCredential {
		return errNoCredential
	}
	data, err := json.Marshal(chunk)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, EventTimeout)
	defer cancel()
	ans, err := a.wire.exchange(cctx, nodeapi.SandboxOutputPath(a.cfg.NodeID(), id), token, "", data, true, maxResponse)
	if err != nil {
		return err
	}
	return a.verify(token, ans)
}
