// Package client is the control plane's API client as the CLI uses it: the public typed client
// (package github.com/cubefleet/cubefleet/client) with the CLI's words for what went wrong. Resolve finds the URL and the key the way docs/cli.md ("Connection") says:
// a flag beats the environment, which beats the config file.
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/client"
	"github.com/cubefleet/cubefleet/internal/capool"
)

// Client calls the API of one control plane as one principal, as the CLI does: the public
// client (API) with the CLI's words for what went wrong (which flag to pass, which file is
// missing). It is safe for concurrent use.
type Client struct {
	api     *client.Client
	baseURL string
	token   string
	http    *http.Client
	caFile  string // the CA file trusted besides the system's, for messages; "" for none
	// noKeyFile is the absolute path of the default token file when Connect found no key
	// because it did not exist, for the message of a call refused for want of a key.
	noKeyFile string
	// replicas are the clients of every URL Connect was given, this one first (nil for a
	// client made by New: itself only).
	replicas []*Client
}

// New returns a client for the control plane at baseURL (e.g. https://127.0.0.1:3010) that
// authenticates with token ("" sends no credentials). httpClient nil means a client that
// refuses redirects, so the key is never sent anywhere else, and trusts the system's CAs for
// https:// (Connect adds a CA file's).
func New(baseURL, token string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = newHTTPClient(nil)
	}
	c := &Client{baseURL: strings.TrimRight(baseURL, "/"), token: token, http: httpClient}
	c.api = client.New(baseURL, token, client.WithHTTPClient(httpClient), client.WithErrorHook(c.explain))
	return c
}

// newHTTPClient returns the default HTTP client: redirects refused, TLS 1.2 or later, the
// certificates of roots trusted (nil: the system's).
func newHTTPClient(roots *x509.CertPool) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = capool.ClientConfig(roots)
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// BaseURL returns the control plane's URL.
func (c *Client) BaseURL() string { return c.baseURL }

// API returns the typed client; its errors are those of Call (the CLI's words, an error
// response as the *cubefleet.Error itself).
func (c *Client) API() *client.Client { return c.api }

// Call runs API method with input in (marshalled to JSON; nil sends {}; a json.RawMessage is
// sent as is) and decodes the result into out (nil discards it; a *json.RawMessage keeps it
// raw). An error response is a *cubefleet.Error with the server's code, message and details
// (details["errors"] as []cubefleet.FieldError). A server
// that cannot be reached is a plain error naming the URL. No error ever contains the key.
func (c *Client) Call(ctx context.Context, method string, in, out any) error {
	return c.api.Call(ctx, method, in, out)
}

// explain is the public client's error hook: it words what went wrong for the CLI's user.
func (c *Client) explain(method string, err error) error {
	var (
		unreachable *client.UnreachableError
		answer      *client.ResponseError
		apiErr      *client.Error
		e           *cubefleet.Error
	)
	switch {
	case errors.As(err, &unreachable):
		if msg := c.tlsProblem(unreachable.Err); msg != "" {
			return errors.New(msg)
		}
		return fmt.Errorf("cannot reach the control plane at %s (start one with `cubefleet server --dev`, or pass --url / set CUBEFLEET_URL): %w", c.baseURL, unreachable.Err)
	case errors.As(err, &answer):
		return c.notTheAPI(answer)
	case errors.As(err, &e) && e.Code == cubefleet.CodeUnauthenticated && c.token == "":
		e.Message = c.noKeyMessage(context.Background())
	}
	if errors.As(err, &apiErr) {
		return apiErr.Err // the CLI and the tests match the *cubefleet.Error itself
	}
	return err
}

