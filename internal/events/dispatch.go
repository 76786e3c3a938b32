package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/cubefleet/cubefleet/internal/netguard"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
)

// Defaults of a Dispatcher.
const (
	DefaultPoll    = 200 * time.Millisecond
	DefaultTimeout = 10 * time.Second
	// DefaultConcurrency is one attempt in flight per subscription: its deliveries go out in
	// event order (see Dispatcher).
	DefaultConcurrency = 1
	// DefaultHorizon is how long a delivery is retried before it is dead-lettered.
	DefaultHorizon     = 24 * time.Hour
	DefaultBackoffBase = 5 * time.Second
	DefaultBackoffMax  = time.Hour
	// maxResponseBytes is how much of a receiver's answer is read (and dropped).
	maxResponseBytes = 64 << 10
	// claimSlack is how long past its timeout an attempt's claim lasts, so a replica that dies
	// mid-attempt hands the delivery to another within Timeout plus this.
	claimSlack = 30 * time.Second
)

// Dispatcher sends the outbox's deliveries: each POSTs its delivery's stored body, byte for
// byte, with the Standard Webhooks headers (webhook-id: the event's id, the same on every
// attempt; webhook-timestamp: the send time; webhook-signature: `v1,<base64 HMAC-SHA256 of
// "<id>.<timestamp>.<body>">` under each of the subscription's signing secrets). A 2xx answer
// delivers it; anything else (a redirect too: none is followed) is retried with exponential
// backoff and jitter until Horizon has passed since it was queued, then it is dead-lettered.
// Each subscription has at most Concurrency attempts in flight and each attempt at most
// Timeout, so a slow receiver delays only its own deliveries. A delivery is claimed in the
// database before it is sent, so with several replicas one attempts it at a time.
//
// Order: a subscription's due deliveries are claimed oldest event first (the time it was
// queued, then the delivery's id, made in event order), so with Concurrency 1 (the default)
// a receiver that answers every delivery with a 2xx within Timeout gets them in the order of
// the log. A delivery that fails waits for its retry while later ones go ahead (no head-of-line
// blocking), so after a failure the order is not kept; neither is it with Concurrency above 1.
// Receivers that need order sort by the payload's timestamp and event id.
type Dispatcher struct {
	DB  *store.DB
	Box *secrets.Box
	// Guard dials receivers: every connection's address is checked as it is made.
	Guard *netguard.Guard
	// Holder names this replica in claims.
	Holder string
	// Now is the clock (scheduling and the signatures' send time); nil means time.Now.
	Now func() time.Time
	Log *slog.Logger
	// Metrics, when set, counts attempts by outcome and their latency.
	Metrics *WebhookMetrics
	// Poll is how often Run looks for due deliveries (DefaultPoll when zero).
	Poll time.Duration
	// Timeout bounds one attempt: connect, send, answer (DefaultTimeout when zero).
	Timeout time.Duration
	// Concurrency is the attempts in flight per subscription (DefaultConcurrency when zero);
	// above 1 a subscription's deliveries may arrive out of order.
	Concurrency int
	// Horizon is how long a delivery is retried (DefaultHorizon when zero).
	Horizon time.Duration
	// BackoffBase and BackoffMax shape the retry delays: BackoffBase doubling per failed
	// attempt up to BackoffMax, each drawn between half and all of that (the jitter); a
	// Retry-After answer lengthens the delay up to BackoffMax.
	BackoffBase, BackoffMax time.Duration

	once   sync.Once
	client *http.Client
	mu     sync.Mutex
	busy   map[string]int // subscription id -> attempts in flight
	wg     sync.WaitGroup
	wake   chan struct{} // an attempt ended: its slot is free for the next due delivery
}

