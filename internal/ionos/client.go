// Package ionos is cubefleet's IONOS Cloud API v6 client, built on the official SDK
// (github.com/ionos-cloud/sdk-go/v6): token files checked before use, an HTTP client that
// refuses redirects, retries with exponential backoff and jitter that honour Retry-After,
// POSTs never repeated blindly, DELETE 404 taken as done, asynchronous writes followed to DONE
// or FAILED, a per-call timeout, and the inventory of one data center in at most ten HTTP
// requests. docs/ionos.md says what it reads and how it treats the token.
package ionos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	ionoscloud "github.com/ionos-cloud/sdk-go/v6"

	"github.com/cubefleet/cubefleet"
)

// Defaults of Config; each applies when its field is zero.
const (
	DefaultAPIURL        = "https://api.ionos.com" // the SDK appends /cloudapi/v6
	DefaultTimeout       = 60 * time.Second        // one call, all its attempts included
	DefaultMaxAttempts   = 5                       // attempts of one HTTP request
	DefaultBaseDelay     = 500 * time.Millisecond  // first backoff, doubled per attempt
	DefaultMaxDelay      = 30 * time.Second        // longest backoff
	DefaultMaxRetryAfter = 120 * time.Second       // longest Retry-After waited for
	DefaultPollInterval  = 1 * time.Second         // request-status polling
	DefaultWaitTimeout   = 30 * time.Minute        // longest wait for one asynchronous request
)

// EnvAPIURL is the environment variable that overrides the API URL (in NormalizeAPIURL's form;
// the CLI's --api-url beats it).
const EnvAPIURL = "IONOS_API_URL"

// Errors wrapped by the client's failures (check with errors.Is).
var (
	// ErrRedirectRefused: the API answered 3xx; the client never follows a redirect, so the
	// token never reaches another host.
	ErrRedirectRefused = errors.New("ionos: the API answered with a redirect, which cubefleet refuses")
	// ErrOutcomeUnknown: a POST failed after it may have reached the API (a 5xx, a timeout or
	// a broken connection). It is not repeated; look the resource up before trying again.
	ErrOutcomeUnknown = errors.New("ionos: the write may have reached the API; look the resource up before trying again")
	// ErrRequestFailed: an asynchronous request ended FAILED.
	ErrRequestFailed = errors.New("ionos: the asynchronous request failed")
	// ErrUnreachable: no connection to the API could be made (the name does not resolve, the
	// connection is refused, there is no route), after every retry. Nothing was sent.
	ErrUnreachable = errors.New("ionos: the API cannot be reached")
)

// Config configures a Client. The zero value plus a Token is usable and talks to
// DefaultAPIURL. Durations are wall-clock time.
type Config struct {
	// APIURL is the API's base, "https://host[:port]" with no path (a trailing slash or
	// "/cloudapi/v6" is removed). Plain http is accepted only for loopback hosts, where the
	// simulator runs. Empty means DefaultAPIURL.
	APIURL string
	// APIURLFrom says where APIURL came from ("--api-url", EnvAPIURL), for the message of an
	// API that cannot be reached; empty means the default.
	APIURLFrom string
	// Token authenticates every call (Authorization: Bearer). Required.
	Token Token
	// Timeout bounds each API call, every retry and backoff included. Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// MaxAttempts bounds the attempts of one HTTP request (1 disables retries). Zero means
	// DefaultMaxAttempts.
	MaxAttempts int
	// BaseDelay and MaxDelay shape the exponential backoff with jitter between attempts.
	// Zero means DefaultBaseDelay and DefaultMaxDelay.
	BaseDelay, MaxDelay time.Duration
	// MaxRetryAfter is the longest Retry-After the client waits for; a longer one fails the
	// call with RESOURCE_EXHAUSTED. Zero means DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// PollInterval is the pause between request-status polls. Zero means
	// DefaultPollInterval.
	PollInterval time.Duration
	// WaitTimeout bounds one Wait. Zero means DefaultWaitTimeout.
	WaitTimeout time.Duration
	// PinnedCertSHA256, when set, pins the API's TLS certificate (the SDK's
	// IONOS_PINNED_CERT, which the client does not read from the environment itself).
	PinnedCertSHA256 string
	// Transport is the base HTTP transport; nil means a clone of http.DefaultTransport.
	Transport http.RoundTripper
	// Logger receives one debug line per retry (method, path, status, wait); nil discards.
	// It never receives the token.
	Logger *slog.Logger
	// Now is the clock for FetchedAt and request filters; nil means time.Now.
	Now func() time.Time
}

