package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
)

// reconcileView renders a run: Result is called for every triaged candidate as it
// comes, Finish once with the summary, Done when the run completed (not
// interrupted, no error) with what it says on stderr. One implementation
// per format, chosen once.
type reconcileView interface {
	// Progress is where the scan's progress goes (nil: nowhere); Stop
	// clears it when the scan ends.
	Progress() func(reconcile.Progress)
	Stop()
	Result(r reconcile.Result) error
	Finish(sum *reconcile.Summary) error
	Done(sum *reconcile.Summary)
}

func newReconcileView(io *iostreams.IOStreams, output Format) reconcileView {
	machine := reconcileMachine{errw: io.ErrOut}
	switch output {
	case FormatJSON:
		return &reconcileJSONView{reconcileMachine: machine, w: io.Out, targets: []reconcile.Target{}}
	case FormatJSONL:
		return &reconcileJSONLView{reconcileMachine: machine, enc: jsonEncoder(io.Out, FormatJSONL)}
	case FormatPrometheus:
		return &reconcilePromView{reconcileMachine: machine, w: io.Out, now: time.Now}
	}
	t := tableFor(io, output)
	v := &reconcileHumanView{w: io.Out, errw: io.ErrOut, tty: t.TTY, table: t, st: ui.NewStyles(io.Out, io.ColorEnabled())}
	if v.tty {
		v.bar = newProgressBar(io.ErrOut, io.ColorEnabled())
	}
	return v
}

// reconcileMachine is what the machine-readable views (json, jsonl,
// prometheus) share: no progress line, and the summary on stderr, which
// the table shows, so that stdout stays machine-readable.
type reconcileMachine struct{ errw io.Writer }

func (reconcileMachine) Progress() func(reconcile.Progress) { return nil }

func (reconcileMachine) Stop() {}

func (v reconcileMachine) Done(sum *reconcile.Summary) { fmt.Fprintln(v.errw, summaryLine(sum)) }

// maxTTYRows bounds the targets a terminal table holds; the rest are counted
// (-o jsonl and --out have them all).
const maxTTYRows = 1000

var targetHeader = []string{"PIPELINE", "CHECK", "BIZ_ID", "VERDICT", "STEP", "DETAIL"}

// targetRow is a target's cells, every value read from the tables shown
// through ui.Safe: a TAB or newline in an id cannot break the columns, an
// ESC cannot reach the terminal.
func targetRow(t reconcile.Target) []string {
	step := ui.Safe(t.Step)
	if step == "" {
		step = "-"
	}
	v := ui.Safe(string(t.Verdict))
	if t.Partial {
		v += " (partial)"
	}
	return []string{ui.Safe(t.Pipeline), ui.Safe(t.Check), ui.Safe(t.BizID), v, step, ui.Safe(t.Detail)}
}

// reconcileHumanView prints the targets and a summary per pipeline and
// check. Piped, target lines stream as they are found (tab-separated); on a
// terminal they are collected into one table (at most maxTTYRows rows).
type reconcileHumanView struct {
	w, errw io.Writer
	tty     bool
	// bar is the progress line on stderr (a terminal only).
	bar *progressBar
	// out is --out ("" when not given): the next command reads it; next
	// are the global flags it carries.
	out  string
	next NextFlags
	// table is how the tables and notes fit the terminal (tty only).
	table    ui.TableOptions
	st       ui.Styles
	rows     [][]string
	dropped  int
	streamed bool
}

func (v *reconcileHumanView) Progress() func(reconcile.Progress) {
	if v.bar == nil {
		return nil
	}
	return v.bar.Update
}

func (v *reconcileHumanView) Stop() {
	if v.bar != nil {
		v.bar.Clear()
	}
}

// Done: piped, stdout may be a file nobody reads at once: a refusal (the
// run may still exit 3 for the targets of the other checks) is said on
// stderr too. On a terminal the table says it.
func (v *reconcileHumanView) Done(sum *reconcile.Summary) {
	if v.tty {
		return
	}
	for _, c := range sum.Checks {
		if c.Status == reconcile.StatusRefused {
			fmt.Fprintf(v.errw, "opctl: reconcile %s/%s refused: %s\n", ui.Safe(c.Pipeline), c.Check, ui.Safe(c.Reason))
		}
	}
}

func (v *reconcileHumanView) Result(r reconcile.Result) error {
	if v.bar != nil {
		v.bar.Found(r)
	}
	if !r.IsTarget() {
		return nil
	}
	if !v.tty {
		if !v.streamed {
			v.streamed = true
			if err := ui.TSVRow(v.w, targetHeader); err != nil {
				return err
			}
		}
		return ui.TSVRow(v.w, targetRow(r.Target))
	}
	if len(v.rows) >= maxTTYRows {
		v.dropped++
		return nil
	}
	v.rows = append(v.rows, targetRow(r.Target))
	return nil
}

