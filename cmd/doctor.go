package cmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sop/doctor"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/schema"
)

// DoctorFactsFunc reads the facts doctor judges for the pipelines.
type DoctorFactsFunc func(ctx context.Context, cfg *config.Config, ps []*config.Pipeline) (sources.DoctorFacts, error)

// DoctorOptions are the parsed flags of `opctl doctor` and its
// dependencies.
type DoctorOptions struct {
	IO       *iostreams.IOStreams
	Format   Format
	Config   func() (*config.Config, error)
	Facts    func() (DoctorFactsFunc, error)
	Pipeline string
}

// NewCmdDoctor builds `opctl doctor`. runF replaces the run function in tests.
func NewCmdDoctor(f *Factory, runF func(context.Context, *DoctorOptions) error) *cobra.Command {
	opts := &DoctorOptions{IO: f.IOStreams, Config: f.Config}
	opts.Facts = func() (DoctorFactsFunc, error) {
		c, err := f.Clients()
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, cfg *config.Config, ps []*config.Pipeline) (sources.DoctorFacts, error) {
			var needs []schema.Need
			for _, p := range ps {
				needs = append(needs, reconcile.IndexNeeds(p)...)
			}
			return c.DoctorFacts(ctx, cfg, ps, needs)
		}, nil
	}
	c := &cobra.Command{
		Use:   "doctor [--pipeline P]",
		Short: "Check the config against the live MySQL and Kafka",
		Long: `Check each pipeline's configuration against the live systems (docs/doctor.md):
tables, columns, indexes, grants, topic, group, partitioner, retention,
offset_reset, isolation_level, time_zone, binlog. Each check passes, warns,
fails or is skipped, with what to do about it. Doctor only reads: SHOW
GRANTS, information_schema, server variables, a bounded sample of state rows,
Kafka metadata, DescribeConfigs and DescribeGroups. Exit 3 when a check fails.`,
		Example: `  opctl doctor
  opctl doctor --pipeline settlement -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Format = f.Globals.Output
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runDoctor(c.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.Pipeline, "pipeline", "", "check only this pipeline")
	return c
}

func runDoctor(ctx context.Context, opts *DoctorOptions) error {
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	ps, err := cfg.Select(opts.Pipeline)
	if err != nil {
		return err
	}
	read, err := opts.Facts()
	if err != nil {
		return err
	}
	// Pipelines on other servers (pipelines[].mysql) are checked against
	// their own: one read and one judgement per server, in file order.
	rep := &doctor.Report{}
	for _, g := range cfg.ByServer(ps) {
		gcfg := cfg.ForServer(g)
		facts, err := read(ctx, gcfg, g)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rep.Checks = append(rep.Checks, doctor.Judge(gcfg, g, facts).Checks...)
	}
	if err := newDoctorView(opts.IO, opts.Format).Report(rep); err != nil {
		return err
	}
	return exitWith(rep.ExitCode())
}
