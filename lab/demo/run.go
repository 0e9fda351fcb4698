package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/sources/config"
)

// errMismatch is the demo's failure: a verdict, a repair or an invariant is
// not what the lab expects (exit 1).
var errMismatch = errors.New("demo: some verdicts, repairs or invariants differ from the lab's expectations (see the tables)")

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
	// DSN is the lab database's, its password (if any) redacted.
	DSN     string   `json:"dsn"`
	Brokers []string `json:"brokers"`
	Config  string   `json:"config"`
}

func runDemo(ctx context.Context, ios *iostreams.IOStreams, opts *options) error {
	start := time.Now()
	human := opts.Output == "table"
	progress := func(format string, args ...any) { fmt.Fprintf(ios.ErrOut, format, args...) }

	env, rep, err := startLab(ctx, opts, progress)
	if err != nil {
		return err
	}
	defer env.Close()
	rep.Elapsed = time.Since(start).Round(time.Millisecond).String()

	if human {
		renderDemo(ios.Out, ios, rep, env)
	} else {
		enc := json.NewEncoder(ios.Out)
		if opts.Output == "json" {
			enc.SetIndent("", "  ")
		}
		if err := enc.Encode(rep); err != nil {
			return err
		}
	}
	if opts.TUI {
		return runConsole(ctx, ios, env)
	}
	if opts.Keep {
		cfgPath, err := writeKeptConfig(".", env)
		if err != nil {
			progress("could not write ./%s: %v\n", keptConfig, err)
		}
		progress("\nThe lab stays up, its incidents unrepaired, until Ctrl-C. From another terminal, in this directory\n(the README's tour):\n  go build -o opctl . && export PATH=\"$PWD:$PATH\" OPCTL_CONFIG=opctl-lab.yaml\n  opctl where PAY-D-1\n  kcat -b %s -L\n  kcat -b %s -C -t settlement-event -o beginning -e -f '%%k %%h %%s\\n'\n",
			env.Cluster.Brokers[0], env.Cluster.Brokers[0])
		<-ctx.Done()
		os.Remove(cfgPath)
		progress("lab stopped\n")
		return nil
	}
	if !rep.OK {
		return errMismatch
	}
	return nil
}

// keptConfig is the file --keep writes the lab's config to, in the current
// directory (docs/lab.md).
const keptConfig = "opctl-lab.yaml"

// writeKeptConfig writes the lab's config, its DSN unredacted (opctl reads
// it), to dir/opctl-lab.yaml, readable by its owner only (mode 0600, also
// when the file was there before), and returns the file's path.
func writeKeptConfig(dir string, env *lab.Env) (string, error) {
	path := filepath.Join(dir, keptConfig)
	if err := os.WriteFile(path, []byte(env.RenderConfig()), 0o600); err != nil {
		return path, err
	}
	return path, os.Chmod(path, 0o600)
}

// startLab starts the lab on opts.MySQLDSN, runs the selected scenarios,
// triages every operation, repairs the incidents (unless opts.NoRepair) and
// checks the invariants. The lab stays up: the caller closes the returned
// env (what --keep leaves running is this env). rep.Elapsed is left to the
// caller.
func startLab(ctx context.Context, opts *options, progress func(format string, args ...any)) (*lab.Env, demoReport, error) {
	dsn := opts.MySQLDSN
	env, err := lab.Start(ctx, lab.Options{MySQLDSN: dsn, SerialWrites: opts.embedded})
	if err != nil {
		if strings.Contains(err.Error(), "not reachable") {
			host := config.RedactDSN(dsn)
			if c, perr := mysql.ParseDSN(dsn); perr == nil {
				host = c.Addr
			}
			return nil, demoReport{}, fmt.Errorf("no MySQL answering at %s: run `go run ./lab/demo` without --mysql-dsn for the embedded MySQL-protocol server", host)
		}
		return nil, demoReport{}, err
	}
	rep, err := runLab(ctx, env, opts, progress)
	if err != nil {
		env.Close()
		return nil, demoReport{}, err
	}
	return env, rep, nil
}

