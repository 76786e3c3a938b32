package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cubefleet/cubefleet/internal/privatefile"
)

// DefaultTLSReloadEvery is how often, at most, a TLS server looks at Config.TLSCert and
// Config.TLSKey for a new pair (on a TLS handshake, so an idle server reads nothing).
const DefaultTLSReloadEvery = 2 * time.Second

// loadTLSPair reads the PEM certificate chain in certFile and the PEM private key in keyFile and
// returns them as a pair. keyFile must be a private file: a regular file, not a symlink, owned
// by the calling user, with mode 0600 (privatefile.Check; the refusal names the file and says
// to run chmod 600). The certificate must match the key. Errors name both files and never hold
// the key's bytes.
func loadTLSPair(certFile, keyFile string) (*tls.Certificate, error) {
	if err := privatefile.Check(keyFile); err != nil {
		return nil, fmt.Errorf("TLS key (--tls-key): %w", err)
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate (--tls-cert): %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS key (--tls-key): %w", err)
	}
	// X509KeyPair's errors describe what is wrong (no PEM block, a mismatch, an unsupported
	// key), never the bytes it was given.
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s (--tls-cert, --tls-key) are not a usable pair: %v", certFile, keyFile, err)
	}
	return &pair, nil
}

// fileStamp identifies one version of a file: a rewrite or a rename over it changes it.
type fileStamp struct {
	mtime int64 // nanoseconds since the epoch
	size  int64
	ino   uint64
}

// pairStamp identifies one version of the certificate and key files.
type pairStamp struct{ cert, key fileStamp }

func statFile(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	st := fileStamp{mtime: fi.ModTime().UnixNano(), size: fi.Size()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st, nil
}

// certReloader serves the certificate pair of two PEM files to tls.Config.GetCertificate and
// reloads it when either file changes, looking at most every `every`. A new pair that fails to
// load keeps the last good pair in service and is logged once, when it has failed on two looks
// in a row (a rotation caught between writing the key and the certificate is not logged), so
// operators can rotate certificates without a restart.
type certReloader struct {
	certFile, keyFile string
	every             time.Duration
	log               *slog.Logger
	cert              atomic.Pointer[tls.Certificate]

	mu      sync.Mutex // held while looking at the files; guards the fields below
	checked time.Time  // when the files were last looked at
	loaded  pairStamp  // the files' version that cert came from
	pending string     // the failure of the last look ("" when it loaded or nothing changed)
	logged  string     // the last failure logged ("" after a good load), to log each once
}

// newCertReloader loads the pair (loadTLSPair) and returns a reloader serving it; a pair that
// does not load is an error.
func newCertReloader(certFile, keyFile string, every time.Duration, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, every: every, log: log}
	st, err := r.stat()
	if err != nil {
		return nil, err
	}
	pair, err := loadTLSPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r.cert.Store(pair)
	r.loaded, r.checked = st, time.Now()
	r.logLoaded("TLS certificate loaded", pair)
	return r, nil
}

func (r *certReloader) stat() (pairStamp, error) {
	c, err := statFile(r.certFile)
	if err != nil {
		return pairStamp{}, fmt.Errorf("TLS certificate (--tls-cert): %w", err)
	}
	k, err := statFile(r.keyFile)
	if err != nil {
		return pairStamp{}, fmt.Errorf("TLS key (--tls-key): %w", err)
	}
	return pairStamp{c, k}, nil
}

// getCertificate is tls.Config.GetCertificate: the current pair, after looking at the files
// when `every` has passed since the last look. A handshake never waits for another one's look:
// while one goroutine reads the files, the others get the current pair.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if r.mu.TryLock() {
		if now := time.Now(); now.Sub(r.checked) >= r.every {
			r.checked = now
			r.reload()
		}
		r.mu.Unlock()
	}
	return r.cert.Load(), nil
}

// reload loads the pair when the files changed since the pair in use was loaded. r.mu is held.
func (r *certReloader) reload() {
	st, err := r.stat()
	if err == nil && st == r.loaded {
		r.pending, r.logged = "", ""
		return
	}
	var pair *tls.Certificate
	if err == nil {
		pair, err = loadTLSPair(r.certFile, r.keyFile)
	}
	if err != nil {
		// The files' version and the error identify a failure. One seen on two looks in a row
		// is not a rotation in progress: log it, once. It is retried at every look (the
		// operator may fix it) but not logged again until it changes.
		failure := fmt.Sprintf("%+v %v", st, err)
		if failure == r.pending && failure != r.logged {
			r.logged = failure
			r.log.Error("the TLS certificate files changed but do not load; still serving the previous certificate",
				"cert", r.certFile, "key", r.keyFile, "err", err)
		}
		r.pending = failure
		return
	}
	r.cert.Store(pair)
	r.loaded, r.pending, r.logged = st, "", ""
	r.logLoaded("TLS certificate reloaded", pair)
}

func (r *certReloader) logLoaded(msg string, pair *tls.Certificate) {
	leaf := pair.Leaf
	if leaf == nil {
		r.log.Info(msg, "cert", r.certFile, "key", r.keyFile)
		return
	}
	r.log.Info(msg, "cert", r.certFile, "key", r.keyFile, "subject", leaf.Subject.String(),
		"not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	if now := time.Now(); now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		r.log.Warn("the TLS certificate is not valid now: clients will refuse it", "cert", r.certFile,
			"not_before", leaf.NotBefore.UTC().Format(time.RFC3339), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
}

// tlsConfig returns the server side TLS configuration: TLS 1.2 or later, the reloader's pair.
func (r *certReloader) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.getCertificate}
}

// errTLSHalf is the error of a Config with only one of TLSCert and TLSKey.
var errTLSHalf = errors.New("TLS needs both a certificate and a key")

// checkTLSFlags returns an error naming the missing one of TLSCert and TLSKey, if only one is set.
func (c *Config) checkTLSFlags() error {
	switch {
	case c.TLSCert != "" && c.TLSKey == "":
		return fmt.Errorf("%w: --tls-key is missing (--tls-cert is set)", errTLSHalf)
	case c.TLSCert == "" && c.TLSKey != "":
		return fmt.Errorf("%w: --tls-cert is missing (--tls-key is set)", errTLSHalf)
	}
	return nil
}
