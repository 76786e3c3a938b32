// Package strictjson is the one strict JSON decoder of API bodies: Read takes a request body
// from its stream and checks it as it arrives, Decode and DecodePart decode it into a method's
// input. The rules are the same everywhere (and the fleet document's, package fleet/document):
//
//   - one JSON value, valid UTF-8; Read takes only an object;
//   - a name appears at most once in an object, at any depth, however it is escaped
//     (`{"tenantId":"acme","tenant\u0049d":"root"}` is refused), so a proxy that reads the first
//     of two names and a server that reads the last never see two different requests;
//   - names match fields exactly: `{"TENANTID":"root"}` is an unknown field, not tenantId;
//   - Decode refuses unknown fields and values of the wrong type.
//
// Every refusal is an INVALID_INPUT error whose details.path names the place
// (`pools[0].offers[1].quota.gpu`, written with Member and Index); a body over its limit is
// PAYLOAD_TOO_LARGE. The decoder is github.com/go-json-experiment/json (encoding/json/v2).
package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/cubefleet/cubefleet"
)

// decodeOptions are Decode's rules: unknown members refused, names matched exactly, repeated
// names and invalid UTF-8 refused (jsontext's defaults).
var decodeOptions = json.JoinOptions(json.RejectUnknownMembers(true), json.MatchCaseInsensitiveNames(false))

// partOptions are DecodePart's: Decode's, with unknown members skipped.
var partOptions = json.JoinOptions(json.RejectUnknownMembers(false), json.MatchCaseInsensitiveNames(false))

// Decode decodes data, which must hold exactly one JSON value, into v by the package's rules.
// Errors: INVALID_INPUT with details.path.
func Decode(data []byte, v any) error {
	return describe(data, json.Unmarshal(data, v, decodeOptions))
}

// DecodeAll is Decode reporting a problem of every member of the JSON object data (a value of
// the wrong type, an unknown name), in order, not only the first: one INVALID_INPUT error whose
// details.errors lists them all. v holds every member that decoded, so the caller can check
// those too and report its own problems with these. Data that is not one valid JSON object is
// Decode's single error.
func DecodeAll(data []byte, v any) error {
	err := Decode(data, v)
	if err == nil {
		return nil
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' || !jsontext.Value(trimmed).IsValid() {
		return err
	}
	var errs []cubefleet.FieldError
	dec := jsontext.NewDecoder(bytes.NewReader(trimmed))
	if _, err := dec.ReadToken(); err != nil {
		return describe(data, err)
	}
	var member bytes.Buffer
	for dec.PeekKind() == '"' {
		name, err := dec.ReadValue() // the name as written, escapes and all
		if err != nil {
			return describe(data, err)
		}
		name = bytes.Clone(name)
		val, err := dec.ReadValue()
		if err != nil {
			return describe(data, err)
		}
		member.Reset()
		member.WriteByte('{')
		member.Write(name)
		member.WriteByte(':')
		member.Write(val)
		member.WriteByte('}')
		if err := Decode(member.Bytes(), v); err != nil {
			var e *cubefleet.Error
			if !errors.As(err, &e) {
				return err
			}
			fes, _ := e.Details["errors"].([]cubefleet.FieldError)
			errs = append(errs, fes...)
		}
	}
	if len(errs) == 0 { // every member decodes alone: the problem is the whole (cannot happen today)
		return err
	}
	return cubefleet.InvalidAll(errs)
}

// DecodePart decodes the members of the JSON object data that v has fields for, and skips the
// others (which still obey the rules on names). A method's decision reads the input's tenantId
// with it before the handler decodes the whole input with Decode. Errors: INVALID_INPUT.
//
// A member whose name is one of v's fields in another case (`TENANTID`) is refused: it reads as
// that field to a decoder that matches names without case.
func DecodePart(data []byte, v any) error {
	if err := json.Unmarshal(data, v, partOptions); err != nil {
		return describe(data, err)
	}
	t := reflect.TypeOf(v)
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	if _, err := dec.ReadToken(); err != nil { // '{': Unmarshal has read the object already
		return describe(data, err)
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return describe(data, err)
		}
		name := tok.String()
		if known := nameLike(t, name); known != "" && known != name {
			return cubefleet.Invalid(Member("", name), "unknown field %s; did you mean %s? Field names are case-sensitive", name, known)
		}
		if err := dec.SkipValue(); err != nil {
			return describe(data, err)
		}
	}
	return nil
}

