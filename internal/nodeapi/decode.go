package nodeapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/cubefleet/cubefleet"
)

// decodeOptions are the decoding rules of the node-agent API, those of CubeOps' Go decoder:
// unknown members ignored, names matched case-insensitively, a repeated name's last value wins.
// Invalid UTF-8 is refused (400).
var decodeOptions = json.JoinOptions(
	json.MatchCaseInsensitiveNames(true),
	jsontext.AllowDuplicateNames(true),
	json.RejectUnknownMembers(false),
)

// Decoder decodes one node-agent body at a time: write the body into it (Write, ReadFrom), then
// call Register or Status. Keep Decoders in a DecoderPool and the hot path allocates no decoder
// state. A Decoder is not safe for concurrent use.
type Decoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

// Write appends p to the body.
func (d *Decoder) Write(p []byte) (int, error) { return d.buf.Write(p) }

// ReadFrom appends what r holds to the body (limit r with io.LimitReader).
func (d *Decoder) ReadFrom(r io.Reader) (int64, error) { return d.buf.ReadFrom(r) }

// Len returns the length of the body in bytes.
func (d *Decoder) Len() int { return d.buf.Len() }

// Bytes returns the body. It is valid until the Decoder is reused.
func (d *Decoder) Bytes() []byte { return d.buf.Bytes() }

// decode decodes one JSON object from the body into v (which must be reset by the caller).
// Errors are INVALID_INPUT "invalid body: ..." (docs/nodes.md, "Node-agent API": 400 invalid JSON).
func (d *Decoder) decode(v any) error {
	data := bytes.TrimSpace(d.buf.Bytes())
	if len(data) == 0 {
		return cubefleet.Invalid("", "invalid body: empty")
	}
	if data[0] != '{' {
		return cubefleet.Invalid("", "invalid body: the body must be a JSON object")
	}
	d.dec.Reset(&d.buf, decodeOptions)
	if err := json.UnmarshalDecode(&d.dec, v); err != nil {
		return cubefleet.Invalid("", "invalid body: %s", decodeMessage(err))
	}
	if _, err := d.dec.ReadToken(); err == nil || !errors.Is(err, io.EOF) {
		return cubefleet.Invalid("", "invalid body: more than one JSON value")
	}
	return nil
}

// DecodeObject decodes body, an optional JSON object (empty or white space: v is left as it
// is), into v by the node-agent decoding rules. Errors are INVALID_INPUT "invalid body: ...".
// The internal nodes routes read their bodies (IsolationRequest, LabelsRequest) with it.
func DecodeObject(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	var d Decoder
	d.buf.Write(body)
	return d.decode(v)
}

// maxPooledBody is the largest body whose buffer a DecoderPool keeps (1 MiB).
const maxPooledBody = 1 << 20

// DecoderPool pools Decoders across requests. The zero value is ready; it is safe for
// concurrent use.
type DecoderPool struct{ pool sync.Pool }

// Get returns an empty Decoder.
func (p *DecoderPool) Get() *Decoder {
	if d, ok := p.pool.Get().(*Decoder); ok {
		return d
	}
	return &Decoder{}
}

// Put returns d to the pool (unless it held a body over 1 MiB, whose buffer is dropped).
func (p *DecoderPool) Put(d *Decoder) {
	if d.buf.Cap() > maxPooledBody {
		return
	}
	d.buf.Reset()
	p.pool.Put(d)
}

// decodeMessage shortens a decoder error to what a caller can act on.
func decodeMessage(err error) string {
	var se *json.SemanticError
	if errors.As(err, &se) && se.JSONPointer != "" {
		return fmt.Sprintf("%s: %v", se.JSONPointer, errors.Unwrap(err))
	}
	return err.Error()
}

// maxRequestIDRunes bounds the body's requestID (variant @4765fcd, docs/nodes.md, "Node-agent
// API").
const maxRequestIDRunes = 64

// checkRequestID refuses a body requestID that is not valid UTF-8 or longer than 64 runes.
func checkRequestID(id string) error {
	if !utf8.ValidString(id) {
		return cubefleet.Invalid("requestID", "invalid requestID: not valid UTF-8")
	}
	if utf8.RuneCountInString(id) > maxRequestIDRunes {
		return cubefleet.Invalid("requestID", "invalid requestID: longer than %d characters", maxRequestIDRunes)
	}
	return nil
}

// MaxNodeIDLen bounds node ids (253 bytes): a Cubelet's is its IPv4 address, ours the same;
// hostnames and IPv6 addresses fit too.
const MaxNodeIDLen = 253

// CheckNodeID refuses a node id that cannot be a path segment of the status route: longer than
// MaxNodeIDLen, or holding anything but letters, digits, '.', '-', '_' and ':'
// (INVALID_INPUT naming node_id).
func CheckNodeID(id string) error {
	if len(id) > MaxNodeIDLen {
		return cubefleet.Invalid("node_id", "node_id is longer than %d characters", MaxNodeIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == ':') {
			return cubefleet.Invalid("node_id", "node_id %q may hold only letters, digits, '.', '-', '_' and ':'", id)
		}
	}
	return nil
}