func (v *reconcileHumanView) Finish(sum *reconcile.Summary) error {
	var b strings.Builder
	if v.tty {
		if len(v.rows) > 0 {
			b.WriteString(v.st.Title.Render("TARGETS") + "\n")
			_ = ui.FitTable(&b, v.table.WithGives(targetGives...), targetHeader, v.rows)
			if v.dropped > 0 {
				fmt.Fprintf(&b, "... and %d more (use --out FILE or -o jsonl for all of them)\n", v.dropped)
			}
			b.WriteString("\n")
		} else {
			b.WriteString(v.st.OK.Render("no targets") + "\n\n")
		}
		b.WriteString(v.st.Title.Render("CHECKS") + "\n")
	} else if v.streamed {
		b.WriteString("\n")
	}
	rows := [][]string{}
	var notes []string
	for _, c := range sum.Checks {
		note := ui.Safe(c.Reason)
		for _, n := range c.Notes {
			note = strings.TrimPrefix(note+"; "+ui.Safe(n), "; ")
		}
		row := []string{ui.Safe(c.Pipeline), ui.Safe(c.Check), ui.Safe(c.Status), strconv.FormatInt(c.Rows, 10),
			strconv.FormatInt(c.Candidates, 10), strconv.FormatInt(c.Targets, 10), verdictCounts(c.Verdicts),
			fmt.Sprintf("%.1fs", c.Seconds)}
		if !v.tty {
			row = append(row, note) // piped: every line whole, the note its last cell
		} else if note != "" {
			notes = append(notes, ui.Safe(c.Pipeline)+"/"+ui.Safe(c.Check)+": "+note)
		}
		rows = append(rows, row)
	}
	header := []string{"PIPELINE", "CHECK", "STATUS", "ROWS", "CANDIDATES", "TARGETS", "VERDICTS", "TIME", "NOTE"}
	if v.tty {
		// On a terminal the notes (long: reasons, DDL hints) go below the
		// table, which fits the width.
		header = header[:len(header)-1]
	}
	_ = ui.FitTable(&b, v.table.WithGives(checkGives...), header, rows)
	if len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			b.WriteString(v.table.Wrap(n, "    "))
		}
	}
	for _, c := range sum.Checks {
		if len(c.DDL) == 0 {
			continue
		}
		heading := fmt.Sprintf("%s/%s needs (or pass --allow-full-scan):", ui.Safe(c.Pipeline), ui.Safe(c.Check))
		if c.Status != reconcile.StatusRefused {
			// It ran (or began) on a full scan, as --allow-full-scan let it.
			heading = fmt.Sprintf("%s/%s ran on a full scan (--allow-full-scan); the index that avoids it:", ui.Safe(c.Pipeline), ui.Safe(c.Check))
		}
		b.WriteString("\n" + v.table.Wrap(heading, "    "))
		for _, d := range c.DDL {
			b.WriteString("  " + ui.Safe(d) + "\n")
		}
	}
	// What a check could not reach is said, whatever else it found
	// (docs/reconcile.md#steps-without-a-scan-block).
	var uncovered []string
	for _, c := range sum.Checks {
		for _, u := range c.Uncovered {
			uncovered = append(uncovered, ui.Safe(c.Pipeline)+"/"+ui.Safe(c.Check)+" cannot reach step "+ui.Safe(u))
		}
	}
	if len(uncovered) > 0 {
		b.WriteString("\n" + v.st.Watch.Render("NOT COVERED") + "\n")
		for _, u := range uncovered {
			b.WriteString(v.table.Wrap("  "+u, "    "))
		}
	}
	fmt.Fprintf(&b, "\n%d target(s) among %d candidate(s); %d rows read in %.1fs\n", sum.Targets, sum.Candidates, sum.Rows, sum.Seconds)
	if len(sum.Lag) > 0 {
		lags := make([]string, len(sum.Lag))
		for i, l := range sum.Lag {
			lags[i] = fmt.Sprintf("%s %d", ui.Safe(l.Pipeline), l.GroupLag)
		}
		b.WriteString("group lag: " + strings.Join(lags, ", ") + "\n")
	}
	if sum.Partial {
		why := make([]string, len(sum.PartialWhy))
		for i, w := range sum.PartialWhy {
			why[i] = ui.Safe(w)
		}
		b.WriteString(v.st.Watch.Render("PARTIAL: "+strings.Join(why, "; ")) + "\n")
	}
	switch {
	case sum.Targets > 0 && v.out != "":
		b.WriteString("next: " + ui.Safe(v.next.Apply("opctl repair plan --from-file "+inspect.ShellQuote(v.out)+" --reason \"$REASON\" --out plans.jsonl")) + "\n")
	case sum.Targets > 0:
		b.WriteString("next: " + ui.Safe(v.next.Apply("opctl repair plan --from-file targets.jsonl --reason \"$REASON\" --out plans.jsonl")) + "   (write the file with --out)\n")
	}
	if sum.Targets > 0 {
		v.next.Note(&b)
	}
	_, err := io.WriteString(v.w, b.String())
	return err
}

