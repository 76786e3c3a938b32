package cli

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/api/nodetext"
	"github.com/cubefleet/cubefleet/internal/scheduler"
	"github.com/cubefleet/cubefleet/internal/scheduler/simulate"
)

func newSchedulerCmd(stdio IO) *cobra.Command {
	cmd := groupCmd("scheduler", "Check a scheduler configuration, simulate placements, place and release sandboxes",
		`check and simulate work offline (no server needed); status, place and release ask the
control plane. docs/scheduler.md describes every key, the profiles and the simulate report.`)
	cmd.AddCommand(newSchedulerCheckCmd(), newSchedulerSimulateCmd(), newSchedulerStatusCmd(), newSchedulerPlaceCmd(), newSchedulerReleaseCmd())
	return cmd
}

func newSchedulerStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the server's scheduler: the configuration in force, the lease holder, the reservations",
		Long: `Ask the control plane (scheduler.status, permission scheduler:read on tenant/root) for the
scheduler configuration in force, the file it came from and when it was loaded, the last
reload's error while it lasts (SIGHUP with an invalid file keeps the previous configuration),
whether the replica that answered holds the scheduler lease (it makes the placement
decisions), and the reservations outstanding: sandboxes placed whose nodes have not listed
them yet, with their pool's fleet name and age.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cp, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := cp.Scheduler.Status(cmd.Context())
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				c := out.Config
				holder := "no (it forwards placements to the holder)"
				if out.LeaseHolder {
					holder = "yes (this replica places sandboxes)"
				}
				file := "none (the built-in defaults)"
				if out.ConfigFile != "" {
					file = out.ConfigFile
				}
				fields := [][2]string{
					{"Config file", file},
					{"Loaded", nodetext.Ago(out.Now, out.ConfigLoadedAt) + " (" + time.UnixMilli(out.ConfigLoadedAt).UTC().Format(time.RFC3339) + ")"},
				}
				if out.ReloadError != "" {
					fields = append(fields, [2]string{"Last reload", "FAILED " + nodetext.Ago(out.Now, out.ReloadFailedAt) +
						": the configuration above stays in force; fix the file and send SIGHUP again (scheduler check FILE shows every problem)"},
						[2]string{"Reload error", out.ReloadError})
				}
				fields = append(fields, [][2]string{
					{"Profile", c.Profile},
					{"Pick", fmt.Sprintf("%s among the top %d", c.LeastSelectName, c.PrioritySelectNum)},
					{"Filters", strings.Join(c.Filter.EnableFilters, ", ")},
					{"Scorers", strings.Join(c.Score.EnableScorers, ", ")},
					{"Lease holder", holder},
					{"Reservations", strconv.Itoa(len(out.Reservations))},
				}...)
				if err := printFields(w, 13, fields); err != nil {
					return err
				}
				if len(out.Reservations) == 0 {
					return nil
				}
				fmt.Fprintln(w)
				rows := make([][]string, 0, len(out.Reservations))
				for _, r := range out.Reservations {
					pool := r.Pool
					if r.PoolName != "" {
						pool = r.PoolName + " (" + r.Pool + ")"
					}
					rows = append(rows, []string{r.SandboxID, r.NodeID, pool, nodetext.Cores(r.CPU), nodetext.GiB(r.MemoryMiB) + "Gi", nodetext.Ago(out.Now, r.ReservedAt)})
				}
				return printTable(w, []string{"SANDBOX", "NODE", "POOL", "CPU", "MEMORY", "RESERVED"}, rows)
			})
		},
	}
}

// schedulerCheck is the --output json result of `scheduler check`.
type schedulerCheck struct {
	File     string              `json:"file"`
	Valid    bool                `json:"valid"`
	Warnings []scheduler.Warning `json:"warnings"`
	Config   *scheduler.Config   `json:"config,omitempty"`
	Problems []scheduler.Problem `json:"problems,omitempty"`
}

func newSchedulerCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE|-",
		Short: "Validate a cubemaster.yaml-shaped scheduler configuration and print it with defaults filled in",
		Long: `Read FILE, or standard input for "-" (a cubemaster.yaml: its scheduler section; other
sections are ignored), and print the effective configuration with every default filled in, as
a scheduler section that loads to the same configuration: standard output holds only that, so
it can be saved or piped; the warnings go to standard error. Exit 0 when the file is valid;
exit 1 naming every problem with its key path and line.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, warns, err := loadSchedulerConfig(cmd, args[0])
			var ce *scheduler.ConfigError
			if err != nil && !errors.As(err, &ce) {
				return err
			}
			out := schedulerCheck{File: configName(args[0]), Valid: err == nil, Warnings: warns}
			if out.Warnings == nil {
				out.Warnings = []scheduler.Warning{}
			}
			if ce != nil {
				out.Problems = ce.Problems
			} else {
				out.Config = &cfg
			}
			if rerr := render(cmd, out, func(w io.Writer) error {
				for _, wn := range warns {
					linef(stdioOf(cmd).Err, "warning: %s\n", wn.String())
				}
				if ce != nil {
					return nil
				}
				body, err := cfg.YAML()
				if err != nil {
					return err
				}
				_, err = w.Write(body)
				return err
			}); rerr != nil {
				return rerr
			}
			if ce != nil {
				return configProblems(args[0], ce)
			}
			return nil
		},
	}
}

