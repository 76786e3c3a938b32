// Command guestinit is the guest init alone, for the microvm driver's tests: a static build of
// it boots faster to build than the whole cubefleet binary, and runs the same code as PID 1.
package main

import (
	"fmt"
	"os"

	"github.com/cubefleet/cubefleet/internal/agent/driver/microvm/guest"
)

func main() {
	guest.MaybeRun()
	fmt.Fprintln(os.Stderr, "guestinit: only runs as a guest's PID 1")
	os.Exit(2)
}
