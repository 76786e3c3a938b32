package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet/internal/cubes/journal"
)

// newRoundtripCmd builds `cubefleet roundtrip`: the single-Cube expansion and reduction of an
// IONOS Cube fleet: it plans (plan), checks (check), adds the Cube (up), removes it (down) and
// shows the workflows' journals (status).
func newRoundtripCmd() *cobra.Command {
	cmd := groupCmd("roundtrip", "IONOS Cube fleet roundtrip: plan, check, up, down, the workflows' journals",
		"The roundtrip adds one Cube to the baseline and removes it again, journaling every side\n"+
			"effect in <private-dir>/"+journal.RoundtripPath+" so a run killed at any moment resumes.\n"+
			"See docs/ionos.md, \"Roundtrip\" and \"Journals\".")
	cmd.AddCommand(newRoundtripPlanCmd(), newRoundtripCheckCmd(), newRoundtripUpCmd(), newRoundtripDownCmd(), newRoundtripStatusCmd())
	return cmd
}

// statusOut is roundtrip status's JSON: the roundtrip journal (null for none) and every scale
// journal.
type statusOut struct {
	Roundtrip *journal.Journal  `json:"roundtrip"`
	Scale     []journal.Journal `json:"scale"`
}

func newRoundtripStatusCmd() *cobra.Command {
	var privateDir, note string
	var abandon bool
	cmd := &cobra.Command{
		Use:   "status [--private-dir .private] [--abandon [--note TEXT]]",
		Short: "Print the roundtrip and scale journals; --abandon closes an open roundtrip journal",
		Long: `Print the roundtrip journal (` + journal.RoundtripPath + `) and the scale journals (` + journal.ScaleDir + `/*.json)
under --private-dir: each run's workflow, state, Cubes (name, server id, request id, peer key)
and steps, marking those that started and never finished (their outcome is checked when the
run resumes). The journals must be private (mode 0600, yours).

--abandon closes an open roundtrip journal once a person cleaned up what the run left (say
what with --note), so that the next run starts afresh instead of resuming it. It takes the
journal's lock: while a run holds it, it is refused, naming the run's pid and host.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if note != "" && !abandon {
				return usagef("--note applies only with --abandon")
			}
			path := filepath.Join(privateDir, journal.RoundtripPath)
			if abandon {
				return abandonJournal(cmd, path, note)
			}
			var out statusOut
			var err error
			if out.Roundtrip, err = journal.Read(path); err != nil {
				return err
			}
			scaleDir := filepath.Join(privateDir, journal.ScaleDir)
			if out.Scale, err = readScaleJournals(scaleDir); err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				if out.Roundtrip == nil {
					linef(w, "No roundtrip journal (%s).\n", path)
				} else {
					printJournal(w, path, out.Roundtrip)
				}
				for i := range out.Scale {
					printJournal(w, filepath.Join(scaleDir, out.Scale[i].Run+".json"), &out.Scale[i])
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&privateDir, "private-dir", ".private", "the private directory holding the journals")
	f.BoolVar(&abandon, "abandon", false, "close the open roundtrip journal after you cleaned up what it left")
	f.StringVar(&note, "note", "", "with --abandon: what you cleaned up (kept in the journal)")
	return cmd
}

// readScaleJournals reads every scale journal of dir (<run>.json), in run order (none: an
// empty list). Errors: a journal that is not private or not a journal.
func readScaleJournals(dir string) ([]journal.Journal, error) {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	slices.Sort(paths)
	out := []journal.Journal{}
	for _, p := range paths {
		j, err := journal.Read(p)
		if err != nil {
			return nil, err
		}
		if j != nil {
			out = append(out, *j)
		}
	}
	return out, nil
}

// abandonJournal closes the open journal at path under its lock (refused while a run holds
// it), with note saying what a person cleaned up, and prints what it closed.
func abandonJournal(cmd *cobra.Command, path, note string) error {
	s, err := journal.Open(path, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	j, err := s.Abandon(note)
	if err != nil {
		return err
	}
	return render(cmd, j, func(w io.Writer) error {
		_, err := linef(w, "Abandoned the %s journal of run %s (%s).\n", j.Workflow, j.Run, path)
		return err
	})
}

// printJournal prints one journal for people.
func printJournal(w io.Writer, path string, j *journal.Journal) {
	linef(w, "%s: %s, run %s, %s (started %s, updated %s)\n", path, j.Workflow, j.Run, j.State, formatTime(j.StartedAt), formatTime(j.UpdatedAt))
	if j.Note != "" {
		linef(w, "  note: %s\n", j.Note)
	}
	for _, c := range j.Cubes {
		linef(w, "  cube %s: slot %d, ip %s, server %s, request %s, peer %s\n", c.Name, c.Slot, orDash(c.PrivateIP), orDash(c.ServerID), orDash(c.RequestID), orDash(c.PeerKey))
		if c.Canary != "" {
			linef(w, "  cube %s: canary %s of tenant %s\n", c.Name, c.Canary, c.CanaryTenant)
		}
	}
	for _, st := range j.Steps {
		state := "done " + formatTime(st.Done)
		if st.Done == 0 {
			state = "STARTED, NOT FINISHED (checked on resume)"
		}
		what := strings.TrimSpace(st.Name + " " + st.Cube)
		if st.Detail != "" {
			what += " (" + st.Detail + ")"
		}
		linef(w, "  step %s: %s\n", what, state)
	}
	if len(j.TargetLists) > 0 {
		ids := make([]string, 0, len(j.TargetLists))
		for id := range j.TargetLists {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			linef(w, "  target group %s before the run: %s\n", id, strings.Join(j.TargetLists[id], ", "))
		}
	}
	fmt.Fprintln(w)
}