func (d *Dispatcher) init() {
	d.once.Do(func() {
		d.busy = map[string]int{}
		d.wake = make(chan struct{}, 1)
		d.client = &http.Client{
			Transport: &http.Transport{
				Proxy:                 nil, // a proxy would dial on our behalf, past the guard
				DialContext:           d.Guard.DialContext,
				ForceAttemptHTTP2:     true,
				MaxIdleConnsPerHost:   4,
				IdleConnTimeout:       90 * time.Second,
				TLSHandshakeTimeout:   10 * time.Second,
				ResponseHeaderTimeout: d.timeout(),
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	})
}

// Run sends due deliveries every Poll, and as soon as an attempt frees its slot, until ctx ends, then waits for the attempts in flight
// (which end with ctx; an attempt cut short is not counted and is retried, here or by another
// replica, once its claim lapses).
func (d *Dispatcher) Run(ctx context.Context) {
	d.init()
	t := time.NewTicker(d.poll())
	defer t.Stop()
	for {
		if _, err := d.dispatch(ctx); err != nil && ctx.Err() == nil {
			d.log().ErrorContext(ctx, "webhook dispatch", "err", err)
		}
		select {
		case <-ctx.Done():
			d.wg.Wait()
			return
		case <-t.C:
		case <-d.wake:
		}
	}
}

// DeliverDue sends every delivery due now (up to Concurrency per subscription) and waits for
// the attempts to end. It returns how many it attempted. Tests step an injected clock with it.
func (d *Dispatcher) DeliverDue(ctx context.Context) (int, error) {
	d.init()
	n, err := d.dispatch(ctx)
	d.wg.Wait()
	return n, err
}

// claimed is a delivery this replica holds.
type claimed struct {
	id, subID, eventID, body string
	attempts                 int
	createdAt, retryFrom     int64
}

// dispatch claims due deliveries for subscriptions with free slots and starts their attempts.
func (d *Dispatcher) dispatch(ctx context.Context) (int, error) {
	now := d.now().UnixMilli()
	rows, err := d.DB.QueryContext(ctx, `SELECT DISTINCT subscription_id FROM webhook_deliveries
		WHERE state = 'pending' AND next_attempt_at <= $1 AND claimed_until < $1 LIMIT 1000`, now)
	if err != nil {
		return 0, fmt.Errorf("due deliveries: %w", err)
	}
	var subs []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return 0, err
		}
		subs = append(subs, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	started := 0
	var errs []error
	for _, sub := range subs {
		d.mu.Lock()
		free := d.concurrency() - d.busy[sub]
		d.mu.Unlock()
		if free <= 0 {
			continue
		}
		cs, err := d.claim(ctx, sub, free, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, c := range cs {
			d.mu.Lock()
			d.busy[sub]++
			d.mu.Unlock()
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				defer func() {
					d.mu.Lock()
					if d.busy[sub]--; d.busy[sub] <= 0 {
						delete(d.busy, sub)
					}
					d.mu.Unlock()
					select {
					case d.wake <- struct{}{}:
					default:
					}
				}()
				d.attempt(ctx, c)
			}()
			started++
		}
	}
	return started, errors.Join(errs...)
}

// claim takes up to n due deliveries of subscription sub for this replica.
func (d *Dispatcher) claim(ctx context.Context, sub string, n int, now int64) ([]claimed, error) {
	lock := ""
	if d.DB.Dialect() == store.Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	until := now + (d.timeout() + claimSlack).Milliseconds()
	rows, err := d.DB.QueryContext(ctx, `UPDATE webhook_deliveries SET claimed_by = $1, claimed_until = $2
		WHERE id IN (SELECT id FROM webhook_deliveries WHERE subscription_id = $3 AND state = 'pending' AND next_attempt_at <= $4 AND claimed_until < $4
			ORDER BY next_attempt_at, id LIMIT $5`+lock+`)
		RETURNING id, subscription_id, event_id, body, attempts, created_at, retry_from`, d.Holder, until, sub, now, n)
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	defer rows.Close()
	var out []claimed
	for rows.Next() {
		var c claimed
		if err := rows.Scan(&c.id, &c.subID, &c.eventID, &c.body, &c.attempts, &c.createdAt, &c.retryFrom); err != nil {
			return nil, fmt.Errorf("claim deliveries: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// attempt sends c once and records the outcome.
func (d *Dispatcher) attempt(ctx context.Context, c claimed) {
	var target string
	err := d.DB.QueryRowContext(ctx, `SELECT url FROM webhook_subscriptions WHERE id = $1`, c.subID).Scan(&target)
	if err != nil {
		if ctx.Err() == nil {
			d.log().ErrorContext(ctx, "webhook delivery: load subscription", "delivery", c.id, "err", err)
		}
		return // deleted with its deliveries, or the database is away: the claim lapses
	}
	sent := d.now()
	status, retryAfter, sendErr := d.send(ctx, c, target, sent)
	if ctx.Err() != nil {
		d.release(c)
		return
	}
	if err := d.record(c, sent, status, retryAfter, sendErr); err != nil {
		d.log().Error("webhook delivery: record the outcome", "delivery", c.id, "err", err)
	}
}

// send POSTs c's body to target signed at sent; it returns the answer's status and
// Retry-After, or why there was none.
func (d *Dispatcher) send(ctx context.Context, c claimed, target string, sent time.Time) (int, time.Duration, error) {
	secrets, err := signingSecrets(ctx, d.DB, d.Box, c.subID, sent)
	if err != nil {
		return 0, 0, err
	}
	if len(secrets) == 0 {
		return 0, 0, errors.New("the subscription has no signing secret")
	}
	body := []byte(c.body)
	var sigs []string
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return 0, 0, errors.New("a signing secret does not decode")
		}
		sig, err := wh.Sign(c.eventID, sent, body)
		if err != nil {
			return 0, 0, err
		}
		sigs = append(sigs, sig)
	}
	actx, cancel := context.WithTimeout(ctx, d.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, 0, errors.New("the URL no longer parses")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "cubefleet-webhooks/1")
	req.Header.Set(standardwebhooks.HeaderWebhookID, c.eventID)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(sent.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, strings.Join(sigs, " "))
	start := time.Now()
	resp, err := d.client.Do(req)
	if d.Metrics != nil {
		d.Metrics.attemptTime.Observe(time.Since(start).Seconds())
	}
	if err != nil {
		return 0, 0, cause(err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes))
	resp.Body.Close()
	var retryAfter time.Duration
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		retryAfter = time.Duration(s) * time.Second
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return resp.StatusCode, retryAfter, fmt.Errorf("answered %d, a redirect, which is not followed: give the final URL", resp.StatusCode)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, retryAfter, fmt.Errorf("answered %d", resp.StatusCode)
	}
	return resp.StatusCode, 0, nil
}

// cause is err without the URL a *url.Error quotes (a URL's path may hold a token).
func cause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return errors.New("no answer within the timeout")
		}
		return ue.Err
	}
	return err
}

