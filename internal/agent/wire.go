package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// maxResponse caps how much of a response the agent reads.
const maxResponse = 1 << 20

// StatusError is a control plane's answer that is not a success: an HTTP status of 300 or
// more, or a 2xx whose body breaks Cubelet's rule (Code 200 then; see nodeapi.DecodeReply).
type StatusError struct {
	Endpoint string // base URL of the control plane that answered
	Code     int    // HTTP status
	Message  string // the body's error message, or the start of the body
	Local    string // the local host:port the call was made from, when known (not shown by Error)
	// answer is the answer as it came (for its proof; nil for a 2xx that broke Cubelet's rule).
	answer *answer
}

// Error implements error.
func (e *StatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%s: HTTP %d", e.Endpoint, e.Code)
	}
	return fmt.Sprintf("%s: HTTP %d: %s", e.Endpoint, e.Code, e.Message)
}

// statusCode returns the HTTP status of a *StatusError in err's chain, 0 for any other error.
func statusCode(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// wireClient posts to the control plane's endpoints with failover: on a transport error or a
// 5xx it tries the next endpoint; a 4xx (or a 2xx with a bad body) is the answer. It keeps
// using the endpoint that last answered; after a call that no endpoint answered, the next call
// starts with the endpoint after the last one tried. Safe for concurrent use.
type wireClient struct {
	endpoints []string
	http      *http.Client
	tls       *tlsDetector

	mu  sync.Mutex
	cur int
}

func newWireClient(endpoints []string, hc *http.Client, tls *tlsDetector) *wireClient {
	return &wireClient{endpoints: endpoints, http: hc, tls: tls}
}

// post sends body as JSON to path with `Authorization: Bearer token` (none when token is
// empty) and returns the decoded reply object.
func (c *wireClient) post(ctx context.Context, path string, token Secret, body any) (map[string]json.RawMessage, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	ans, err := c.exchange(ctx, path, token, requestID(body), data, false, maxResponse)
	if err != nil {
		return nil, err
	}
	reply, err := nodeapi.DecodeReply(ans.body)
	if err != nil {
		return nil, &StatusError{Endpoint: ans.endpoint, Code: ans.code, Message: err.Error()}
	}
	return reply, nil
}

// answer is a 2xx answer of the control plane, as it came.
type answer struct {
	endpoint string      // the base URL that answered
	code     int         // its HTTP status
	nonce    string      // the NonceHeader the request carried ("" for none)
	header   http.Header // its headers (nodeapi.ProofHeader)
	body     []byte      // at most the limit exchange was given
}

// exchange POSTs data to path on the endpoints with failover (see wireClient) and returns the
// 2xx answer of the endpoint that gave one; any other answer is a *StatusError. With nonce, each
// request carries a fresh nodeapi.NonceHeader (32 random bytes), which the answer records for
// its proof. At most limit bytes of the answer are read.
func (c *wireClient) exchange(ctx context.Context, path string, token Secret, rid string, data []byte, nonce bool, limit int64) (*answer, error) {
	c.mu.Lock()
	start := c.cur
	c.mu.Unlock()
	var errs []error
	idx := start
	for i := range c.endpoints {
		idx = (start + i) % len(c.endpoints)
		ep := c.endpoints[idx]
		ans, err := c.postOne(ctx, ep, path, token, rid, data, nonce, limit)
		if err == nil || (statusCode(err) != 0 && statusCode(err) < 500) {
			c.mu.Lock()
			c.cur = idx
			c.mu.Unlock()
			return ans, err
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	// Start the next call after the last endpoint tried, so that one that hangs until the
	// deadline does not take every call's whole time.
	c.mu.Lock()
	c.cur = (idx + 1) % len(c.endpoints)
	c.mu.Unlock()
	return nil, errors.Join(errs...)
}

func (c *wireClient) postOne(ctx context.Context, ep, path string, token Secret, rid string, data []byte, nonce bool, limit int64) (*answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep+path, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if rid != "" {
		req.Header.Set("X-Request-ID", rid)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token.Reveal())
	}
	ans := &answer{endpoint: ep}
	if nonce {
		ans.nonce = newNonce()
		req.Header.Set(nodeapi.NonceHeader, ans.nonce)
	}
	var local string // where the connection comes from, for errors that depend on it
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { local = info.Conn.LocalAddr().String() },
	}))
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.tls.hint(ctx, ep, fmt.Errorf("%s: %w", ep, scrubURLError(err)))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, c.tls.hint(ctx, ep, fmt.Errorf("%s: read the reply: %w", ep, scrubNetError(err)))
	}
	ans.code, ans.header, ans.body = resp.StatusCode, resp.Header, raw
	if resp.StatusCode >= 300 || resp.StatusCode < 200 {
		return nil, c.tls.hint(ctx, ep, &StatusError{Endpoint: ep, Code: resp.StatusCode, Message: errorMessage(raw), Local: local, answer: ans})
	}
	return ans, nil
}

