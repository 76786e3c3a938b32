// Package envfile reads and writes env files: Cube Sandbox's `.env` (install-compute.sh sources
// it with `. ./.env`), the file the node agent reads its settings from and the one `agent
// install` writes. Parse accepts the subset of POSIX shell syntax that assigns without
// expanding or running anything, and Write writes what both Parse and a shell read back to the
// same values. See docs/agent.md, "The env file".
package envfile

import (
	"fmt"
	"io"
	"strings"
)

// Var is one assignment of an env file: Name=Value, from line Line (1-based; 0 for a value
// that was not read from a file).
type Var struct {
	Name  string // [A-Za-z_][A-Za-z0-9_]*; "" in Write for a comment
	Value string // unquoted
	Line  int    // where the assignment starts
}

// Parse parses an env file (Cube Sandbox's `.env`) in the subset of POSIX shell syntax that
// `. ./.env` runs without executing anything: one or more `NAME=VALUE` assignments per line,
// optionally preceded by `export `; blank lines and `#` comments; values unquoted (a backslash
// escapes the next character), in single quotes (literal) or in double quotes (`\"`, `\\`, `\$`
// and "\`" escaped), or a concatenation of those, as in
//
//	A='it'\''s'
//
// Quoted values may span lines. A CR before a newline is ignored.
//
// It refuses what the shell would expand or execute, instead of guessing: `$` and backquotes
// outside single quotes, an unquoted `~` at the start of a value, the operators `;&|<>()`, and
// any word that is not an assignment. Names are `[A-Za-z_][A-Za-z0-9_]*`. Assignments are
// returned in file order; when a name repeats, the last one wins (as in the shell). Errors name
// the line and say how to fix it.
func Parse(data []byte) ([]Var, error) {
	p := &parser{s: string(data), line: 1}
	var out []Var
	for {
		p.skipBlank()
		if p.eof() {
			return out, nil
		}
		switch c := p.peek(); {
		case c == '\n':
			p.next()
			p.prev = nil
			continue
		case c == '#':
			p.skipComment()
			continue
		}
		v, err := p.assignment()
		if err != nil {
			return nil, err
		}
		// A value ends at a blank or a newline; what follows on the line must be a comment or
		// another assignment, which the next round reads.
		out = append(out, v)
		p.prev = &out[len(out)-1]
	}
}

// Map returns vars as a map; for a repeated name the last assignment wins.
func Map(vars []Var) map[string]Var {
	m := make(map[string]Var, len(vars))
	for _, v := range vars {
		m[v.Name] = v
	}
	return m
}

