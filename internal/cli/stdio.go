package cli

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether w is a terminal (a character device that answers TCGETS).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// writeSandboxOutput writes a sandbox's output stream b to w: byte for byte to a pipe or file
// (or with raw), and to a terminal with every control character but \n and \t shown as a
// visible escape (safeText's \x1b, \u009b, ...), so what a tenant's command printed can
// neither write the operator's clipboard (OSC 52), clear the screen nor move the cursor.
func writeSandboxOutput(w io.Writer, b []byte, raw bool) error {
	if raw || !isTerminal(w) {
		_, err := w.Write(b)
		return err
	}
	_, err := w.Write(terminalText(b))
	return err
}

// terminalText is b with safeText's escapes applied to everything between its newlines and
// tabs, which stay as they are.
func terminalText(b []byte) []byte {
	var out bytes.Buffer
	for i, line := range bytes.Split(b, []byte("\n")) {
		if i > 0 {
			out.WriteByte('\n')
		}
		for j, cell := range bytes.Split(line, []byte("\t")) {
			if j > 0 {
				out.WriteByte('\t')
			}
			out.WriteString(safeText(string(cell)))
		}
	}
	return out.Bytes()
}

// pendingStdin reports whether in, the command's standard input, is a pipe, socket or file
// holding bytes not yet read, without reading any of them (a terminal, /dev/null or an empty
// or drained pipe is not); an input that is no file (a test's reader) is read for one byte.
func pendingStdin(in io.Reader) bool {
	f, ok := in.(*os.File)
	if !ok {
		if in == nil {
			return false
		}
		n, _ := in.Read(make([]byte, 1))
		return n > 0
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		off, err := f.Seek(0, io.SeekCurrent)
		return err == nil && st.Size > off
	case unix.S_IFIFO, unix.S_IFSOCK:
		n, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCINQ) // FIONREAD: bytes waiting in the pipe
		return err == nil && n > 0
	}
	return false
}