// Client calls the IONOS Cloud API v6 through the official SDK. It is safe for concurrent use.
type Client struct {
	api         *ionoscloud.APIClient
	rt          *transport
	apiURL      string
	apiURLFrom  string
	timeout     time.Duration
	poll        time.Duration
	waitTimeout time.Duration
	now         func() time.Time
}

// New returns a client for cfg. It returns an INVALID_INPUT *cubefleet.Error when the token is
// missing or the API URL is malformed or plain http to a non-loopback host.
func New(cfg Config) (*Client, error) {
	if cfg.Token.IsZero() {
		return nil, cubefleet.Errorf(cubefleet.CodeInvalidInput, "no IONOS API token; give --token-file")
	}
	apiURL, err := NormalizeAPIURL(cfg.APIURL)
	if err != nil {
		return nil, err
	}
	base := cfg.Transport
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		if cfg.PinnedCertSHA256 != "" {
			ionoscloud.AddPinnedCert(t, cfg.PinnedCertSHA256)
		}
		base = t
	}
	rt := &transport{
		base: base, token: cfg.Token,
		maxAttempts: orDefault(cfg.MaxAttempts, DefaultMaxAttempts),
		baseDelay:   orDefault(cfg.BaseDelay, DefaultBaseDelay), maxDelay: orDefault(cfg.MaxDelay, DefaultMaxDelay),
		maxRetryAfter: orDefault(cfg.MaxRetryAfter, DefaultMaxRetryAfter),
		log:           cfg.Logger,
	}
	if rt.log == nil {
		rt.log = slog.New(slog.DiscardHandler)
	}
	httpClient := &http.Client{
		Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return ErrRedirectRefused
		},
	}
	// No credentials in the SDK's configuration: the transport adds them, so the SDK's own
	// request dumps (IONOS_LOG_LEVEL=trace) cannot print the token.
	sdkCfg := ionoscloud.NewConfiguration("", "", "", apiURL)
	sdkCfg.UserAgent = "cubefleet " + sdkCfg.UserAgent
	sdkCfg.MaxRetries = 1 // one attempt per SDK call: retries are the transport's, uncapped by the SDK's 2 s
	sdkCfg.WaitTime, sdkCfg.MaxWaitTime = 0, 0
	sdkCfg.PollInterval = orDefault(cfg.PollInterval, DefaultPollInterval)
	sdkCfg.Debug = false
	sdkCfg.LogLevel = ionoscloud.Off
	sdkCfg.Logger = log.New(io.Discard, "", 0)
	// NewAPIClient replaces the transport of the client it is given when IONOS_PINNED_CERT is
	// set; give it a throwaway client and install ours afterwards.
	sdkCfg.HTTPClient = &http.Client{}
	api := ionoscloud.NewAPIClient(sdkCfg)
	api.GetConfig().HTTPClient = httpClient

	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Client{
		api: api, rt: rt, apiURL: apiURL, apiURLFrom: cfg.APIURLFrom,
		timeout:     orDefault(cfg.Timeout, DefaultTimeout),
		poll:        orDefault(cfg.PollInterval, DefaultPollInterval),
		waitTimeout: orDefault(cfg.WaitTimeout, DefaultWaitTimeout),
		now:         now,
	}, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// NormalizeAPIURL checks an API URL and returns it as "scheme://host[:port]" (no trailing
