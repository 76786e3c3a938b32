package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/ionos"
	"github.com/cubefleet/cubefleet/internal/ionos/ionossim"
)

// newIonosCmd builds `cubefleet ionos`: the IONOS Cloud tools that talk to the provider's API
// directly (inventory, plan) and the loopback API simulator (simulate). See docs/ionos.md.
func newIonosCmd(stdio IO) *cobra.Command {
	cmd := groupCmd("ionos", "IONOS Cloud: inventory, Cube slot planning, API simulator",
		"Read an IONOS data center's inventory, plan the Cube fleet's slots against the private\n"+
			"configuration, or run a loopback IONOS Cloud API v6 simulator. See docs/ionos.md.")
	cmd.AddCommand(newIonosInventoryCmd(stdio), newIonosPlanCmd(stdio), newIonosSimulateCmd(stdio))
	return cmd
}

// ---- inventory ----

func newIonosInventoryCmd(stdio IO) *cobra.Command {
	var (
		datacenter, tokenFile, apiURL, out string
		timeout                            time.Duration
		verbose                            bool
	)
	cmd := &cobra.Command{
		Use:   "inventory --datacenter ID [--token-file F] [--out FILE]",
		Short: "Write one data center's inventory as JSON (at most 10 API requests)",
		Long: "Reads the data center's servers, NICs, LANs, security groups, NAT gateways, load balancers,\n" +
			"target groups, CUBE templates and pending requests, and writes one JSON document: to --out\n" +
			"(mode 0600) or to stdout (tightened to 0600 when it is a file). The token file must be a\n" +
			"regular file owned by you with mode 0600. The API URL comes from --api-url, else $" + ionos.EnvAPIURL + ",\n" +
			"else " + ionos.DefaultAPIURL + "; plain http is accepted only for a loopback simulator.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !ionos.IsUUID(datacenter) {
				return usagef("--datacenter %q: want the data center's UUID", datacenter)
			}
			if timeout <= 0 {
				return usagef("--timeout must be positive")
			}
			client, err := ionosClient(stdio, apiURL, tokenFile, timeout)
			if err != nil {
				return err
			}
			inv, err := client.Inventory(cmd.Context(), datacenter)
			if err != nil {
				return err
			}
			if verbose {
				linef(stdio.Err, "inventory of %s: %s, %s; %s to %s\n", inv.Datacenter.ID, cubefleet.Count(len(inv.Servers), "server", "servers"),
					cubefleet.Count(len(inv.PendingRequests), "pending request", "pending requests"), cubefleet.Count(int(client.HTTPRequests()), "HTTP request", "HTTP requests"), client.APIURL())
			}
			if out == "" {
				if err := tightenIfFile(stdio.Out); err != nil {
					return err
				}
				return ionos.EncodeInventory(stdio.Out, inv)
			}
			if err := ionos.WriteInventoryFile(out, inv); err != nil {
				return err
			}
			return render(cmd, inventorySummary{Out: out, FetchedAt: inv.FetchedAt, Datacenter: inv.Datacenter.ID,
				Servers: len(inv.Servers), PendingRequests: len(inv.PendingRequests), HTTPRequests: client.HTTPRequests()},
				func(w io.Writer) error { return printInventory(w, out, inv) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&datacenter, "datacenter", "", "data center UUID (required)")
	f.StringVar(&tokenFile, "token-file", ionos.DefaultTokenFile, "file holding the IONOS API token: a regular file you own, mode 0600")
	f.StringVar(&apiURL, "api-url", "", "IONOS API base URL (default $"+ionos.EnvAPIURL+", else "+ionos.DefaultAPIURL+")")
	f.StringVar(&out, "out", "", "write the inventory to this file (mode 0600) instead of stdout")
	durationVar(f, &timeout, "timeout", ionos.DefaultTimeout, "limit for each API call, retries included")
	f.BoolVarP(&verbose, "verbose", "v", false, "report the number of HTTP requests on stderr")
	_ = cmd.MarkFlagRequired("datacenter")
	return cmd
}

// inventorySummary is what `ionos inventory --out FILE --output json` prints.
type inventorySummary struct {
	Out             string `json:"out"`
	FetchedAt       int64  `json:"fetchedAt"`
	Datacenter      string `json:"datacenterId"`
	Servers         int    `json:"servers"`
	PendingRequests int    `json:"pendingRequests"`
	HTTPRequests    int64  `json:"httpRequests"`
}

// tightenIfFile sets mode 0600 on w when it is a regular file (stdout redirected to a file):
// an inventory is a private operator file.
func tightenIfFile(w io.Writer) error {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() == 0o600 {
		return nil // not a file we can tighten: a terminal or a pipe
	}
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("make the inventory file private (chmod 600): %w", err)
	}
	return nil
}

