package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
)

// repairPlanView renders `repair plan` and `repair show`; one human and one
// JSON implementation, chosen once.
type repairPlanView interface {
	Plan(p *plans.Plan, saved string) error
	Nothing(rep inspect.Report) error
	Show(p *plans.Plan, verifyErr error) error
	Batch(res batchResult) error
}

// repairApplyView renders `repair apply`.
type repairApplyView interface {
	Plan(p *plans.Plan) error
	Progress(ar repair.ActionResult)
	Result(res *repair.Result, err error) error
}

func newRepairPlanView(ios *iostreams.IOStreams, format Format) repairPlanView {
	if format.IsJSON() {
		return &repairPlanJSON{w: ios.Out, format: format}
	}
	return &repairPlanHuman{w: ios.Out, errw: ios.ErrOut, st: ui.NewStyles(ios.Out, ios.ColorEnabled())}
}

func newRepairApplyView(ios *iostreams.IOStreams, format Format, dry bool) repairApplyView {
	if format.IsJSON() {
		return &repairApplyJSON{w: ios.Out, format: format}
	}
	return &repairApplyHuman{w: ios.Out, table: tableFor(ios, format), st: ui.NewStyles(ios.Out, ios.ColorEnabled()), dry: dry}
}

// renderOptions colours a plan's diff with the command's styles (plain when
// piped or with NO_COLOR).
func renderOptions(st ui.Styles) plans.RenderOptions {
	return plans.RenderOptions{Colorize: func(class, text string) string {
		switch class {
		case plans.ClassTitle:
			return st.Bold.Render(text)
		case plans.ClassAdd:
			return st.OK.Render(text)
		case plans.ClassRemove, plans.ClassManual:
			return st.Action.Render(text)
		case plans.ClassChange:
			return st.Watch.Render(text)
		case plans.ClassGuard, plans.ClassDim:
			return st.Dim.Render(text)
		}
		return text
	}}
}

// --- human ---------------------------------------------------------------

type repairPlanHuman struct {
	w, errw io.Writer
	st      ui.Styles
	// next are the global flags the printed apply commands carry.
	next NextFlags
}

func (v *repairPlanHuman) Plan(p *plans.Plan, saved string) error {
	var b strings.Builder
	if err := plans.Render(&b, p, renderOptions(v.st)); err != nil {
		return err
	}
	b.WriteString("\n")
	if saved != "" {
		fmt.Fprintf(&b, "Saved the plan to %s (id %s). Review it, then:\n", ui.Safe(saved), p.Short())
		fmt.Fprintf(&b, "  %s\n  %s\n", ui.Safe(v.next.Apply("opctl repair apply --dry-run"+inspect.IDArg(saved))), ui.Safe(v.next.Apply("opctl repair apply"+inspect.IDArg(saved))))
		v.next.Note(&b)
	} else {
		b.WriteString("Not saved: add --out plan.json to apply it (apply only takes a saved, reviewed plan).\n")
	}
	_, err := io.WriteString(v.w, b.String())
	return err
}

func (v *repairPlanHuman) Nothing(rep inspect.Report) error {
	_, err := fmt.Fprintf(v.w, "nothing to repair: %s\n  %s\n", rep.Verdict.Code, ui.Safe(rep.Verdict.Summary))
	return err
}

func (v *repairPlanHuman) Show(p *plans.Plan, verr error) error {
	var b strings.Builder
	if verr != nil {
		// Line by line: a style pads a multi-line text to one width.
		for i, l := range strings.Split(ui.SafeLines(verr.Error()), "\n") {
			if i == 0 {
				l = "TAMPERED: " + l
			}
			b.WriteString(v.st.Action.Render(l) + "\n")
		}
		b.WriteString("\n")
	}
	if err := plans.Render(&b, p, renderOptions(v.st)); err != nil {
		return err
	}
	if verr == nil {
		fmt.Fprintf(&b, "\nid %s matches the plan's body.\n", p.ID)
	}
	_, err := io.WriteString(v.w, b.String())
	return err
}

