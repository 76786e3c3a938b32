package agent

import (
	"github.com/cubefleet/cubefleet/internal/buildinfo"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// Component is the name the agent reports itself under in versions.
const Component = "cubefleet-agent"

// BuildVersion returns the version the agent reports to the registry: this binary's
// (buildinfo.Read, what `cubefleet version` prints): its version, the VCS revision (with
// "+dirty" when the tree had changes) and the commit time, with source "binary".
func BuildVersion() nodeapi.ComponentVersion {
	i := buildinfo.Read()
	v := nodeapi.ComponentVersion{Component: Component, Version: i.Version, Commit: i.Revision, BuildTime: i.Time, Source: "binary"}
	if i.Modified && v.Commit != "" {
		v.Commit += "+dirty"
	}
	return v
}