func printInventory(w io.Writer, path string, inv *ionos.Inventory) error {
	dc := inv.Datacenter
	linef(w, "Wrote the inventory of data center %s (%s, %s, version %d) to %s, fetched %s.\n\n",
		dc.ID, orDash(dc.Name), orDash(dc.Location), dc.Version, path, formatTime(inv.FetchedAt))
	rows := make([][]string, 0, len(inv.Servers))
	for _, s := range inv.Servers {
		var ips []string
		for _, n := range s.NICs {
			for _, ip := range n.IPs {
				ips = append(ips, fmt.Sprintf("%s (LAN %d)", ip, n.LANID))
			}
		}
		rows = append(rows, []string{s.Name, s.ID, s.Type, strconv.Itoa(s.Cores), strconv.Itoa(s.RAMMiB), orDash(s.VMState), orDash(s.State), orDash(strings.Join(ips, ", "))})
	}
	if err := printTable(w, []string{"NAME", "ID", "TYPE", "CORES", "RAM MiB", "VMSTATE", "STATE", "ADDRESSES"}, rows); err != nil {
		return err
	}
	linef(w, "\n%s, %s, %s, %s, %s, %s, %s, %s.\n",
		cubefleet.Count(len(inv.Servers), "server", "servers"), cubefleet.Count(len(inv.LANs), "LAN", "LANs"),
		cubefleet.Count(len(inv.SecurityGroups), "security group", "security groups"), cubefleet.Count(len(inv.NATGateways), "NAT gateway", "NAT gateways"),
		cubefleet.Count(len(inv.ApplicationLoadBalancers), "load balancer", "load balancers"), cubefleet.Count(len(inv.TargetGroups), "target group", "target groups"),
		cubefleet.Count(len(inv.CubeTemplates), "CUBE template", "CUBE templates"), cubefleet.Count(len(inv.PendingRequests), "pending request", "pending requests"))
	if !inv.Consistent {
		linef(w, "The data center changed while it was read (version %d, then %d): run the inventory again before planning.\n", dc.Version, dc.VersionAtEnd)
	}
	return nil
}

// ---- plan ----

