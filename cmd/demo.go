package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/config"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/internal/ui"
	"github.com/opctl-dev/opctl/lab"
)

// DefaultLabDSN is the server `opctl demo` tries when neither --mysql-dsn
// nor $OPCTL_MYSQL_DSN is set.
const DefaultLabDSN = "root@tcp(127.0.0.1:3306)/"

// DemoOptions are the parsed flags of `opctl demo`.
type DemoOptions struct {
	MySQLDSN  string
	Keep      bool
	Scenarios []string
	// NoRepair stops after the triage.
	NoRepair bool
	// Embedded is set by lab/demo: the server is its in-memory
	// go-mysql-server, which needs the lab's writes serialized.
	Embedded bool
}

// NewCmdDemo builds `opctl demo`.
func NewCmdDemo(f *Factory, runF func(context.Context, *DemoOptions) error) *cobra.Command {
	opts := &DemoOptions{}
	c := &cobra.Command{
		Use:   "demo",
		Short: "Reproduce the seed incidents with real consumers and faults, then triage them",
		Long: `Run the incident lab: an in-process Kafka-protocol cluster on loopback, real
consumers on sarama consumer groups (the seeds' naive designs and the anchored
design of DESIGN.md), fake downstream HTTP services, and real faults (a broker
that refuses commits, an RPC that times out at the caller but takes effect, a
rebalance, out-of-order events, consumers that die mid-operation). Each
scenario's operations are then triaged exactly as 'opctl where' does.

MySQL: --mysql-dsn, else $OPCTL_MYSQL_DSN, else a server on 127.0.0.1:3306.
The lab creates its own database there and drops it at the end. With no MySQL
at all, run 'go run ./lab/demo' (an embedded MySQL-protocol server).`,
		Example: `  opctl demo
  opctl demo --mysql-dsn 'root@tcp(127.0.0.1:3306)/'
  opctl demo --scenario settlement-double-debit,order-wrongly-skipped
  opctl demo --keep            # leave the lab up; run opctl where from another terminal
  opctl demo -o json | jq '.checks[] | select(.ok | not)'`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if tui, _ := c.Flags().GetBool("tui"); tui {
				return usageErrorf("--tui: the incident console is not built yet; run 'opctl demo' without it")
			}
			opts.MySQLDSN = f.Globals.MySQLDSN
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runDemo(c.Context(), f, opts)
		},
	}
	c.Flags().BoolVar(&opts.Keep, "keep", false, "leave the lab running after the demo (until Ctrl-C) and print how to reach it")
	c.Flags().StringSliceVar(&opts.Scenarios, "scenario", nil, "run only these scenarios (default: all)")
	c.Flags().BoolVar(&opts.NoRepair, "no-repair", false, "stop after the triage: no plans, no apply")
	c.Flags().Bool("tui", false, "open the incident console (not available yet)")
	c.Flags().BoolVar(&opts.Embedded, "embedded", false, "the server is lab/demo's embedded go-mysql-server (set by go run ./lab/demo)")
	_ = c.Flags().MarkHidden("embedded")
	return c
}

// demoDSN resolves the MySQL server of the demo (SPEC §5 demo row).
func demoDSN(flag string) string {
	if flag != "" {
		return flag
	}
	if env := os.Getenv("OPCTL_MYSQL_DSN"); env != "" {
		return env
	}
	return DefaultLabDSN
}

// demoReport is the JSON of `opctl demo -o json`.
type demoReport struct {
	Scenarios  []demoScenario       `json:"scenarios"`
	Checks     []lab.Check          `json:"checks"`
	Repairs    []lab.Repair         `json:"repairs"`
	Invariants []lab.InvariantCheck `json:"invariants"`
	Reports    []inspect.Report     `json:"reports"`
	Keep       *demoKeep            `json:"keep,omitempty"`
	OK         bool                 `json:"ok"`
	Elapsed    string               `json:"elapsed"`
}

type demoScenario struct {
	Name    string   `json:"name"`
	Seed    string   `json:"seed,omitempty"`
	Title   string   `json:"title"`
	Story   []string `json:"story"`
	Error   string   `json:"error,omitempty"`
	Elapsed string   `json:"elapsed"`
}

type demoKeep struct {
	DSN     string   `json:"dsn"`
	Brokers []string `json:"brokers"`
	Config  string   `json:"config"`
}

