package envfile

import (
	"bytes"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

func TestParseEnv(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Var
	}{
		{"empty", "", nil},
		{"comments and blanks", "# a comment\n\n   \n\t# indented\n", nil},
		{"plain", "A=1\nB=two\n", []Var{{"A", "1", 1}, {"B", "two", 2}}},
		{"export", "export A=1\nexport\tB=2", []Var{{"A", "1", 1}, {"B", "2", 2}}},
		{"empty value", "A=\nB=''\nC=\"\"", []Var{{"A", "", 1}, {"B", "", 2}, {"C", "", 3}}},
		{"trailing comment", "A=1 # the first\nB='x y' # two words", []Var{{"A", "1", 1}, {"B", "x y", 2}}},
		{"hash inside a word", "A=a#b\nB=#c", []Var{{"A", "a#b", 1}, {"B", "#c", 2}}},
		{"single quotes", `A='$HOME \n "x"'`, []Var{{"A", `$HOME \n "x"`, 1}}},
		{"double quotes", `A="a \"b\" \\ \$c d\e"`, []Var{{"A", `a "b" \ $c d\e`, 1}}},
		{"concatenation", `A='it'\''s'"!"x`, []Var{{"A", `it's!x`, 1}}},
		{"backslash unquoted", `A=a\ b\$c`, []Var{{"A", `a b$c`, 1}}},
		{"multi-line quoted", "A='one\ntwo'\nB=3", []Var{{"A", "one\ntwo", 1}, {"B", "3", 3}}},
		{"line continuation", "A=one\\\ntwo\nB=\"x\\\ny\"", []Var{{"A", "onetwo", 1}, {"B", "xy", 3}}},
		{"CRLF", "A=1\r\nB='2'\r\n", []Var{{"A", "1", 1}, {"B", "2", 2}}},
		{"two on a line", "A=1 B=2", []Var{{"A", "1", 1}, {"B", "2", 1}}},
		{"repeat", "A=1\nA=2", []Var{{"A", "1", 1}, {"A", "2", 2}}},
		{"url and options", "CUBE_S3_ENDPOINT=http://10.0.0.1:9000\nCUBE_S3_S3FS_EXTRA_OPTS=-ouse_path_request_style",
			[]Var{{"CUBE_S3_ENDPOINT", "http://10.0.0.1:9000", 1}, {"CUBE_S3_S3FS_EXTRA_OPTS", "-ouse_path_request_style", 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse(%q)\n got %#v\nwant %#v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseEnvRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"A", `line 1: want NAME=VALUE, found "A"`},
		{"A = 1", `line 1: "A" is followed by a space before =: remove the spaces around = (A=VALUE)`},
		{"A\t=1", `line 1: "A" is followed by a space before =`},
		{"1A=2", `line 1: "1A" is not a variable name: names are letters, digits and _, and do not start with a digit`},
		{"A-B=2", `line 1: "A-B" is not a variable name`},
		{"A=1 rm -rf /", `line 1: the value of A ends at the space before "rm" (the shell would run "rm" as a command): a value with spaces must be quoted: A='1 rm -rf /'`},
		{"A=\"it's\" two", `line 1: the value of A ends at the space before "two" (the shell would run "two" as a command): a value with spaces must be quoted`},
		// A space after =: the value is empty and the next word would run as a command.
		{"# ten lines\n\n\n\n\n\n\n\n\n\nNAME= value", `line 11: NAME= is followed by a space, so "value" is not its value (the shell would run it as a command): remove the space after = (NAME=value), or quote a value that starts with a space (NAME=' value')`},
		{"NAME= 1", `line 1: NAME= is followed by a space, so "1" is not its value`},
		// A redirection after a value.
		{"A=1\nX=1 2>/dev/null", `line 2: "2>/dev/null" after the value of X is a shell redirection or operator, which an env file cannot hold (the agent reads the file, it does not run it): remove it, or quote the value if it belongs to it`},
		{"X=1 >out", `line 1: ">out" after the value of X is a shell redirection or operator`},
		{"A=$HOME", "line 1: the value of A uses '$', which the shell would expand; put the value in single quotes"},
		{"\nA=`id`", "line 2: the value of A uses '`'"},
		{`A="x$y"`, "the value of A uses '$' inside double quotes"},
		{"A=~/x", "starts with ~"},
		{"A=x;y", "the value of A contains ';', a shell operator"},
		{"A=x|y", "shell operator"},
		{"A='open", "no closing single quote"},
		{`A="open`, "no closing double quote"},
		{"A=1\n\nB=\"x\\", "line 3: the value of B has no closing double quote"},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestWriteEnvShellRoundTrip(t *testing.T) {
	vars := []Var{
		{Value: "a comment\non two lines"},
		{},
		{Name: "PLAIN", Value: "http://10.0.0.1:9000"},
		{Name: "SPACES", Value: "a b  c"},
		{Name: "QUOTES", Value: `it's "quoted" $HOME \n`},
		{Name: "NEWLINE", Value: "one\ntwo"},
		{Name: "EMPTY", Value: ""},
		{Name: "TILDE", Value: "~/x"},
	}
	var buf bytes.Buffer
	if err := Write(&buf, vars); err != nil {
		t.Fatal(err)
	}
	parsed, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatalf("Parse(Write(...)): %v\n%s", err, buf.String())
	}
	m := Map(parsed)
	for _, v := range vars[2:] {
		if m[v.Name].Value != v.Value {
			t.Errorf("%s: got %q, want %q", v.Name, m[v.Name].Value, v.Value)
		}
	}
	// The shell reads the same values.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	f := t.TempDir() + "/env"
	if err := os.WriteFile(f, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, v := range vars[2:] {
		out, err := exec.Command(sh, "-c", `. "$1"; printf %s "$`+v.Name+`"`, "sh", f).Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != v.Value {
			t.Errorf("sh: %s = %q, want %q", v.Name, out, v.Value)
		}
	}
	if err := Write(&buf, []Var{{Name: "BAD-NAME", Value: "x"}}); err == nil {
		t.Error("Write accepted an invalid name")
	}
}

// FuzzParseEnv checks that Parse never panics and that what it accepts survives a round trip
// through Write.
func FuzzParseEnv(f *testing.F) {
	for _, s := range []string{
		"A=1\nB='two words'\n# c\nexport C=\"x\\\"y\"\n",
		"ONE_CLICK_DEPLOY_ROLE=compute\r\nCUBE_SANDBOX_NODE_IP=10.0.0.5 # node\r\n",
		`A='it'\''s'`, "A=a\\\nb", "A=\"multi\nline\"", "A=$x", "=", "A=\\", "export  A=1 B=2",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		vars, err := Parse(data)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := Write(&buf, vars); err != nil {
			t.Fatalf("Write of parsed vars: %v", err)
		}
		again, err := Parse(buf.Bytes())
		if err != nil {
			t.Fatalf("Parse(Write(vars)): %v\n%q", err, buf.String())
		}
		if len(again) != len(vars) {
			t.Fatalf("round trip: %d vars, want %d", len(again), len(vars))
		}
		for i := range vars {
			if again[i].Name != vars[i].Name || again[i].Value != vars[i].Value {
				t.Fatalf("round trip: %#v, want %#v", again[i], vars[i])
			}
		}
	})
}

// TestQuote: every value is one shell word that sh reads back as the value: safe ones as they
// are, others single-quoted (a quote inside escaped), the empty one as two single quotes.
func TestQuote(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain-value_1.2:3,@%+=/", "plain-value_1.2:3,@%+=/"},
		{"", "''"},
		{"hello world", "'hello world'"},
		{"it's", `'it'\''s'`},
		{"$HOME", "'$HOME'"},
	} {
		if got := Quote(c.in); got != c.want {
			t.Errorf("Quote(%q) = %s, want %s", c.in, got, c.want)
		}
		if c.in == "" {
			continue
		}
		out, err := exec.Command("sh", "-c", "printf %s "+Quote(c.in)).Output()
		if err != nil || string(out) != c.in {
			t.Errorf("sh read %s as %q (%v), want %q", Quote(c.in), out, err, c.in)
		}
	}
}