// slash, no /cloudapi/v6: the SDK appends that path itself). Empty means
// DefaultAPIURL. Plain http is accepted only for loopback hosts. Errors are INVALID_INPUT
// with path "--api-url".
func NormalizeAPIURL(raw string) (string, error) {
	if raw == "" {
		return DefaultAPIURL, nil
	}
	bad := func(format string, args ...any) (string, error) {
		return "", cubefleet.Invalid("--api-url", "%q: "+format, append([]any{raw}, args...)...)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("not a URL")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return bad("the scheme must be https (or http for the loopback simulator)")
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return bad("give only scheme, host and port, e.g. https://api.ionos.com")
	}
	path := strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), ionoscloud.DefaultIonosBasePath)
	if path != "" && path != "/" {
		return bad("unexpected path %q; give only scheme, host and port", u.Path)
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return bad("plain http is accepted only for a loopback host (the simulator); the token would travel unencrypted")
	}
	return u.Scheme + "://" + u.Host, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// API returns the SDK client for calls the package does not wrap; run them through Do (or
// Write) to get the timeout and error handling.
func (c *Client) API() *ionoscloud.APIClient { return c.api }

// APIURL returns the normalized API base URL the client talks to.
func (c *Client) APIURL() string { return c.apiURL }

// HTTPRequests returns how many HTTP requests the client has sent, retries included.
func (c *Client) HTTPRequests() int64 { return c.rt.sent.Load() }

// Do runs one SDK call with the per-call timeout (Config.Timeout). op names the call in
// errors ("list servers"). A DELETE answered 404 is done and returns no error. An API that
// cannot be reached (no connection: a name that does not resolve, a refused connection, no
// route) is an error without a code, wrapping ErrUnreachable and the *APIError, that names the
// URL, where it came from and IONOS_API_URL. Any other failure is a *cubefleet.Error wrapping an
// *APIError: NOT_FOUND (404), UNAUTHENTICATED (401), FORBIDDEN (403), INVALID_INPUT (400, 422),
// RESOURCE_EXHAUSTED (429), CONFLICT (409), INTERNAL (anything else); a redirect wraps
// ErrRedirectRefused, and a POST that may have reached the API wraps ErrOutcomeUnknown.
func (c *Client) Do(ctx context.Context, op string, call func(ctx context.Context) (*ionoscloud.APIResponse, error)) (*ionoscloud.APIResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := call(ctx)
	if err == nil {
		return resp, nil
	}
	if resp != nil && resp.Method == http.MethodDelete && resp.SafeStatusCode() == http.StatusNotFound {
		return resp, nil
	}
	return resp, c.translate(op, resp, err)
}

// Write runs an asynchronous write through Do and then Wait: it returns once the request
// IONOS accepted is DONE, or with an error wrapping ErrRequestFailed when it ended FAILED.
// A DELETE answered 404 returns nil at once.
func (c *Client) Write(ctx context.Context, op string, call func(ctx context.Context) (*ionoscloud.APIResponse, error)) error {
	resp, err := c.Do(ctx, op, call)
	if err != nil {
		return err
	}
	if resp.SafeStatusCode() == http.StatusNotFound {
		return nil
	}
	return c.Wait(ctx, op, resp)
}

// Wait follows an accepted write's Location header (…/requests/{id}/status, where IONOS reports an
// asynchronous write's progress) by polling every PollInterval until the request is DONE (nil) or
// FAILED (an error wrapping ErrRequestFailed with the API's message), for at most
// Config.WaitTimeout. A response without Location is an INTERNAL error: there is nothing to follow.
func (c *Client) Wait(ctx context.Context, op string, accepted *ionoscloud.APIResponse) error {
	loc := ""
	if accepted != nil && accepted.Response != nil {
		loc = accepted.Header.Get("Location")
	}
	if loc == "" {
		return cubefleet.Errorf(cubefleet.CodeInternal, "IONOS API: %s: the answer has no Location to follow", op)
	}
	ctx, cancel := context.WithTimeout(ctx, c.waitTimeout)
	defer cancel()
	for {
		var st ionoscloud.RequestStatus
		_, err := c.Do(ctx, op+": request status", func(ctx context.Context) (*ionoscloud.APIResponse, error) {
			s, r, err := c.api.GetRequestStatus(ctx, loc)
			if err == nil && r.SafeStatusCode() != http.StatusOK {
				// GetRequestStatus decodes any status; anything but 200 is a failure.
				return r, ionoscloud.NewGenericOpenAPIError(r.Status, r.Payload, nil, r.StatusCode)
			}
			if s != nil {
				st = *s
			}
			return r, err
		})
		if err != nil {
			return err
		}
		if md := st.Metadata; md != nil && md.Status != nil {
			switch *md.Status {
			case ionoscloud.RequestStatusDone:
				return nil
			case ionoscloud.RequestStatusFailed:
				msg := ""
				if md.Message != nil {
					msg = *md.Message
				}
				return &cubefleet.Error{Code: cubefleet.CodeConflict,
					Message: fmt.Sprintf("IONOS API: %s: request %s failed: %s", op, ionoscloud.ToValueDefault(st.Id), msg),
					Err:     ErrRequestFailed}
			}
		}
		t := time.NewTimer(c.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return cubefleet.Errorf(cubefleet.CodeInternal, "IONOS API: %s: gave up waiting for request %s: %v", op, loc, ctx.Err())
		case <-t.C:
		}
	}
}

