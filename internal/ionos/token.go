package ionos

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"

	"github.com/cubefleet/cubefleet"
)

// DefaultTokenFile is where the operator keeps the API token (docs/ionos.md,
// "Private files": the git-ignored .private/ directory).
const DefaultTokenFile = ".private/ionos-api-token.txt"

// maxTokenFile is the largest token file read (64 KiB); IONOS tokens are a few KiB.
const maxTokenFile = 64 << 10

const redacted = "[redacted]"

// ErrInsecureTokenFile is wrapped by every refusal of ReadTokenFile.
var ErrInsecureTokenFile = errors.New("ionos: token file refused")

// Token is an IONOS API bearer token. It never reveals itself: String, GoString, Format
// (every verb), MarshalJSON, MarshalText and LogValue give "[redacted]", and it holds the
// secret behind a pointer so a struct containing a Token prints an address, not the secret.
// The zero Token is empty. Only this package's HTTP transport reads the secret, to set the
// Authorization header.
type Token struct{ secret *string }

// NewToken wraps s (for tests and callers that hold the token elsewhere; operators use
// ReadTokenFile).
func NewToken(s string) Token { return Token{secret: &s} }

// IsZero reports whether t holds no token.
func (t Token) IsZero() bool { return t.secret == nil || *t.secret == "" }

// Matches reports, in constant time, whether s is the token (for a server that checks
// tokens, such as the simulator). The zero Token matches nothing.
func (t Token) Matches(s string) bool {
	return !t.IsZero() && subtle.ConstantTimeCompare([]byte(s), []byte(*t.secret)) == 1
}

func (t Token) reveal() string {
	if t.secret == nil {
		return ""
	}
	return *t.secret
}

// String implements fmt.Stringer without revealing the token.
func (t Token) String() string { return redacted }

// GoString implements fmt.GoStringer without revealing the token.
func (t Token) GoString() string { return "ionos.Token(" + redacted + ")" }

// Format implements fmt.Formatter for every verb without revealing the token.
func (t Token) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, redacted) }

// MarshalJSON implements json.Marshaler without revealing the token.
func (t Token) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText implements encoding.TextMarshaler without revealing the token.
func (t Token) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// LogValue implements slog.LogValuer without revealing the token.
func (t Token) LogValue() slog.Value { return slog.StringValue(redacted) }

// ReadTokenFile reads the API token from path, which must be a regular file (not a symbolic
// link, FIFO or device) owned by the calling user with mode 0600, holding the token (surrounding
// whitespace is trimmed) and nothing else. Every refusal is a *cubefleet.Error with code
// INVALID_INPUT that names the file and the problem and wraps ErrInsecureTokenFile; no error
// contains the file's contents (docs/ionos.md, "Private files").
func ReadTokenFile(path string) (Token, error) {
	refuse := func(format string, args ...any) (Token, error) {
		msg := fmt.Sprintf("token file %s: ", path) + fmt.Sprintf(format, args...)
		return Token{}, &cubefleet.Error{Code: cubefleet.CodeInvalidInput, Message: msg,
			Details: map[string]any{"path": "--token-file"}, Err: ErrInsecureTokenFile}
	}
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return refuse("does not exist; write the token there with `umask 077` first")
	case err != nil:
		return refuse("cannot be examined: %v", cause(err))
	case st.Mode()&fs.ModeSymlink != 0:
		return refuse("is a symbolic link; use the regular file it points to, not a link")
	case !st.Mode().IsRegular():
		return refuse("is not a regular file (%s)", st.Mode().Type())
	}
	f, err := openNoFollow(path)
	if err != nil {
		return refuse("cannot be opened: %v", cause(err))
	}
	defer f.Close()
	// Check the file we opened, not the name: it may have been replaced since Lstat.
	st, err = f.Stat()
	if err != nil {
		return refuse("cannot be examined: %v", cause(err))
	}
	if !st.Mode().IsRegular() {
		return refuse("is not a regular file (%s)", st.Mode().Type())
	}
	if uid, mine := ownedByCaller(st); !mine {
		return refuse("is owned by uid %d, not by the user running cubefleet (uid %d); chown it", uid, os.Getuid())
	}
	if perm := st.Mode().Perm(); perm != 0o600 || st.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
		return refuse("has mode %04o; it must be 0600 (run `chmod 600 %s`)", perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return refuse("cannot be read: %v", cause(err))
	}
	if len(data) > maxTokenFile {
		return refuse("is larger than %d KiB; it should hold only the token", maxTokenFile>>10)
	}
	tok := bytes.TrimSpace(data)
	if len(tok) == 0 {
		return refuse("is empty")
	}
	for _, b := range tok {
		if b <= ' ' || b == 0x7f {
			return refuse("holds more than one token (whitespace or control characters inside); keep only the token")
		}
	}
	return NewToken(string(tok)), nil
}

// cause strips the *fs.PathError around err (its path is already in the message).
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
