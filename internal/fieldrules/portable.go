package fieldrules

import (
	"fmt"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Portable reports the first construct of the regular expression re that lies outside the
// subset every draft 2020-12 JSON Schema validator compiles and reads alike: ECMA-262 with and
// without the u flag (JavaScript validators), Python's re (python-jsonschema), Go's RE2, PCRE,
// Java and .NET. The subset is:
//
//   - literal characters other than the metacharacters \ ^ $ . | ? * + ( ) [ ] { };
//   - the escapes \ followed by a metacharacter or '/', and \xHH;
//   - character classes [...] and [^...] of literal characters, those escapes, \- and ranges
//     a-b, with no '[' inside, no doubled '&', '~', '|' or '-' (set operations elsewhere);
//   - plain groups (...), alternation |, the anchors ^ and $;
//   - the quantifiers *, + and ?, and {n}, {n,} and {n,m} up to 1000, each after an atom.
//
// So no \p{...} or \d \w \s classes (Python has no \p; \d and \w are Unicode-aware in some
// engines), no \uXXXX or \x{...} (Go and PCRE lack one, ECMA-262 the other), no (?...) of any
// kind (inline flags, non-capturing groups, lookarounds), no \A, \z, \Z or \b, no
// backreferences, no '.', whose line terminators differ. One difference remains that no syntax
// avoids: Python's $ also matches before a final newline, so a Python validator accepts "x\n"
// where "x" is valid. The result is nil when re is portable; re must also parse as Go's RE2.
func Portable(re string) error {
	if _, err := syntax.Parse(re, syntax.Perl); err != nil {
		return err
	}
	s := &scanner{re: re}
	if err := s.alternation(0); err != nil {
		return err
	}
	if s.i < len(re) {
		return s.errorf("unbalanced ')'")
	}
	return nil
}

type scanner struct {
	re string
	i  int
}

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("pattern %q at byte %d: %s", s.re, s.i, fmt.Sprintf(format, args...))
}

func (s *scanner) peek() byte {
	if s.i < len(s.re) {
		return s.re[s.i]
	}
	return 0
}

// alternation reads branches separated by '|' up to a ')' or the end; depth counts open groups.
func (s *scanner) alternation(depth int) error {
	for {
		if err := s.branch(depth); err != nil {
			return err
		}
		if s.peek() != '|' {
			return nil
		}
		s.i++
	}
}

// branch reads atoms, each with at most one quantifier.
func (s *scanner) branch(depth int) error {
	for s.i < len(s.re) {
		c := s.re[s.i]
		switch c {
		case '|':
			return nil
		case ')':
			if depth == 0 {
				return s.errorf("unbalanced ')'")
			}
			return nil
		case '^', '$':
			s.i++
			continue // anchors take no quantifier
		case '(':
			s.i++
			if s.peek() == '?' {
				return s.errorf("(? constructs (flags, non-capturing groups, lookarounds) are not portable")
			}
			if err := s.alternation(depth + 1); err != nil {
				return err
			}
			if s.peek() != ')' {
				return s.errorf("unclosed group")
			}
			s.i++
		case '[':
			if err := s.class(); err != nil {
				return err
			}
		case '\\':
			if err := s.escape(false); err != nil {
				return err
			}
		case '.':
			return s.errorf("'.' is not portable (engines differ on line terminators); use a class")
		case '?', '*', '+', '{', '}', ']':
			return s.errorf("%q without an atom before it", c)
		default:
			if err := s.literal(); err != nil {
				return err
			}
		}
		if err := s.quantifier(); err != nil {
			return err
		}
	}
	return nil
}

func (s *scanner) literal() error {
	r, n := utf8.DecodeRuneInString(s.re[s.i:])
	if r == utf8.RuneError && n <= 1 {
		return s.errorf("invalid UTF-8")
	}
	if r > 0xFFFF {
		return s.errorf("a character beyond the Basic Multilingual Plane is two code units in ECMA-262 without the u flag")
	}
	s.i += n
	return nil
}