// APIError is one failed API call: Status is the HTTP status (0 when no answer arrived),
// Messages the API's error messages, RetryAfter the wait a 429 asked for. It never holds the
// token: requests carry it only in a header, and errors are built from the URL, status and
// body.
type APIError struct {
	Op         string
	Method     string
	Status     int
	Messages   []string
	RetryAfter time.Duration
	Err        error
}

// Error implements error.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "IONOS API: %s", e.Op)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": %d %s", e.Status, http.StatusText(e.Status))
	}
	if len(e.Messages) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(e.Messages, "; "))
	} else if e.Err != nil && e.Status == 0 {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *APIError) Unwrap() error { return e.Err }

func (c *Client) translate(op string, resp *ionoscloud.APIResponse, err error) error {
	ae := &APIError{Op: op, Err: err}
	if resp != nil {
		ae.Method = resp.Method
		ae.Status = resp.SafeStatusCode()
		if resp.Response != nil {
			if s, convErr := strconv.Atoi(resp.Header.Get("Retry-After")); convErr == nil {
				ae.RetryAfter = time.Duration(s) * time.Second
			}
		}
	}
	var gen ionoscloud.GenericOpenAPIError
	if errors.As(err, &gen) {
		if ae.Status == 0 {
			ae.Status = gen.StatusCode()
		}
		if m, ok := gen.Model().(ionoscloud.Error); ok && m.Messages != nil {
			for _, msg := range *m.Messages {
				ae.Messages = append(ae.Messages, ionoscloud.ToValueDefault(msg.Message))
			}
		}
	}
	code := cubefleet.CodeInternal
	switch ae.Status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		code = cubefleet.CodeInvalidInput
	case http.StatusUnauthorized:
		code = cubefleet.CodeUnauthenticated
	case http.StatusForbidden:
		code = cubefleet.CodeForbidden
	case http.StatusNotFound:
		code = cubefleet.CodeNotFound
	case http.StatusConflict:
		code = cubefleet.CodeConflict
	case http.StatusTooManyRequests:
		code = cubefleet.CodeResourceExhausted
	}
	if ae.Status == 0 && dialFailed(err) {
		return c.unreachable(ae)
	}
	var cause error = ae
	msg := ae.Error()
	switch {
	case errors.Is(err, ErrRedirectRefused):
		msg = fmt.Sprintf("IONOS API: %s: %v", op, ErrRedirectRefused)
		cause = fmt.Errorf("%w: %w", ErrRedirectRefused, ae)
	case ae.Method == http.MethodPost && mayHaveReached(ae.Status, err):
		msg += "; the write may have been applied: look the resource up before trying again"
		cause = fmt.Errorf("%w: %w", ErrOutcomeUnknown, ae)
	}
	return &cubefleet.Error{Code: code, Message: msg, Err: cause}
}

// unreachable is the error of a call that could not connect to the API: it names the URL and
// where it came from, and says how to point the client elsewhere.
func (c *Client) unreachable(ae *APIError) error {
	from := c.apiURLFrom
	if from == "" {
		from = "the default"
	}
	detail := ae.Err
	var op *net.OpError
	if errors.As(ae.Err, &op) && op.Err != nil {
		detail = op.Err
	}
	return &unreachableError{ae: ae, msg: fmt.Sprintf("IONOS API: %s: cannot reach the IONOS API at %s (%s): %v; check the network, or point %s (or --api-url) at the API (for the loopback simulator, the URL `cubefleet ionos simulate` prints)",
		ae.Op, c.apiURL, from, detail, EnvAPIURL)}
}

