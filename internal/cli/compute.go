package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/client"
)

// computeReader is what the read-only compute commands need of a kind's typed client methods
// (client.ComputeService's fields).
type computeReader[O any] interface {
	Get(ctx context.Context, in api.ObjectRef) (O, error)
	List(ctx context.Context, in api.ListInput) (api.ObjectList[O], error)
}

// computeKind describes one compute kind for `cubefleet KIND list|get`: its command words, its
// id prefix, its table and how to reach its methods.
type computeKind[O any] struct {
	use, singular string
	aliases       []string
	short         string
	prefix        string // the ids' prefix, "tpl_": an argument without it is a name
	byPool        bool   // list takes --pool
	methods       func(c *client.Client) computeReader[O]
	meta          func(o O) api.ObjectMeta
	header        []string // after NAME and ID; CREATED follows
	cells         func(o O, names fleetNames) []string
	// refers lists the kinds of the objects the cells name by id (pools, flavors, sites), whose
	// names the table shows instead.
	refers []func(ctx context.Context, c *client.Client, tenant string, names fleetNames) error
}

// fleetNames maps the ids of a tenant's objects to their names, for tables that show a
// referenced object by its name.
type fleetNames map[string]string

// of returns id's name, or id when it has none the table knows (an object of another tenant,
// one without a name, or names that could not be read).
func (n fleetNames) of(id string) string {
	if name := n[id]; name != "" {
		return name
	}
	return id
}

// namesOf returns a refers function that adds the names of the tenant's objects of one kind.
func namesOf[O any](methods func(c *client.Client) computeReader[O], meta func(o O) api.ObjectMeta) func(context.Context, *client.Client, string, fleetNames) error {
	return func(ctx context.Context, c *client.Client, tenant string, names fleetNames) error {
		cursor := ""
		for {
			p, err := methods(c).List(ctx, api.ListInput{TenantID: tenant, Limit: 1000, Cursor: cursor})
			if err != nil {
				return err
			}
			for _, o := range p.Items {
				m := meta(o)
				names[m.ID] = m.Name
			}
			if p.NextCursor == "" {
				return nil
			}
			cursor = p.NextCursor
		}
	}
}

var (
	poolNames = namesOf(func(c *client.Client) computeReader[api.Pool] { return c.Compute.Pools },
		func(o api.Pool) api.ObjectMeta { return o.ObjectMeta })
	flavorNames = namesOf(func(c *client.Client) computeReader[api.Flavor] { return c.Compute.Flavors },
		func(o api.Flavor) api.ObjectMeta { return o.ObjectMeta })
	siteNames = namesOf(func(c *client.Client) computeReader[api.Site] { return c.Compute.Sites },
		func(o api.Site) api.ObjectMeta { return o.ObjectMeta })
)

func newTemplatesCmd() *cobra.Command {
	return computeCmd(computeKind[api.SandboxTemplate]{
		use: "templates", singular: "template", aliases: []string{"template", "tpl"}, prefix: "tpl_", byPool: true,
		short:   "List and show a tenant's sandbox templates (what sandboxes create --template names)",
		methods: func(c *client.Client) computeReader[api.SandboxTemplate] { return c.Compute.SandboxTemplates },
		meta:    func(o api.SandboxTemplate) api.ObjectMeta { return o.ObjectMeta },
		header:  []string{"POOL", "FLAVOR", "IMAGE", "NETWORK", "WARM"},
		refers:  []func(context.Context, *client.Client, string, fleetNames) error{poolNames, flavorNames},
		cells: func(o api.SandboxTemplate, names fleetNames) []string {
			warm := "-"
			if o.Warm != nil {
				warm = fmt.Sprintf("%d-%d", o.Warm.Min, o.Warm.Max)
			}
			return []string{names.of(o.PoolID), names.of(o.FlavorID), o.ImageID, o.Network, warm}
		},
	})
}

