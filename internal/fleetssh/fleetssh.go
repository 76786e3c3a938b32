// Package fleetssh reaches the fleet's hosts (the coordinator, the GPU WireGuard host, and each
// Cube through the coordinator as a jump host) over SSH with the operator's key, checking every
// host key against a known_hosts file: an unknown or changed host key is refused. It runs one
// command per session and returns its output.
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

// Host is an SSH endpoint: a host name or address, its port and the user to log in as.
type Host struct {
	Host string
	Port int
	User string
}

func (h Host) addr() string { return net.JoinHostPort(h.Host, strconv.Itoa(h.Port)) }

// Run connects to user@host:port and runs command, returning its standard output. A refused
// host key is a *HostKeyError; a command that exits non-zero is an error with its stderr.
func (d *Dialer) Run(ctx context.Context, host string, port int, user, command string) (string, error) {
	h := Host{Host: host, Port: port, User: user}
	var nd net.Dialer
	dctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	conn, err := nd.DialContext(dctx, "tcp", h.addr())
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", h.addr(), err)
	}
	client, err := d.handshake(dctx, conn, h)
	if err != nil {
		return "", err
	}
	defer client.Close()
	return d.session(ctx, client, h, command)
}

// RunVia connects to jump (the coordinator), from there to target (a Cube on the private LAN,
// a TCP forward through the jump host, as `ssh -J` does), and runs command on target. Both host
// keys are checked against known_hosts (target's under its own address as the jump host dials
// it). Errors are as Run's; one naming the jump host means target was not tried.
func (d *Dialer) RunVia(ctx context.Context, jump, target Host, command string) (string, error) {
	var nd net.Dialer
	dctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	conn, err := nd.DialContext(dctx, "tcp", jump.addr())
	if err != nil {
		return "", fmt.Errorf("connect to the jump host %s: %w", jump.addr(), err)
	}
	jc, err := d.handshake(dctx, conn, jump)
	if err != nil {
		return "", fmt.Errorf("jump host: %w", err)
	}
	defer jc.Close()
	stop := context.AfterFunc(dctx, func() { jc.Close() })
	tconn, err := jc.Dial("tcp", target.addr())
	stop()
	if err != nil {
		return "", fmt.Errorf("connect to %s through the jump host %s: %w", target.addr(), jump.addr(), err)
	}
	client, err := d.handshake(dctx, tconn, target)
	if err != nil {
		return "", err
	}
	defer client.Close()
	return d.session(ctx, client, target, command)
}

// handshake runs the SSH handshake on conn to h within dctx (its deadline bounds it), checking
// h's host key; it closes conn on failure.
func (d *Dialer) handshake(dctx context.Context, conn net.Conn, h Host) (*ssh.Client, error) {
	if deadline, ok := dctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	cfg := &ssh.ClientConfig{User: h.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(d.signer)}, HostKeyCallback: d.hostKeys, Timeout: d.timeout}
	sc, chans, reqs, err := ssh.NewClientConn(conn, h.addr(), cfg)
	if err != nil {
		conn.Close()
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			return nil, &HostKeyError{Host: h.addr(), Changed: len(ke.Want) > 0}
		}
		return nil, fmt.Errorf("ssh %s@%s: %w", h.User, h.addr(), err)
	}
	_ = conn.SetDeadline(time.Time{})
	return ssh.NewClient(sc, chans, reqs), nil
}

// session runs command in one session of client (connected to h), closing the client when
// ctx ends first.
func (d *Dialer) session(ctx context.Context, client *ssh.Client, h Host, command string) (string, error) {
	stop := context.AfterFunc(ctx, func() { client.Close() })
	defer stop()
	sess, err := client.NewSession()
	if err != nil {
		return "", fmt.Errorf("ssh %s@%s: %w", h.User, h.addr(), err)
	}
	defer sess.Close()
	var stdout, stderr bytes.Buffer
	sess.Stdout, sess.Stderr = &stdout, &stderr
	if err := sess.Run(command); err != nil {
		return stdout.String(), fmt.Errorf("ssh %s@%s %q: %w: %s", h.User, h.addr(), command, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}