// unreachableError is the error unreachable returns: ErrUnreachable and the *APIError.
type unreachableError struct {
	ae  *APIError
	msg string
}

func (e *unreachableError) Error() string   { return e.msg }
func (e *unreachableError) Unwrap() []error { return []error{ErrUnreachable, e.ae} }

// mayHaveReached reports whether a failed POST may have been applied: a 5xx, or no answer
// after the request may have been sent (a refused connection is safe).
func mayHaveReached(status int, err error) bool {
	if status >= 500 {
		return true
	}
	if status != 0 {
		return false
	}
	return !errors.Is(err, ErrRedirectRefused) && !dialFailed(err)
}

func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// transport adds the token, refuses nothing itself (the http.Client refuses redirects) and
// retries: 429 on every method, honouring Retry-After up to maxRetryAfter; 5xx and transport
// errors on GET, HEAD, PUT, PATCH and DELETE; on POST only a connection that was refused
// (nothing was sent). Backoff is exponential with jitter. It stops when the request's context
// would end before the next attempt.
type transport struct {
	base          http.RoundTripper
	token         Token
	maxAttempts   int
	baseDelay     time.Duration
	maxDelay      time.Duration
	maxRetryAfter time.Duration
	log           *slog.Logger
	sent          atomic.Int64
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// RoundTrip implements http.RoundTripper.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	for attempt := 1; ; attempt++ {
		r := req.Clone(ctx)
		if attempt > 1 && req.Body != nil {
			if req.GetBody == nil {
				return nil, fmt.Errorf("ionos: cannot repeat a %s whose body cannot be read again", req.Method)
			}
			body, err := req.GetBody()
			if err != nil {
				return nil, fmt.Errorf("ionos: repeat %s: %w", req.Method, err)
			}
			r.Body = body
		}
		r.Header.Set("Authorization", "Bearer "+t.token.reveal())
		t.sent.Add(1)
		resp, err := t.base.RoundTrip(r)
		wait, retry := t.backoff(req.Method, resp, err, attempt)
		if retry {
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
				retry = false
			}
		}
		if !retry {
			if resp != nil {
				normalizeRetryAfter(resp)
			}
			return resp, err
		}
		status := 0
		if resp != nil {
			status = resp.StatusCode
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			_ = resp.Body.Close()
		}
		t.log.Debug("ionos: retrying", "method", req.Method, "path", req.URL.Path, "status", status, "attempt", attempt, "wait", wait)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
}

// backoff decides whether attempt may be followed by another and how long to wait first.
func (t *transport) backoff(method string, resp *http.Response, err error, attempt int) (time.Duration, bool) {
	if attempt >= t.maxAttempts {
		return 0, false
	}
	exp := min(t.maxDelay, t.baseDelay<<min(attempt-1, 20))
	jittered := exp/2 + rand.N(exp/2+1) // "equal jitter": [exp/2, exp]
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return 0, false
		}
		return jittered, idempotent(method) || dialFailed(err)
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		if ra, ok := retryAfter(resp.Header.Get("Retry-After")); ok {
			if ra > t.maxRetryAfter {
				return 0, false
			}
			return ra + rand.N(min(ra/10, time.Second)+1), true
		}
		return jittered, true
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if !idempotent(method) {
			return 0, false
		}
		if ra, ok := retryAfter(resp.Header.Get("Retry-After")); ok && ra <= t.maxRetryAfter {
			return max(ra, jittered), true
		}
		return jittered, true
	}
	return 0, false
}

// retryAfter parses a Retry-After value: seconds or an HTTP date.
func retryAfter(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(time.Until(at), 0), true
	}
	return 0, false
}

// normalizeRetryAfter rewrites Retry-After as whole seconds (or drops it when unreadable):
// the SDK's retry loop parses it as seconds and fails on an HTTP date.
func normalizeRetryAfter(resp *http.Response) {
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return
	}
	if d, ok := retryAfter(v); ok {
		resp.Header.Set("Retry-After", strconv.Itoa(int((d+time.Second-1)/time.Second)))
		return
	}
	resp.Header.Del("Retry-After")
}
