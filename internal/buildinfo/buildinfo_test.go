package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := func(rev, at, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "-buildmode", Value: "exe"}, {Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: at}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "40ded9969514e17244e2915758b79a35aca9c2eb"
	cases := []struct {
		name          string
		bi            *debug.BuildInfo
		stamped       [2]string // -X version, revision
		want          Info
		text, oneLine string
	}{
		{
			name: "a tagged release",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/cubefleet/cubefleet", Version: "v1.4.0"}, Settings: vcs(rev, "2026-12-01T16:41:07Z", "false")},
			want: Info{Module: "github.com/cubefleet/cubefleet", Version: "v1.4.0", Revision: rev, Time: "2026-12-01T16:41:07Z", GoVersion: "go1.26.8"},
			text: "cubefleet v1.4.0\n" +
				"revision   40ded9969514e17244e2915758b79a35aca9c2eb (committed 2026-12-01T16:41:07Z)\n" +
				"module     github.com/cubefleet/cubefleet\n" +
				"go         go1.26.8",
			oneLine: "v1.4.0 (revision 40ded9969514)",
		},
		{
			name: "a build from a clone with changes (a pseudo-version)",
			bi: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/cubefleet/cubefleet", Version: "v0.0.0-20261201164107-40ded9969514+dirty"},
				Settings: vcs(rev, "2026-12-01T16:41:07Z", "true")},
			want: Info{Module: "github.com/cubefleet/cubefleet", Version: "v0.0.0-20261201164107-40ded9969514+dirty", Revision: rev, Time: "2026-12-01T16:41:07Z", Modified: true, GoVersion: "go1.26.8"},
			text: "cubefleet v0.0.0-20261201164107-40ded9969514+dirty\n" +
				"revision   40ded9969514e17244e2915758b79a35aca9c2eb, with uncommitted changes (committed 2026-12-01T16:41:07Z)\n" +
				"module     github.com/cubefleet/cubefleet\n" +
				"go         go1.26.8",
			oneLine: "v0.0.0-20261201164107-40ded9969514+dirty (revision 40ded9969514, with uncommitted changes)",
		},
		{
			name: "no VCS information (-buildvcs=false, a git worktree, go run)",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/cubefleet/cubefleet", Version: "(devel)"}},
			want: Info{Module: "github.com/cubefleet/cubefleet", Version: Devel, GoVersion: "go1.26.8"},
			text: "cubefleet (devel)\n" +
				"revision   unknown: built without VCS information (GOFLAGS=-buildvcs=false, a git worktree, or not a git clone)\n" +
				"module     github.com/cubefleet/cubefleet\n" +
				"go         go1.26.8",
			oneLine: "(devel) (revision unknown)",
		},
		{
			name:    "stamped at link time",
			bi:      &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/cubefleet/cubefleet", Version: "(devel)"}},
			stamped: [2]string{"v1.5.0-rc.1", rev},
			want:    Info{Module: "github.com/cubefleet/cubefleet", Version: "v1.5.0-rc.1", Revision: rev, GoVersion: "go1.26.8"},
			oneLine: "v1.5.0-rc.1 (revision 40ded9969514)",
		},
		{
			name:    "the link-time stamp beats the toolchain's",
			bi:      &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/cubefleet/cubefleet", Version: "v0.0.0-20261201164107-40ded9969514"}, Settings: vcs(rev, "2026-12-01T16:41:07Z", "false")},
			stamped: [2]string{"v1.5.0", ""},
			want:    Info{Module: "github.com/cubefleet/cubefleet", Version: "v1.5.0", Revision: rev, Time: "2026-12-01T16:41:07Z", GoVersion: "go1.26.8"},
			oneLine: "v1.5.0 (revision 40ded9969514)",
		},
		{
			name:    "no build information at all",
			want:    Info{Version: Devel},
			oneLine: "(devel) (revision unknown)",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := from(tc.bi, tc.bi != nil, tc.stamped[0], tc.stamped[1])
			if got != tc.want {
				t.Fatalf("from = %+v\nwant   %+v", got, tc.want)
			}
			if tc.text != "" && got.Text() != tc.text {
				t.Errorf("Text:\n%s\nwant:\n%s", got.Text(), tc.text)
			}
			if got.String() != tc.oneLine {
				t.Errorf("String = %q, want %q", got.String(), tc.oneLine)
			}
		})
	}
}

// TestReadIsThisBinary: Read describes the running binary (a test binary: the main module's
// path and the toolchain's version).
func TestReadIsThisBinary(t *testing.T) {
	i := Read()
	if i.Version == "" || !strings.HasPrefix(i.GoVersion, "go") {
		t.Fatalf("Read() = %+v", i)
	}
}
