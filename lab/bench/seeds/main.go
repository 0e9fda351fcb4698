// Command seeds measures `opctl reconcile` on each seed's own schema
// (lab/schema_seed000.sql, seed001.sql, seed003.sql, unmodified, with the
// seed's preset) against the naive statements a DBA of that team would
// write for the same question, one run each, on the same data, and checks
// that both find exactly the planted incidents (docs/performance.md, "The
// seeds' own schemas").
//
//	go run ./lab/bench/seeds                       # 200k operations per seed, every seed
//	go run ./lab/bench/seeds -seeds 001,003 -ops 2000
//	go run ./lab/bench/seeds -private              # a private MariaDB for every seed (clean row counts)
//
// For each seed it creates a database opctl_seedbench_<seed>_<hex> (dropped
// at the end), loads the seed's schema and opctl's audit tables, starts an
// in-process Kafka cluster (kfake) with the seed's topic and a probe server
// for the seed's downstream journals (WMS, logistics, points), generates
// -ops operations with -rate of each planted incident class, produces
// every operation's message and commits the group past them (the seeds'
// policy: the offset is committed after the steps), then runs the built
// opctl binary's `reconcile` (every check, -since) and the naive
// statements. Seed 000's debit is read from the binlog: it runs on a
// server with a ROW binlog, started with lab/testenv.StartBinlogServer
// when -dsn's server has none.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
)

type options struct {
	Seeds   []string
	Ops     int
	Rate    float64
	DSN     string
	Private bool
	// Opctl is the binary to run; empty: build it from the module into a
	// temporary directory. InProcess runs cmd.Run instead (no RSS).
	Opctl     string
	InProcess bool
	Since     string
	Explain   bool
	// PerCheck also runs each question alone (reconcile --check C);
	// Checks limits those to the checks named; NoAll skips the run of
	// every check.
	PerCheck bool
	Checks   []string
	NoAll    bool
	// Hold: after the load, print the environment and the config and
	// wait for a line on stdin (to run opctl by hand on the data).
	Hold bool
	Log  io.Writer
}

// result is one seed's measurement.
type result struct {
	Seed       string
	Ops        int
	Load       time.Duration
	Server     string
	Manifest   []want
	Opctl      measure
	Naive      measure
	OpctlExact exactness
	NaiveExact exactness
	Explain    []string
	PerCheck   []checkResult
}

// checkResult is one question alone: `reconcile --check C` against the
// naive statement for the same verdict (with the topic dump and its load
// when the seed's naive side needs them).
type checkResult struct {
	Check, Verdict string
	Planted        int
	Opctl          measure
	OpctlExact     exactness
	NaiveWall      time.Duration
	NaiveRows      int64
	NaiveExact     exactness
}

func main() {
	var o options
	seeds := flag.String("seeds", "000,001,003", "the seeds to measure")
	flag.IntVar(&o.Ops, "ops", 200000, "operations per seed")
	flag.Float64Var(&o.Rate, "rate", 0.001, "share of the operations planted in each incident class (at least one each)")
	dflt := os.Getenv("BENCH_DSN")
	if dflt == "" {
		dflt = "root@tcp(127.0.0.1:3306)/"
	}
	flag.StringVar(&o.DSN, "dsn", dflt, "the MariaDB/MySQL server (go-sql-driver DSN, its database ignored; default $BENCH_DSN)")
	flag.BoolVar(&o.Private, "private", false, "start a private MariaDB (lab/testenv.StartBinlogServer, 128M buffer pool) for every seed: nothing else inflates the GLOBAL row counts")
	flag.StringVar(&o.Opctl, "opctl", "", "the opctl binary (default: go build the module)")
	flag.BoolVar(&o.InProcess, "inprocess", false, "run reconcile in this process (no RSS)")
	flag.StringVar(&o.Since, "since", "1d", "reconcile --since")
	flag.DurationVar(&span, "span", span, "seeds 001 and 003: how far back the operations go (ending 10 minutes ago)")
	flag.BoolVar(&o.Explain, "explain", false, "print EXPLAIN of the naive statements")
	flag.BoolVar(&o.PerCheck, "per-check", false, "also run each question alone: reconcile --check C against its naive statement")
	checks := flag.String("checks", "", "with -per-check: only these checks (comma-separated)")
	flag.BoolVar(&o.NoAll, "no-all", false, "skip the run of every check (with -per-check)")
	flag.BoolVar(&o.Hold, "hold", false, "after each load, print the environment and the config path and wait for a line on stdin")
	flag.Parse()
	o.Seeds = strings.Split(*seeds, ",")
	if *checks != "" {
		o.Checks = strings.Split(*checks, ",")
	}
	o.Log = os.Stderr
	ctx := context.Background()
	res, err := run(ctx, o)
	for _, r := range res {
		report(os.Stdout, r)
	}
	if len(res) > 0 {
		fmt.Println()
		table(os.Stdout, res)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "seeds:", err)
		os.Exit(1)
	}
}

