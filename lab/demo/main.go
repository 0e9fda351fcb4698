// Command demo is opctl's demo program: it runs the incident lab (an
// in-process Kafka-protocol cluster, real consumers on sarama consumer
// groups, fake downstream HTTP services and real faults), reproduces the
// seed incidents, triages and repairs them with the same packages the opctl
// binary runs, and checks the invariants each scenario states.
//
//	go run ./lab/demo                        # on an embedded MySQL-protocol server
//	go run ./lab/demo --mysql-dsn 'root@tcp(127.0.0.1:3306)/'
//	go run ./lab/demo --scenario settlement-double-debit,order-wrongly-skipped
//	go run ./lab/demo --keep                 # leave it up; try opctl from another terminal
//	go run ./lab/demo --watch                # the incidents under a live opctl watch: flagged, repaired, cleared
//	go run ./lab/demo -o json
//
// Without --mysql-dsn it starts an embedded MySQL-protocol server
// (github.com/dolthub/go-mysql-server, in memory) on a loopback port.
// go-mysql-server lives only in this program: it is never linked into the
// opctl binary (its go-icu-regex dependency compiles a WebAssembly module at
// package init, +0.4–0.6 s and +40 MB on every run of any command).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/server"
	gmssql "github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/sources"
)

// options are the demo's flags.
type options struct {
	MySQLDSN  string
	Keep      bool
	NoRepair  bool
	Scenarios []string
	Output    string
	NoColor   bool
	// TUI opens the incident console on the lab after the triage (tui.go).
	TUI bool
	// Watch runs the scenarios under a live opctl watch (watch.go).
	Watch bool
	// keepDir is where --watch --keep writes opctl-lab.yaml ("": the
	// current directory, where its printed commands run; tests set it).
	keepDir string
	// selected are the scenarios to run: --scenario checked by lab.Select
	// (every scenario without it), in the lab's order.
	selected []lab.Scenario
	// embedded is true when the demo runs on its own go-mysql-server: the
	// lab then sends its consumers' statements through one connection.
	embedded bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	code := run(ctx, iostreams.System(), os.Args[1:])
	stop()
	os.Exit(code)
}

// usageError is a bad invocation (exit sources.ExitUsage).
type usageError struct{ error }