// MaxToken is the longest single token (a string, a number, a name) Read takes, in bytes
// (1 MiB): no API input holds a longer one (a secret value is at most 64 KiB), and Read holds
// at most this much besides the body.
const MaxToken = 1 << 20

// chunk bounds one read from the stream (32 KiB), so the decoder reads little ahead of the
// token it is at.
const chunk = 32 << 10

// Read reads one JSON object from r and returns its bytes (without the white space around
// it); an empty or blank body is `{}`. size is the length the body announced (Content-Length),
// or -1: the buffer grows with what arrives, up to that size and no more. Read checks the object as it arrives, token by
// token, and stops reading at the first problem: more than limit bytes is PAYLOAD_TOO_LARGE, a
// token longer than MaxToken or anything else wrong INVALID_INPUT with details.path. An error
// of r itself (a deadline, a budget) is returned as it is, for the caller to answer. It holds
// the bytes read, plus at most MaxToken.
func Read(r io.Reader, limit, size int64) ([]byte, error) {
	buf := &bodyBuffer{size: min(size, limit+1)}
	lr := &limitReader{r: r, left: limit + 1}
	dec := jsontext.NewDecoder(io.TeeReader(lr, buf))
	end := int64(-1) // the offset just after the object, once it is read
	for first := true; ; first = false {
		tok, err := dec.ReadToken()
		if err == io.EOF && end >= 0 {
			break
		}
		if err != nil {
			switch {
			case lr.over():
				return nil, tooLarge(limit)
			case lr.err == errLongToken:
				return nil, cubefleet.Invalid(pathOf(buf.Bytes(), dec.StackPointer()), "a value or name longer than %d bytes starts after byte %d; no field takes one", MaxToken, lr.tokenStart)
			case lr.err != nil:
				return nil, lr.err
			case err == io.EOF && first: // blank
				return []byte("{}"), nil
			}
			return nil, describe(buf.Bytes(), err)
		}
		lr.tokenStart = dec.InputOffset()
		switch {
		case end >= 0:
			return nil, cubefleet.Invalid("", "the body must be one JSON object; more follows after byte %d", end)
		case first && tok.Kind() != '{':
			return nil, cubefleet.Invalid("", "the body must be a JSON object, not %s", kindName(tok.Kind()))
		case dec.StackDepth() == 0:
			end = dec.InputOffset()
		}
	}
	if lr.over() {
		return nil, tooLarge(limit)
	}
	return bytes.TrimLeft(buf.Bytes()[:end], " \t\r\n"), nil
}

// bodyBuffer holds what Read has read. It grows with what arrives, doubling, but never past
// size (the announced length) when that holds it, so a body that announces much and sends
// little costs little, and one that sends all it announced is held in one allocation of its
// size at the end.
type bodyBuffer struct {
	b    []byte
	size int64
}

func (g *bodyBuffer) Write(p []byte) (int, error) {
	if need := len(g.b) + len(p); need > cap(g.b) {
		n := max(2*cap(g.b), need, 4<<10)
		if g.size > 0 && int64(need) <= g.size {
			n = int(min(int64(n), g.size))
		}
		b := make([]byte, len(g.b), n)
		copy(b, g.b)
		g.b = b
	}
	g.b = append(g.b, p...)
	return len(p), nil
}

// Bytes returns what was written.
func (g *bodyBuffer) Bytes() []byte { return g.b }

func tooLarge(limit int64) error {
	return cubefleet.Errorf(cubefleet.CodePayloadTooLarge, "the request body is larger than %d bytes, the most this method takes", limit)
}

var errLongToken = errors.New("token too long")

// limitReader reads at most left bytes from r, a chunk at a time, and remembers r's error. It
// refuses to read more than MaxToken (and a chunk) past tokenStart, where the decoder's
// current token starts.
type limitReader struct {
	r          io.Reader
	left       int64
	read       int64
	tokenStart int64
	err        error
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, io.EOF
	}
	if l.read-l.tokenStart > MaxToken+chunk {
		l.err = errLongToken
		return 0, l.err
	}
	p = p[:min(int64(len(p)), l.left, chunk)]
	n, err := l.r.Read(p)
	l.left -= int64(n)
	l.read += int64(n)
	if err != nil && err != io.EOF {
		l.err = err
	}
	return n, err
}

// over reports whether more than the limit arrived.
func (l *limitReader) over() bool { return l.left <= 0 }