// run measures every seed of o.
func run(ctx context.Context, o options) ([]result, error) {
	repo, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
		}
	}
	bin := o.Opctl
	if bin == "" && !o.InProcess {
		dir, err := os.MkdirTemp("", "opctl-seedbench-bin-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "opctl")
		logf("building opctl")
		c := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
		c.Dir = repo
		if out, err := c.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	if o.InProcess {
		bin = ""
	}
	var binlog *testenv.BinlogServer
	defer func() {
		if binlog != nil {
			binlog.Stop()
		}
	}()
	startPrivate := func() (string, error) {
		if binlog == nil {
			logf("starting a private MariaDB with a ROW binlog")
			var err error
			if binlog, err = testenv.StartBinlogServer(testenv.BinlogOptions{Args: []string{"--innodb-buffer-pool-size=128M", "--local-infile=1"}}); err != nil {
				return "", err
			}
		}
		return binlog.RootDSN, nil
	}
	var out []result
	for _, id := range o.Seeds {
		d, ok := seedDefs[strings.TrimSpace(id)]
		if !ok {
			return out, fmt.Errorf("no seed %q (000, 001, 003)", id)
		}
		dsn, server := o.DSN, "the -dsn server"
		if o.Private || (d.Binlog && !hasRowBinlog(ctx, o.DSN)) {
			if dsn, err = startPrivate(); err != nil {
				return out, err
			}
			server = "a private MariaDB with a ROW binlog (lab/testenv.StartBinlogServer)"
		}
		r, err := runSeed(ctx, o, repo, bin, dsn, d, logf)
		r.Server = server
		if err != nil {
			return out, fmt.Errorf("seed %s: %w", d.ID, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func runSeed(ctx context.Context, o options, repo, bin, dsn string, d *seedDef, logf func(string, ...any)) (result, error) {
	r := result{Seed: d.ID, Ops: o.Ops}
	e, err := newEnv(ctx, repo, dsn, d.ID, d.Topic, d.Partitions)
	if err != nil {
		return r, err
	}
	defer e.close()
	logf("seed %s: loading %d operations into %s", d.ID, o.Ops, e.name)
	t0 := time.Now()
	rnd := rand.New(rand.NewPCG(uint64(o.Ops), 22))
	if r.Manifest, err = d.load(ctx, e, d, o.Ops, o.Rate, rnd); err != nil {
		return r, err
	}
	if _, err := e.db.ExecContext(ctx, "ANALYZE TABLE "+strings.Join(tables(ctx, e), ", ")); err != nil {
		return r, err
	}
	r.Load = time.Since(t0)
	logf("seed %s: loaded in %s; %d planted; opctl reconcile --since %s", d.ID, r.Load.Round(time.Millisecond), len(r.Manifest), o.Since)
	binlogDSN := ""
	if d.Binlog {
		binlogDSN = e.dsn
	}
	if o.Hold {
		for k, v := range e.opctlEnv(binlogDSN) {
			fmt.Fprintf(o.Log, "export %s='%s'\n", k, v)
		}
		fmt.Fprintf(o.Log, "config: %s\npress Enter to go on\n", e.config)
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	}
	if !o.NoAll {
		if r.Opctl, err = runOpctl(ctx, e, bin, e.opctlEnv(binlogDSN), []string{"--since", o.Since, "--timeout", "5m"}); err != nil {
			return r, err
		}
		r.OpctlExact = compare(r.Manifest, r.Opctl.Found)
		logf("seed %s: opctl %s, exit %d, exact %s; naive", d.ID, r.Opctl.Wall.Round(time.Millisecond), r.Opctl.Exit, r.OpctlExact)
	}
	if r.Naive, err = runNaive(ctx, e, d); err != nil {
		return r, err
	}
	r.NaiveExact = compare(r.Manifest, r.Naive.Found)
	logf("seed %s: naive %s, exact %s", d.ID, r.Naive.Wall.Round(time.Millisecond), r.NaiveExact)
	if o.PerCheck {
		for i, q := range d.naive {
			if q.Check == "" || (len(o.Checks) > 0 && !slices.Contains(o.Checks, q.Check)) {
				continue
			}
			c := checkResult{Check: q.Check, Verdict: q.Verdict}
			var sub []want
			for _, w := range r.Manifest {
				if w.Verdict == q.Verdict {
					sub = append(sub, w)
				}
			}
			c.Planted = len(sub)
			if c.Opctl, err = runOpctl(ctx, e, bin, e.opctlEnv(binlogDSN), []string{"--since", o.Since, "--timeout", "5m", "--check", q.Check}); err != nil {
				return r, err
			}
			c.OpctlExact = compare(sub, c.Opctl.Found)
			// The naive side of this question: the dump and its load
			// (parts before the statements), then its statement.
			found := map[string]string{}
			for id, v := range r.Naive.Found {
				if v == q.Verdict {
					found[id] = v
				}
			}
			c.NaiveExact = compare(sub, found)
			pre := len(r.Naive.Parts) - len(d.naive)
			for _, p := range append(r.Naive.Parts[:pre:pre], r.Naive.Parts[pre+i]) {
				c.NaiveWall += p.Wall
				c.NaiveRows += p.Rows
			}
			logf("seed %s: --check %s %s, exit %d, exact %s", d.ID, q.Check, c.Opctl.Wall.Round(time.Millisecond), c.Opctl.Exit, c.OpctlExact)
			r.PerCheck = append(r.PerCheck, c)
		}
	}
	if o.Explain {
		r.Explain, err = explain(ctx, e, d)
	}
	return r, err
}

// tables lists the bench database's tables (for ANALYZE after the load).
func tables(ctx context.Context, e *env) []string {
	rows, err := e.db.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if rows.Scan(&t) == nil {
			out = append(out, "`"+strings.ReplaceAll(t, "`", "``")+"`")
		}
	}
	return out
}

// explain runs EXPLAIN on the naive statements (their temporary table
// loaded again on the connection).
func explain(ctx context.Context, e *env, d *seedDef) ([]string, error) {
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if d.dumpDDL != "" {
		if _, err := conn.ExecContext(ctx, d.dumpDDL); err != nil {
			return nil, err
		}
	}
	var out []string
	for _, q := range d.naive {
		rows, err := conn.QueryContext(ctx, "EXPLAIN "+q.SQL)
		if err != nil {
			return out, err
		}
		cols, _ := rows.Columns()
		out = append(out, q.Label+":", "  "+strings.Join(cols, " | "))
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return out, err
			}
			s := make([]string, len(vals))
			for i, v := range vals {
				if b, ok := v.([]byte); ok {
					s[i] = string(b)
				} else {
					s[i] = fmt.Sprint(v)
				}
			}
			out = append(out, "  "+strings.Join(s, " | "))
		}
		rows.Close()
	}
	return out, nil
}

// hasRowBinlog: the server dsn reaches keeps a ROW binlog.
func hasRowBinlog(ctx context.Context, dsn string) bool {
	db, err := openRoot(dsn)
	if err != nil {
		return false
	}
	defer db.Close()
	var on int
	var format string
	return db.QueryRowContext(ctx, "SELECT @@log_bin, @@binlog_format").Scan(&on, &format) == nil && on != 0 && strings.EqualFold(format, "ROW")
}

// moduleRoot is the directory of opctl's go.mod, from the working
// directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/opctl-dev/opctl\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the opctl module (no go.mod of github.com/opctl-dev/opctl above the working directory)")
		}
		dir = parent
	}
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }

// report prints one seed's details: each check of opctl's run, the probe
// calls, each part of the naive side.
func report(w io.Writer, r result) {
	fmt.Fprintf(w, "== seed %s, %d operations on %s (loaded in %s s), %d planted\n", r.Seed, r.Ops, r.Server, secs(r.Load), len(r.Manifest))
	if r.Opctl.Found != nil { // not -no-all
		reportOpctl(w, r.Opctl, r.OpctlExact)
	}
	fmt.Fprintf(w, "naive: %s s, %d rows examined, exact %s\n", secs(r.Naive.Wall), r.Naive.Rows, r.NaiveExact)
	reportNaive(w, r)
}

// reportOpctl prints an all-checks run: each check, the probe calls.
func reportOpctl(w io.Writer, m measure, x exactness) {
	fmt.Fprintf(w, "opctl reconcile: %s s (its summary: %.2f s), %d rows examined, peak RSS %.1f MiB, exit %d, exact %s\n", secs(m.Wall), m.Seconds, m.Rows, m.RSSMiB, m.Exit, x)
	for _, c := range m.Checks {
		fmt.Fprintf(w, "  %s/%s: %s %s; rows %d, candidates %d (cover only %d), targets %d, %.2f s; verdicts %v\n",
			c.Pipeline, c.Check, c.Status, c.Reason, c.Rows, c.Candidates, c.CoverOnly, c.Targets, c.Seconds, c.Verdicts)
		for _, n := range c.Notes {
			fmt.Fprintf(w, "    note: %s\n", n)
		}
		for _, u := range c.Uncovered {
			fmt.Fprintf(w, "    uncovered: %s\n", u)
		}
	}
	if len(m.Probes) > 0 {
		keys := make([]string, 0, len(m.Probes))
		for k := range m.Probes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var s []string
		for _, k := range keys {
			s = append(s, fmt.Sprintf("%s %d", k, m.Probes[k]))
		}
		fmt.Fprintf(w, "  probe calls: %s\n", strings.Join(s, ", "))
	}
}

