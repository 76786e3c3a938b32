// Package capool loads the CA certificates that clients of an https:// control plane trust:
// the system's, plus a PEM bundle the operator names (the CLI's --ca-file, the agent's
// CUBEFLEET_CA_FILE), and the TLS settings those clients use.
package capool

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Load returns the system's CA certificates (none when the system has no pool) plus those of
// the PEM bundle in path. An error names the file: it cannot be read, or it holds no PEM
// "CERTIFICATE" block that parses. CA certificates are public, so the file's mode is not
// checked.
func Load(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate; it must hold the certificate of the CA that signed the control plane's (-----BEGIN CERTIFICATE-----)", path)
	}
	return pool, nil
}

// ClientConfig returns the TLS settings of a client of the control plane: TLS 1.2 or later,
// trusting roots (nil: the system's CAs).
func ClientConfig(roots *x509.CertPool) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
}