// How the reconcile tables give way on a narrow terminal (ui.FitTable).
var (
	// targets: PIPELINE, CHECK, BIZ_ID, VERDICT, STEP, DETAIL.
	targetGives = []ui.Give{{Col: 5, Floor: 20}, {Col: 0, Floor: 10}, {Col: 4, Floor: 8}, {Col: 5, Floor: 8}, {Col: 2, Floor: 16}, {Col: 3, Floor: 12}}
	// checks: PIPELINE, CHECK, STATUS, ROWS, CANDIDATES, TARGETS, VERDICTS, TIME.
	checkGives = []ui.Give{{Col: 6, Floor: 16}, {Col: 0, Floor: 12}, {Col: 6, Floor: 8}, {Col: 1, Floor: 8}, {Col: 2, Floor: 7}}
)

// verdictCounts renders {"COMPLETE": 3, "IN_FLIGHT": 1} as "COMPLETE 3, IN_FLIGHT 1".
func verdictCounts(m map[inspect.Code]int64) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]inspect.Code, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// reconcileJSONView prints one object at the end: the targets and the summary.
type reconcileJSONView struct {
	reconcileMachine
	w       io.Writer
	targets []reconcile.Target
}

func (v *reconcileJSONView) Result(r reconcile.Result) error {
	if r.IsTarget() {
		v.targets = append(v.targets, r.Target)
	}
	return nil
}

func (v *reconcileJSONView) Finish(sum *reconcile.Summary) error {
	return jsonEncoder(v.w, FormatJSON).Encode(struct {
		Targets []reconcile.Target `json:"targets"`
		Summary *reconcile.Summary `json:"summary"`
	}{v.targets, sum})
}

// reconcileJSONLView streams the targets, one JSON object per line: the
// same lines as --out.
type reconcileJSONLView struct {
	reconcileMachine
	enc *json.Encoder
}

func (v *reconcileJSONLView) Result(r reconcile.Result) error {
	if !r.IsTarget() {
		return nil
	}
	return v.enc.Encode(r.Target)
}

func (v *reconcileJSONLView) Finish(*reconcile.Summary) error { return nil }

// reconcilePromView prints the Prometheus text exposition format at the end.
type reconcilePromView struct {
	reconcileMachine
	w   io.Writer
	now func() time.Time
}

func (v *reconcilePromView) Result(reconcile.Result) error { return nil }

func (v *reconcilePromView) Finish(sum *reconcile.Summary) error {
	_, err := io.WriteString(v.w, PrometheusText(sum, v.now()))
	return err
}