// record writes an attempt's outcome, if this replica still holds the claim.
func (d *Dispatcher) record(c claimed, sent time.Time, status int, retryAfter time.Duration, sendErr error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := d.now()
	at := now.UnixMilli()
	if sendErr == nil {
		_, err := d.DB.ExecContext(ctx, `UPDATE webhook_deliveries SET state = 'delivered', attempts = attempts + 1, last_attempt_at = $1, last_status = $2,
			last_error = '', done_at = $3, claimed_by = '', claimed_until = 0 WHERE id = $4 AND claimed_by = $5`,
			sent.UnixMilli(), status, at, c.id, d.Holder)
		if d.Metrics != nil {
			d.Metrics.outcomes.WithLabelValues("delivered").Inc()
			d.Metrics.latency.Observe(float64(at-c.createdAt) / 1000)
		}
		return err
	}
	msg := netguard.Redact(sendErr.Error()) // what is stored and shown never holds a password
	if r := []rune(msg); len(r) > 300 {
		msg = string(r[:299]) + "…"
	}
	attempts := c.attempts + 1
	if now.Sub(time.UnixMilli(c.retryFrom)) >= d.horizon() {
		d.log().Warn("webhook delivery dead-lettered", "delivery", c.id, "subscription", c.subID, "event", c.eventID, "attempts", attempts, "err", msg)
		_, err := d.DB.ExecContext(ctx, `UPDATE webhook_deliveries SET state = 'failed', attempts = $1, last_attempt_at = $2, last_status = $3,
			last_error = $4, done_at = $5, claimed_by = '', claimed_until = 0 WHERE id = $6 AND claimed_by = $7`,
			attempts, sent.UnixMilli(), status, msg, at, c.id, d.Holder)
		if d.Metrics != nil {
			d.Metrics.outcomes.WithLabelValues("dead_lettered").Inc()
		}
		return err
	}
	next := now.Add(max(d.backoff(attempts), min(retryAfter, d.backoffMax()))).UnixMilli()
	_, err := d.DB.ExecContext(ctx, `UPDATE webhook_deliveries SET attempts = $1, last_attempt_at = $2, last_status = $3, last_error = $4,
		next_attempt_at = $5, claimed_by = '', claimed_until = 0 WHERE id = $6 AND claimed_by = $7`,
		attempts, sent.UnixMilli(), status, msg, next, c.id, d.Holder)
	if d.Metrics != nil {
		d.Metrics.outcomes.WithLabelValues("retry").Inc()
	}
	return err
}

// release gives up c's claim without counting an attempt (the server is stopping).
func (d *Dispatcher) release(c claimed) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.DB.ExecContext(ctx, `UPDATE webhook_deliveries SET claimed_by = '', claimed_until = 0 WHERE id = $1 AND claimed_by = $2`, c.id, d.Holder)
}

// backoff is the delay after the attempts-th failed attempt: BackoffBase * 2^(attempts-1),
// at most BackoffMax, drawn between half and all of it.
func (d *Dispatcher) backoff(attempts int) time.Duration {
	base, limit := d.BackoffBase, d.backoffMax()
	if base <= 0 {
		base = DefaultBackoffBase
	}
	delay := base
	for i := 1; i < attempts && delay < limit; i++ {
		delay *= 2
	}
	delay = min(delay, limit)
	return delay/2 + rand.N(delay/2+1)
}

func (d *Dispatcher) backoffMax() time.Duration {
	if d.BackoffMax <= 0 {
		return DefaultBackoffMax
	}
	return d.BackoffMax
}

func (d *Dispatcher) horizon() time.Duration {
	if d.Horizon <= 0 {
		return DefaultHorizon
	}
	return d.Horizon
}

func (d *Dispatcher) timeout() time.Duration {
	if d.Timeout <= 0 {
		return DefaultTimeout
	}
	return d.Timeout
}

func (d *Dispatcher) poll() time.Duration {
	if d.Poll <= 0 {
		return DefaultPoll
	}
	return d.Poll
}

func (d *Dispatcher) concurrency() int {
	if d.Concurrency <= 0 {
		return DefaultConcurrency
	}
	return d.Concurrency
}

func (d *Dispatcher) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Dispatcher) log() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.New(slog.DiscardHandler)
}