func runDemo(ctx context.Context, f *Factory, opts *DemoOptions) error {
	start := time.Now()
	dsn := demoDSN(opts.MySQLDSN)
	ios := f.IOStreams
	human := f.Globals.Output == "table"
	progress := func(format string, args ...any) { fmt.Fprintf(ios.ErrOut, format, args...) }

	env, err := lab.Start(ctx, lab.Options{MySQLDSN: dsn, SerialWrites: opts.Embedded})
	if err != nil {
		if strings.Contains(err.Error(), "not reachable") {
			host := dsn
			if c, perr := mysql.ParseDSN(dsn); perr == nil {
				host = c.Addr
			}
			return fmt.Errorf("no MySQL answering at %s: run `go run ./lab/demo` for an embedded MySQL-protocol server, or pass --mysql-dsn", host)
		}
		return err
	}
	defer env.Close()
	progress("lab: database %s, Kafka %s, %d scenarios\n", env.DBName, strings.Join(env.Cluster.Brokers, ","), len(lab.Scenarios()))

	results, runErr := env.Run(ctx, opts.Scenarios, func(p lab.Progress) {
		if !p.Done {
			progress("[%d/%d] %-26s ", p.Index+1, p.Total, p.Scenario)
			return
		}
		if p.Err != nil {
			progress("FAILED after %s: %v\n", p.Elapsed.Round(time.Millisecond), p.Err)
		} else {
			progress("ok (%s)\n", p.Elapsed.Round(10*time.Millisecond))
		}
	})
	if runErr != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if runErr != nil {
		return runErr
	}
	progress("triaging %d operations with opctl where...\n", countExpect(results))
	checks, err := env.Check(ctx, results)
	if err != nil {
		return err
	}
	rep := demoReport{Checks: checks, Repairs: []lab.Repair{}, Reports: []inspect.Report{}, OK: true}
	if !opts.NoRepair {
		progress("repairing: opctl repair plan + opctl repair apply --yes for each incident...\n")
		rep.Repairs, err = env.Repair(ctx, checks, func(s string) { progress("  %s\n", s) })
		if err != nil {
			return err
		}
		for _, r := range rep.Repairs {
			rep.OK = rep.OK && r.OK
		}
	}
	invs, err := env.Invariants(ctx, results)
	if err != nil {
		return err
	}
	rep.Invariants = invs
	for _, inv := range invs {
		if !opts.NoRepair {
			rep.OK = rep.OK && inv.Holds
		}
	}
	for _, r := range results {
		s := demoScenario{Name: r.Scenario.Name, Seed: r.Scenario.Seed, Title: r.Scenario.Title, Story: r.Story, Elapsed: r.Elapsed.Round(time.Millisecond).String()}
		if r.Story == nil {
			s.Story = []string{}
		}
		if r.Err != nil {
			s.Error = r.Err.Error()
			rep.OK = false
		}
		rep.Scenarios = append(rep.Scenarios, s)
	}
	for _, c := range checks {
		rep.OK = rep.OK && c.OK
		if c.Affected {
			rep.Reports = append(rep.Reports, c.Report)
		}
	}
	if opts.Keep {
		rep.Keep = &demoKeep{DSN: env.DSN, Brokers: env.Cluster.Brokers, Config: env.ConfigPath}
	}
	rep.Elapsed = time.Since(start).Round(time.Millisecond).String()

	if human {
		renderDemo(ios.Out, f, rep, env)
	} else {
		enc := json.NewEncoder(ios.Out)
		if f.Globals.Output == "json" {
			enc.SetIndent("", "  ")
		}
		if err := enc.Encode(rep); err != nil {
			return err
		}
	}
	if opts.Keep {
		if err := os.WriteFile("opctl-lab.yaml", []byte(env.RenderConfig()), 0o600); err != nil {
			progress("could not write ./opctl-lab.yaml: %v\n", err)
		}
		progress("\nThe lab stays up until Ctrl-C. From another terminal:\n  opctl --config opctl-lab.yaml where PAY-D-1\n  kcat -b %s -L\n  kcat -b %s -C -t settlement-event -o beginning -e -f '%%k %%h %%s\\n'\n",
			env.Cluster.Brokers[0], env.Cluster.Brokers[0])
		<-ctx.Done()
		os.Remove("opctl-lab.yaml")
		progress("lab stopped\n")
		return nil
	}
	if !rep.OK {
		return &CodeError{Code: ExitError, Err: fmt.Errorf("demo: some verdicts, repairs or invariants differ from the lab's expectations (see the tables)")}
	}
	return nil
}

func countExpect(rs []lab.Result) int {
	n := 0
	for _, r := range rs {
		n += len(r.Expect)
	}
	return n
}

