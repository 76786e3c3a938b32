// Package client is the typed Go client of the cubefleet control plane's public API: one method
// per API method, grouped by domain (c.Sandboxes.Create, c.Fleet.Apply, c.Nodes.Drain,
// c.Compute.Pools.List, ...), each taking a context first and the contract's input type
// (package api), and answering the contract's output type.
//
// Errors: an answer with an error body is a *Error, which unwraps to the *cubefleet.Error the
// server sent, so callers match codes with errors.Is(err, cubefleet.CodeNotFound) or take the
// details with errors.As(err, &e) for a *cubefleet.Error; RetryAfter tells how long the server
// asked to wait (RESOURCE_EXHAUSTED answers carry it). A control plane that cannot be reached,
// or a body that is not the API's, is a plain error naming the URL. No error ever holds the
// key.
//
// A Client is configured by its arguments only (New(url, token, opts...)): it reads no flag,
// environment variable or file. The cubefleet CLI finds the URL, key and CA the way its
// documentation says (flags, environment, config file, token files) and then uses this
// package. A Client is safe for concurrent use.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/api"
)

// MaxResponseBytes bounds the response body a call reads (64 MiB).
const MaxResponseBytes = 64 << 20

// Client calls the API of one control plane as one principal.
type Client struct {
	baseURL string
	token   string
	http    *http.Client
	tls     *tls.Config // WithTLSConfig's, for the default HTTP client
	hook    func(method string, err error) error

	// The API's domains, one field each; every method of a domain is a method of its field.
	Audit     *AuditService
	Compute   *ComputeService
	Events    *EventsService
	Fleet     *FleetService
	IAM       *IAMService
	Nodes     *NodesService
	Sandboxes *SandboxesService
	Scheduler *SchedulerService
	Secrets   *SecretsService
	Webhooks  *WebhooksService
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests with hc (its transport, timeouts, TLS).
// Without it the client uses one that refuses redirects (so the key is never sent anywhere
// else), speaks TLS 1.2 or later and trusts the system's CAs.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithTLSConfig makes the default HTTP client use cfg for https:// URLs (e.g. RootCAs holding
// the CA of a private control plane; MinVersion below TLS 1.2 is raised to it). It has no
// effect with WithHTTPClient.
func WithTLSConfig(cfg *tls.Config) Option { return func(c *Client) { c.tls = cfg.Clone() } }

// WithErrorHook passes every error a call would return through hook, which returns the error
// the call returns instead (return err to keep it). A command
// line uses it to add what its user should do, such as which flag to pass.
func WithErrorHook(hook func(method string, err error) error) Option {
	return func(c *Client) { c.hook = hook }
}

// New returns a client for the control plane at baseURL (e.g. http://127.0.0.1:3010; a
// trailing slash is dropped) that authenticates with the API key token ("" sends no
// credentials: every method answers UNAUTHENTICATED then).
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{baseURL: strings.TrimRight(baseURL, "/"), token: token}
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		c.http = defaultHTTP(c.tls)
	}
	c.Audit = &AuditService{c}
	c.Compute = newComputeService(c)
	c.Events = &EventsService{c}
	c.Fleet = &FleetService{c}
	c.IAM = &IAMService{Tenants: &TenantsService{c}, Keys: &KeysService{c}, Permissions: &PermissionsService{c}}
	c.Nodes = &NodesService{c: c, JoinTokens: &JoinTokensService{c}}
	c.Sandboxes = &SandboxesService{c}
	c.Scheduler = &SchedulerService{c}
	c.Secrets = &SecretsService{c}
	c.Webhooks = &WebhooksService{c}
	return c
}

// defaultHTTP returns the default HTTP client: redirects refused, TLS 1.2 or later with cfg
// (nil: the system's CAs).
func defaultHTTP(cfg *tls.Config) *http.Client {
	if cfg == nil {
		cfg = &tls.Config{}
	}
	cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS12)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// BaseURL returns the control plane's URL.
func (c *Client) BaseURL() string { return c.baseURL }