// Batch prints a line per plan on stdout; on stderr, a line per skipped
// target and the summary. Every text from the targets file is shown
// through ui.Safe.
func (v *repairPlanHuman) Batch(res batchResult) error {
	var b strings.Builder
	for _, p := range res.Plans {
		acts := make([]string, len(p.Actions))
		for i, a := range p.Actions {
			acts[i] = string(a.Type)
		}
		fmt.Fprintf(&b, "planned  %s  %s  %s  %s  (%s)\n", p.Short(), p.Pipeline, ui.Safe(p.BizID), p.Verdict, strings.Join(acts, ", "))
	}
	if _, err := io.WriteString(v.w, b.String()); err != nil {
		return err
	}
	b.Reset()
	file := ui.Safe(res.File)
	for _, s := range res.Skipped {
		fmt.Fprintf(&b, "skipped %s (%s): %s:%d: %s\n", orDash(ui.Safe(s.BizID)), orDash(ui.Safe(s.Pipeline)), file, s.Line, ui.Safe(s.Why))
	}
	out, n, skipped := ui.Safe(res.Out), len(res.Plans), len(res.Skipped)
	switch {
	case res.Written:
		fmt.Fprintf(&b, "%d plan(s) written to %s, %d target(s) skipped.\n", n, out, skipped)
	case skipped > 0:
		fmt.Fprintf(&b, "no plan made: all %d target(s) of %s were skipped; nothing was written to %s.\n", skipped, file, out)
	default:
		fmt.Fprintf(&b, "no target in %s: nothing to plan; nothing was written to %s.\n", file, out)
	}
	if res.OldOut {
		fmt.Fprintf(&b, "The %s already there is an earlier run's: do not apply it by mistake.\n", out)
	}
	_, err := io.WriteString(v.errw, b.String())
	return err
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type repairApplyHuman struct {
	w io.Writer
	// table says whether a statement is cut to the terminal's width (on a
	// terminal, not -o wide) or shown whole (piped).
	table ui.TableOptions
	st    ui.Styles
	dry   bool
	// next are the global flags the printed command carries.
	next NextFlags
}

func (v *repairApplyHuman) Plan(p *plans.Plan) error {
	var b strings.Builder
	if err := plans.Render(&b, p, renderOptions(v.st)); err != nil {
		return err
	}
	if v.dry {
		b.WriteString("\n" + v.st.Watch.Render("DRY RUN: each SQL action runs in a transaction that is rolled back; nothing is sent.") + "\n")
	}
	b.WriteString("\n")
	_, err := io.WriteString(v.w, b.String())
	return err
}

func (v *repairApplyHuman) Progress(ar repair.ActionResult) {
	out := string(ar.Outcome)
	switch ar.Outcome {
	case repair.OutcomeApplied, repair.OutcomePublished:
		out = v.st.OK.Render(out)
	case repair.OutcomeWouldApply:
		out = v.st.Watch.Render("would apply")
	case repair.OutcomeRefused, repair.OutcomeFailed, repair.OutcomeUnknown:
		out = v.st.Action.Render(out)
	}
	line := fmt.Sprintf("  %d. [%s] %s", ar.Index, ui.Safe(string(ar.Type)), out)
	var parts []string
	for _, s := range ar.Statements {
		parts = append(parts, fmt.Sprintf("%d row(s): %s", s.Rows, ui.Safe(oneLine(s.SQL))))
	}
	if p := ar.Published; p != nil {
		if p.Offset >= 0 {
			parts = append(parts, fmt.Sprintf("written to %s partition %d offset %d", ui.Safe(p.Topic), p.Partition, p.Offset))
		} else {
			parts = append(parts, fmt.Sprintf("would be written to %s partition %d", ui.Safe(p.Topic), p.Partition))
		}
	}
	line += fmt.Sprintf("  (%s)", ar.Elapsed.Round(100*time.Microsecond))
	fmt.Fprintln(v.w, line)
	const indent = "       "
	for _, p := range parts {
		fmt.Fprintln(v.w, indent+v.st.Dim.Render(v.table.Truncate(p, v.table.Width-len(indent))))
	}
	if ar.Detail != "" && ar.Outcome != repair.OutcomeRefused && ar.Outcome != repair.OutcomeFailed && ar.Outcome != repair.OutcomeUnknown {
		fmt.Fprintln(v.w, "       "+v.st.Dim.Render(ui.Safe(ar.Detail)))
	}
}

// oneLine is a statement on one line, its runs of white space one space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (v *repairApplyHuman) Result(res *repair.Result, err error) error {
	if res == nil {
		return nil
	}
	var msg string
	switch res.Outcome {
	case repair.OutcomeApplied:
		msg = v.st.OK.Render(fmt.Sprintf("applied %d/%d", res.Applied+res.Previously, res.Total))
		if res.Previously > 0 {
			msg += fmt.Sprintf(" (%d by an earlier apply, %d now)", res.Previously, res.Applied)
		}
		msg += ". Check it: " + ui.Safe(v.next.Apply("opctl where --pipeline "+inspect.ShellQuote(res.Pipeline)+inspect.IDArg(res.BizID)))
	case repair.OutcomeAlreadyApplied:
		msg = v.st.OK.Render(fmt.Sprintf("already applied: all %d action(s) took effect earlier; nothing changed", res.Total))
		if res.Concurrent != "" {
			msg = v.st.OK.Render(fmt.Sprintf("already applied by another apply, which held the plan's lock (%s) while this one waited: all %d action(s) took effect; nothing changed", ui.Safe(res.Concurrent), res.Total))
		}
	case repair.OutcomeWouldApply:
		msg = v.st.Watch.Render(fmt.Sprintf("would apply %d/%d (dry run: rolled back, nothing sent)", res.Applied+res.Previously, res.Total))
	case repair.OutcomeRefused, repair.OutcomeFailed, repair.OutcomeUnknown:
		done := res.Previously
		if !res.DryRun {
			done += res.Applied
		}
		msg = v.st.Action.Render(fmt.Sprintf("%s: %d/%d action(s) applied", res.Outcome, done, res.Total))
		if done > 0 && !res.DryRun {
			msg += "; apply the same plan again to continue once the cause is fixed"
		}
	}
	if msg != "" {
		_, werr := fmt.Fprintln(v.w, msg)
		return werr
	}
	return nil
}