func renderDemo(w io.Writer, f *Factory, rep demoReport, env *lab.Env) {
	ios := f.IOStreams
	st := ui.NewStyles(w, ios.ColorEnabled())
	fmt.Fprintln(w, st.Title.Render("SCENARIOS"))
	rows := [][]string{}
	for _, c := range rep.Checks {
		mark := "ok"
		if !c.OK {
			mark = "MISMATCH"
		}
		who := "affected"
		if !c.Affected {
			who = "untouched"
		}
		rows = append(rows, []string{c.Scenario, c.BizID, c.Pipeline, who, c.Verdict, c.Expectation.Verdict, mark})
	}
	_ = ui.Table(w, ios.IsStdoutTTY(), []string{"SCENARIO", "BIZ_ID", "PIPELINE", "OPERATION", "VERDICT", "EXPECTED", "CHECK"}, rows)

	for _, s := range rep.Scenarios {
		if s.Error != "" {
			fmt.Fprintf(w, "\n%s %s: %s\n", st.Action.Render("scenario failed:"), s.Name, s.Error)
		}
	}
	fmt.Fprintln(w, "\n"+st.Title.Render("WHAT HAPPENED"))
	for _, s := range rep.Scenarios {
		seed := ""
		if s.Seed != "" {
			seed = " (seed " + s.Seed + ")"
		}
		fmt.Fprintf(w, "%s%s: %s\n", st.Bold.Render(s.Name), seed, s.Title)
		for _, line := range s.Story {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}

	view := &whereHumanView{w: w, tty: ios.IsStdoutTTY(), st: st}
	for _, r := range rep.Reports {
		fmt.Fprintf(w, "\n%s\n\n", strings.Repeat("═", 72))
		_ = view.Render([]inspect.Report{r})
	}

	if len(rep.Repairs) > 0 {
		fmt.Fprintf(w, "\n%s\n%s\n", strings.Repeat("═", 72), st.Title.Render("REPAIRS")+" (opctl repair plan, then opctl repair apply --yes; then the fixed consumers are deployed)")
		for _, r := range rep.Repairs {
			fmt.Fprintf(w, "\n%s %s: %s\n", st.Bold.Render(r.BizID), r.Pipeline, r.Before)
			if r.PlanID == "" {
				fmt.Fprintf(w, "  no plan: %s\n", r.Why)
				continue
			}
			if r.Attest != "" {
				fmt.Fprintf(w, "  attested: %s\n", r.Attest)
			}
			for _, line := range strings.Split(strings.TrimRight(r.PlanText, "\n"), "\n") {
				fmt.Fprintf(w, "  %s\n", line)
			}
			fmt.Fprintf(w, "  apply: %s\n", r.Applied)
		}
		fmt.Fprintln(w, "\n"+st.Title.Render("AFTER THE REPAIR"))
		rows = rows[:0]
		for _, r := range rep.Repairs {
			mark := "ok"
			if !r.OK {
				mark = "NOT REPAIRED"
			}
			plan := r.PlanID
			if len(plan) > 12 {
				plan = plan[:12]
			}
			if plan == "" {
				plan = "-"
			}
			rows = append(rows, []string{r.Scenario, r.BizID, r.Before, plan, r.After, mark})
		}
		_ = ui.Table(w, ios.IsStdoutTTY(), []string{"SCENARIO", "BIZ_ID", "BEFORE", "PLAN", "AFTER", "CHECK"}, rows)
	}

	when := "now, after the repair"
	if len(rep.Repairs) == 0 {
		when = "must hold after a correct repair; before it, the incidents break them"
	}
	fmt.Fprintln(w, "\n"+st.Title.Render("INVARIANTS")+" ("+when+")")
	rows = rows[:0]
	for _, inv := range rep.Invariants {
		h := "holds"
		if !inv.Holds {
			h = "broken"
		}
		rows = append(rows, []string{inv.Scenario, inv.Name, h, inv.Detail})
	}
	_ = ui.Table(w, ios.IsStdoutTTY(), []string{"SCENARIO", "INVARIANT", "NOW", "DETAIL"}, rows)

	if rep.Keep != nil {
		fmt.Fprintf(w, "\n%s\nMySQL:   %s\nBrokers: %s\nConfig:  ./opctl-lab.yaml (also %s)\n\n%s\n",
			st.Title.Render("THE LAB STAYS UP"), config.RedactDSN(rep.Keep.DSN), strings.Join(rep.Keep.Brokers, ","), rep.Keep.Config, env.RenderConfig())
	}
	ok := "every verdict matches the lab's expectation"
	if len(rep.Repairs) > 0 {
		ok += ", every incident was repaired and every invariant holds"
	}
	if !rep.OK {
		ok = "some verdicts, repairs or invariants DO NOT match the lab's expectation"
	}
	fmt.Fprintf(w, "\n%s in %s\n", ok, rep.Elapsed)
}
