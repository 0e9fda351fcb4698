package cmd

import (
	"context"
	"strings"
	"testing"

	"charm.land/lipgloss/v2"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources/config"
)

// viewSummary is a run with long cells: a refused check with its DDL, a
// check that ran on a full scan (--allow-full-scan) with the DDL that
// would avoid it, long notes, many verdicts.
func viewSummary() *reconcile.Summary {
	ddl := "ALTER TABLE `ledger_entry` ADD INDEX `ix_opctl_created_at_biz_order_id` (`created_at`, `biz_order_id`);"
	return &reconcile.Summary{Targets: 2, Candidates: 9, Rows: 123456, Checks: []reconcile.CheckStats{
		{Pipeline: "settlement", Check: "stuck", Status: reconcile.StatusOK, Rows: 120, Candidates: 7, Targets: 2,
			Verdicts: map[inspect.Code]int64{inspect.Stranded: 1, inspect.StateBehind: 1, inspect.InFlight: 3, inspect.WillRedeliver: 2}},
		{Pipeline: "settlement", Check: "duplicates", Status: reconcile.StatusRefused, DDL: []string{ddl},
			Reason: "would need a full scan: no index on ledger_entry starting with (created_at) to walk the scan table by time (add the index, or pass --allow-full-scan)"},
		{Pipeline: "orders_anchored", Check: "orphans", Status: reconcile.StatusOK, Rows: 123336, DDL: []string{ddl},
			Notes: []string{"full scan allowed (--allow-full-scan): no index on points_grant starting with (created_at) to walk the scan table by time",
				"step notify has no scan block: not scanned"}},
	}}
}

func viewTargets() []reconcile.Result {
	long := strings.Repeat("debit: 2 evidence rows; notify: the downstream reports 2 effects; ", 4)
	return []reconcile.Result{
		{Target: reconcile.Target{BizID: "工单-20261201-000000000042", Pipeline: "settlement", Check: "stuck", Verdict: inspect.Stranded, Detail: long}, Severity: inspect.SeverityAction},
		{Target: reconcile.Target{BizID: `O'Re"il\-7`, Pipeline: "settlement", Check: "stuck", Verdict: inspect.WillRedeliver, Detail: "the group will read it again", Partial: true}, Severity: inspect.SeverityAction},
	}
}

