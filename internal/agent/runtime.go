package agent

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/agent/driver/microvm"
	"github.com/cubefleet/cubefleet/internal/agent/driver/process"
)

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
		MaxConnections: cfg.SandboxMaxConnections, Spares: spares, Log: log,
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox runtime (CUBEFLEET_RUNTIME=process; CUBEFLEET_SANDBOX_DIR, CUBEFLEET_SANDBOX_UIDS, CUBEFLEET_REQUIRE_ISOLATION): %w", err)
	}
	return d, nil
}

// MicroVMDriver opens the microvm driver (package microvm) with cfg's settings: the sandbox
// directory, user ids and sandbox network (as the process runtime's), the guest kernel (GuestKernel), the init
// (GuestInit, default this executable), the image directory (ImageDir) and the accelerator
// (MicroVMAccel; auto takes `agent check`'s last probe, else probes). With boots false (agent
// down, which only stops VMs) auto probes nothing. Errors name the setting to fix; the caller
// closes the driver.
func (cfg *Config) MicroVMDriver(ctx context.Context, log *slog.Logger, boots bool) (*microvm.Driver, error) {
	accel := cfg.MicroVMAccel
	if accel == "" && !boots {
		accel = microvm.AccelTCG
	}
	d, err := microvm.New(ctx, microvm.Config{
		Dir: cfg.SandboxDir, Kernel: cfg.GuestKernel, Init: cfg.GuestInit, ImageDir: cfg.ImageDir, Accel: accel,
		FirstUID: cfg.SandboxFirstUID, UIDCount: cfg.SandboxUIDCount, NetworkCIDR: cfg.NetworkCIDR, MaxConnections: cfg.SandboxMaxConnections, Log: log,
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox runtime (CUBEFLEET_RUNTIME=microvm; CUBEFLEET_GUEST_KERNEL, CUBEFLEET_IMAGE_DIR, CUBEFLEET_MICROVM_ACCEL): %w", err)
	}
	return d, nil
}

// SandboxDriver opens the driver of cfg's runtime (ProcessDriver or MicroVMDriver, with boots
// false: for stopping sandboxes, not starting them).
func (cfg *Config) SandboxDriver(ctx context.Context, log *slog.Logger) (driver.Driver, error) {
	if cfg.Runtime == RuntimeMicroVM {
		return cfg.MicroVMDriver(ctx, log, false)
	}
	return cfg.ProcessDriver(log, 0)
}

// openDriver returns the driver the agent runs sandboxes with: Options.Driver (the caller's to
// close), else the driver of the node's runtime (closed by the returned function), else none,
// with why (for the events of the sandboxes that cannot run). A driver that cannot be opened
// leaves the node running without one: it reports itself not Ready (SandboxRuntimeUnavailable,
// with the error).
func (a *Agent) openDriver() (drv driver.Driver, noDriver string, closeDriver func()) {
	if a.drv != nil {
		return a.drv, "", func() {}
	}
	var d driver.Driver
	var err error
	if a.cfg.Runtime == RuntimeMicroVM {
		d, err = a.cfg.MicroVMDriver(context.Background(), a.log, true)
	} else {
		d, err = a.cfg.ProcessDriver(a.log, a.cfg.SandboxSpares)
	}
	if err != nil {
		a.log.Error("this node cannot run sandboxes: it reports itself not Ready until the agent restarts with the problem fixed", "node_id", a.cfg.NodeID(), "error", err.Error())
		a.mu.Lock()
		a.runtimeErr = err.Error()
		a.mu.Unlock()
		return nil, err.Error(), func() {}
	}
	return d, "", func() { d.Close() }
}
