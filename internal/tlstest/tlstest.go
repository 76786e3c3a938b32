// Package tlstest makes throwaway certificate authorities and server certificates for tests of
// the TLS listeners and their clients: an ECDSA P-256 CA and, signed by it, server certificates
// for 127.0.0.1 and localhost, as PEM files. The keys are generated per test and never leave
// its temporary directory. Never for production.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	// Cert is the CA's self-signed certificate (valid from an hour ago for a day).
	Cert *x509.Certificate
	// PEM is Cert PEM-encoded ("CERTIFICATE" block), what a --ca-file holds.
	PEM []byte
	key *ecdsa.PrivateKey
}

// Files are the paths of a CA and a server certificate pair written by Write.
type Files struct {
	CA   string // the CA certificate, PEM, mode 0644: what clients pass as --ca-file
	Cert string // the server certificate for 127.0.0.1 and localhost, PEM, mode 0644
	Key  string // its private key, PEM (PKCS #8), mode 0600
}

// NewCA returns a new CA whose certificate's common name is name. It fails the test on error.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"cubefleet tests"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Issue returns a new server certificate signed by ca for the IP address 127.0.0.1 and the
// name localhost, valid from an hour ago for a day, with common name cn: the parsed
// certificate, its PEM and its private key's PEM (PKCS #8).
func (ca *CA) Issue(t testing.TB, cn string) (cert *x509.Certificate, certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})
}

// WriteServer issues a server certificate with common name cn (see Issue) and writes it to
// certFile (mode 0644) and its key to keyFile (mode 0600), each through a temporary file and a
// rename, as an operator rotating certificates would. It returns the certificate.
func (ca *CA) WriteServer(t testing.TB, certFile, keyFile, cn string) *x509.Certificate {
	t.Helper()
	cert, certPEM, keyPEM := ca.Issue(t, cn)
	writeAtomic(t, keyFile, keyPEM, 0o600)
	writeAtomic(t, certFile, certPEM, 0o644)
	return cert
}

// Write makes a CA and a server certificate for 127.0.0.1 in dir (ca.pem, server.pem,
// server.key; see Files) and returns the CA and the paths.
func Write(t testing.TB, dir string) (*CA, Files) {
	t.Helper()
	ca := NewCA(t, "cubefleet test CA")
	f := Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server.key")}
	writeAtomic(t, f.CA, ca.PEM, 0o644)
	ca.WriteServer(t, f.Cert, f.Key, "cubefleet test server")
	return ca, f
}

func writeAtomic(t testing.TB, path string, data []byte, mode os.FileMode) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, mode); err != nil { // the umask may have narrowed it
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