// PrometheusText renders a summary in the Prometheus text exposition
// format: per pipeline and check, the targets, candidates, rows read, the
// check's status and duration; per verdict, the candidates' verdicts; and
// whether the run was partial. Every check that was asked for has a sample,
// zero included, so that an alert can tell "none found" from "not run".
func PrometheusText(sum *reconcile.Summary, now time.Time) string {
	var b strings.Builder
	metric := func(name, help, typ string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	lbl := func(kv ...string) string {
		parts := make([]string, 0, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			parts = append(parts, fmt.Sprintf("%s=%q", kv[i], promEscape(kv[i+1])))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	metric("opctl_reconcile_targets", "Operations whose verdict needs action, per pipeline and check.", "gauge")
	for _, c := range sum.Checks {
		fmt.Fprintf(&b, "opctl_reconcile_targets%s %d\n", lbl("pipeline", c.Pipeline, "check", c.Check), c.Targets)
	}
	metric("opctl_reconcile_candidates", "Operations triaged, per pipeline and check.", "gauge")
	for _, c := range sum.Checks {
		fmt.Fprintf(&b, "opctl_reconcile_candidates%s %d\n", lbl("pipeline", c.Pipeline, "check", c.Check), c.Candidates)
	}
	metric("opctl_reconcile_verdicts", "Triaged operations per verdict (severity action, watch or ok).", "gauge")
	for _, c := range sum.Checks {
		keys := make([]inspect.Code, 0, len(c.Verdicts))
		for k := range c.Verdicts {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "opctl_reconcile_verdicts%s %d\n",
				lbl("pipeline", c.Pipeline, "check", c.Check, "verdict", string(k), "severity", string(inspect.SeverityOf(k))), c.Verdicts[k])
		}
	}
	metric("opctl_reconcile_rows_read", "Index entries and keys read by the scan, per pipeline and check.", "gauge")
	for _, c := range sum.Checks {
		fmt.Fprintf(&b, "opctl_reconcile_rows_read%s %d\n", lbl("pipeline", c.Pipeline, "check", c.Check), c.Rows)
	}
	metric("opctl_reconcile_check_ok", "1 when the check ran to the end, 0 when it was skipped, refused, failed or interrupted.", "gauge")
	for _, c := range sum.Checks {
		ok := 0
		if c.Status == reconcile.StatusOK {
			ok = 1
		}
		fmt.Fprintf(&b, "opctl_reconcile_check_ok%s %d\n", lbl("pipeline", c.Pipeline, "check", c.Check, "status", c.Status), ok)
	}
	metric("opctl_reconcile_check_duration_seconds", "Wall time of the check's scan.", "gauge")
	for _, c := range sum.Checks {
		fmt.Fprintf(&b, "opctl_reconcile_check_duration_seconds%s %s\n", lbl("pipeline", c.Pipeline, "check", c.Check), promFloat(c.Seconds))
	}
	metric("opctl_reconcile_group_lag", "The consumer group's total lag on the pipeline's topic (log end - committed, summed over partitions).", "gauge")
	for _, l := range sum.Lag {
		fmt.Fprintf(&b, "opctl_reconcile_group_lag%s %d\n", lbl("pipeline", l.Pipeline, "topic", l.Topic, "group", l.Group), l.GroupLag)
	}
	metric("opctl_reconcile_partial", "1 when a source (Kafka) could not be read and verdicts were computed without it.", "gauge")
	fmt.Fprintf(&b, "opctl_reconcile_partial %d\n", boolInt(sum.Partial))
	metric("opctl_reconcile_last_run_timestamp_seconds", "When the run finished (Unix time).", "gauge")
	fmt.Fprintf(&b, "opctl_reconcile_last_run_timestamp_seconds %d\n", now.Unix())
	return b.String()
}

func promEscape(s string) string {
	// %q escapes backslash, quote and newline as the format wants; strip
	// what %q would turn into other escapes.
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' {
			return -1
		}
		return r
	}, s)
}

func promFloat(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// progressBar draws one line on stderr while a run scans: the fraction of
// the current check's range, rows read, rate and targets found. Updates are
// drawn at most ten times a second.
type progressBar struct {
	mu    sync.Mutex
	w     io.Writer
	st    ui.Styles
	last  time.Time
	found int64
	drawn bool
}

func newProgressBar(w io.Writer, color bool) *progressBar {
	return &progressBar{w: w, st: ui.NewStyles(w, color)}
}

// Found counts a target (called from the result loop).
func (b *progressBar) Found(r reconcile.Result) {
	if r.IsTarget() {
		b.mu.Lock()
		b.found++
		b.mu.Unlock()
	}
}

// Update redraws the line (called from the scan).
func (b *progressBar) Update(p reconcile.Progress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if b.drawn && now.Sub(b.last) < 100*time.Millisecond {
		return
	}
	b.last, b.drawn = now, true
	fmt.Fprint(b.w, "\r\x1b[2K"+renderProgress(p, b.st, max(b.found, p.Found)))
}

// Clear erases the line.
func (b *progressBar) Clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drawn {
		fmt.Fprint(b.w, "\r\x1b[2K")
		b.drawn = false
	}
}

// renderProgress is the text of the progress line.
func renderProgress(p reconcile.Progress, st ui.Styles, found int64) string {
	const width = 24
	bar := strings.Repeat("·", width)
	pct := "  ?%"
	if p.Fraction >= 0 {
		n := int(p.Fraction*width + 0.5)
		bar = st.OK.Render(strings.Repeat("█", n)) + st.Dim.Render(strings.Repeat("░", width-n))
		pct = fmt.Sprintf("%3.0f%%", p.Fraction*100)
	}
	rate := 0.0
	if s := p.Elapsed.Seconds(); s > 0 {
		rate = float64(p.TotalRows) / s
	}
	return fmt.Sprintf("%s %s  %s/%s  rows %d  %.0f rows/s  found %s", bar, pct, p.Pipeline, p.Check,
		p.TotalRows, rate, st.Severity("action", strconv.FormatInt(found, 10)))
}
