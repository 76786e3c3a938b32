package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/ionos"
)

// fleetFlags are the flags of the commands that read the Cube fleet as it is now (scale plan,
// roundtrip plan): the profile, the slot configuration, the IONOS API and its limits.
type fleetFlags struct {
	profile, config, apiURL string
	timeout, maxAge         time.Duration
}

func (ff *fleetFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&ff.profile, "profile", "", "the fleet-scaling profile (JSON; examples/ionos-fleet-profile.example.json shows one; required)")
	f.StringVar(&ff.config, "config", "", "the private fleet configuration of ordered slots (JSON; required)")
	f.StringVar(&ff.apiURL, "api-url", "", "IONOS API base URL (default $"+ionos.EnvAPIURL+", else "+ionos.DefaultAPIURL+")")
	durationVar(f, &ff.timeout, "timeout", ionos.DefaultTimeout, "limit for each IONOS API call, retries included")
	durationVar(f, &ff.maxAge, "max-inventory-age", cubes.DefaultMaxInventoryAge, "refuse an older inventory")
	_ = cmd.MarkFlagRequired("profile")
	_ = cmd.MarkFlagRequired("config")
}

// fleetState is the fleet as one command reads it: the profile and slot configuration, a
// fresh inventory of the profile's data center, what the profile's names resolve to there,
// and the control plane's members of the profile's pool.
type fleetState struct {
	profile *cubes.Profile
	config  *cubes.Config
	inv     *ionos.Inventory
	found   *cubes.Discovered
	members []cubes.Member
	cp      controlPlane
	ionos   *ionos.Client
}

// readFleet reads the profile and configuration, then the inventory (with the profile's
// IONOS token file) and the control plane's members (with the profile's API key file).
// Errors name the flag or profile key concerned; the data center the profile names must be
// the configuration's.
func (ff *fleetFlags) read(cmd *cobra.Command) (*fleetState, error) {
	if ff.timeout <= 0 {
		return nil, usagef("--timeout must be positive")
	}
	if ff.maxAge <= 0 {
		return nil, usagef("--max-inventory-age must be positive")
	}
	none := func([]byte) string { return "" }
	st := &fleetState{}
	var err error
	if st.profile, err = readFile(ff.profile, "--profile", cubes.DecodeProfile, none); err != nil {
		return nil, err
	}
	if st.config, err = readFile(ff.config, "--config", cubes.DecodeConfig, none); err != nil {
		return nil, err
	}
	stdio := stdioOf(cmd)
	ic, err := ionosClient(stdio, ff.apiURL, st.profile.TokenFile, ff.timeout)
	if err != nil {
		return nil, err
	}
	st.ionos = ic
	ctx := cmd.Context()
	dcs, err := ic.Datacenters(ctx)
	if err != nil {
		return nil, err
	}
	dc, err := cubes.DiscoverDatacenter(st.profile, dcs)
	if err != nil {
		return nil, err
	}
	if dc != st.config.DatacenterID {
		return nil, cubefleet.Invalid("datacenter", "data center %q is %s, but --config %s is for %s: use the profile and configuration of one fleet",
			st.profile.Datacenter, dc, ff.config, st.config.DatacenterID)
	}
	if st.inv, err = ic.Inventory(ctx, dc); err != nil {
		return nil, err
	}
	if st.found, err = cubes.Discover(st.profile, st.inv); err != nil {
		return nil, err
	}
	caFile, _ := cmd.Flags().GetString(flagCAFile)
	if st.cp, err = profileControlPlane(stdio.Getenv, caFile, st.profile.ControlPlane); err != nil {
		return nil, err
	}
	if st.members, err = st.cp.Members(ctx, st.profile.ControlPlane.Pool); err != nil {
		return nil, err
	}
	return st, nil
}

// scalePlan plans the fleet st read to target Cubes (cubes.PlanScale) with the profile's
// runtime source, drain deadline and Cube name prefix, refusing an inventory older than maxAge.
func (st *fleetState) scalePlan(target int, maxAge time.Duration) *cubes.ScalePlan {
	return cubes.PlanScale(st.config, st.inv, st.members, cubes.ScaleOptions{Target: target, RuntimeSourceServerID: st.found.RuntimeSourceServerID,
		DrainDeadline: st.profile.DrainDeadline, MaxInventoryAge: maxAge, CubeNamePrefix: st.profile.CubeNamePrefix})
}
