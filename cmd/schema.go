package cmd

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/connect"
	"github.com/opctl-dev/opctl/sources/schema"
)

// SchemaOptions are the parsed flags of `opctl schema print|check|apply` and
// their dependencies.
type SchemaOptions struct {
	IO      *iostreams.IOStreams
	Format  Format
	Timeout time.Duration
	// Config returns the configuration.
	Config func() (*config.Config, error)
	// Inspector reads table metadata on the read path of a pipeline (its
	// own server with pipelines[].mysql).
	Inspector func(p *config.Pipeline) (schema.Inspector, error)
	// Exec runs DDL on the write path (mysql.write_dsn) and names its
	// server.
	Exec func(ctx context.Context, cfg *config.Config, stmts []string) (addr string, err error)

	// Action is print, check or apply.
	Action   string
	Audit    bool
	Indexes  bool
	Dialect  string
	Pipeline string
	DryRun   bool
	Yes      bool
}

// NewCmdSchema builds `opctl schema` and its subcommands. runF replaces the
// run function in tests.
func NewCmdSchema(f *Factory, runF func(context.Context, *SchemaOptions) error) *cobra.Command {
	root := &cobra.Command{
		Use:   "schema",
		Short: "Recommended DDL; compare a database with the config",
		Long: `print   the recommended tables of the anchored design (state, step
        intents, idempotency with the SKIPPED lifecycle, balance journal) and
        opctl's audit tables; needs no config
check   compare the configured database with the config: tables and columns
        exist, and the indexes 'opctl reconcile' walks; prints the DDL that
        adds the missing ones (exit 3 when something is missing)
apply   --audit creates the audit tables (idempotent) on mysql.write_dsn;
        --indexes adds the indexes 'check' found missing; without either,
        creates the recommended tables. --dry-run prints the statements;
        --indexes and the tables need --yes or an interactive confirmation.
        --timeout bounds connecting to mysql.write_dsn, not the statements
        (an index build on a large table can take minutes); Ctrl-C stops
        waiting`,
		Args: noArgs,
	}
	run := func(opts *SchemaOptions) func(*cobra.Command, []string) error {
		return func(c *cobra.Command, _ []string) error {
			switch opts.Dialect {
			case schema.MySQL8, schema.MariaDB:
			default:
				return usageErrorf("--dialect %q: want mysql8 or mariadb", opts.Dialect)
			}
			if opts.Audit && opts.Indexes {
				return usageErrorf("--audit and --indexes: pick one")
			}
			opts.IO, opts.Format, opts.Timeout, opts.Config = f.IOStreams, f.Globals.Output, f.Globals.Timeout, f.Config
			opts.Inspector = func(p *config.Pipeline) (schema.Inspector, error) {
				c, err := f.Clients()
				if err != nil {
					return nil, err
				}
				return c.ReaderFor(p), nil
			}
			opts.Exec = func(ctx context.Context, cfg *config.Config, stmts []string) (string, error) {
				w, err := connect.OpenWriter(cfg, 0)
				if err != nil {
					return "", err
				}
				defer w.Close()
				return w.Addr(), schema.Apply(ctx, w, opts.Timeout, stmts)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runSchema(c.Context(), opts)
		}
	}

	printOpts := &SchemaOptions{Action: "print"}
	pr := &cobra.Command{
		Use:   "print",
		Short: "Print the recommended DDL (and the audit tables)",
		Example: `  opctl schema print
  opctl schema print --audit --dialect mariadb`,
		Args: noArgs,
		RunE: run(printOpts),
	}
	pr.Flags().BoolVar(&printOpts.Audit, "audit", false, "only the audit tables (docs/repair.md), named after audit.table when a config is found")
	pr.Flags().StringVar(&printOpts.Dialect, "dialect", schema.MySQL8, "mysql8 or mariadb")

	checkOpts := &SchemaOptions{Action: "check", Dialect: schema.MySQL8}
	ck := &cobra.Command{
		Use:     "check",
		Short:   "Compare the database with the config; the DDL of missing indexes",
		Example: `  opctl schema check --pipeline settlement`,
		Args:    noArgs,
		RunE:    run(checkOpts),
	}
	ck.Flags().StringVar(&checkOpts.Pipeline, "pipeline", "", "only this pipeline")

	applyOpts := &SchemaOptions{Action: "apply", Dialect: schema.MySQL8}
	ap := &cobra.Command{
		Use:   "apply",
		Short: "Create the audit tables, missing indexes or the recommended tables",
		Example: `  opctl schema apply --audit
  opctl schema apply --indexes --dry-run
  opctl schema apply --indexes --yes`,
		Args: noArgs,
		RunE: run(applyOpts),
	}
	ap.Flags().BoolVar(&applyOpts.Audit, "audit", false, "create opctl's audit tables (CREATE TABLE IF NOT EXISTS)")
	ap.Flags().BoolVar(&applyOpts.Indexes, "indexes", false, "add the indexes 'opctl schema check' reports missing")
	ap.Flags().StringVar(&applyOpts.Pipeline, "pipeline", "", "--indexes: only this pipeline")
	ap.Flags().BoolVar(&applyOpts.DryRun, "dry-run", false, "print the statements, run nothing")
	ap.Flags().BoolVar(&applyOpts.Yes, "yes", false, "do not ask for confirmation")

	root.AddCommand(pr, ck, ap)
	return root
}

func runSchema(ctx context.Context, opts *SchemaOptions) error {
	v := newSchemaView(opts.IO, opts.Format)
	switch opts.Action {
	case "print":
		table := ""
		if cfg, err := opts.Config(); err == nil {
			table = cfg.Audit.AuditTable()
		}
		var rec []string
		if !opts.Audit {
			var err error
			if rec, err = schema.Recommended(opts.Dialect); err != nil {
				return usageErrorf("%v", err)
			}
		}
		return v.Print(dialectName(opts.Dialect), rec, schema.AuditDDL(table))
	case "check":
		rep, _, err := schemaCheck(ctx, opts)
		if err != nil {
			return err
		}
		if err := v.Check(rep); err != nil {
			return err
		}
		if len(rep.Missing()) > 0 {
			return exitWith(ExitAttention)
		}
		return nil
	case "apply":
		return runSchemaApply(ctx, opts, v)
	}
	return usageErrorf("unknown schema action %q", opts.Action)
}

func dialectName(d string) string {
	if d == schema.MariaDB {
		return "MariaDB >= 10.6"
	}
	return "MySQL 8"
}

// schemaCheck compares the read database with the config.
func schemaCheck(ctx context.Context, opts *SchemaOptions) (*schema.Report, *config.Config, error) {
	cfg, err := opts.Config()
	if err != nil {
		return nil, nil, err
	}
	pipelines, err := cfg.Select(opts.Pipeline)
	if err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	// Each server its pipelines (pipelines[].mysql), in file order.
	rep := &schema.Report{}
	for _, g := range cfg.ByServer(pipelines) {
		db, err := opts.Inspector(g[0])
		if err != nil {
			return nil, nil, err
		}
		var needs []schema.Need
		for _, p := range g {
			needs = append(needs, reconcile.IndexNeeds(p)...)
		}
		r, err := schema.Check(cctx, db, g, needs, cfg.Audit.AuditTable())
		if err != nil {
			return nil, nil, err
		}
		rep.Items = append(rep.Items, r.Items...)
	}
	return rep, cfg, nil
}

func runSchemaApply(ctx context.Context, opts *SchemaOptions, v schemaView) error {
	var (
		stmts []string
		what  string
		ask   bool
		cfg   *config.Config
		err   error
	)
	switch {
	case opts.Audit || opts.Indexes:
		// Each server its own statements (pipelines[].mysql): the audit
		// tables where its pipelines' repairs write, the indexes where
		// their tables are.
		cfg, err = opts.Config()
		if err != nil {
			return err
		}
		ps, err := cfg.Select(opts.Pipeline)
		if err != nil {
			return err
		}
		groups := cfg.ByServer(ps)
		if len(groups) > 1 {
			for _, g := range groups {
				gcfg := cfg.ForServer(g)
				gopts := *opts
				gopts.Config = func() (*config.Config, error) { return gcfg, nil }
				gopts.Pipeline = g[0].Name
				if len(g) > 1 {
					gopts.Pipeline = "" // every pipeline of the file shares this server
					sub := *gcfg
					sub.Pipelines = nil
					for _, p := range g {
						sub.Pipelines = append(sub.Pipelines, *p)
					}
					gopts.Config = func() (*config.Config, error) { return &sub, nil }
				}
				if err := runSchemaApply(ctx, &gopts, v); err != nil {
					return err
				}
			}
			return nil
		}
		if opts.Audit {
			stmts, what = schema.AuditDDL(cfg.Audit.AuditTable()), "create the audit tables"
		} else {
			var rep *schema.Report
			if rep, _, err = schemaCheck(ctx, opts); err != nil {
				return err
			}
			stmts, what, ask = rep.DDL(), "add the indexes reconcile needs", true
			if len(stmts) == 0 {
				return v.Nothing("nothing to add: every index reconcile needs is there")
			}
		}
		// The pipelines' own server when they share one other than the
		// top-level one.
		cfg = cfg.ForServer(ps)
	default:
		cfg, err = opts.Config()
		if err != nil {
			return err
		}
		stmts, err = schema.Recommended(opts.Dialect)
		if err != nil {
			return usageErrorf("%v", err)
		}
		what, ask = "create the recommended tables of the anchored design", true
	}
	if opts.DryRun {
		return v.DryRun(what, writeAddr(cfg), stmts)
	}
	if ask && !opts.Yes {
		if !opts.IO.IsStdinTTY() {
			return &RefusedError{Err: fmt.Errorf("schema apply: %d statement(s) to %s on %s: pass --yes, or --dry-run to see them", len(stmts), what, writeAddr(cfg))}
		}
		fmt.Fprintf(opts.IO.ErrOut, "%s\nRun these %d statement(s) to %s on %s? [y/N] ", schema.Script(stmts), len(stmts), what, writeAddr(cfg))
		line, _ := bufio.NewReader(opts.IO.In).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			return &RefusedError{Err: fmt.Errorf("schema apply: not confirmed; nothing was changed")}
		}
	}
	addr, err := opts.Exec(ctx, cfg, stmts)
	if err != nil {
		return err
	}
	return v.Applied(len(stmts), ui.Safe(addr), what)
}

// writeAddr names the write database for messages, never with the
// password, shown by the rule of human output (ui.Safe).
func writeAddr(cfg *config.Config) string {
	if cfg == nil {
		return "mysql.write_dsn"
	}
	return ui.Safe(config.RedactDSN(cfg.MySQL.EffectiveWriteDSN()))
}