// newNonce returns a nodeapi.NonceHeader value: 32 random bytes in base64url, 43 characters.
func newNonce() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// errorMessage extracts a short message from an error body: {"error":"msg"},
// {"error":{"message":"msg"}}, {"ret":{"ret_msg":"msg"}} or the start of the text.
func errorMessage(raw []byte) string {
	var m struct {
		Error json.RawMessage `json:"error"`
		Ret   struct {
			Msg string `json:"ret_msg"`
		} `json:"ret"`
	}
	if json.Unmarshal(raw, &m) == nil {
		var s string
		var o struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		switch {
		case json.Unmarshal(m.Error, &s) == nil && s != "":
			return s
		case json.Unmarshal(m.Error, &o) == nil && o.Message != "":
			if o.Code != "" {
				return o.Code + ": " + o.Message
			}
			return o.Message
		case m.Ret.Msg != "":
			return m.Ret.Msg
		}
	}
	s := strings.Join(strings.Fields(string(raw)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// scrubURLError drops the method and URL from a *url.Error (the endpoint is already named) and
// the local address from a network error (see scrubNetError), and says what to do about a TLS
// failure: a certificate that does not name the address used, one that does not verify, or no
// TLS at all.
func scrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	err = scrubNetError(err)
	var (
		name   x509.HostnameError
		verr   *tls.CertificateVerificationError
		record tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &name):
		return fmt.Errorf("%w (the control plane's TLS certificate does not name the address used, %s: reissue it with that address as a subject alternative name (an IP SAN for an IP address), or use an address it names)", err, name.Host)
	case errors.As(err, &verr):
		return fmt.Errorf("%w (the control plane's TLS certificate does not verify: set CUBEFLEET_CA_FILE or --ca-file to the PEM certificate of the CA that signed it)", err)
	case errors.As(err, &record) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("%w (the control plane does not speak TLS: use an http:// address, or unset CUBEFLEET_CONTROL_PLANE_TLS)", err)
	}
	return err
}

// localAddr matches the local half of a network error's "local->remote" pair, as in
// "read tcp 127.0.0.1:33616->10.0.0.1:3010: connection reset by peer".
var localAddr = regexp.MustCompile(`\b((?:tcp|tcp4|tcp6|udp) )\S+->`)

// scrubNetError returns err with the local address left out of its message ("read tcp
// 10.0.0.1:3010: ...": the local port changes with every connection, so errors that are the
// same to an operator would not compare equal, and the agent logs an error only when it
// changes). errors.Is and errors.As still see err.
func scrubNetError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if s := localAddr.ReplaceAllString(msg, "$1"); s != msg {
		return &scrubbedError{msg: s, err: err}
	}
	return err
}

// scrubbedError is an error shown with another message.
type scrubbedError struct {
	msg string
	err error
}

