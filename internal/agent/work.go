package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// The work loop (docs/agent.md, "The work loop"): the agent holds a long poll on the control
// plane's work route (nodeapi.RouteWork), carries out what it is given, and sends every state a
// sandbox reaches to the event route (nodeapi.RouteSandboxEvent) from its outbox. Every answer
// must carry the control plane's proof (nodeapi.ProofHeader) over the request's fresh nonce:
// an answer without a valid one is dropped and logged, never acted on.

// Timing of the work API.
const (
	// WorkWait is how long the control plane may hold a work request without work
	// (WorkRequest.WaitMS).
	WorkWait = 25 * time.Second
	// WorkTimeout is the HTTP timeout of a work request: longer than WorkWait, so that a held
	// request is answered before the agent gives up on it.
	WorkTimeout = WorkWait + 10*time.Second
	// EventTimeout is the HTTP timeout of a sandbox event (which may carry up to twice 64 MiB
	// of output).
	EventTimeout = time.Minute
	// noWorkAPIRetry is how long the agent waits before it asks again a control plane that has
	// no work route (HTTP 404 to it while status reports are accepted) or refuses it (403).
	noWorkAPIRetry = 30 * time.Second
)

// maxWorkAnswer caps how much of a work answer the agent reads: the specs of many sandboxes
// with their environments.
const maxWorkAnswer = 64 << 20

// errNoCredential means the agent has no node credential, which the work API requires.
var errNoCredential = errors.New("the work API needs the node credential, and this node registered without one (a stock Cubelet's mode): it takes no sandboxes")

// workLoop polls for work until ctx is done (always nil: the status loop, which gets the same
// 404 or 401 when the node is unknown or revoked, registers again or stops the agent). A 404,
// 401 (which a control plane without the work API may answer too) or 403 (a node without its
// credential) is retried every noWorkAPIRetry; other failures with a backoff from
// RegisterBackoffMin to RegisterBackoffMax.
func (a *Agent) workLoop(ctx context.Context) error {
	backoff := RegisterBackoffMin
	var lastErr string
	for {
		req := nodeapi.WorkRequest{Running: a.run.live(), Done: a.run.doneIDs(), InProgress: a.run.inProgress(), WaitMS: int(WorkWait / time.Millisecond), Draining: a.run.isDraining()}
		pctx, interrupt := context.WithCancel(ctx)
		a.mu.Lock()
		a.interruptPoll = interrupt
		a.mu.Unlock()
		resp, err := a.pollWork(pctx, &req)
		a.mu.Lock()
		a.interruptPoll = nil
		a.mu.Unlock()
		interrupted := pctx.Err() != nil
		interrupt()
		wait := time.Duration(0)
		switch code := statusCode(err); {
		case err != nil && interrupted && ctx.Err() == nil:
			continue // the node's drain changed: ask again at once, saying so
		case err == nil:
			a.run.acknowledge(req.Done)
			if lastErr != "" {
				a.log.Info("work requests succeed again", "node_id", a.cfg.NodeID())
				lastErr = ""
			}
			backoff = RegisterBackoffMin
			if a.run.dispatch(resp.Assignments) == 0 && len(resp.Assignments) > 0 {
				// Only assignments in progress (a control plane that does not know
				// InProgress): ask again once one is done (or after a second), not at once.
				select {
				case <-ctx.Done():
					return nil
				case <-a.run.completed:
				case <-time.After(time.Second):
				}
			}
			continue
		case ctx.Err() != nil:
			return nil
		case code == http.StatusNotFound || code == http.StatusUnauthorized:
			// The node is unknown (404) or its credential revoked (401): the status reports
			// get the same answer and register again (which restarts this loop) or stop the
			// agent. Or the control plane has no work route, and answers so.
			err = fmt.Errorf("%w (the control plane does not know this node or its credential, which the status reports find too, or it has no work API: it is older than this agent, and this node takes no sandboxes from it)", err)
			wait = noWorkAPIRetry
		case code == http.StatusForbidden || errors.Is(err, errNoCredential):
			wait = noWorkAPIRetry
		case errors.Is(err, nodeapi.ErrBadProof):
			a.log.Warn("dropped a work answer that carries no valid control-plane proof: nothing of it is carried out", "node_id", a.cfg.NodeID(), "error", err.Error())
			lastErr = err.Error()
		}
		if wait == 0 {
			wait = backoff
			backoff = min(2*backoff, RegisterBackoffMax)
		}
		if msg := err.Error(); msg != lastErr {
			a.log.Warn("work request failed; retrying", "node_id", a.cfg.NodeID(), "retry_in", wait.String(), "error", msg)
			lastErr = msg
		}
		if sleepCtx(ctx, wait) != nil {
			return nil
		}
	}
}