// --- JSON ----------------------------------------------------------------

// repairPlanJSON prints -o json (indented) and -o jsonl (one object a line).
type repairPlanJSON struct {
	w      io.Writer
	format Format
}

// enc encodes for stdout; the values may come from a targets file, so no
// control character is left raw (safeJSON).
func (v *repairPlanJSON) enc() *json.Encoder { return jsonEncoder(v.w, v.format) }

func (v *repairPlanJSON) Plan(p *plans.Plan, _ string) error { return v.enc().Encode(p) }

func (v *repairPlanJSON) Nothing(rep inspect.Report) error {
	return v.enc().Encode(map[string]any{"biz_id": rep.BizID, "pipeline": rep.Pipeline, "verdict": rep.Verdict.Code,
		"nothing_to_repair": true, "summary": rep.Verdict.Summary})
}

func (v *repairPlanJSON) Show(p *plans.Plan, verr error) error {
	out := map[string]any{"plan": p, "verified": verr == nil}
	if verr != nil {
		out["error"] = verr.Error()
	}
	return v.enc().Encode(out)
}

// Batch prints one object: {"plans_written", "out" ("" when nothing was
// written), "plans" (id, biz_id, pipeline, verdict of each), "skipped"
// (line, biz_id, pipeline, verdict, why)}.
func (v *repairPlanJSON) Batch(res batchResult) error {
	ids := make([]map[string]string, len(res.Plans))
	for i, p := range res.Plans {
		ids[i] = map[string]string{"id": p.ID, "biz_id": p.BizID, "pipeline": p.Pipeline, "verdict": string(p.Verdict)}
	}
	skipped := res.Skipped
	if skipped == nil {
		skipped = []repair.Skip{}
	}
	out := ""
	if res.Written {
		out = res.Out
	}
	return v.enc().Encode(struct {
		PlansWritten int                 `json:"plans_written"`
		Out          string              `json:"out"`
		Plans        []map[string]string `json:"plans"`
		Skipped      []repair.Skip       `json:"skipped"`
	}{len(res.Plans), out, ids, skipped})
}

// repairApplyJSON prints one result per plan: -o jsonl one a line (a JSON
// lines file of plans gives JSON lines), -o json indented.
type repairApplyJSON struct {
	w      io.Writer
	format Format
}

func (v *repairApplyJSON) Plan(*plans.Plan) error       { return nil }
func (v *repairApplyJSON) Progress(repair.ActionResult) {}
func (v *repairApplyJSON) Result(res *repair.Result, _ error) error {
	if res == nil {
		return nil
	}
	return jsonEncoder(v.w, v.format).Encode(res)
}
