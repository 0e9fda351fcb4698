// Package tui is opctl's incident console (`opctl tui`, docs/tui.md): a
// bubbletea program over the same packages as the commands. The list is a
// reconcile (reconcile.Run through Options.Reconcile), the detail the
// triage of `opctl where` (the read side, inspect/triage, through
// Options.Triage) with the planner's NEXT, and the repair flow the
// planner and the guarded apply of `opctl repair` (repair.Service.Plan and
// Apply): the console adds no verdict or plan logic of its own. Every read
// and write runs in a tea.Cmd; Update and View are pure.
package tui

import (
	"context"
	"fmt"
	"io"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/reconcile/watch"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Triager is what the console reads an operation with (*triage.Service):
// the triage of `opctl where`.
type Triager interface {
	Triage(ctx context.Context, bizID, pipeline string) (*triage.Result, error)
}

// Service is what the console needs of repair.Service: the planner and
// the guarded apply of `opctl repair`, and the audit of `opctl audit`.
type Service interface {
	Plan(ctx context.Context, op *triage.Operation, o plans.Options) (*plans.Plan, error)
	Apply(ctx context.Context, plan *plans.Plan, o repair.ApplyOptions) (*repair.Result, error)
	Audit(ctx context.Context, f sources.AuditFilter) (*sources.AuditLog, error)
}

// Options configure the console (the flags of `opctl tui`).
type Options struct {
	// Triage, Service and Reconcile open the clients on first use: a
	// source that cannot be reached is shown in the status line, never a
	// crash.
	Triage    func() (Triager, error)
	Service   func() (Service, error)
	Reconcile func() (reconcile.Func, error)
	// Pipelines are the pipelines the list reconciles (every configured
	// one, or --pipeline); Pipeline is --pipeline ("" for all).
	Pipelines []*config.Pipeline
	Pipeline  string
	// Since bounds the reconcile (default DefaultSince); OlderThan is its
	// stuck check's minimum age; Refresh is how often the list is read
	// again (default DefaultRefresh).
	Since, OlderThan, Refresh time.Duration
	// ReadOnly disables apply.
	ReadOnly bool
	// Incident tags every plan (and so every audit row) made here.
	Incident string
	// Operator is who plans and applies (recorded in the plan and audit).
	Operator string
	// BizID, when set, opens its detail at start.
	BizID string
	// Color turns colour on (off for NO_COLOR and --no-color).
	Color bool
	// Now is the clock of the header (nil: time.Now); ages come from the
	// database clock.
	Now func() time.Time
	// Keys and Styles default to DefaultKeyMap and NewStyles.
	Keys *KeyMap
	// Watch, when set, is the base URL of a running `opctl watch`
	// (--watch, shown in the title): the list is what Targets reads (its
	// /targets, bounded by the wiring), every Refresh (default
	// DefaultWatchRefresh), instead of a reconcile
	// (docs/tui.md#the-console-on-a-watch); notReady is why the watch is
	// not ready ("" when it is: its /readyz), said in the status line. The
	// detail and the repair flow still triage through Triage.
	Watch   string
	Targets func(ctx context.Context) (targets []watch.Event, notReady string, err error)
}

// Defaults of the console (docs/tui.md).
const (
	DefaultSince   = time.Hour
	DefaultRefresh = 10 * time.Second
)

// Run runs the console on the terminal (in, out) until the operator quits,
// ctx ends (SIGTERM, SIGHUP) or it fails. The terminal is restored in every
// case: a panic of the console is recovered in Update, View and every
// command, ends the program cleanly and is returned as a
// *sources.InternalError.
func Run(ctx context.Context, in io.Reader, out io.Writer, o Options) error {
	m := New(ctx, o, NewStyles(o.Color))
	// Signals are ctx's (cmd.Main: SIGINT, SIGTERM, SIGHUP), not the
	// program's own handler: one way to end, and the exit status says so.
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out), tea.WithoutSignalHandler())
	final, err := p.Run()
	if fm, ok := final.(Model); ok && fm.crash != nil {
		return fm.crash
	}
	if ctx.Err() != nil {
		return ctx.Err() // SIGTERM or SIGHUP (cmd.Main's context): the terminal is restored
	}
	if err != nil {
		return fmt.Errorf("the console stopped: %w", err)
	}
	return nil
}
