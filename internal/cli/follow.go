package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"

	"github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/client"
)

// followLogs prints sandbox id's output to stdout and stderr as it arrives, from offsets from
// (sandboxes.logs with follow, a long poll), until the sandbox has ended and its whole output is
// printed; a lost connection is retried (reconnecting). It returns the last answer: its next
// offsets are where the output printed ends. The output goes through writeSandboxOutput (raw:
// byte for byte to a terminal too).
func followLogs(ctx context.Context, c *replicas, tenant, id string, from api.SandboxLogs, stdout, stderr io.Writer, raw bool) (api.SandboxLogs, error) {
	last := from
	for {
		logs, err := reconnecting(ctx, c, func(ctx context.Context, c *client.Client) (api.SandboxLogs, error) {
			return c.Sandboxes.Logs(ctx, api.SandboxLogsInput{TenantID: tenant, ID: id, Encoding: "base64", Follow: true,
				StdoutOffset: last.NextStdoutOffset, StderrOffset: last.NextStderrOffset})
		})
		if err != nil {
			return last, err
		}
		out, err1 := base64.StdEncoding.DecodeString(logs.Stdout)
		errOut, err2 := base64.StdEncoding.DecodeString(logs.Stderr)
		if err := errors.Join(err1, err2); err != nil {
			return last, fmt.Errorf("the server's output of %s: %w", id, err)
		}
		writeSandboxOutput(stdout, out, raw)
		writeSandboxOutput(stderr, errOut, raw)
		last = logs
		if logs.Final && len(out) == 0 && len(errOut) == 0 {
			return last, nil
		}
	}
}