func newPoolsCmd() *cobra.Command {
	return computeCmd(computeKind[api.Pool]{
		use: "pools", singular: "pool", aliases: []string{"pool"}, prefix: "pool_",
		short:   "List and show a tenant's pools of compute hosts",
		methods: func(c *client.Client) computeReader[api.Pool] { return c.Compute.Pools },
		meta:    func(o api.Pool) api.ObjectMeta { return o.ObjectMeta },
		header:  []string{"SITE", "CLASS", "GPU", "ARCHIVED"},
		refers:  []func(context.Context, *client.Client, string, fleetNames) error{siteNames},
		cells: func(o api.Pool, names fleetNames) []string {
			return []string{names.of(o.SiteID), o.Class, orDash(o.GPUModel), formatTimePtr(o.ArchivedAt)}
		},
	})
}

func newFlavorsCmd() *cobra.Command {
	return computeCmd(computeKind[api.Flavor]{
		use: "flavors", singular: "flavor", aliases: []string{"flavor"}, prefix: "flv_", byPool: true,
		short:   "List and show the sandbox sizes sold on a tenant's pools",
		methods: func(c *client.Client) computeReader[api.Flavor] { return c.Compute.Flavors },
		meta:    func(o api.Flavor) api.ObjectMeta { return o.ObjectMeta },
		header:  []string{"POOL", "VCPU", "MEMORY", "DISK", "GPU"},
		refers:  []func(context.Context, *client.Client, string, fleetNames) error{poolNames},
		cells: func(o api.Flavor, names fleetNames) []string {
			return []string{names.of(o.PoolID), fmt.Sprint(o.VCPU), fmt.Sprintf("%d GiB", o.MemoryGiB), fmt.Sprintf("%d GiB", o.DiskGiB), fmt.Sprint(o.GPU)}
		},
	})
}

func newSitesCmd() *cobra.Command {
	return computeCmd(computeKind[api.Site]{
		use: "sites", singular: "site", aliases: []string{"site"}, prefix: "site_",
		short:   "List and show a tenant's sites",
		methods: func(c *client.Client) computeReader[api.Site] { return c.Compute.Sites },
		meta:    func(o api.Site) api.ObjectMeta { return o.ObjectMeta },
		header:  []string{"KIND", "REGION"},
		cells:   func(o api.Site, _ fleetNames) []string { return []string{o.Kind, o.Region} },
	})
}

// computeCmd builds `cubefleet KIND` with its read-only list and get, in kubectl's table
// style (--output json: the API's objects); create, update and delete go through
// `cubefleet fleet apply`.
func computeCmd[O any](k computeKind[O]) *cobra.Command {
	cmd := groupCmd(k.use, k.short, fmt.Sprintf(`List (cubefleet %[1]s list --tenant T) and show (cubefleet %[1]s get ID|NAME --tenant T) a
tenant's %[1]s, read-only: a table, or the API's objects with --output json. A fleet file
applied with cubefleet fleet apply creates and changes them.`, k.use))
	cmd.Aliases = k.aliases
	cmd.AddCommand(computeListCmd(k), computeGetCmd(k))
	return cmd
}

// computeTable prints objects as a table: NAME, ID, the kind's columns (the objects they refer
// to by their names, as names has them), CREATED.
func computeTable[O any](w io.Writer, k computeKind[O], objects []O, names fleetNames) error {
	rows := make([][]string, 0, len(objects))
	for _, o := range objects {
		m := k.meta(o)
		rows = append(rows, append(append([]string{orDash(m.Name), m.ID}, k.cells(o, names)...), formatTime(m.CreatedAt)))
	}
	return printTable(w, append(append([]string{"NAME", "ID"}, k.header...), "CREATED"), rows)
}

