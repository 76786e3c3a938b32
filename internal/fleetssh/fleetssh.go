// Package fleetssh reaches the fleet's hosts (the coordinator, the GPU WireGuard host) over
// SSH with the operator's key, checking every host key against a known_hosts file: an unknown
// or changed host key is refused. It runs one command per session and returns its output.
package fleetssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Dialer opens SSH connections as one identity: the private key and the known_hosts file
// every host key is checked against. Timeout bounds each connection's setup.
type Dialer struct {
	signer   ssh.Signer
	hostKeys ssh.HostKeyCallback
	timeout  time.Duration
}

// NewDialer reads keyFile (an unencrypted OpenSSH private key) and knownHostsFile. Errors
// name the file and what is wrong with it; they never contain the key.
func NewDialer(keyFile, knownHostsFile string, timeout time.Duration) (*Dialer, error) {
	pem, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("ssh key_file: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		return nil, fmt.Errorf("ssh key_file %s: not an unencrypted OpenSSH private key", keyFile)
	}
	hostKeys, err := knownhosts.New(knownHostsFile)
	if err != nil {
		return nil, fmt.Errorf("ssh known_hosts_file: %w", err)
	}
	return &Dialer{signer: signer, hostKeys: hostKeys, timeout: timeout}, nil
}

// HostKeyError is a refused host key: Changed when known_hosts holds another key for the
// host (possibly an attack, or a reinstalled host), else the host is not in it at all.
type HostKeyError struct {
	Host    string
	Changed bool
}

func (e *HostKeyError) Error() string {
	if e.Changed {
		return fmt.Sprintf("the host key of %s changed: known_hosts holds another key (a reinstalled host, or someone in between); verify it before you replace the entry", e.Host)
	}
	return fmt.Sprintf("the host key of %s is not in known_hosts: verify it and add it", e.Host)
}

// Run connects to user@host:port and runs command, returning its standard output. A refused
// host key is a *HostKeyError; a command that exits non-zero is an error with its stderr.
func (d *Dialer) Run(ctx context.Context, host string, port int, user, command string) (string, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	var nd net.Dialer
	dctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	conn, err := nd.DialContext(dctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", addr, err)
	}
	if deadline, ok := dctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	cfg := &ssh.ClientConfig{User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(d.signer)}, HostKeyCallback: d.hostKeys, Timeout: d.timeout}
	sc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		conn.Close()
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			return "", &HostKeyError{Host: addr, Changed: len(ke.Want) > 0}
		}
		return "", fmt.Errorf("ssh %s@%s: %w", user, addr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	client := ssh.NewClient(sc, chans, reqs)
	defer client.Close()
	stop := context.AfterFunc(ctx, func() { client.Close() })
	defer stop()
	sess, err := client.NewSession()
	if err != nil {
		return "", fmt.Errorf("ssh %s@%s: %w", user, addr, err)
	}
	defer sess.Close()
	var stdout, stderr bytes.Buffer
	sess.Stdout, sess.Stderr = &stdout, &stderr
	if err := sess.Run(command); err != nil {
		return stdout.String(), fmt.Errorf("ssh %s@%s %q: %w: %s", user, addr, command, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}