// interruptWork ends the work request the control plane holds, so that the next one, sent at
// once, tells what changed (the node's drain). An assignment the cut answer carried is offered
// again.
func (a *Agent) interruptWork() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.interruptPoll != nil {
		a.interruptPoll()
	}
}

// pollWork makes one work request and returns the proven answer.
func (a *Agent) pollWork(ctx context.Context, req *nodeapi.WorkRequest) (*nodeapi.WorkResponse, error) {
	token, isCredential := a.credential()
	if !isCredential {
		return nil, errNoCredential
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, WorkTimeout)
	defer cancel()
	ans, err := a.wire.exchange(cctx, nodeapi.WorkPath(a.cfg.NodeID()), token, "", data, true, maxWorkAnswer)
	if err != nil {
		return nil, err
	}
	if err := a.verify(token, ans); err != nil {
		return nil, err
	}
	var resp nodeapi.WorkResponse
	if err := json.Unmarshal(ans.body, &resp); err != nil {
		return nil, &StatusError{Endpoint: ans.endpoint, Code: ans.code, Message: "the answer is not a work response: " + err.Error()}
	}
	return &resp, nil
}

// verify checks the control plane's proof on ans, made with the node credential token.
func (a *Agent) verify(token Secret, ans *answer) error {
	err := nodeapi.VerifyProof(nodeapi.CredentialKey(token.Reveal()), ans.nonce, a.cfg.NodeID(), ans.body, ans.header.Get(nodeapi.ProofHeader))
	if err != nil {
		return fmt.Errorf("%s: %w", ans.endpoint, err)
	}
	return nil
}

// postEvent sends p, with the sandbox's captured output when it is a final event of a sandbox
// the driver holds, and returns nil once the control plane accepted it with a valid proof.
func (a *Agent) postEvent(ctx context.Context, p *pendingEvent) error {
	token, isCredential := a.credential()
	if !isCredential {
		return errNoCredential
	}
	ev := p.Event
	if p.Output && a.run.drv != nil {
		if out, err := a.run.drv.Output(ctx, p.SandboxID); err == nil {
			ev.Stdout, ev.Stderr, ev.StdoutTruncated, ev.StderrTruncated = out.Stdout, out.Stderr, out.StdoutTruncated, out.StderrTruncated
		}
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, EventTimeout)
	defer cancel()
	ans, err := a.wire.exchange(cctx, nodeapi.SandboxEventPath(a.cfg.NodeID(), p.SandboxID), token, "", data, true, maxResponse)
	var se *StatusError
	if errors.As(err, &se) && se.answer != nil && refusedForGood[se.Code] && a.verify(token, se.answer) == nil {
		return &refusedEvent{err}
	}
	if err != nil {
		return err
	}
	return a.verify(token, ans)
}

// refusedForGood are the statuses of a proven answer that refuse an event for good: the control
// plane runs no such sandbox on this node (404), or the event breaks its rules (400, 413, 422)
// or its state (409). Sending it again would not change the answer: it is dropped.
var refusedForGood = map[int]bool{http.StatusBadRequest: true, http.StatusNotFound: true, http.StatusConflict: true,
	http.StatusRequestEntityTooLarge: true, http.StatusUnprocessableEntity: true}