// Error returns the message without the local address.
func (e *scrubbedError) Error() string { return e.msg }

// Unwrap returns the original error.
func (e *scrubbedError) Unwrap() error { return e.err }

// hintHTTPS is what to do when a plain-HTTP call is answered by a TLS server.
const hintHTTPS = "the control plane speaks HTTPS: set CUBEFLEET_CONTROL_PLANE_TLS=1 (and CUBEFLEET_CA_FILE, unless the system trusts its CA), or write https:// in the address"

// tlsDetector recognizes a TLS server behind an http:// endpoint: one that answers a plain
// HTTP request with "400 Client sent an HTTP request to an HTTPS server" (Go; nginx says
// "The plain HTTP request was sent to HTTPS port"), or that resets the connection (or closes
// it without a reply) and completes a TLS handshake when asked. Safe for concurrent use; a nil
// *tlsDetector detects only the 400.
type tlsDetector struct {
	dial   func(ctx context.Context, network, addr string) (net.Conn, error) // nil: a net.Dialer
	config *tls.Config                                                       // the client's TLS settings (for the probe only)

	mu     sync.Mutex
	probed map[string]probe // by endpoint
}

// probe is the outcome of a TLS handshake with an http:// endpoint.
type probe struct {
	tls bool
	at  time.Time
}

// reprobe is how long a probe that found no TLS server stands.
const reprobe = time.Minute

// hint returns err, with hintHTTPS added when ep is an http:// endpoint that err shows to be
// a TLS server.
func (d *tlsDetector) hint(ctx context.Context, ep string, err error) error {
	if err == nil || !strings.HasPrefix(ep, "http://") {
		return err
	}
	var se *StatusError
	switch {
	case errors.As(err, &se):
		if se.Code != http.StatusBadRequest || !answeredLikeTLS(se.Message) {
			return err
		}
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		if d == nil || !d.speaksTLS(ctx, strings.TrimPrefix(ep, "http://")) {
			return err
		}
	default:
		return err
	}
	return fmt.Errorf("%w (%s)", err, hintHTTPS)
}

// answeredLikeTLS reports whether an HTTP 400's message is a TLS server's answer to plain HTTP.
func answeredLikeTLS(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "http request to an https server") || strings.Contains(m, "plain http request was sent to https port")
}

// speaksTLS reports whether hostport completes a TLS handshake, or fails one only on the
// certificate (the probe sends no request and no credential); a result is kept, a negative
// one for reprobe.
func (d *tlsDetector) speaksTLS(ctx context.Context, hostport string) bool {
	d.mu.Lock()
	p, ok := d.probed[hostport]
	d.mu.Unlock()
	if ok && (p.tls || time.Since(p.at) < reprobe) {
		return p.tls
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	dial := d.dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	result := false
	if conn, err := dial(ctx, "tcp", hostport); err == nil {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if d.config != nil {
			cfg = d.config.Clone()
		}
		if host, _, err := net.SplitHostPort(hostport); err == nil {
			cfg.ServerName = host
		}
		tc := tls.Client(conn, cfg)
		err := tc.HandshakeContext(ctx)
		var (
			verr  *tls.CertificateVerificationError
			alert tls.AlertError
		)
		result = err == nil || errors.As(err, &verr) || errors.As(err, &alert)
		tc.Close()
	}
	d.mu.Lock()
	if d.probed == nil {
		d.probed = map[string]probe{}
	}
	d.probed[hostport] = probe{tls: result, at: time.Now()}
	d.mu.Unlock()
	return result
}

// requestID returns the requestID of a request body.
func requestID(body any) string {
	switch b := body.(type) {
	case *nodeapi.RegisterRequest:
		return b.RequestID
	case *nodeapi.StatusRequest:
		return b.RequestID
	}
	return ""
}

// newRequestID returns 32 random hex digits (fits the 64-rune requestID and X-Request-ID rules).
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