// run parses args, starts the embedded server unless --mysql-dsn names a
// real one, and runs the demo; it returns the exit status (those of opctl,
// docs/exit-codes.md).
func run(ctx context.Context, ios *iostreams.IOStreams, args []string) int {
	opts := &options{}
	c := &cobra.Command{
		Use:   "demo",
		Short: "Reproduce the seed incidents with real consumers and faults, then triage and repair them",
		Long: `Run the incident lab: an in-process Kafka-protocol cluster on loopback, real
consumers on sarama consumer groups (the seeds' naive designs and the anchored
design), fake downstream HTTP services, and real faults (a broker that refuses
commits, an RPC that times out at the caller but takes effect, a rebalance,
out-of-order events, consumers that die mid-operation). Each scenario's
operations are triaged exactly as 'opctl where' does, repaired as 'opctl repair
plan' + 'opctl repair apply --yes' do, and the invariants are checked.

Without --mysql-dsn the demo starts an embedded MySQL-protocol server (in
memory). With --mysql-dsn it creates its own database on that server
(opctl_lab_<random>) and drops it at the end.`,
		Example: `  go run ./lab/demo
  go run ./lab/demo --mysql-dsn 'root@tcp(127.0.0.1:3306)/'
  go run ./lab/demo --scenario settlement-double-debit,order-wrongly-skipped
  go run ./lab/demo --keep            # leave the lab up; run opctl from another terminal
  go run ./lab/demo --watch           # under a live opctl watch: flagged, repaired, cleared
  go run ./lab/demo --watch --keep    # ... and left up: opctl tui --watch from another terminal
  go run ./lab/demo -o json | jq '.checks[] | select(.ok | not)'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unexpected argument %q: the demo takes flags only", args[0])}
			}
			return nil
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Watch && (opts.TUI || opts.Output != "table") {
				return usageError{errors.New("--watch shows the watch's events to a person: not with --tui or -o")}
			}
			if opts.TUI {
				if opts.Output != "table" {
					return usageError{errors.New("--tui and -o: the console is for a person; give one or the other")}
				}
				opts.NoRepair = true // the console repairs them
			}
			switch opts.Output {
			case "table", "json", "jsonl":
			default:
				return usageError{fmt.Errorf("--output %q: want table, json or jsonl", opts.Output)}
			}
			selected, err := lab.Select(opts.Scenarios)
			if err != nil {
				return usageError{fmt.Errorf("--scenario: %v", err)}
			}
			opts.selected = selected
			ios.SetNoColor(opts.NoColor || os.Getenv("NO_COLOR") != "")
			if opts.Keep {
				// A kept lab is for a person to triage and repair: every
				// command the README and where's NEXT suggest has work to do.
				opts.NoRepair = true
			}
			if opts.MySQLDSN == "" {
				srv, dsn, err := startEmbedded()
				if err != nil {
					return fmt.Errorf("embedded MySQL-protocol server: %v", err)
				}
				defer srv.Close()
				fmt.Fprintf(ios.ErrOut, "lab/demo: embedded MySQL-protocol server (go-mysql-server, in memory) on %s\n", srv.Listener.Addr())
				opts.MySQLDSN, opts.embedded = dsn, true
			}
			if opts.Watch {
				return runWatchDemo(c.Context(), ios, opts)
			}
			return runDemo(c.Context(), ios, opts)
		},
	}
	c.SetHelpTemplate(c.HelpTemplate() + `
EXIT STATUS
  0    every verdict, repair and invariant is as the lab expects
  1    a mismatch, or an error
  2    usage
  130  interrupted
`)
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	fl := c.Flags()
	fl.StringVar(&opts.MySQLDSN, "mysql-dsn", "", "run on this MySQL/MariaDB server (default: an embedded MySQL-protocol server)")
	fl.BoolVar(&opts.Keep, "keep", false, "leave the lab running, its incidents unrepaired (as --no-repair), until Ctrl-C, and print how to reach it")
	fl.StringSliceVar(&opts.Scenarios, "scenario", nil, "run only these scenarios, comma-separated (default: all)")
	fl.BoolVar(&opts.NoRepair, "no-repair", false, "stop after the triage: no plans, no apply")
	fl.StringVarP(&opts.Output, "output", "o", "table", "output format: table|json|jsonl")
	fl.BoolVar(&opts.NoColor, "no-color", false, "disable colour (also NO_COLOR)")
	fl.BoolVar(&opts.Watch, "watch", false, "run the scenarios under a live opctl watch (polling) and show each incident flagged, repaired by its recovery worker, and cleared")
	fl.BoolVar(&opts.TUI, "tui", false, "open the incident console (opctl tui) on the lab's incidents after the triage, before any repair")
	c.SetArgs(args)
	c.SetIn(ios.In)
	c.SetOut(ios.Out)
	c.SetErr(ios.ErrOut)
	err := c.ExecuteContext(ctx)
	switch {
	case err == nil:
		return sources.ExitOK
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		fmt.Fprintln(ios.ErrOut, "lab/demo: interrupted")
		return sources.ExitInterrupted
	}
	fmt.Fprintln(ios.ErrOut, "lab/demo: "+err.Error())
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(ios.ErrOut, "Run 'go run ./lab/demo --help' for usage.")
		return sources.ExitUsage
	}
	return sources.ExitError
}

// startEmbedded starts go-mysql-server on 127.0.0.1:0 and returns a DSN for
// it (root, no password; the lab creates its own database). Its tables have
// a PRIMARY index, as InnoDB's: go-mysql-server's default has none (none in
// information_schema.STATISTICS, SHOW INDEX or its planner), and opctl reads
// the primary key from STATISTICS (docs/lab.md).
func startEmbedded() (*server.Server, string, error) {
	logrus.SetOutput(io.Discard) // go-mysql-server logs every connection and every failed prepare
	db := memory.NewDatabase("opctl")
	db.BaseDatabase.EnablePrimaryKeyIndexes()
	pro := memory.NewDBProvider(db)
	// The lab creates its own database (CREATE DATABASE opctl_lab_...): the
	// provider's option, not the database's, decides for it.
	pro.WithOption(memory.NativeIndexProvider(true))
	engine := sqle.NewDefault(pro)
	serial := func(h mysql.Handler) (mysql.Handler, error) { return &serialHandler{Handler: h}, nil }
	srv, err := server.NewServerWithHandler(server.Config{Protocol: "tcp", Address: "127.0.0.1:0"}, engine, gmssql.NewContext,
		memory.NewSessionBuilder(pro), nil, serial)
	if err != nil {
		return nil, "", err
	}
	go func() { _ = srv.Start() }()
	return srv, "root@tcp(" + srv.Listener.Addr().String() + ")/", nil
}

// serialHandler runs one statement at a time across all connections. The
// in-memory tables of go-mysql-server are not safe for a read on one
// connection while another commits to the same table (the race detector
// shows an index scan reading rows that a commit is sorting): under load
// the demo's reads came back torn and redriven operations stalled. The
// demo's statements are small, so serving them one by one costs little.
type serialHandler struct {
	mysql.Handler
	mu sync.Mutex
}

func (h *serialHandler) ComQuery(ctx context.Context, c *mysql.Conn, query string, callback mysql.ResultSpoolFn) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Handler.ComQuery(ctx, c, query, callback)
}

func (h *serialHandler) ComMultiQuery(ctx context.Context, c *mysql.Conn, query string, callback mysql.ResultSpoolFn) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Handler.ComMultiQuery(ctx, c, query, callback)
}

func (h *serialHandler) ComPrepare(ctx context.Context, c *mysql.Conn, query string, prepare *mysql.PrepareData) ([]*querypb.Field, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Handler.ComPrepare(ctx, c, query, prepare)
}

func (h *serialHandler) ComStmtExecute(ctx context.Context, c *mysql.Conn, prepare *mysql.PrepareData, callback func(*sqltypes.Result) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Handler.ComStmtExecute(ctx, c, prepare, callback)
}
