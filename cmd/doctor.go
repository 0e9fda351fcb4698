package cmd

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sop/doctor"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/connect"
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
		c, err := f.Clients(connect.Options{})
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, cfg *config.Config, ps []*config.Pipeline) (sources.DoctorFacts, error) {
			return readDoctorFacts(ctx, c, cfg, ps)
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

// readDoctorFacts reads every fact of doctor: the read path's (tables,
// snippets, grants, server, samples), the schema check's items, the write
// DSN's grants when it is another DSN, and the cluster's.
// usesBinlog reports whether a pipeline of ps reads a step from the binlog.
func usesBinlog(ps []*config.Pipeline) bool {
	for _, p := range ps {
		if p.UsesBinlog() {
			return true
		}
	}
	return false
}

func readDoctorFacts(ctx context.Context, c *connect.Clients, cfg *config.Config, ps []*config.Pipeline) (sources.DoctorFacts, error) {
	// The pipelines of one call share a server (runDoctor groups them):
	// the first one's read path, write path and binlog are theirs.
	reader := c.ReaderFor(ps[0])
	// A MySQL that cannot be reached at all: doctor cannot run (exit 1).
	if _, err := reader.Now(ctx); err != nil {
		return sources.DoctorFacts{}, err
	}
	f := reader.DoctorFacts(ctx, cfg, ps)
	if f.MySQLErr == "" {
		var needs []schema.Need
		for _, p := range ps {
			needs = append(needs, reconcile.IndexNeeds(p)...)
		}
		rep, err := schema.Check(ctx, reader, ps, needs, cfg.Audit.AuditTable())
		if err != nil {
			f.MySQLErr = err.Error()
		} else {
			for _, it := range rep.Items {
				f.Schema = append(f.Schema, sources.SchemaFact{Pipeline: it.Pipeline, Kind: it.Kind, Table: it.Table, What: it.What,
					OK: it.Status == schema.StatusOK, Index: it.Index, DDL: it.DDL, Checks: it.Checks, Why: it.Why})
			}
		}
		if w := cfg.MySQL.WriteDSN; w != "" && w != cfg.MySQL.DSN {
			g := sources.GrantFacts{}
			if wr, err := c.WriterFor(ps[0]); err != nil {
				g.Err = err.Error()
			} else {
				g = wr.Grants(ctx)
			}
			f.WriteGrants = &g
		}
	}
	// How far back the binlog reaches, from the binlog reader itself (its
	// oldest file's first event), for the binlog check's retention.
	if o, ok := c.Collector.For(ps[0]).Binlog.(interface {
		Oldest(context.Context) (time.Time, error)
	}); ok && usesBinlog(ps) {
		if t, err := o.Oldest(ctx); err == nil {
			f.Server.OldestBinlog = t
		} else if f.Server.BinlogErr == "" {
			f.Server.BinlogErr = err.Error()
		}
	}
	if c.Kafka == nil {
		f.KafkaErr = "no broker configured (" + c.KafkaMissing + ")"
	} else {
		c.Kafka.DoctorFacts(ctx, ps, &f)
	}
	return f, nil
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
	for _, g := range byServer(cfg, ps) {
		gcfg := *cfg
		gcfg.MySQL = cfg.MySQLFor(g[0])
		facts, err := read(ctx, &gcfg, g)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rep.Checks = append(rep.Checks, doctor.Judge(&gcfg, g, facts).Checks...)
	}
	if opts.Format != FormatTable {
		if err := jsonEncoder(opts.IO.Out, opts.Format).Encode(rep); err != nil {
			return err
		}
	} else if err := renderDoctor(opts.IO, rep); err != nil {
		return err
	}
	return exitWith(rep.ExitCode())
}

// byServer groups ps by the MySQL block each uses (cfg.MySQLFor), in
// file order: pipelines that read, write and keep their binlog on the same
// servers are checked together.
func byServer(cfg *config.Config, ps []*config.Pipeline) [][]*config.Pipeline {
	var groups [][]*config.Pipeline
	var keys []config.MySQL
	for _, p := range ps {
		m := cfg.MySQLFor(p)
		i := slices.Index(keys, m)
		if i < 0 {
			keys, groups = append(keys, m), append(groups, nil)
			i = len(groups) - 1
		}
		groups[i] = append(groups[i], p)
	}
	return groups
}

// renderDoctor prints the checks as a table, then the fix of each check
// that did not pass. Every detail can hold a value read from the database
// or Kafka: each goes through ui.Safe.
func renderDoctor(ios *iostreams.IOStreams, rep *doctor.Report) error {
	out := ios.Out
	st := ui.NewStyles(out, ios.ColorEnabled())
	rows := [][]string{}
	counts := map[string]int{}
	for _, c := range rep.Checks {
		counts[c.Status]++
		status := c.Status
		switch c.Status {
		case doctor.Pass:
			status = st.OK.Render(status)
		case doctor.Fail:
			status = st.Action.Render(status)
		case doctor.Warn:
			status = st.Watch.Render(status)
		}
		rows = append(rows, []string{ui.Safe(c.Pipeline), c.Check, status, ui.Safe(c.Detail)})
	}
	var b strings.Builder
	if err := ui.Table(&b, ios.IsStdoutTTY(), []string{"PIPELINE", "CHECK", "STATUS", "DETAIL"}, rows); err != nil {
		return err
	}
	var fixes []string
	for _, c := range rep.Checks {
		if c.Fix != "" && c.Status != doctor.Pass {
			fixes = append(fixes, fmt.Sprintf("  %s %s (%s): %s", ui.Safe(c.Pipeline), c.Check, c.Status, ui.Safe(c.Fix)))
		}
	}
	if len(fixes) > 0 {
		b.WriteString("\nFIX\n" + strings.Join(fixes, "\n") + "\n")
	}
	fmt.Fprintf(&b, "\n%d pass, %d warn, %d fail, %d skip\n", counts[doctor.Pass], counts[doctor.Warn], counts[doctor.Fail], counts[doctor.Skip])
	_, err := io.WriteString(out, b.String())
	return err
}