// flagProblems turns an INVALID_INPUT whose field errors name flags (simulate.Options'
// fields are its flags' names) into a usage error (exit 2): a flag given a bad value is a
// usage error, as an unknown flag is. Other errors are returned as they are.
//
// names maps an input field to its flag where the two differ (memoryMiB: memory-mib); a
// problem of a field without a flag keeps the field's name.
func flagProblems(err error, names ...map[string]string) error {
	var ce *cubefleet.Error
	if !errors.As(err, &ce) || ce.Code != cubefleet.CodeInvalidInput {
		return err
	}
	fes, _ := ce.Details["errors"].([]cubefleet.FieldError)
	if len(fes) == 0 {
		return usagef("%s", ce.Message)
	}
	parts := make([]string, len(fes))
	for i, fe := range fes {
		flag := fe.Path
		for _, m := range names {
			if n, ok := m[fe.Path]; ok {
				flag = n
			}
		}
		parts[i] = "--" + flag + ": " + fe.Message
	}
	return usagef("%s", strings.Join(parts, "; "))
}

// configName is how messages name a configuration file argument: "stdin" for "-".
func configName(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}

// loadSchedulerConfig loads the scheduler configuration file path, or standard input for "-"
// (named "stdin" in the messages; at most scheduler.MaxConfigBytes).
func loadSchedulerConfig(cmd *cobra.Command, path string) (scheduler.Config, []scheduler.Warning, error) {
	if path != "-" {
		cfg, warns, err := scheduler.LoadFile(path)
		var ce *scheduler.ConfigError
		if err != nil && !errors.As(err, &ce) {
			return cfg, warns, usagef("%v", err) // a file that cannot be read: exit 2, as for fleet documents
		}
		return cfg, warns, err
	}
	data, err := io.ReadAll(io.LimitReader(stdioOf(cmd).In, scheduler.MaxConfigBytes+1))
	if err != nil {
		return scheduler.Config{}, nil, fmt.Errorf("scheduler configuration: read standard input: %w", err)
	}
	return scheduler.Load("stdin", data)
}

// configProblems turns a configuration's problems into the CLI's INVALID_INPUT error: one
// line per problem, `path: line N: message`. file "-" is named stdin.
func configProblems(file string, ce *scheduler.ConfigError) error {
	file = configName(file)
	errs := make([]cubefleet.FieldError, len(ce.Problems))
	for i, p := range ce.Problems {
		msg := p.Message
		if p.Line > 0 {
			msg = fmt.Sprintf("line %d: %s", p.Line, msg)
		}
		errs[i] = cubefleet.FieldError{Path: p.Path, Message: msg}
	}
	e := cubefleet.InvalidAll(errs)
	e.Message = file + ": " + e.Message
	return e
}

