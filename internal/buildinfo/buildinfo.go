// Package buildinfo says which cubefleet a binary is: the main module's version and the VCS
// revision the Go toolchain recorded in it (runtime/debug.ReadBuildInfo), or the ones a release
// build stamped at link time. `cubefleet version`, the control plane's cubefleet_build_info
// metric and the version each agent reports to the registry all read it here.
//
// The toolchain records a version and a revision when it builds the main module from a git
// clone (`go build` with the default -buildvcs=auto): a tag (v1.4.0) or a pseudo-version
// (v0.0.0-20261201164107-40ded9969514, "+dirty" with uncommitted changes). Without them
// (GOFLAGS=-buildvcs=false, a git worktree, whose .git is a file the toolchain does not read,
// or a source tree without .git) the version is "(devel)" and the revision unknown; a build
// then stamps them with
//
//	go build -ldflags "-X github.com/cubefleet/cubefleet/internal/buildinfo.version=v1.4.0 \
//	  -X github.com/cubefleet/cubefleet/internal/buildinfo.revision=$(git rev-parse HEAD)" ./cmd/cubefleet
package buildinfo

import (
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Devel is the version of a build that recorded none.
const Devel = "(devel)"

// Stamped at link time with -ldflags "-X github.com/cubefleet/cubefleet/internal/buildinfo.version=...":
// they beat what the toolchain recorded. Never assigned in code.
var (
	version  string
	revision string
)

// Info describes one build of cubefleet.
type Info struct {
	Module    string `json:"module"`             // the main module's path, "" when unknown
	Version   string `json:"version"`            // v1.4.0, a pseudo-version, or Devel
	Revision  string `json:"revision,omitempty"` // the full VCS revision (commit hash), "" when unknown
	Time      string `json:"time,omitempty"`     // the revision's commit time, RFC 3339, "" when unknown
	Modified  bool   `json:"modified"`           // the work tree had uncommitted changes
	GoVersion string `json:"goVersion"`          // the toolchain that built it: go1.26.8
}

// Read returns this binary's Info.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	return from(bi, ok, version, revision)
}

// from builds the Info of bi (ok false: none recorded), with the link-time stamps
// stampedVersion and stampedRevision ("" for none) beating the toolchain's.
func from(bi *debug.BuildInfo, ok bool, stampedVersion, stampedRevision string) Info {
	i := Info{Version: Devel}
	if ok && bi != nil {
		i.Module, i.GoVersion = bi.Main.Path, bi.GoVersion
		if bi.Main.Version != "" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = s.Value
			case "vcs.time":
				i.Time = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if stampedVersion != "" {
		i.Version = stampedVersion
	}
	if stampedRevision != "" {
		i.Revision = stampedRevision
	}
	return i
}

// ShortRevision is the revision's first 12 characters (as pseudo-versions show it), or
// "unknown".
func (i Info) ShortRevision() string {
	switch {
	case i.Revision == "":
		return "unknown"
	case len(i.Revision) > 12:
		return i.Revision[:12]
	}
	return i.Revision
}

// String is one line for `cubefleet --version` and logs: "v1.4.0 (revision 40ded9969514)",
// with ", with uncommitted changes" for a modified work tree.
func (i Info) String() string {
	s := i.Version + " (revision " + i.ShortRevision()
	if i.Modified {
		s += ", with uncommitted changes"
	}
	return s + ")"
}

// Text is what `cubefleet version` prints: the version, then the revision (or why it is
// unknown), the module and the toolchain, one per line, without a final newline.
func (i Info) Text() string {
	rev := i.Revision
	switch {
	case rev == "":
		rev = "unknown: built without VCS information (GOFLAGS=-buildvcs=false, a git worktree, or not a git clone)"
	case i.Modified:
		rev += ", with uncommitted changes"
	}
	if i.Time != "" {
		rev += " (committed " + i.Time + ")"
	}
	lines := []string{"cubefleet " + i.Version, "revision   " + rev}
	if i.Module != "" {
		lines = append(lines, "module     "+i.Module)
	}
	if i.GoVersion != "" {
		lines = append(lines, "go         "+i.GoVersion)
	}
	return strings.Join(lines, "\n")
}

// Collector returns the gauge cubefleet_build_info, always 1, labelled with the version, the
// revision ("unknown" when not recorded) and the Go version: the Prometheus convention for
// telling which build a process runs.
func (i Info) Collector() prometheus.Collector {
	rev := i.Revision
	if rev == "" {
		rev = "unknown"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "cubefleet_build_info",
		Help:        "The build of cubefleet this process runs: always 1, labelled with its version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": rev, "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}