// reportNaive prints the naive side's parts, each question alone, the plans.
func reportNaive(w io.Writer, r result) {
	for _, p := range r.Naive.Parts {
		fmt.Fprintf(w, "  %s: %s s, %d rows examined, %d found\n", p.Label, secs(p.Wall), p.Rows, p.Found)
	}
	for _, c := range r.PerCheck {
		fmt.Fprintf(w, "--check %s alone (%s): %s s, %d rows examined, RSS %.1f MiB, exit %d, exact %s; naive %s s, %d rows, exact %s\n",
			c.Check, c.Verdict, secs(c.Opctl.Wall), c.Opctl.Rows, c.Opctl.RSSMiB, c.Opctl.Exit, c.OpctlExact, secs(c.NaiveWall), c.NaiveRows, c.NaiveExact)
		for _, k := range c.Opctl.Checks {
			for _, n := range k.Notes {
				fmt.Fprintf(w, "    note: %s\n", n)
			}
		}
	}
	for _, l := range r.Explain {
		fmt.Fprintln(w, "  "+l)
	}
}

// table prints the summary table of docs/performance.md.
func table(w io.Writer, res []result) {
	fmt.Fprintln(w, "| seed | ops | planted | opctl s | opctl rows | opctl RSS MiB | opctl exit | opctl exact | naive s | naive rows | naive exact |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |")
	for _, r := range res {
		if r.Opctl.Found == nil {
			continue // -no-all
		}
		rss := "n/a"
		if r.Opctl.RSSMiB > 0 {
			rss = fmt.Sprintf("%.1f", r.Opctl.RSSMiB)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %s | %d | %s | %d | %s | %s | %d | %s |\n", r.Seed, r.Ops, len(r.Manifest),
			secs(r.Opctl.Wall), r.Opctl.Rows, rss, r.Opctl.Exit, r.OpctlExact, secs(r.Naive.Wall), r.Naive.Rows, r.NaiveExact)
	}
	var per bool
	for _, r := range res {
		per = per || len(r.PerCheck) > 0
	}
	if !per {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| seed | ops | question | opctl --check | opctl s | opctl rows | opctl RSS MiB | opctl exact | naive s | naive rows | naive exact |")
	fmt.Fprintln(w, "| --- | ---: | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | --- |")
	for _, r := range res {
		for _, c := range r.PerCheck {
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %d | %.1f | %s | %s | %d | %s |\n", r.Seed, r.Ops, c.Verdict, c.Check,
				secs(c.Opctl.Wall), c.Opctl.Rows, c.Opctl.RSSMiB, c.OpctlExact, secs(c.NaiveWall), c.NaiveRows, c.NaiveExact)
		}
	}
}