func newSchedulerSimulateCmd() *cobra.Command {
	var o simulate.Options
	var configFile, profile string
	var seed uint64
	cmd := &cobra.Command{
		Use:   "simulate --nodes N --requests M [--config FILE | --profile P] [--workload burst|template-reuse|mixed] [--report-lag 1s] [--seed S]",
		Short: "Replay synthetic work against the real scheduler and report placement quality",
		Long: `Replay M requests against N simulated nodes with the real scheduler code: nodes report every
--report-period, their reports lagging --report-lag behind their state; sandboxes start and
complete during the run; reservations are released as reports list the sandboxes.

The report: placements per node, load imbalance (coefficient of variation of placements per
node), busiest node against the mean, Jain's fairness index, top-1 herding share, template
hit rate, nodes left empty, success rate. The same options and --seed print the same report,
byte for byte. The decision latency (p50/p95/p99) varies from run to run: it is printed on
standard error, and in the report only with --timing. docs/scheduler.md documents the JSON.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Nodes < 1 || o.Requests < 1 {
				return usagef("--nodes and --requests are required (at least 1)")
			}
			switch {
			case configFile != "" && profile != "":
				return usagef("--config and --profile: give one (a file sets its profile with scheduler.profile)")
			case configFile != "":
				cfg, warns, err := loadSchedulerConfig(cmd, configFile)
				var ce *scheduler.ConfigError
				if errors.As(err, &ce) {
					return configProblems(configFile, ce)
				} else if err != nil {
					return err
				}
				for _, w := range warns {
					linef(stdioOf(cmd).Err, "warning: %s\n", w.String())
				}
				o.Config = cfg
			case profile != "":
				cfg, _, err := scheduler.Load("--profile", []byte("scheduler:\n  profile: "+fmt.Sprintf("%q", profile)+"\n"))
				var ce *scheduler.ConfigError
				if errors.As(err, &ce) {
					return usagef("--profile %q: want one of %s", profile, strings.Join(scheduler.Profiles, ", "))
				} else if err != nil {
					return err
				}
				o.Config = cfg
			}
			if o.ReportPeriod == 0 { // Run would read 0 as its default, 1s: refuse rather than differ from the flag
				return usagef("--report-period 0s: must be 1ms to 1h")
			}
			o.Seed = seed
			rep, err := simulate.Run(cmd.Context(), o)
			if err != nil {
				return flagProblems(err)
			}
			t := rep.Timing()
			linef(stdioOf(cmd).Err, "decision latency: p50 %.1f µs, p95 %.1f µs, p99 %.1f µs (varies from run to run)\n", t.P50, t.P95, t.P99)
			return render(cmd, rep, func(w io.Writer) error { return printSimulation(w, rep) })
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Nodes, "nodes", 0, "simulated nodes (64 cores, 256 GiB each)")
	f.IntVar(&o.Requests, "requests", 0, "sandbox requests")
	f.StringVar(&configFile, "config", "", "scheduler configuration file (cubemaster.yaml shape; - for standard input); default: the built-in defaults")
	f.StringVar(&profile, "profile", "", "a built-in profile instead of --config: "+strings.Join(scheduler.Profiles, ", "))
	f.StringVar(&o.Workload, "workload", simulate.WorkloadBurst, "burst, template-reuse or mixed")
	durationVar(f, &o.ReportLag, "report-lag", time.Second, "how far node reports lag behind the nodes' state")
	durationVar(f, &o.ReportPeriod, "report-period", time.Second, "how often each node reports (1ms to 1h)")
	f.Uint64Var(&seed, "seed", 1, "seed of the workload and of the random picks")
	f.BoolVar(&o.Timing, "timing", false, "put the decision latency in the report (it then differs between runs)")
	return cmd
}

// printSimulation prints a simulate report for people.
func printSimulation(w io.Writer, r *simulate.Report) error {
	linef(w, "%d nodes, %d requests, workload %s, report lag %dms every %dms, seed %d\n",
		r.Nodes, r.Requests, r.Workload, r.ReportLagMs, r.ReportEvery, r.Seed)
	linef(w, "profile %s, priority_select_num %d, least_select_name %s\n\n", r.Profile, r.PrioritySel, r.LeastSelect)
	lo, p50, hi := spread(r.Placements)
	fields := [][2]string{
		{"placed", fmt.Sprintf("%d of %d (%.2f%%)", r.Placed, r.Requests, 100*r.SuccessRate)},
		{"load imbalance", fmt.Sprintf("%.4f (coefficient of variation of placements per node)", r.Imbalance)},
		{"busiest / mean", fmt.Sprintf("%.4f", r.BusiestRatio)},
		{"Jain's fairness", fmt.Sprintf("%.4f", r.Jain)},
		{"top-1 herding", fmt.Sprintf("%.4f (share of all placements on the busiest node)", r.HerdingTop1)},
		{"template hits", fmt.Sprintf("%.2f%%", 100*r.TemplateHits)},
		{"nodes left empty", fmt.Sprintf("%d of %d", r.EmptyNodes, r.Nodes)},
		{"placements/node", fmt.Sprintf("min %d, median %d, max %d", lo, p50, hi)},
		{"peak running/node", fmt.Sprintf("%d", r.PeakRunning)},
	}
	if r.Latency != nil {
		fields = append(fields, [2]string{"decision latency", fmt.Sprintf("p50 %.1f µs, p95 %.1f µs, p99 %.1f µs", r.Latency.P50, r.Latency.P95, r.Latency.P99)})
	}
	for _, reason := range slices.Sorted(maps.Keys(r.UnplacedReasons)) {
		fields = append(fields, [2]string{"unplaced", fmt.Sprintf("%d: most nodes %s", r.UnplacedReasons[reason], reason)})
	}
	return printFields(w, 18, fields)
}

// spread returns the minimum, median and maximum of xs.
func spread(xs []int) (lo, mid, hi int) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Sorted(slices.Values(xs))
	return s[0], s[len(s)/2], s[len(s)-1]
}
