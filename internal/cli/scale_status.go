package cli

import (
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes/journal"
)

func newScaleStatusCmd() *cobra.Command {
	var privateDir, run, note string
	var abandon bool
	cmd := &cobra.Command{
		Use:   "status [--private-dir .private] [--run R] [--abandon [--note TEXT]]",
		Short: "Print the scale journals; --abandon closes an open one after you cleaned up",
		Long: `Print the scale journals (` + journal.ScaleDir + `/<run>.json under --private-dir), or only run
--run's: each run's workflow, state, Cubes (name, server id, request id, peer key, the sandbox
accepted on it) and steps, marking those that started and never finished (their outcome is
checked when the run resumes). The journals must be private (mode 0600, yours).

--abandon closes the open scale journal (--run's, needed when several are open) once a person
cleaned up what the run left (say what with --note), so that the next scale apply plans
afresh instead of resuming it. It takes scale apply's lock: while a run holds it, it is
refused, naming the run's pid and host.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if note != "" && !abandon {
				return usagef("--note applies only with --abandon")
			}
			if run != "" && !journal.IsRun(run) {
				return usagef("--run %q: want a run id as scale status lists them, such as rtpelh9", run)
			}
			if _, err := outputFormat(cmd); err != nil {
				return err
			}
			dir := filepath.Join(privateDir, journal.ScaleDir)
			if abandon {
				return abandonScaleRun(cmd, dir, run, note)
			}
			all, err := readScaleJournals(dir)
			if err != nil {
				return err
			}
			if run != "" {
				j, err := readScaleRun(dir, run)
				if err != nil {
					return err
				}
				all = []journal.Journal{*j}
			}
			return render(cmd, all, func(w io.Writer) error {
				if len(all) == 0 {
					linef(w, "No scale journal (%s).\n", dir)
				}
				for i := range all {
					printJournal(w, filepath.Join(dir, all[i].Run+".json"), &all[i])
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&privateDir, "private-dir", ".private", "the private directory holding the journals")
	f.StringVar(&run, "run", "", "only this run's journal (its id, such as rtpelh9)")
	f.BoolVar(&abandon, "abandon", false, "close the open scale journal (--run's) after you cleaned up what it left")
	f.StringVar(&note, "note", "", "with --abandon: what you cleaned up (kept in the journal)")
	return cmd
}

// readScaleRun reads run's journal of dir. Errors: INVALID_INPUT when there is none.
func readScaleRun(dir, run string) (*journal.Journal, error) {
	j, err := journal.Read(filepath.Join(dir, run+".json"))
	if err != nil {
		return nil, err
	}
	if j == nil {
		return nil, cubefleet.Invalid("--run", "%s has no journal of run %s: scale status lists the runs", dir, run)
	}
	return j, nil
}

// abandonScaleRun closes the open scale journal of dir (run's when run is not ""), holding
// scale apply's lock and the journal's, and prints what it closed.
func abandonScaleRun(cmd *cobra.Command, dir, run, note string) error {
	lock, err := journal.Open(filepath.Join(dir, scaleLockName), nil)
	if err != nil {
		return err
	}
	defer lock.Close()
	if run == "" {
		open, err := openScaleJournal(dir)
		if err != nil {
			return err
		}
		if open == nil {
			return cubefleet.Invalid("--abandon", "%s holds no open scale journal: nothing to abandon", dir)
		}
		run = open.Run
	} else if _, err := readScaleRun(dir, run); err != nil {
		return err
	}
	return abandonJournal(cmd, filepath.Join(dir, run+".json"), note)
}