func newIonosPlanCmd(stdio IO) *cobra.Command {
	var (
		configPath, inventoryPath string
		target                    int
		maxAge                    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "plan --config F --inventory F --target N",
		Short: "Plan the Cube slots for a target count (read-only; exit 1 when rejected)",
		Long: "Checks the private configuration against an inventory and prints, per slot, retain, create,\n" +
			"remove or empty, the capacity each yields and why. Every broken rule is reported at once,\n" +
			"naming the slot or server; a rejected plan exits 1. The plan changes nothing: it is not a\n" +
			"mutation transaction, so refresh the inventory before every plan.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if target < 0 {
				return usagef("--target must not be negative")
			}
			if maxAge <= 0 {
				return usagef("--max-inventory-age must be positive")
			}
			if _, err := outputFormat(cmd); err != nil {
				return err
			}
			cfg, err := readFile(configPath, "--config", cubes.DecodeConfig, func(data []byte) string {
				if ionos.IsInventory(data) {
					return "is an inventory (written by cubefleet ionos inventory), not the fleet configuration: pass it as --inventory, and the fleet configuration (examples/ionos-fleet-config.example.json shows one) as --config"
				}
				return ""
			})
			if err != nil {
				return err
			}
			inv, err := readFile(inventoryPath, "--inventory", ionos.DecodeInventory, func(data []byte) string {
				if cubes.IsConfig(data) {
					return "is a fleet configuration, not an inventory: pass it as --config, and an inventory (cubefleet ionos inventory --out FILE writes one) as --inventory"
				}
				return ""
			})
			if err != nil {
				return err
			}
			plan := cubes.PlanSlots(cfg, inv, cubes.PlanOptions{Target: target, MaxInventoryAge: maxAge})
			if err := render(cmd, plan, func(w io.Writer) error { return printPlan(w, plan) }); err != nil {
				return err
			}
			if !plan.Accepted {
				return cubefleet.Errorf(cubefleet.CodePlanBlocked, "plan rejected: %s; nothing was changed", cubefleet.Count(len(plan.Problems), "problem", "problems"))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "the private fleet configuration (JSON; required)")
	f.StringVar(&inventoryPath, "inventory", "", "an inventory from `cubefleet ionos inventory` (required)")
	f.IntVar(&target, "target", 0, "number of Cubes wanted (required)")
	durationVar(f, &maxAge, "max-inventory-age", cubes.DefaultMaxInventoryAge, "refuse an older inventory")
	for _, name := range []string{"config", "inventory", "target"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// ionosClient makes the IONOS API client: the API URL from apiURL (--api-url), else
// $IONOS_API_URL, else the public API; the token from tokenFile (a private file: regular,
// yours, mode 0600); timeout bounds each call, retries included.
func ionosClient(stdio IO, apiURL, tokenFile string, timeout time.Duration) (*ionos.Client, error) {
	apiURLFrom := "--api-url"
	if apiURL == "" {
		apiURL, apiURLFrom = stdio.Getenv(ionos.EnvAPIURL), ionos.EnvAPIURL
	}
	if apiURL == "" {
		apiURLFrom = ""
	}
	tok, err := ionos.ReadTokenFile(tokenFile)
	if err != nil {
		return nil, err
	}
	return ionos.New(ionos.Config{APIURL: apiURL, APIURLFrom: apiURLFrom, Token: tok, Timeout: timeout,
		PinnedCertSHA256: stdio.Getenv("IONOS_PINNED_CERT")})
}

// readFile reads path and decodes it; errors name the flag. When decode refuses the file,
// mistaken says what else it is ("" when it recognises nothing), and that is the error.
func readFile[T any](path, flag string, decode func(io.Reader) (T, error), mistaken func([]byte) string) (T, error) {
	var zero T
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return zero, cubefleet.Invalid(flag, "cannot read %s: %v", path, err)
	}
	v, err := decode(bytes.NewReader(data))
	if err != nil {
		if what := mistaken(data); what != "" {
			return zero, cubefleet.Invalid(flag, "%s %s", path, what)
		}
		var e *cubefleet.Error
		if errors.As(err, &e) {
			e.Message = fmt.Sprintf("%s %s: %s", flag, path, e.Message)
		}
		return zero, err
	}
	return v, nil
}

func printPlan(w io.Writer, p *cubes.Plan) error {
	linef(w, "Plan for data center %s: target %s (inventory %s old).\n\n", p.DatacenterID, cubefleet.Count(p.Target, "Cube", "Cubes"),
		time.Duration(p.InventoryAge*int64(time.Millisecond)).Round(time.Second))
	rows := make([][]string, 0, len(p.Slots))
	for _, s := range p.Slots {
		rows = append(rows, []string{strconv.Itoa(s.Index), s.Name, s.PrivateIP, orDash(s.ServerID), string(s.Action),
			strconv.Itoa(s.Cores), strconv.Itoa(s.RAMMiB), strconv.Itoa(s.WorkerSlots), orDash(s.Status), s.Reason})
	}
	if err := printTable(w, []string{"SLOT", "NAME", "PRIVATE IP", "SERVER", "ACTION", "CORES", "RAM MiB", "WORKERS", "STATUS", "REASON"}, rows); err != nil {
		return err
	}
	fmt.Fprintln(w)
	printCapacity(w, "Capacity", p.Capacity, p.CapacityNote)
	if t := p.Template; t != nil {
		linef(w, "New Cubes: template %q (%s): %d cores, %d MiB RAM, %d GB storage.\n", t.Name, t.ID, t.Cores, t.RAMMiB, t.StorageGB)
	} else {
		fmt.Fprintln(w, "New Cubes: no CUBE template meets the minimums.")
	}
	if p.Accepted {
		fmt.Fprintln(w, "\nPlan accepted. It changed nothing; running Cubes are not proven ready.")
		return nil
	}
	printProblems(w, p.Problems)
	return nil
}

// printCapacity prints a plan's capacity after label, or the note saying why there is none.
func printCapacity(w io.Writer, label string, c *cubes.Capacity, note string) {
	if c == nil {
		linef(w, "%s: %s.\n", label, note)
		return
	}
	linef(w, "%s: %s, %s, %d MiB RAM, %s.\n", label, cubefleet.Count(c.Cubes, "Cube", "Cubes"), cubefleet.Count(c.Cores, "core", "cores"), c.RAMMiB, cubefleet.Count(c.WorkerSlots, "worker slot", "worker slots"))
}

// printProblems lists a rejected plan's problems, each with its rule and slot.
func printProblems(w io.Writer, problems []cubes.Problem) {
	linef(w, "\nProblems (%d):\n", len(problems))
	for _, pr := range problems {
		where := ""
		if pr.SlotIndex >= 0 {
			where = fmt.Sprintf(" slot %d (%s)", pr.SlotIndex, pr.Slot)
		}
		linef(w, "  %s%s: %s\n", pr.Rule, where, pr.Message)
	}
}

// ---- simulate ----

func newIonosSimulateCmd(stdio IO) *cobra.Command {
	var (
		listen, statePath, tokenFile string
		sample                       int
		runFor                       time.Duration
		faultSpecs                   []string
	)
	cmd := &cobra.Command{
		Use:   "simulate [--listen 127.0.0.1:PORT] [--state FILE] [--fault SPEC]... [--request-duration D]",
		Short: "Serve a loopback IONOS Cloud API v6 simulator until interrupted",
		Long: "Serves /cloudapi/v6 on a loopback address with the official SDK's JSON shapes, asynchronous\n" +
			"requests, BUSY states and CUBE rules. --state loads a JSON fixture when the file exists and\n" +
			"saves the world there (mode 0600) on exit; --sample-cubes starts from a sample data center\n" +
			"instead. Point the tools at it with --api-url or " + ionos.EnvAPIURL + ".\n\n" +
			"--fault SPEC (repeatable) makes matching calls misbehave, so every failure can be rehearsed:\n" +
			"  [METHOD] TARGET: ACTION [MODIFIER]...\n" +
			"ACTION is an HTTP status (300-599), \"stuck BUSY DURATION\", \"latency DURATION\" or\n" +
			"\"fail-request\"; MODIFIERs are after-apply, xCOUNT, \"if FIELD\" and \"retry-after SECONDS\".\n" +
			"TARGET is \"*\" or the end of the path, {id} standing for one segment. The first matching\n" +
			"fault answers a call (\"stuck\" faults apply besides it). docs/ionos.md has the grammar.",
		Example: `  cubefleet ionos simulate --sample-cubes 4 --fault 'POST servers: 504 after-apply'
  cubefleet ionos simulate --fault 'GET servers/{id}: 404 x3' --fault '*: 429 x20 retry-after 1'
  cubefleet ionos simulate --fault 'POST servers: 422 if cpuFamily' --fault 'requests: stuck BUSY 10m'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sample < 0 || runFor < 0 {
				return usagef("--sample-cubes and --request-duration must not be negative")
			}
			var faults []ionossim.Fault
			for _, spec := range faultSpecs {
				f, err := ionossim.ParseFault(spec)
				if err != nil {
					return usagef("--fault: %v", err)
				}
				faults = append(faults, f)
			}
			opts := ionossim.Options{RunDuration: runFor}
			if tokenFile != "" {
				tok, err := ionos.ReadTokenFile(tokenFile)
				if err != nil {
					return err
				}
				opts.Authorize = tok.Matches
			}
			sim := ionossim.New(opts)
			for _, f := range faults {
				sim.InjectFault(f)
			}
			loaded := false
			if statePath != "" {
				f, err := os.Open(statePath)
				switch {
				case err == nil:
					err = sim.LoadState(f)
					f.Close()
					if err != nil {
						return cubefleet.Invalid("--state", "%s: %v", statePath, err)
					}
					loaded = true
				case !errors.Is(err, fs.ErrNotExist):
					return cubefleet.Invalid("--state", "cannot read %s: %v", statePath, err)
				}
			}
			if !loaded && sample > 0 {
				if err := sim.Load(ionossim.SampleFleet(sample)); err != nil {
					return err
				}
			}
			l, err := ionossim.Listen(cmd.Context(), listen, sim)
			if err != nil {
				if errors.Is(err, ionossim.ErrNotLoopback) {
					return usagef("--listen %s: %v", listen, ionossim.ErrNotLoopback)
				}
				return err
			}
			st := sim.Snapshot()
			linef(stdio.Out, "IONOS API simulator listening on %s (%s)\n", l.URL, cubefleet.Count(len(st.Datacenters), "data center", "data centers"))
			for _, dc := range st.Datacenters {
				linef(stdio.Out, "  data center %s (%s, %s): %s\n", dc.ID, dc.Name, dc.Location, cubefleet.Count(len(dc.Servers), "server", "servers"))
			}
			for _, f := range faults {
				linef(stdio.Out, "  fault: %s\n", f)
			}
			linef(stdio.Out, "Use it with: export %s=%s\n", ionos.EnvAPIURL, l.URL)
			<-cmd.Context().Done()
			closeErr := l.Close()
			if statePath != "" {
				if err := saveState(statePath, sim); err != nil {
					return err
				}
				linef(stdio.Out, "Saved the simulator's state to %s\n", statePath)
			}
			return closeErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8443", "loopback address to serve on (port 0 picks a free one)")
	f.StringVar(&statePath, "state", "", "JSON fixture loaded at start when it exists and saved on exit")
	f.IntVar(&sample, "sample-cubes", 0, "start from a sample data center with this many running Cubes (when --state is absent)")
	f.StringVar(&tokenFile, "token-file", "", "accept only the token in this file (default: any bearer token)")
	durationVar(f, &runFor, "request-duration", time.Second, "how long an asynchronous request stays RUNNING")
	f.StringArrayVar(&faultSpecs, "fault", nil, "a fault to inject, e.g. 'POST servers: 504 after-apply' (repeatable; see docs/ionos.md)")
	return cmd
}

// saveState writes the simulator's world to path with mode 0600, atomically.
func saveState(path string, sim *ionossim.Sim) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("save simulator state: %w", err)
	}
	if err := sim.SaveState(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save simulator state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("save simulator state: %w", err)
	}
	return nil
}