// refusedEvent is an event the control plane refused for good, in a proven answer.
type refusedEvent struct{ error }

func (e *refusedEvent) Unwrap() error { return e.error }

// maxEventsInFlight bounds the events on their way to the control plane at once, each of
// another sandbox (a final event carries up to twice Spec.OutputLimitBytes of output).
const maxEventsInFlight = 4

// sentEvent is the outcome of one event's post.
type sentEvent struct {
	p   *pendingEvent
	err error
}

// sendEvents sends the outbox's events until ctx is done: those of one sandbox one after the
// other, oldest first, each until the control plane accepts it, or refuses it for good in a
// proven answer (refusedForGood: it is dropped and logged); those of different sandboxes at the
// same time (up to maxEventsInFlight), so that a sandbox's start is not held up behind the
// output of another's end. An event that fails otherwise holds back the later ones of its
// sandbox only; a control plane that cannot be reached (or does not prove its answers) holds
// back all. Both are retried with a backoff from RegisterBackoffMin to RegisterBackoffMax. A
// failure is logged when it changes.
func (a *Agent) sendEvents(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-a.registered:
	}
	backoff := RegisterBackoffMin
	var lastErr string
	results := make(chan sentEvent)
	sending := map[string]bool{} // sandboxes with an event on its way
	held := map[string]bool{}    // sandboxes whose event failed, until the retry
	allHeld := false             // the control plane is not there: nothing goes until the retry
	var retry <-chan time.Time   // the retry of the failed events, nil when none failed
	defer func() {
		for range sending { // the posts end with ctx
			<-results
		}
	}()
	for {
		if !allHeld {
			for _, p := range a.run.box.queued() {
				if len(sending) >= maxEventsInFlight {
					break
				}
				if sending[p.SandboxID] || held[p.SandboxID] {
					continue
				}
				sending[p.SandboxID] = true
				go func() { results <- sentEvent{p, a.postEvent(ctx, p)} }()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-a.run.box.wake:
		case <-retry:
			retry, allHeld = nil, false
			clear(held)
		case res := <-results:
			p, err := res.p, res.err
			delete(sending, p.SandboxID)
			if err != nil && ctx.Err() != nil {
				return
			}
			var refused *refusedEvent
			if errors.As(err, &refused) {
				a.log.Warn("the control plane refused a sandbox event for good: it is dropped", "sandbox", p.SandboxID, "state", p.Event.State, "error", err.Error())
				err = nil
			}
			if err == nil {
				// Recorded as accepted before it leaves the outbox: in between, the event is
				// still queued, so the sandbox's watcher cannot queue it a second time.
				a.run.sent(p)
				if err := a.run.box.done(p); err != nil {
					a.log.Error("cannot remove a sent sandbox event from the state directory: it is sent again after a restart", "sandbox", p.SandboxID, "error", err.Error())
				}
				if retry == nil && lastErr != "" {
					a.log.Info("sandbox events are accepted again", "node_id", a.cfg.NodeID())
					lastErr = ""
				}
				if retry == nil {
					backoff = RegisterBackoffMin
				}
				continue
			}
			held[p.SandboxID] = true
			if msg := err.Error(); msg != lastErr {
				a.log.Warn("a sandbox event was not accepted; retrying", "sandbox", p.SandboxID, "state", p.Event.State, "retry_in", backoff.String(), "error", msg)
				lastErr = msg
			}
			if code := statusCode(err); code == 0 || code >= 500 || code == http.StatusUnauthorized {
				allHeld = true // the control plane is not there (or not the one): the rest waits too
			}
			if retry == nil {
				retry = time.After(backoff)
				backoff = min(2*backoff, RegisterBackoffMax)
			}
		}
	}
}
