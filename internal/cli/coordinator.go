package cli

import (
	"bytes"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/atomicfile"
	"github.com/cubefleet/cubefleet/internal/cubes"
)

// newCoordinatorCmd builds `cubefleet coordinator`: the configuration of a coordinator that
// loads a fixed list of Cube origins at start (docs/ionos.md, "Coordinator configuration").
func newCoordinatorCmd(stdio IO) *cobra.Command {
	cmd := groupCmd("coordinator", "Coordinator configuration: render a fixed Cube origin list",
		"Render the configuration of a coordinator that loads its Cube origins once, at start: the\n"+
			"origins and their 3 slots per Cube. See docs/ionos.md, \"Coordinator configuration\".")
	cmd.AddCommand(newCoordinatorRenderCmd(stdio))
	return cmd
}

func newCoordinatorRenderCmd(stdio IO) *cobra.Command {
	var originsPath, out string
	var count int
	cmd := &cobra.Command{
		Use:   "render --origins FILE [--cube-count N] [--out FILE]",
		Short: "Check an origins file and render the coordinator's origins and slots as JSON",
		Long: fmt.Sprintf(`Read --origins (one http(s) origin per line, # comments), normalise each origin (scheme and
host in lower case, the scheme's default port dropped), and check that they are unique and that
there are exactly --cube-count of them (default %d, so an incomplete legacy file still fails).
Every problem is reported at once, by line. The JSON written (to --out, atomically, or stdout)
holds the Cube count, the origins and their %d slots per Cube.

Rendering a file does not change a running coordinator: membership is loaded at start. Move
to a new list with a ready replacement process, hand traffic over, and let the previous one
finish its accepted work before stopping it; never restart the only routed coordinator.`, cubes.DefaultCubeCount, cubes.SlotsPerCube),
		Example: `  cubefleet coordinator render --origins .private/origins.txt --cube-count 13 --out .private/coordinator.json`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := readOrigins(originsPath, count)
			if err != nil {
				return err
			}
			var b bytes.Buffer
			if err := writeJSON(&b, c); err != nil {
				return err
			}
			if out == "" {
				_, err := stdio.Out.Write(b.Bytes())
				return err
			}
			if err := atomicfile.WriteFile(out, b.Bytes(), 0o644); err != nil {
				return fmt.Errorf("write %s: %w", out, err)
			}
			_, err = linef(stdio.Err, "Wrote %s: %d origins, %d slots\n", out, len(c.Origins), len(c.Slots))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&originsPath, "origins", "", "the origins file: one http(s) origin per line, # comments")
	f.IntVar(&count, "cube-count", cubes.DefaultCubeCount, "how many origins the file must list")
	f.StringVar(&out, "out", "", "write the JSON to this file (atomically) instead of stdout")
	cmd.MarkFlagRequired("origins")
	return cmd
}

// readOrigins reads and checks the origins file at path for count Cubes (cubes.ParseOrigins);
// errors name --origins.
func readOrigins(path string, count int) (cubes.Coordinator, error) {
	if count < 1 || count > cubes.MaxCubeCount {
		return cubes.Coordinator{}, usagef("--cube-count %d: want 1 to %d", count, cubes.MaxCubeCount)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return cubes.Coordinator{}, cubefleet.Invalid("--origins", "cannot read the origins file: %v", err)
	}
	c, err := cubes.ParseOrigins(data, count)
	if err != nil {
		return cubes.Coordinator{}, fmt.Errorf("--origins %s: %w", path, err)
	}
	return c, nil
}