// referredNames reads the names of the tenant's objects k's table refers to. A table is still
// right without them (it shows ids), so a key that may not list those kinds, or a deployment
// without them, gets the ids; another failure is a warning on stderr.
func referredNames[O any](cmd *cobra.Command, k computeKind[O], tenant string) fleetNames {
	names := fleetNames{}
	c, err := typed(cmd)
	if err != nil {
		return names
	}
	for _, add := range k.refers {
		err := add(cmd.Context(), c, tenant, names)
		if err != nil && !cubefleet.IsCode(err, cubefleet.CodeForbidden) && !cubefleet.IsCode(err, cubefleet.CodeUnsupported) {
			linef(cmd.ErrOrStderr(), "warning: showing ids, not names: %v\n", err)
		}
	}
	return names
}

func computeListCmd[O any](k computeKind[O]) *cobra.Command {
	var tenant, pool, cursor string
	var limit int
	use := "list --tenant T [--limit N] [--cursor C]"
	if k.byPool {
		use = "list --tenant T [--pool POOL] [--limit N] [--cursor C]"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: "List the tenant's " + k.use + " by id",
		Long: fmt.Sprintf(`List the tenant's %s by id, at most --limit (1 to 1000, default 100); when there are more,
the next page's --cursor is printed on stderr.`, k.use),
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 1000 {
				return usagef("--limit %d: give 1 to 1000", limit)
			}
			out, err := listPages(cmd, func(ctx context.Context, c *client.Client, limit int, cursor string) ([]O, string, error) {
				p, err := k.methods(c).List(ctx, api.ListInput{TenantID: tenant, PoolID: pool, Limit: limit, Cursor: cursor})
				return p.Items, p.NextCursor, err
			}, cursor, limit)
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				if err := computeTable(w, k, out.Items, referredNames(cmd, k, tenant)); err != nil {
					return err
				}
				if out.NextCursor != "" {
					linef(cmd.ErrOrStderr(), "More %s: add --cursor %s\n", k.use, out.NextCursor)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "tenant whose "+k.use+" to list")
	if k.byPool {
		f.StringVar(&pool, "pool", "", "only the "+k.use+" of this pool (its id)")
	}
	f.IntVar(&limit, "limit", 100, "list at most this many (1 to 1000)")
	f.StringVar(&cursor, "cursor", "", "the page after this cursor (printed by the previous page)")
	cmd.MarkFlagRequired("tenant")
	return cmd
}

func computeGetCmd[O any](k computeKind[O]) *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "get ID|NAME --tenant T",
		Short: "Show one of the tenant's " + k.use + " by its id or name",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			o, err := computeFind(cmd.Context(), c, k, tenant, args[0])
			if err != nil {
				return err
			}
			return render(cmd, o, func(w io.Writer) error { return computeTable(w, k, []O{o}, referredNames(cmd, k, tenant)) })
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant whose "+k.singular+" it is")
	cmd.MarkFlagRequired("tenant")
	return cmd
}

// computeFind reads the tenant's object ref: by id when ref has the kind's prefix, else the one
// named ref (NOT_FOUND naming the list command when none is).
func computeFind[O any](ctx context.Context, c *client.Client, k computeKind[O], tenant, ref string) (O, error) {
	if strings.HasPrefix(ref, k.prefix) {
		return k.methods(c).Get(ctx, api.ObjectRef{TenantID: tenant, ID: ref})
	}
	var zero O
	cursor := ""
	for {
		p, err := k.methods(c).List(ctx, api.ListInput{TenantID: tenant, Limit: 1000, Cursor: cursor})
		if err != nil {
			return zero, err
		}
		for _, o := range p.Items {
			if k.meta(o).Name == ref {
				return o, nil
			}
		}
		if p.NextCursor == "" {
			return zero, cubefleet.Errorf(cubefleet.CodeNotFound, "tenant %s has no %s with id or name %q (cubefleet %s list --tenant %s)", tenant, k.singular, ref, k.use, tenant)
		}
		cursor = p.NextCursor
	}
}
