package agenttest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// ComputeEnv is a valid compute node's env file on the fake host "compute" (node IP 10.0.0.5,
// control plane 10.0.0.1), as in examples/agent.env.
const ComputeEnv = `# as in examples/agent.env
ONE_CLICK_DEPLOY_ROLE=compute
CUBE_SANDBOX_NODE_IP=10.0.0.5
ONE_CLICK_CONTROL_PLANE_IP=10.0.0.1
CUBE_S3_ENDPOINT=http://10.0.0.1:9000
CUBE_S3_ACCESS_KEY_ID=minio
CUBE_S3_SECRET_ACCESS_KEY='s3cr3t$'
CUBE_S3_BUCKET=cube-volumes
CUBE_S3_S3FS_EXTRA_OPTS=-ouse_path_request_style
`

// Serve runs serve (an agent's Serve) on a new TCP listener on addr ("127.0.0.1:0" for a free
// port) until the test ends or stop is called, and returns the listener's address and stop.
// stop cancels serve's context and waits up to 5 s for it to return; an error it returns fails
// the test. stop may be called more than once.
func Serve(t testing.TB, addr string, serve func(ctx context.Context, ln net.Listener) error) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Error("Serve did not return within 5 s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// EnvFile writes content to a new env file (mode 0600) in a temporary directory of the test and
// returns its path.
func EnvFile(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// SandboxDir returns a sandbox directory for an agent of the test (not created): in a temporary
// directory of the test that every user can reach (the sandboxes' users must reach their
// directories, and t.TempDir is 0700).
func SandboxDir(t testing.TB) string {
	t.Helper()
	base := t.TempDir()
	for p := base; p != filepath.Clean(os.TempDir()) && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(base, "sandboxes")
}