// escape reads \ and what follows; inClass allows \-.
func (s *scanner) escape(inClass bool) error {
	s.i++
	c := s.peek()
	switch {
	case c == 0:
		return s.errorf("trailing backslash")
	case strings.IndexByte(`\^$.|?*+()[]{}/`, c) >= 0, inClass && c == '-':
		s.i++
		return nil
	case c == 'x':
		if s.i+3 > len(s.re) || !isHex(s.re[s.i+1]) || !isHex(s.re[s.i+2]) {
			return s.errorf(`\x takes exactly two hex digits (\x{...} is not portable)`)
		}
		s.i += 3
		return nil
	}
	return s.errorf(`\%c is not portable`, c)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// class reads [...] or [^...].
func (s *scanner) class() error {
	s.i++
	if s.peek() == '^' {
		s.i++
	}
	start := s.i
	prevRangeEnd := false // the last item closed a range, so '-' cannot start another
	var last rune = -1    // the last single character, a possible range start
	for {
		if s.i >= len(s.re) {
			return s.errorf("unclosed class")
		}
		c := s.re[s.i]
		switch {
		case c == ']':
			if s.i == start {
				return s.errorf("empty class")
			}
			s.i++
			return nil
		case c == '[':
			return s.errorf("'[' inside a class is not portable (POSIX classes, nested classes)")
		case s.i+1 < len(s.re) && s.re[s.i+1] == c && strings.IndexByte("&~|-", c) >= 0:
			return s.errorf("doubled %q in a class is a set operation in some engines", c)
		case c == '-' && s.i != start && s.i+1 < len(s.re) && s.re[s.i+1] != ']':
			if last < 0 || prevRangeEnd {
				return s.errorf("'-' right after a range; write a literal '-' first or last")
			}
			s.i++
			hi, err := s.classChar()
			if err != nil {
				return err
			}
			if hi < last {
				return s.errorf("range out of order")
			}
			prevRangeEnd, last = true, -1
			continue
		}
		r, err := s.classChar()
		if err != nil {
			return err
		}
		prevRangeEnd, last = false, r
	}
}

// classChar reads one character of a class: a literal or an escape; it returns the character.
func (s *scanner) classChar() (rune, error) {
	if s.i >= len(s.re) {
		return 0, s.errorf("unclosed class")
	}
	if s.re[s.i] == '\\' {
		at := s.i
		if err := s.escape(true); err != nil {
			return 0, err
		}
		if s.re[at+1] == 'x' {
			v, _ := strconv.ParseUint(s.re[at+2:at+4], 16, 8)
			return rune(v), nil
		}
		return rune(s.re[at+1]), nil
	}
	r, _ := utf8.DecodeRuneInString(s.re[s.i:])
	if err := s.literal(); err != nil {
		return 0, err
	}
	return r, nil
}

// quantifier reads an optional quantifier after an atom.
func (s *scanner) quantifier() error {
	switch s.peek() {
	case '*', '+', '?':
		s.i++
	case '{':
		end := strings.IndexByte(s.re[s.i:], '}')
		if end < 0 {
			return s.errorf("unclosed {")
		}
		body := s.re[s.i+1 : s.i+end]
		lo, hi, comma := strings.Cut(body, ",")
		n, err := strconv.Atoi(lo)
		if err != nil || n > 1000 || lo != strconv.Itoa(n) {
			return s.errorf("{%s}: counts are decimal numbers up to 1000", body)
		}
		if comma && hi != "" {
			m, err := strconv.Atoi(hi)
			if err != nil || m > 1000 || m < n || hi != strconv.Itoa(m) {
				return s.errorf("{%s}: counts are decimal numbers up to 1000, the first not above the second", body)
			}
		}
		s.i += end + 1
	default:
		return nil
	}
	switch s.peek() {
	case '*', '+', '?', '{':
		return s.errorf("a quantifier after a quantifier (lazy or possessive) is not portable")
	}
	return nil
}
