// Package client is the control plane's API client, as the CLI uses it: Call posts a JSON
// object to /api/v1/<method> with the bearer key and maps an error body back to a
// *cubefleet.Error. Resolve finds the URL and the key the way ../shared/DESIGN.md ("Ports and
// defaults") says: a flag beats the environment, which beats the config file.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/cubefleet/cubefleet"
)

// maxResponseBytes bounds the response body Call reads (64 MiB).
const maxResponseBytes = 64 << 20

// Client calls the API of one control plane as one principal. It is safe for concurrent use.
type Client struct {
	baseURL string
	token   string
	http    *http.Client
}

// New returns a client for the control plane at baseURL (e.g. http://127.0.0.1:3010) that
// authenticates with token ("" sends no credentials). httpClient nil means a client that
// refuses redirects, so the key is never sent anywhere else.
func New(baseURL, token string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &Client{baseURL: strings.TrimRight(baseURL, "/"), token: token, http: httpClient}
}

// BaseURL returns the control plane's URL.
func (c *Client) BaseURL() string { return c.baseURL }

// Call runs API method with input in (marshalled to JSON; nil sends {}; a json.RawMessage is
// sent as is) and decodes the result into out (nil discards it; a *json.RawMessage keeps it
// raw). An error response becomes a *cubefleet.Error with the server's code, message and
// details (details["errors"] as []cubefleet.FieldError). A server that cannot be reached is a
// plain error naming the URL. No error ever contains the key.
func (c *Client) Call(ctx context.Context, method string, in, out any) error {
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
		return fmt.Errorf("cannot reach the control plane at %s (start one with `cubefleet server --dev`, or pass --url / set CUBEFLEET_URL): %w", c.baseURL, unwrapURLError(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
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

// unwrapURLError drops *url.Error's "Post "URL":" prefix; the message already names the URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err
	}
	return err
}

type wireError struct {
	Error *struct {
		Code    cubefleet.Code  `json:"code"`
		Message string          `json:"message"`
		Details json.RawMessage `json:"details"`
	} `json:"error"`
}

func (c *Client) decodeError(method string, resp *http.Response, data []byte) error {
	var w wireError
	if err := json.Unmarshal(data, &w); err != nil || w.Error == nil || w.Error.Code == "" {
		snippet := strings.TrimSpace(string(data))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "..."
		}
		if resp.StatusCode/100 == 3 {
			return fmt.Errorf("%s: %s answered with a redirect (HTTP %d to %q), which cubefleet never follows so the key goes nowhere else: point --url at the control plane itself",
				method, c.baseURL, resp.StatusCode, resp.Header.Get("Location"))
		}
		return fmt.Errorf("%s: HTTP %d from %s, which does not answer like a cubefleet control plane (is --url right?): %q", method, resp.StatusCode, c.baseURL, snippet)
	}
	e := &cubefleet.Error{Code: w.Error.Code, Message: w.Error.Message}
	if len(w.Error.Details) > 0 && string(w.Error.Details) != "null" {
		if err := json.Unmarshal(w.Error.Details, &e.Details); err == nil {
			if raw, ok := e.Details["errors"]; ok {
				b, _ := json.Marshal(raw)
				var fes []cubefleet.FieldError
				if json.Unmarshal(b, &fes) == nil {
					e.Details["errors"] = fes
				}
			}
		}
	}
	if e.Code == cubefleet.CodeUnauthenticated && c.token == "" {
		e.Message = "no API key: pass --token-file FILE or set CUBEFLEET_TOKEN (`cubefleet server --dev` writes ./.cubefleet/admin.token, the default)"
	}
	return e
}