// tlsProblem returns what to do about err when it is a TLS failure: a certificate that does not
// verify (pass --ca-file), or an https:// URL for a server that speaks plain HTTP. "" for any
// other error.
func (c *Client) tlsProblem(err error) string {
	var (
		verr      *tls.CertificateVerificationError
		unknownCA x509.UnknownAuthorityError
		host      x509.HostnameError
		invalid   x509.CertificateInvalidError
		record    tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &host):
		return fmt.Sprintf("the TLS certificate of the control plane at %s does not verify: %v; point --url at a name or address the certificate is valid for", c.baseURL, host)
	case errors.As(err, &verr) || errors.As(err, &unknownCA) || errors.As(err, &invalid):
		detail := err.Error()
		if verr != nil && verr.Err != nil {
			detail = verr.Err.Error()
		}
		if c.caFile != "" {
			return fmt.Sprintf("the TLS certificate of the control plane at %s does not verify against the system's CAs or %s (%s): pass --ca-file with the CA that signed it", c.baseURL, c.caFile, detail)
		}
		return fmt.Sprintf("the TLS certificate of the control plane at %s does not verify (%s): pass --ca-file FILE (or set %s, or ca_file in the config file) naming the PEM certificate of the CA that signed it", c.baseURL, detail, EnvCAFile)
	case errors.As(err, &record) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Sprintf("the control plane at %s does not speak TLS (%v): use an http:// URL, or start the server with --tls-cert and --tls-key", c.baseURL, err)
	}
	return ""
}

// notTheAPI says what an answer that is not the API's means: --url names an HTTPS server
// over http://, a redirect, or something that is not a control plane.
func (c *Client) notTheAPI(a *client.ResponseError) error {
	if a.Status == http.StatusBadRequest && strings.Contains(a.Body, "HTTP request to an HTTPS server") {
		return fmt.Errorf("%s: %s serves HTTPS only: use https:// in --url (or %s, or url in the config file)", a.Method, c.baseURL, EnvURL)
	}
	if a.Status/100 == 3 {
		return fmt.Errorf("%s: %s answered with a redirect (HTTP %d to %q), which cubefleet never follows so the key goes nowhere else: point --url at the control plane itself",
			a.Method, c.baseURL, a.Status, a.Location)
	}
	hint := "is --url right?"
	if a.Status == http.StatusNotFound {
		hint = "is --url right? the server's --internal-listen address serves only the node-agent routes, not the API"
	}
	return fmt.Errorf("%s: HTTP %d from %s, which does not answer like a cubefleet control plane (%s): %q", a.Method, a.Status, c.baseURL, hint, a.Body)
}

// noKeyMessage says why a call went without a key: which token file was looked for, and, from
// the control plane's /healthz, whether it is a --dev server (which writes that file where it
// is started) or not (nothing writes it). A file that exists by now was written by a --dev
// server that started while the command ran.
func (c *Client) noKeyMessage(ctx context.Context) string {
	const fix = "pass --token-file FILE or set " + EnvToken
	if c.noKeyFile == "" {
		return "no API key: " + fix
	}
	if _, err := os.Stat(c.noKeyFile); err == nil {
		return fmt.Sprintf("no API key: the default token file %s did not exist when this command started and does now: the --dev control plane at %s had just written it; run the command again", c.noKeyFile, c.baseURL)
	}
	dev, known := c.devServer(ctx)
	switch {
	case !known:
		return fmt.Sprintf("no API key: the default token file %s does not exist: %s (`cubefleet server --dev` writes .cubefleet/admin.token in the directory it is started in)", c.noKeyFile, fix)
	case dev:
		return fmt.Sprintf("no API key: the default token file %s does not exist; the control plane at %s is a --dev server, which keeps its administrator key in admin.token in its --data-dir (./.cubefleet where it was started): run the command in that directory, or pass --token-file DIR/admin.token", c.noKeyFile, c.baseURL)
	}
	return fmt.Sprintf("no API key: the default token file %s does not exist, and the control plane at %s is not a --dev server, so nothing writes it: pass --token-file FILE (a key from cubefleet server init --token-out FILE, or cubefleet keys create) or set %s", c.noKeyFile, c.baseURL, EnvToken)
}

// devServer asks the control plane's GET /healthz whether it runs with --dev; known is false
// when it did not answer that.
func (c *Client) devServer(ctx context.Context) (dev, known bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.baseURL+"/healthz", nil)
	if err != nil {
		return false, false
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false, false
	}
	defer resp.Body.Close()
	var h struct {
		Status string `json:"status"`
		Dev    bool   `json:"dev"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&h) != nil || h.Status == "" {
		return false, false
	}
	return h.Dev, true
}
