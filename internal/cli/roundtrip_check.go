package cli

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/fleetssh"
)

func newRoundtripPlanCmd() *cobra.Command {
	var ff fleetFlags
	cmd := &cobra.Command{
		Use:   "plan --profile F --config F",
		Short: "Say what roundtrip up would do now: which slot, which name, which calls (read-only)",
		Long: `Reads a fresh inventory of the profile's data center and the control plane's members of its
pool and plans roundtrip up: the slot the new Cube takes (the lowest-index empty one), its name
(<cube_name_prefix><run>-<slot>; the run id is chosen when up starts and journaled before the
create) and the IONOS, SSH and control-plane calls it makes, in order. The fleet must hold
exactly the profile's baseline Cubes, and every rule of scale plan applies. A rejected plan
exits 1; the plan changes nothing.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := outputFormat(cmd); err != nil {
				return err
			}
			st, err := ff.read(cmd)
			if err != nil {
				return err
			}
			sp := st.scalePlan(st.config.Occupied()+1, ff.maxAge)
			plan := cubes.PlanRoundtrip(st.config, st.profile, st.found, sp)
			if err := render(cmd, plan, func(w io.Writer) error { return printRoundtripPlan(w, plan) }); err != nil {
				return err
			}
			if !plan.Accepted {
				return cubefleet.Errorf(cubefleet.CodePlanBlocked, "roundtrip plan rejected: %s; nothing was changed", cubefleet.Count(len(plan.Problems), "problem", "problems"))
			}
			return nil
		},
	}
	ff.register(cmd)
	return cmd
}

func printRoundtripPlan(w io.Writer, p *cubes.RoundtripPlan) error {
	linef(w, "Roundtrip plan for data center %s: %s, one more for the roundtrip.\n", p.DatacenterID, cubefleet.Count(p.Current, "Cube", "Cubes"))
	if !p.Accepted {
		printProblems(w, p.Problems)
		return nil
	}
	linef(w, "\nNew Cube: slot %d, %s, named %s.\n", p.Slot, p.PrivateIP, p.NamePattern)
	linef(w, "\nCalls (%d):\n", len(p.Calls))
	for i, c := range p.Calls {
		linef(w, "  %d. %s\n", i+1, c)
	}
	fmt.Fprintln(w, "\nPlan accepted. It changed nothing.")
	return nil
}

// checksOut is roundtrip check's JSON: every check, and whether all passed.
type checksOut struct {
	OK     bool          `json:"ok"`
	Checks []cubes.Check `json:"checks"`
}

// sshChecks are roundtrip check's SSH checks: the coordinator reached with its host key
// known; each Cube of the configuration's slots reached through it as a jump host at its
// private IP (ssh.cube_user, ssh.cube_port), its host key known too; and on the GPU host (its host key known too) a WireGuard peer on the profile's
// interface whose allowed IPs hold each Cube's private address (/32), as `wg show INTERFACE
// allowed-ips` lists them.
func sshChecks(ctx context.Context, p *cubes.Profile, cfg *cubes.Config, timeout time.Duration) []cubes.Check {
	d, err := fleetssh.NewDialer(p.SSH.KeyFile, p.SSH.KnownHostsFile, timeout)
	if err != nil {
		return []cubes.Check{{Name: "ssh", Detail: err.Error()}}
	}
	co := p.Coordinator
	out := []cubes.Check{{Name: "ssh coordinator " + co.Host, OK: true, Detail: fmt.Sprintf("%s@%s:%d, host key known", co.User, co.Host, co.Port)}}
	if _, err := d.Run(ctx, co.Host, co.Port, co.User, "true"); err != nil {
		out[0].OK, out[0].Detail = false, err.Error()
	}
	jump := fleetssh.Host{Host: co.Host, Port: co.Port, User: co.User}
	for _, s := range cfg.Slots {
		if s.ServerID == "" {
			continue
		}
		c := cubes.Check{Name: "ssh cube " + s.Name, OK: true, Detail: fmt.Sprintf("%s@%s:%d through %s, host key known", p.SSH.CubeUser, s.PrivateIP, p.SSH.CubePort, co.Host)}
		if !out[0].OK {
			c.OK, c.Detail = false, "not tried: the coordinator (the jump host) failed its check"
		} else if _, err := d.RunVia(ctx, jump, fleetssh.Host{Host: s.PrivateIP, Port: p.SSH.CubePort, User: p.SSH.CubeUser}, "true"); err != nil {
			c.OK, c.Detail = false, err.Error()
		}
		out = append(out, c)
	}
	gw := p.GPUWireGuard
	name := "wireguard " + gw.Host + " " + gw.Interface
	cmd := "wg show " + gw.Interface + " allowed-ips"
	listed, err := d.Run(ctx, gw.Host, gw.Port, gw.User, cmd)
	var peers map[netip.Prefix]string
	if err == nil {
		peers, err = fleetssh.AllowedIPs(listed)
	}
	if err != nil {
		return append(out, cubes.Check{Name: name, Detail: err.Error()})
	}
	out = append(out, cubes.Check{Name: name, OK: true, Detail: fmt.Sprintf("%s over %s", cubefleet.Count(len(peers), "allowed IP", "allowed IPs"), cmd)})
	for _, s := range cfg.Slots {
		if s.ServerID == "" {
			continue
		}
		c := cubes.Check{Name: "wireguard peer " + s.Name}
		addr, err := netip.ParseAddr(s.PrivateIP)
		if key, ok := peers[netip.PrefixFrom(addr, 32)]; err == nil && ok {
			c.OK, c.Detail = true, fmt.Sprintf("peer %s allows %s/32", key, s.PrivateIP)
		} else {
			c.Detail = fmt.Sprintf("no peer of %s on %s allows %s/32: add the Cube's peer (roundtrip up does, persisted in /etc/wireguard/%s.conf)", gw.Interface, gw.Host, s.PrivateIP, gw.Interface)
		}
		out = append(out, c)
	}
	return out
}

func newRoundtripCheckCmd() *cobra.Command {
	var ff fleetFlags
	var port int
	cmd := &cobra.Command{
		Use:   "check --profile F --config F [--origin-port 8080]",
		Short: "Check the fleet read-only: one line per check, ok or FAIL and why (exit 1 on any FAIL)",
		Long: `Reads a fresh inventory of the profile's data center and the control plane's members of its
pool, and checks, read-only: the planning rules at the fleet's current size; per Cube the
worker security group attached and its origin (private IP, --origin-port) a healthy target of
every target group (weight above 0, health check on, not in maintenance); the NAT gateway on
the private LAN; the load balancer's target LAN and a FORWARD rule to every target group; and
the membership: every Cube registered and Ready in the pool and uncordoned, nothing registered
there that the fleet lacks. Then over SSH with the profile's key, every host key checked
against its known_hosts (an unknown or changed key fails): the coordinator, each Cube through
the coordinator as a jump host (ssh.cube_user at its private IP, port ssh.cube_port), and on
the GPU host a WireGuard peer of the profile's interface allowing each Cube's private IP (/32), as
"wg show INTERFACE allowed-ips" lists them. One line per check; any FAIL exits 1.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if port < 1 || port > 65535 {
				return usagef("--origin-port %d: want 1 to 65535", port)
			}
			if _, err := outputFormat(cmd); err != nil {
				return err
			}
			st, err := ff.read(cmd)
			if err != nil {
				return err
			}
			out, failed := fleetChecks(cmd.Context(), st, &ff, port)
			if err := render(cmd, out, func(w io.Writer) error {
				printChecks(w, out.Checks)
				return nil
			}); err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("roundtrip check: %d of %d checks failed", failed, len(out.Checks))
			}
			return nil
		},
	}
	ff.register(cmd)
	cmd.Flags().IntVar(&port, "origin-port", 8080, "the port of each Cube's origin in the target groups")
	return cmd
}

// fleetChecks runs every check of roundtrip check on the fleet as st read it and returns them
// with the number that failed.
func fleetChecks(ctx context.Context, st *fleetState, ff *fleetFlags, port int) (checksOut, int) {
	out := checksOut{Checks: cubes.CheckFleet(st.config, st.inv, st.found, st.members, port, cubes.PlanOptions{MaxInventoryAge: ff.maxAge, CubeNamePrefix: st.profile.CubeNamePrefix})}
	out.Checks = append(out.Checks, sshChecks(ctx, st.profile, st.config, ff.timeout)...)
	failed := 0
	for _, c := range out.Checks {
		if !c.OK {
			failed++
		}
	}
	out.OK = failed == 0
	return out, failed
}

// printChecks prints one line per check: ok or FAIL, its name and what it found.
func printChecks(w io.Writer, checks []cubes.Check) {
	for _, c := range checks {
		verdict := "ok  "
		if !c.OK {
			verdict = "FAIL"
		}
		linef(w, "%s %s: %s\n", verdict, c.Name, c.Detail)
	}
}