func renderReconcile(t *testing.T, tty bool, width int) string {
	t.Helper()
	io, _, out, _ := iostreams.Test()
	io.SetStdoutTTY(tty)
	io.SetNoColor(true)
	io.SetTerminalWidth(width)
	v := newReconcileView(io, FormatTable)
	for _, r := range viewTargets() {
		if err := v.Result(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Finish(viewSummary()); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestReconcileTableFitsTheTerminal: on a terminal every line of the tables
// and of the notes below them fits the width (long cells cut with an
// ellipsis, the notes below the table, wrapped); the DDL and the next
// command are printed whole, to be copied. Piped, every line is whole TSV.
func TestReconcileTableFitsTheTerminal(t *testing.T) {
	for _, width := range []int{80, 120} {
		out := renderReconcile(t, true, width)
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "  ALTER TABLE ") || strings.HasPrefix(l, "next: opctl ") {
				continue // a statement or a command, to be copied whole
			}
			if w := lipgloss.Width(l); w > width {
				t.Errorf("width %d: a line of %d columns:\n%s", width, w, l)
			}
		}
		if !strings.Contains(out, "…") {
			t.Errorf("width %d: nothing truncated:\n%s", width, out)
		}
		if !strings.Contains(out, "settlement/duplicates: would need a full scan") {
			t.Errorf("width %d: the refusal is not noted below the table:\n%s", width, out)
		}
		if strings.Contains(out, "NOTE") {
			t.Errorf("width %d: a NOTE column on a terminal:\n%s", width, out)
		}
	}
	piped := renderReconcile(t, false, 80)
	long := viewTargets()[0].Detail
	if !strings.Contains(piped, "\t"+long+"\n") || strings.Contains(piped, "…") {
		t.Errorf("piped: the detail is not whole:\n%s", piped)
	}
	if !strings.Contains(piped, "\tfull scan allowed (--allow-full-scan): no index on points_grant starting with (created_at) to walk the scan table by time; step notify has no scan block: not scanned\n") {
		t.Errorf("piped: the notes are not the last cell, whole:\n%s", piped)
	}
}

// TestReconcileDDLHeadings: a refused check's DDL says what it needs (or
// pass --allow-full-scan); a check that ran on a full scan because
// --allow-full-scan was given is not told to pass it.
func TestReconcileDDLHeadings(t *testing.T) {
	for _, tty := range []bool{true, false} {
		out := renderReconcile(t, tty, 100)
		if !strings.Contains(out, "settlement/duplicates needs (or pass --allow-full-scan):\n") {
			t.Errorf("tty %v: the refused check's DDL heading:\n%s", tty, out)
		}
		if strings.Count(out, "pass --allow-full-scan):") != 1 {
			t.Errorf("tty %v: a check that ran with --allow-full-scan is told to pass it:\n%s", tty, out)
		}
		if !strings.Contains(out, "orders_anchored/orphans ran on a full scan (--allow-full-scan); the index that avoids it:\n") {
			t.Errorf("tty %v: the full-scan check's DDL heading:\n%s", tty, out)
		}
	}
}

// TestReconcileInterruptNamesEachPipeline: the interrupt line names the
// check of every pipeline the interrupt cut, each with its rows and key.
func TestReconcileInterruptNamesEachPipeline(t *testing.T) {
	cfg := &config.Config{Path: "opctl.yaml", Pipelines: []config.Pipeline{{Name: "settlement"}, {Name: "orders"}}}
	cuts := []reconcile.Interruption{
		{Pipeline: "settlement", Check: "duplicates", Rows: 120, LastKey: "PAY-9"},
		{Pipeline: "orders", Check: "skipped", Rows: 30, LastKey: "m-\x1b[2J"},
	}
	run := func(context.Context, reconcile.Options, func(reconcile.Result) error) (*reconcile.Summary, error) {
		return &reconcile.Summary{Interrupted: &cuts[0], Interruptions: cuts, Targets: 1}, context.Canceled
	}
	ios, _, _, stderr := iostreams.Test()
	err := runReconcile(context.Background(), &ReconcileOptions{IO: ios, Timeout: 1e9, Output: FormatTable, Chunk: 10,
		Config: func() (*config.Config, error) { return cfg, nil }, Reconcile: func() (reconcile.Func, error) { return run, nil }})
	if code := exitCode(err, false); code != ExitInterrupted {
		t.Fatalf("exit %d (%v), want 130", code, err)
	}
	want := `opctl: interrupted after 120 rows of check duplicates on pipeline settlement (last key "PAY-9"), ` +
		`after 30 rows of check skipped on pipeline orders (last key "m-\x1b[2J"); 1 target(s) found so far`
	if !strings.Contains(stderr.String(), want+"\n") {
		t.Errorf("stderr:\n%s\nwant the line:\n%s", stderr, want)
	}
}

// The summary line is followed by each pipeline's group lag, on a
// terminal and piped.
func TestReconcileGroupLagLine(t *testing.T) {
	for _, tty := range []bool{true, false} {
		io, _, out, _ := iostreams.Test()
		io.SetStdoutTTY(tty)
		io.SetNoColor(true)
		v := newReconcileView(io, FormatTable)
		sum := viewSummary()
		sum.Lag = []reconcile.PipelineLag{{Pipeline: "settlement", GroupLag: 4120}, {Pipeline: "orders_anchored", GroupLag: 0}}
		if err := v.Finish(sum); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "\ngroup lag: settlement 4120, orders_anchored 0\n") {
			t.Errorf("tty %v: no group lag line:\n%s", tty, out)
		}
	}
}

// TestReconcileNextReadsTheOutFile: the next command names the file --out
// wrote (quoted for the shell), so that it works as printed; without --out
// it says to write one.
func TestReconcileNextReadsTheOutFile(t *testing.T) {
	for _, c := range []struct{ out, want string }{
		{"", "next: opctl repair plan --from-file targets.jsonl --reason \"$REASON\" --out plans.jsonl   (write the file with --out)"},
		{"t.jsonl", "next: opctl repair plan --from-file t.jsonl --reason \"$REASON\" --out plans.jsonl\n"},
		{"my targets.jsonl", "next: opctl repair plan --from-file 'my targets.jsonl' --reason \"$REASON\" --out plans.jsonl\n"},
	} {
		io, _, out, _ := iostreams.Test()
		io.SetNoColor(true)
		v := newReconcileView(io, FormatTable)
		v.(*reconcileHumanView).out = c.out
		for _, r := range viewTargets() {
			if err := v.Result(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := v.Finish(viewSummary()); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("--out %q: no %q in\n%s", c.out, c.want, out.String())
		}
	}
}
