package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// Prober makes the read-only calls of `agent check` (package hostsetup): GETs of the control
// plane's node-agent routes and of the agent's health endpoint, over connections made as the
// agent's own (Config.DialContext, Config.TLSClientConfig), with the agent's error messages:
// without the local address, with what to do about a TLS failure, and with what to set when an
// http:// endpoint turns out to be a TLS server. Safe for concurrent use.
type Prober struct {
	http *http.Client
	tls  *tlsDetector
}

// NewProber returns a Prober for cfg that makes its calls with hc; its TLS probe of an http://
// endpoint connects within 5 s.
func NewProber(cfg *Config, hc *http.Client) *Prober {
	return &Prober{http: hc, tls: &tlsDetector{dial: cfg.DialContext(&net.Dialer{Timeout: 5 * time.Second}), config: cfg.TLSClientConfig()}}
}

// Get GETs url with `Authorization: Bearer token` (none when token is empty) and returns the
// HTTP status and up to 1 MiB of the body. Its error is the transport's (see the type's doc).
func (p *Prober) Get(ctx context.Context, url string, token Secret) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token.Reveal())
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return 0, nil, scrubURLError(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	return resp.StatusCode, body, scrubNetError(err)
}

// Hint returns err, with what to set added when ep is an http:// endpoint that err shows to be
// a TLS server (a reset or an early close that a TLS handshake then explains).
func (p *Prober) Hint(ctx context.Context, ep string, err error) error {
	return p.tls.hint(ctx, ep, err)
}

// DescribeAnswer describes an answer of endpoint ep that is not a success, "HTTP 503 <message>"
// (the message from the body as ErrorMessage finds it), with what to set when an http://
// endpoint answered like a TLS server.
func DescribeAnswer(ep string, code int, body []byte) string {
	msg := errorMessage(body)
	s := fmt.Sprintf("HTTP %d %s", code, msg)
	if strings.HasPrefix(ep, "http://") && code == http.StatusBadRequest && answeredLikeTLS(msg) {
		s += " (" + hintHTTPS + ")"
	}
	return s
}

// ErrorMessage returns the short message of an error body: {"error":"msg"},
// {"error":{"code":"C","message":"msg"}} ("C: msg"), {"ret":{"ret_msg":"msg"}}, else the
// start of the text (at most 200 bytes).
func ErrorMessage(body []byte) string { return errorMessage(body) }

// AcceptReply applies Cubelet's acceptance rule to the body of a 2xx answer: it must be a JSON
// object, and a "ret" object in it must carry ret_code 200. It returns what breaks the rule.
func AcceptReply(body []byte) error {
	_, err := nodeapi.DecodeReply(body)
	return err
}
