package agent

import (
	"runtime/debug"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// Component is the name the agent reports itself under in versions.
const Component = "cubefleet-agent"

// BuildVersion returns cubefleet's version as the Go toolchain recorded it in the binary: the
// main module's version ("(devel)" for a build from a work tree), the VCS revision (with
// "+dirty" when the tree had changes) and the commit time, with source "binary".
func BuildVersion() nodeapi.ComponentVersion {
	v := nodeapi.ComponentVersion{Component: Component, Version: "(devel)", Source: "binary"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.BuildTime = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && v.Commit != "" {
		v.Commit += "+dirty"
	}
	return v
}