// runLab is startLab on a started env: it runs opts.selected.
func runLab(ctx context.Context, env *lab.Env, opts *options, progress func(format string, args ...any)) (demoReport, error) {
	selected := opts.selected
	if len(opts.Scenarios) == 0 {
		// Seed 000 on its own schema needs a binlog: run it where there is
		// one, and say why not elsewhere. The other seeds' own schemas run
		// everywhere.
		for _, s := range lab.BinlogScenarios() {
			if env.Binlog {
				selected = append(selected, s)
			} else {
				progress("lab: %s skipped: this server keeps no ROW binlog (the embedded server never does); run the demo with --mysql-dsn on a server with log_bin ON and binlog_format=ROW\n", s.Name)
			}
		}
		selected = append(selected, lab.SeedScenarios()...)
	}
	progress("lab: database %s, Kafka %s, %d scenario(s)\n", env.DBName, strings.Join(env.Cluster.Brokers, ","), len(selected))

	results, runErr := env.Run(ctx, selected, func(p lab.Progress) {
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
		return demoReport{}, ctx.Err()
	}
	if runErr != nil {
		return demoReport{}, runErr
	}
	progress("triaging %d operations with opctl where...\n", countExpect(results))
	checks, err := env.Check(ctx, results)
	if err != nil {
		return demoReport{}, err
	}
	rep := demoReport{Checks: checks, Repairs: []lab.Repair{}, Reports: []inspect.Report{}, OK: true}
	if !opts.NoRepair {
		progress("repairing: opctl repair plan + opctl repair apply --yes for each incident...\n")
		rep.Repairs, err = env.Repair(ctx, checks, func(s string) { progress("  %s\n", s) })
		if err != nil {
			return demoReport{}, err
		}
		for _, r := range rep.Repairs {
			rep.OK = rep.OK && r.OK
		}
	}
	invs, err := env.Invariants(ctx, results)
	if err != nil {
		return demoReport{}, err
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
		// The report is printed: the DSN's password never is.
		rep.Keep = &demoKeep{DSN: config.RedactDSN(env.DSN), Brokers: env.Cluster.Brokers, Config: env.ConfigPath}
	}
	return rep, nil
}

// repairedView is the where view of an incident the demo then repaired:
// its NEXT repair commands are what the demo ran (REPAIRS), and pasted into
// another terminal they would find nothing to repair (and no plan.json to
// dry-run), so they give way to a comment that says so. The other NEXT
// lines (explain, where again) still work on the repaired lab.
func repairedView(r inspect.Report) inspect.Report {
	var next []string
	replaced := false
	for _, n := range r.Verdict.Next {
		if strings.HasPrefix(n, "opctl repair ") {
			if !replaced {
				next = append(next, "# repaired by the demo (REPAIRS below); to run opctl repair yourself: go run ./lab/demo --keep --no-repair")
				replaced = true
			}
			continue
		}
		next = append(next, n)
	}
	r.Verdict.Next = next
	return r
}

func countExpect(rs []lab.Result) int {
	n := 0
	for _, r := range rs {
		n += len(r.Expect)
	}
	return n
}

func renderDemo(w io.Writer, ios *iostreams.IOStreams, rep demoReport, env *lab.Env) {
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
		rows = append(rows, []string{c.Scenario, c.BizID, c.Pipeline, who, string(c.Verdict), string(c.Expectation.Verdict), mark})
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

	for _, r := range rep.Reports {
		fmt.Fprintf(w, "\n%s\n\n", strings.Repeat("═", 72))
		if len(rep.Repairs) > 0 {
			r = repairedView(r)
		}
		_ = ui.Where(w, ios.IsStdoutTTY(), st, []inspect.Report{r})
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
			rows = append(rows, []string{r.Scenario, r.BizID, string(r.Before), plan, string(r.After), mark})
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
			st.Title.Render("THE LAB STAYS UP"), rep.Keep.DSN, strings.Join(rep.Keep.Brokers, ","), rep.Keep.Config, env.DisplayConfig())
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