// describe turns a decoding error of data into INVALID_INPUT with the path of its place.
func describe(data []byte, err error) error {
	if err == nil {
		return nil
	}
	var se *json.SemanticError
	if errors.As(err, &se) {
		path := pathOf(data, se.JSONPointer)
		switch {
		case errors.Is(se.Err, json.ErrUnknownName):
			name := lastToken(se.JSONPointer)
			msg := "unknown field " + name
			if known := nameLike(se.GoType, name); known != "" {
				msg += "; did you mean " + known + "? Field names are case-sensitive"
			}
			return cubefleet.Invalid(path, "%s", msg)
		case se.GoType != nil && (se.Err == nil || se.JSONKind == '0'):
			return cubefleet.Invalid(path, "%s must be %s", fieldName(path), typeName(se.GoType))
		}
		var sy *jsontext.SyntacticError
		if !errors.As(se.Err, &sy) {
			return cubefleet.Invalid(path, "%s: %v", fieldName(path), se.Err)
		}
	}
	var sy *jsontext.SyntacticError
	if errors.As(err, &sy) {
		path := pathOf(data, sy.JSONPointer)
		switch {
		case errors.Is(sy.Err, jsontext.ErrDuplicateName):
			return cubefleet.Invalid(path, "%s appears twice in the same object; keep one", lastToken(sy.JSONPointer))
		case errors.Is(sy.Err, io.ErrUnexpectedEOF):
			return cubefleet.Invalid(path, "the input ends early at byte %d; close every string, array and object", sy.ByteOffset)
		case strings.Contains(sy.Err.Error(), "UTF-8"):
			return cubefleet.Invalid(path, "the input is not valid UTF-8 at byte %d; send UTF-8", sy.ByteOffset)
		}
		return cubefleet.Invalid(path, "the input is not valid JSON at byte %d: %v", sy.ByteOffset, sy.Err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return cubefleet.Invalid("", "the input is empty or ends early; it must be a JSON object")
	}
	return cubefleet.Invalid("", "the input is not a valid JSON object: %v", err)
}

// lastToken returns the last reference token of p, the name or index a problem is about.
func lastToken(p jsontext.Pointer) string {
	last := ""
	for tok := range p.Tokens() {
		last = tok
	}
	return last
}

// pathOf writes the JSON pointer p out as a path (Member, Index): data tells whether each
// token is a member's name or an array's index. A pointer data does not hold (cut short) is
// read with its numeric tokens as indexes from where data ends.
func pathOf(data []byte, p jsontext.Pointer) string {
	var toks []string
	for tok := range p.Tokens() {
		toks = append(toks, tok)
	}
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	path, known := "", true
	for i, tok := range toks {
		kind := jsontext.Kind(0)
		if known {
			kind = dec.PeekKind()
		}
		isIndex := kind == '[' || kind == 0 && isDigits(tok)
		if isIndex {
			n := 0
			fmt.Sscan(tok, &n)
			path = Index(path, n)
		} else {
			path = Member(path, tok)
		}
		if i == len(toks)-1 || !known {
			continue
		}
		known = descend(dec, kind, tok)
	}
	return path
}

// descend moves dec, at a container of kind, to the value of its member or element tok; false
// when it cannot.
func descend(dec *jsontext.Decoder, kind jsontext.Kind, tok string) bool {
	if _, err := dec.ReadToken(); err != nil {
		return false
	}
	switch kind {
	case '{':
		for dec.PeekKind() == '"' {
			name, err := dec.ReadToken()
			if err != nil {
				return false
			}
			if name.String() == tok {
				return true
			}
			if dec.SkipValue() != nil {
				return false
			}
		}
	case '[':
		n := 0
		fmt.Sscan(tok, &n)
		for i := 0; i < n; i++ {
			if dec.SkipValue() != nil {
				return false
			}
		}
		return dec.PeekKind() != ']' && dec.PeekKind() != 0
	}
	return false
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// nameLike returns the JSON name of a field of struct type t that equals name but for case, or
// "".
func nameLike(t reflect.Type, name string) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return ""
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-" || !f.IsExported() && !f.Anonymous:
			continue
		case f.Anonymous && tag == "":
			if n := nameLike(f.Type, name); n != "" {
				return n
			}
			continue
		case tag == "":
			tag = f.Name
		}
		if strings.EqualFold(tag, name) {
			return tag
		}
	}
	return ""
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '[', ']':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "an object"
}

func fieldName(f string) string {
	if f == "" {
		return "the input"
	}
	return f
}

func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "an integer"
}
