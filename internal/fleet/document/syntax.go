package document

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// syntaxError reads data, which is valid UTF-8 without a byte order mark and not blank, with
// encoding/json's Decoder.Token the way parse did before it used jsontext, and describes the first
// reason data is not one JSON value nested at most maxDepth deep: malformed JSON, nesting too
// deep, or data after the value. It returns nil if there is none.
//
// parse calls it only after jsontext has rejected data, so it stays off the common path; it
// keeps the words, and the positions, of Decode's messages about malformed input.
func syntaxError(data []byte) *parseError {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers are not converted, so 1e999 is no error
	s := syntaxChecker{dec: dec, data: data}
	if err := s.value(1); err != nil {
		return s.describe(err)
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return trailingData(data, end)
	}
	return nil
}

// syntaxChecker walks the tokens of a document as parse's tree builder does, without a tree.
type syntaxChecker struct {
	dec  *json.Decoder
	data []byte
}

// value reads the next value; depth is the nesting it would have if it is a container.
func (s *syntaxChecker) value(depth int) error {
	off := s.dec.InputOffset()
	tok, err := s.dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth > maxDepth {
			return &parseError{fmt.Sprintf("the document nests arrays and objects deeper than %d levels at %s", maxDepth, position(s.data, off))}
		}
		if t == '{' {
			return s.object(depth)
		}
		if t == '[' {
			return s.array(depth)
		}
		return &parseError{fmt.Sprintf("malformed JSON at %s: unexpected %q", position(s.data, off), rune(t))}
	case string, json.Number, bool, nil:
		return nil
	}
	return &parseError{fmt.Sprintf("malformed JSON at %s", position(s.data, off))}
}

func (s *syntaxChecker) object(depth int) error {
	for s.dec.More() {
		koff := s.dec.InputOffset()
		tok, err := s.dec.Token()
		if err != nil {
			return err
		}
		if _, ok := tok.(string); !ok {
			return &parseError{fmt.Sprintf("malformed JSON at %s: an object key must be a string", position(s.data, koff))}
		}
		if err := s.value(depth + 1); err != nil {
			return err
		}
	}
	_, err := s.dec.Token() // the closing '}'
	return err
}

func (s *syntaxChecker) array(depth int) error {
	for s.dec.More() {
		if err := s.value(depth + 1); err != nil {
			return err
		}
	}
	_, err := s.dec.Token() // the closing ']'
	return err
}

// describe turns a decoder error into a parseError with the position of the problem.
func (s *syntaxChecker) describe(err error) *parseError {
	var pe *parseError
	if errors.As(err, &pe) {
		return pe
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &parseError{fmt.Sprintf("malformed JSON at %s: %s", position(s.data, se.Offset), se.Error())}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &parseError{fmt.Sprintf("malformed JSON: the document ends early at %s; close every string, array and object", position(s.data, int64(len(s.data))))}
	}
	return &parseError{fmt.Sprintf("malformed JSON near %s", position(s.data, s.dec.InputOffset()))}
}

// position describes byte offset off of data the way editors show it: "line 3, column 7 (byte
// 42)", lines and columns counted from 1, columns in characters. An offset past the end is
// placed just after the last character.
func position(data []byte, off int64) string {
	off = max(0, min(off, int64(len(data))))
	before := data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
	return fmt.Sprintf("line %d, column %d (byte %d)", line, col, off)
}
