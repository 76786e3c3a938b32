package cli

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cubefleet/cubefleet/internal/testkit"
)

// hostileOutput is what a tenant's command may print to reach the operator's terminal: an OSC
// 52 clipboard write, a screen clear, a CSI in its C1 form, a bidi override, a lone CR, bytes
// that are not UTF-8, next to the newlines and tabs that stay.
var hostileOutput = []byte("ok\tfine\n\x1b]52;c;Y3VybCBldmlsLnNofHNo\a\x1b[2J\x1b[Hcleared\r\xc2\x9b31mred\u202eevil\xff\n")

// openPty returns a pseudo-terminal's two ends: the terminal side a program writes to, and the
// controller side that reads what it wrote.
func openPty(t *testing.T) (term, controller *os.File) {
	t.Helper()
	controller, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { controller.Close() })
	fd := int(controller.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	term, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Close() })
	tio, err := unix.IoctlGetTermios(int(term.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Oflag &^= unix.OPOST // what is written arrives as written (no \n -> \r\n)
	if err := unix.IoctlSetTermios(int(term.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	return term, controller
}

// TestSandboxOutputToTerminal: a sandbox's output reaches a terminal with its control
// characters (but \n and \t) escaped (golden file), byte for byte with --raw, and a pipe or a
// buffer byte for byte.
func TestSandboxOutputToTerminal(t *testing.T) {
	term, controller := openPty(t)
	read := func(n int) []byte {
		t.Helper()
		buf := make([]byte, 0, n)
		for len(buf) < n {
			chunk := make([]byte, n-len(buf))
			k, err := controller.Read(chunk)
			if err != nil {
				t.Fatal(err)
			}
			buf = append(buf, chunk[:k]...)
		}
		return buf
	}
	if err := writeSandboxOutput(term, hostileOutput, false); err != nil {
		t.Fatal(err)
	}
	want := terminalText(hostileOutput)
	got := read(len(want))
	if !bytes.Equal(got, want) {
		t.Fatalf("the terminal got %q, want %q", got, want)
	}
	testkit.Golden(t, "sandbox_output_terminal.golden", got)
	if bytes.ContainsAny(got, "\x1b\a\r\u009b\u202e") {
		t.Errorf("a control character reached the terminal: %q", got)
	}
	if err := writeSandboxOutput(term, hostileOutput, true); err != nil {
		t.Fatal(err)
	}
	if got := read(len(hostileOutput)); !bytes.Equal(got, hostileOutput) {
		t.Errorf("--raw: the terminal got %q, want it byte for byte", got)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	writeSandboxOutput(w, hostileOutput, false)
	w.Close()
	var piped bytes.Buffer
	piped.ReadFrom(r)
	if !bytes.Equal(piped.Bytes(), hostileOutput) {
		t.Errorf("a pipe got %q, want it byte for byte", piped.Bytes())
	}
	if isTerminal(&piped) {
		t.Error("a buffer is taken for a terminal")
	}
}

// TestPendingStdin: standard input holding data is seen without being read (a pipe, a file),
// an empty, drained or closed one and a terminal are not.
func TestPendingStdin(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if pendingStdin(r) {
		t.Error("an empty pipe holds data")
	}
	w.WriteString("x\n")
	if !pendingStdin(r) {
		t.Error("a pipe holding x\\n: not seen")
	}
	if !pendingStdin(r) { // the first check read nothing
		t.Error("a pipe holding x\\n: read by the first check")
	}
	w.Close()
	r.Read(make([]byte, 8))
	if pendingStdin(r) {
		t.Error("a drained, closed pipe holds data")
	}
	f, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("data")
	f.Seek(0, 0)
	if !pendingStdin(f) {
		t.Error("a file holding data: not seen")
	}
	f.Seek(0, 2)
	if pendingStdin(f) {
		t.Error("a file read to its end holds data")
	}
	term, _ := openPty(t)
	if pendingStdin(term) || pendingStdin(nil) || pendingStdin(strings.NewReader("")) || !pendingStdin(strings.NewReader("x")) {
		t.Error("a terminal, no input or an empty reader holds data, or a reader holding x does not")
	}
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	if pendingStdin(devnull) {
		t.Error("/dev/null holds data")
	}
}
