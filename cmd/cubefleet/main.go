// Command cubefleet is the fleet control plane for Cube sandbox hosts: `cubefleet server` runs
// the control plane, `cubefleet agent` runs on each compute host, and the other sub-commands are
// operator tools. See the README.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cubefleet/cubefleet/internal/agent/driver/microvm/guest"
	"github.com/cubefleet/cubefleet/internal/agent/driver/process"
	"github.com/cubefleet/cubefleet/internal/cli"
)

func main() {
	guest.MaybeRun()             // a microVM sandbox's guest init (PID 1 of the guest): never returns
	process.MaybeRunSupervisor() // a sandbox's supervisor or exec stage: runs and exits
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
