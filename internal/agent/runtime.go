package agent

import (
	"fmt"
	"log/slog"

	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/agent/driver/process"
)

// noMicroVMDriver is why a node of the microvm runtime runs no sandbox (yet).
const noMicroVMDriver = "the microvm runtime's driver is not part of this build; use CUBEFLEET_RUNTIME=process"

// ProcessDriver opens the process driver (package process) with cfg's sandbox settings: the
// directory (SandboxDir), the user id range (SandboxFirstUID, SandboxUIDCount) and whether an
// agent that is not root may run sandboxes as its own user (SandboxAllowOwnUser), whether it
// must refuse to run sandboxes without memory, process and network isolation
// (RequireIsolation), with spares
// supervisors started ahead of need (0 or negative: none). `agent run` opens it with
// cfg.SandboxSpares, `agent down` with none, to stop every sandbox. Errors name the setting to
// fix; the caller closes the driver.
func (cfg *Config) ProcessDriver(log *slog.Logger, spares int) (*process.Driver, error) {
	if spares <= 0 {
		spares = -1 // process.Config: negative is none, 0 the default
	}
	d, err := process.New(process.Config{
		Dir: cfg.SandboxDir, FirstUID: cfg.SandboxFirstUID, UIDCount: cfg.SandboxUIDCount,
		AllowOwnUser: cfg.SandboxAllowOwnUser, RequireIsolation: cfg.RequireIsolation, NetworkCIDR: cfg.NetworkCIDR,
		Spares: spares, Log: log,
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox runtime (CUBEFLEET_RUNTIME=process; CUBEFLEET_SANDBOX_DIR, CUBEFLEET_SANDBOX_UIDS, CUBEFLEET_REQUIRE_ISOLATION): %w", err)
	}
	return d, nil
}

// openDriver returns the driver the agent runs sandboxes with: Options.Driver (the caller's to
// close), else the process driver for the process runtime (closed by the returned function), else
// none, with why (for the events of the sandboxes that cannot run). A process driver that cannot
// be opened leaves the node running without one: it reports itself not Ready
// (SandboxRuntimeUnavailable, with the error), as a microvm node without /dev/kvm does.
func (a *Agent) openDriver() (drv driver.Driver, noDriver string, closeDriver func()) {
	switch {
	case a.drv != nil:
		return a.drv, "", func() {}
	case a.cfg.Runtime != RuntimeProcess:
		a.log.Warn("this node runs no sandboxes: "+noMicroVMDriver, "node_id", a.cfg.NodeID())
		return nil, noMicroVMDriver, func() {}
	}
	d, err := a.cfg.ProcessDriver(a.log, a.cfg.SandboxSpares)
	if err != nil {
		a.log.Error("this node cannot run sandboxes: it reports itself not Ready until the agent restarts with the problem fixed", "node_id", a.cfg.NodeID(), "error", err.Error())
		a.mu.Lock()
		a.runtimeErr = err.Error()
		a.mu.Unlock()
		return nil, err.Error(), func() {}
	}
	return d, "", func() { d.Close() }
}