// Error is an error answer of the API: the *cubefleet.Error the server sent (Err: its code,
// message and details; details["errors"] as []cubefleet.FieldError), the HTTP status, and the
// wait the server asked for before a retry (RetryAfter, from the Retry-After header; 0 when it
// sent none). Its message is Err's.
type Error struct {
	Method     string
	Status     int
	RetryAfter time.Duration
	Err        *cubefleet.Error
}

// Error implements error with the server's code and message.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the server's *cubefleet.Error, so errors.As and errors.Is see it.
func (e *Error) Unwrap() error { return e.Err }

// UnreachableError is a call that got no answer: the control plane at URL could not be
// reached (refused, reset, a TLS handshake that failed: Err says which).
type UnreachableError struct {
	Method, URL string
	Err         error
}

// Error implements error.
func (e *UnreachableError) Error() string {
	return fmt.Sprintf("%s: cannot reach the control plane at %s: %v", e.Method, e.URL, e.Err)
}

// Unwrap returns the cause.
func (e *UnreachableError) Unwrap() error { return e.Err }

// ResponseError is an answer that is not the API's: its status is not 200 and its body is not
// an error body (a proxy's page, a redirect, the node-agent listener). Body is the answer's
// first 200 bytes, trimmed; Location is its Location header.
type ResponseError struct {
	Method, URL string
	Status      int
	Location    string
	Body        string
}

// Error implements error.
func (e *ResponseError) Error() string {
	return fmt.Sprintf("%s: HTTP %d from %s, which does not answer like a cubefleet control plane: %q", e.Method, e.Status, e.URL, e.Body)
}

// RetryAfter returns how long the server asked the caller to wait before retrying the call
// that failed with err, and whether it asked at all (a RESOURCE_EXHAUSTED answer does).
func RetryAfter(err error) (time.Duration, bool) {
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return e.RetryAfter, true
	}
	return 0, false
}

// Call runs API method with input in (see call), passing an error through the error hook.
func (c *Client) Call(ctx context.Context, method string, in, out any) error {
	err := c.call(ctx, method, in, out)
	if err != nil && c.hook != nil {
		return c.hook(method, err)
	}
	return err
}

// call runs API method with input in (marshalled to JSON; nil sends {}; a json.RawMessage is
// sent as it is) and decodes the answer into out (nil discards it). It is the one transport of
// the typed methods, and reaches a method this package has no typed method for yet. Errors:
// *Error for an error answer; ctx's error when ctx ended; *UnreachableError when the control
// plane cannot be reached; *ResponseError when it does not answer like one.
func (c *Client) call(ctx context.Context, method string, in, out any) error {
	body := []byte("{}")
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("%s: encode input: %w", method, err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"/api/v1/"+method, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", method, ctx.Err())
		}
		var ue *url.Error
		if errors.As(err, &ue) && ue.Err != nil {
			err = ue.Err
		}
		return &UnreachableError{Method: method, URL: c.baseURL, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", method, ctx.Err())
		}
		return fmt.Errorf("%s: read response: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		return c.decodeError(method, resp, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s: decode response: %w", method, err)
	}
	return nil
}

// decodeError turns an error answer into an *Error, or a *ResponseError when the body is not
// an API error body.
func (c *Client) decodeError(method string, resp *http.Response, data []byte) error {
	var body api.ErrorBody
	if err := json.Unmarshal(data, &body); err != nil || body.Error.Code == "" {
		snippet := strings.TrimSpace(string(data))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "..."
		}
		return &ResponseError{Method: method, URL: c.baseURL, Status: resp.StatusCode, Location: resp.Header.Get("Location"), Body: snippet}
	}
	e := &cubefleet.Error{Code: body.Error.Code, Message: body.Error.Message, Details: body.Error.Details}
	if raw, ok := e.Details["errors"]; ok {
		b, _ := json.Marshal(raw)
		var fes []cubefleet.FieldError
		if json.Unmarshal(b, &fes) == nil {
			e.Details["errors"] = fes
		}
	}
	out := &Error{Method: method, Status: resp.StatusCode, Err: e}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		out.RetryAfter = time.Duration(s) * time.Second
	}
	return out
}

// call runs method with in and answers its output as Out.
func call[Out any](ctx context.Context, c *Client, method string, in any) (Out, error) {
	var out Out
	err := c.Call(ctx, method, in, &out)
	return out, err
}