// Write writes vars as an env file that both Parse and a POSIX shell read back to the same
// values: `NAME=value` when value holds only characters that need no quoting, else
// `NAME='value'`, where a single quote is written as quote, backslash, quote, quote (the
// shell's idiom for ending the quoted string, adding a literal quote and opening a new one). A
// var with an empty Name writes its Value as a comment line (`# ...`); an empty comment writes a
// blank line. Names must be valid (see Parse); an invalid one is an error.
func Write(w io.Writer, vars []Var) error {
	var b strings.Builder
	for _, v := range vars {
		if v.Name == "" {
			if v.Value == "" {
				b.WriteString("\n")
				continue
			}
			for _, l := range strings.Split(v.Value, "\n") {
				b.WriteString(strings.TrimRight("# "+l, " "))
				b.WriteString("\n")
			}
			continue
		}
		if !ValidName(v.Name) {
			return fmt.Errorf("env file: %q is not a valid variable name", v.Name)
		}
		b.WriteString(v.Name)
		b.WriteByte('=')
		if v.Value != "" {
			b.WriteString(Quote(v.Value))
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Quote returns value as one POSIX shell word: as it is when it holds only letters, digits and
// `_./:,@%+=-`, else in single quotes (a single quote inside ends the quoted part, is escaped
// with a backslash, and a new quoted part begins); the empty value is two single quotes. The env file's values
// are written so (an empty one as nothing after the =), and so are the commands the CLI
// suggests and shows.
func Quote(value string) string {
	if value == "" {
		return "''"
	}
	safe := true
	for i := 0; i < len(value); i++ {
		c := value[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("_./:,@%+=-", c) >= 0) {
			safe = false
			break
		}
	}
	if safe {
		return value
	}
	return "'" + strings.ReplaceAll(value, "'", `'\''`) + "'"
}

// ValidName reports whether s is a variable name an env file can hold: `[A-Za-z_][A-Za-z0-9_]*`.
func ValidName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

type parser struct {
	s    string
	i    int
	line int
	// prev is the assignment read last on the current line (nil at the start of a line), and
	// prevRawEmpty whether its value was written as nothing at all (NAME=), for errors about
	// what follows it.
	prev         *Var
	prevRawEmpty bool
}

func (p *parser) eof() bool  { return p.i >= len(p.s) }
func (p *parser) peek() byte { return p.s[p.i] }

func (p *parser) next() byte {
	c := p.s[p.i]
	p.i++
	if c == '\n' {
		p.line++
	}
	return c
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("line %d: %s", p.line, fmt.Sprintf(format, args...))
}

// skipBlank skips spaces, tabs and a CR that ends a line.
func (p *parser) skipBlank() {
	for !p.eof() {
		switch p.peek() {
		case ' ', '\t':
			p.i++
		case '\r':
			if p.i+1 < len(p.s) && p.s[p.i+1] != '\n' {
				return
			}
			p.i++
		default:
			return
		}
	}
}

func (p *parser) skipComment() {
	for !p.eof() && p.peek() != '\n' {
		p.i++
	}
}

// assignment reads `[export ]NAME=VALUE` and the blanks and comment after it.
func (p *parser) assignment() (Var, error) {
	line := p.line
	start := p.i
	for !p.eof() && isNameByte(p.peek(), p.i > start) {
		p.i++
	}
	name := p.s[start:p.i]
	if name == "export" && !p.eof() && (p.peek() == ' ' || p.peek() == '\t') {
		p.skipBlank()
		return p.assignment()
	}
	if name == "" || p.eof() || p.peek() != '=' {
		return Var{}, p.notAssignment(start, name)
	}
	p.i++ // '='
	valueStart := p.i
	value, err := p.value(name)
	if err != nil {
		return Var{}, err
	}
	p.prevRawEmpty = p.i == valueStart
	p.skipBlank()
	if !p.eof() && p.peek() == '#' {
		p.skipComment()
	}
	return Var{Name: name, Value: value, Line: line}, nil
}

// notAssignment explains why the word at start (whose name part is name) is not NAME=VALUE:
// a space after the previous assignment's =, a value with spaces that is not quoted, a shell
// redirection or operator, spaces around =, or something else.
func (p *parser) notAssignment(start int, name string) error {
	end := start
	for end < len(p.s) && strings.IndexByte(" \t\r\n", p.s[end]) < 0 {
		end++
	}
	word := p.s[start:end]
	rest := p.s[start:]
	if i := strings.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[:i]
	}
	rest = strings.TrimRight(rest, " \t\r")
	if prev := p.prev; prev != nil {
		switch {
		case strings.ContainsAny(word, "<>|&;()"):
			return p.errorf("%q after the value of %s is a shell redirection or operator, which an env file cannot hold (the agent reads the file, it does not run it): remove it, or quote the value if it belongs to it", word, prev.Name)
		case p.prevRawEmpty:
			return p.errorf("%s= is followed by a space, so %q is not its value (the shell would run it as a command): remove the space after = (%s=%s), or quote a value that starts with a space (%s=' %s')", prev.Name, word, prev.Name, rest, prev.Name, rest)
		case !strings.Contains(prev.Value+rest, "'"):
			return p.errorf("the value of %s ends at the space before %q (the shell would run %q as a command): a value with spaces must be quoted: %s='%s %s'", prev.Name, word, word, prev.Name, prev.Value, rest)
		default:
			return p.errorf("the value of %s ends at the space before %q (the shell would run %q as a command): a value with spaces must be quoted", prev.Name, word, word)
		}
	}
	if name != "" {
		q := p.i
		for q < len(p.s) && (p.s[q] == ' ' || p.s[q] == '\t') {
			q++
		}
		if q > p.i && q < len(p.s) && p.s[q] == '=' {
			return p.errorf("%q is followed by a space before =: remove the spaces around = (%s=VALUE)", name, name)
		}
	}
	if n, _, ok := strings.Cut(word, "="); ok {
		return p.errorf("%q is not a variable name: names are letters, digits and _, and do not start with a digit", n)
	}
	if word == "" && start < len(p.s) {
		word = string(p.s[start])
	}
	return p.errorf("want NAME=VALUE, found %q (names are letters, digits and _, with no spaces around =)", word)
}

func isNameByte(c byte, notFirst bool) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || notFirst && c >= '0' && c <= '9'
}

// value reads one shell word: unquoted, '...' and "..." parts up to an unquoted blank or newline.
func (p *parser) value(name string) (string, error) {
	var b strings.Builder
	first := true
	for !p.eof() {
		c := p.peek()
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			return b.String(), nil
		case c == '\r' && (p.i+1 == len(p.s) || p.s[p.i+1] == '\n'):
			return b.String(), nil
		case c == '\'':
			p.next()
			closed := false
			for !p.eof() {
				c := p.next()
				if c == '\'' {
					closed = true
					break
				}
				b.WriteByte(c)
			}
			if !closed {
				return "", p.errorf("the value of %s has no closing single quote", name)
			}
		case c == '"':
			p.next()
			if err := p.doubleQuoted(name, &b); err != nil {
				return "", err
			}
		case c == '\\':
			p.next()
			if p.eof() {
				b.WriteByte('\\')
				break
			}
			if e := p.next(); e != '\n' { // backslash-newline continues the line
				b.WriteByte(e)
			}
		case c == '$' || c == '`':
			return "", p.errorf("the value of %s uses %q, which the shell would expand; put the value in single quotes to keep it literal", name, c)
		case c == '~' && first:
			return "", p.errorf("the value of %s starts with ~, which the shell would expand; write the full path or quote it", name)
		case strings.IndexByte(";&|<>()", c) >= 0:
			return "", p.errorf("the value of %s contains %q, a shell operator; put the value in single quotes", name, c)
		default:
			b.WriteByte(p.next())
		}
		first = false
	}
	return b.String(), nil
}

func (p *parser) doubleQuoted(name string, b *strings.Builder) error {
	for !p.eof() {
		c := p.next()
		switch c {
		case '"':
			return nil
		case '\\':
			if p.eof() {
				return p.errorf("the value of %s has no closing double quote", name)
			}
			switch e := p.next(); e {
			case '"', '\\', '$', '`':
				b.WriteByte(e)
			case '\n': // line continuation
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		case '$', '`':
			return p.errorf("the value of %s uses %q inside double quotes, which the shell would expand; use single quotes to keep it literal", name, c)
		default:
			b.WriteByte(c)
		}
	}
	return p.errorf("the value of %s has no closing double quote", name)
}
