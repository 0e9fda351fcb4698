package cmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sop"
)

// runbookView is a runbook as list, show and -o json give it.
type runbookView struct {
	Name        string         `json:"name"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	Verdicts    []inspect.Code `json:"verdicts"`
	Source      string         `json:"source"`
	Mass        bool           `json:"mass"`
	Steps       []stepView     `json:"steps,omitempty"`
}

type stepView struct {
	Name    string         `json:"name"`
	Type    sop.StepType   `json:"type"`
	Text    string         `json:"text,omitempty"`
	Expect  []inspect.Code `json:"expect,omitempty"`
	Until   []inspect.Code `json:"until,omitempty"`
	For     string         `json:"for,omitempty"`
	Timeout string         `json:"timeout,omitempty"`
	Count   int            `json:"count,omitempty"`
	Checks  []string       `json:"checks,omitempty"`
	Line    int            `json:"line"`
}

func viewOf(rb *sop.Runbook, steps bool) runbookView {
	v := runbookView{Name: rb.Name, Title: rb.Title, Description: rb.Description, Verdicts: rb.Verdicts, Source: rb.Source, Mass: rb.Mass()}
	if !steps {
		return v
	}
	for _, s := range rb.Steps {
		sv := stepView{Name: s.Name, Type: s.Type, Text: s.Text, Expect: s.Expect, Until: s.Until, Count: s.Count, Checks: s.Checks, Line: s.Line}
		if s.For > 0 {
			sv.For = s.For.String()
		}
		if s.Timeout > 0 {
			sv.Timeout = s.Timeout.String()
		}
		v.Steps = append(v.Steps, sv)
	}
	return v
}

// stepWhat says what a step does, as a person reads it.
func stepWhat(s sop.Step) string {
	switch s.Type {
	case sop.StepWhere, sop.StepProbe:
		if len(s.Expect) > 0 {
			return ": triage; stop unless " + codeList(s.Expect)
		}
		return ": triage"
	case sop.StepVerify:
		return ": triage what was applied; stop unless " + codeList(s.Expect)
	case sop.StepPlan:
		return ": build the plan of the verdict"
	case sop.StepReview:
		return ": a person reviews the plans (--yes passes)"
	case sop.StepApply:
		if s.Count > 0 {
			return fmt.Sprintf(": apply the next %d plan(s) (--dry-run: dry-run them)", s.Count)
		}
		return ": apply the plans left (--dry-run: dry-run them)"
	case sop.StepWait:
		if s.For > 0 {
			return ": wait " + s.For.String()
		}
		return fmt.Sprintf(": wait until %s, at most %s", codeList(s.Until), s.Timeout)
	case sop.StepReconcile:
		c := "all checks"
		if len(s.Checks) > 0 {
			c = strings.Join(s.Checks, ",")
		}
		return fmt.Sprintf(": reconcile (%s) for the operations to repair", c)
	}
	return ""
}

// sopRunView renders a run: one line per step for a person (a terminal
// or a pipe), one JSON object per step then the summary with -o json;
// chosen once. Review and Before ask on stderr in both.
type sopRunView interface {
	// Start names the runbook a run starts (not a resumed one).
	Start(rb *sop.Runbook)
	Event(ev sop.Event) error
	Summary(s *sop.Summary) error
	Review(ctx context.Context, s sop.Step, ps []*plans.Plan) error
	Before(ctx context.Context, index int, s sop.Step) error
}

func newSopView(opts *SopOptions) sopRunView {
	a := sopAsk{errw: opts.IO.ErrOut, in: bufio.NewReader(opts.IO.In)}
	if opts.Format.IsJSON() {
		return &sopRunJSON{sopAsk: a, enc: jsonEncoder(opts.IO.Out, FormatJSONL)}
	}
	return &sopRunHuman{sopAsk: a, w: opts.IO.Out, table: tableFor(opts.IO, opts.Format)}
}

// sopRunJSON writes each step's event and the summary as JSON lines
// (docs/runbooks.md "Output").
type sopRunJSON struct {
	sopAsk
	enc interface{ Encode(any) error }
}

func (v *sopRunJSON) Start(*sop.Runbook) {}

func (v *sopRunJSON) Event(ev sop.Event) error { return v.enc.Encode(ev) }

func (v *sopRunJSON) Summary(s *sop.Summary) error { return v.enc.Encode(s) }

// sopRunHuman writes a transcript of the run.
type sopRunHuman struct {
	sopAsk
	w     io.Writer
	table ui.TableOptions
}

func (v *sopRunHuman) Start(rb *sop.Runbook) {
	fmt.Fprintf(v.w, "runbook %s: %s (%s)\n", ui.Safe(rb.Name), ui.Safe(rb.Title), ui.Safe(rb.Source))
}

// outcomeMark is how a step's outcome reads in a transcript: the ones
// that stop a run in capitals.
func outcomeMark(o string) string {
	switch o {
	case sop.OutcomeUnexpected, sop.OutcomeRefused, sop.OutcomeFailed:
		return strings.ToUpper(o)
	}
	return o
}

// Event writes a step's line; on a terminal it wraps to the width, the
// lines after the first indented (piped: one line, whole).
func (v *sopRunHuman) Event(ev sop.Event) error {
	line := fmt.Sprintf("step %d %s (%s): %s", ev.Index, ui.Safe(ev.Step), ev.Type, outcomeMark(ev.Outcome))
	if ev.Detail != "" {
		line += ": " + ui.Safe(firstLine(ev.Detail))
	}
	var b strings.Builder
	b.WriteString(v.table.Wrap(line, "    "))
	if ev.Type == sop.StepNote {
		for _, l := range strings.Split(strings.TrimSpace(ev.Detail), "\n")[1:] {
			b.WriteString(v.table.Wrap("    "+ui.Safe(l), "    "))
		}
	}
	_, err := io.WriteString(v.w, b.String())
	return err
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func (v *sopRunHuman) Summary(s *sop.Summary) error {
	w := v.w
	mode := ""
	if s.DryRun {
		mode = " (dry run: nothing applied)"
	}
	switch s.Outcome {
	case "done":
		fmt.Fprintf(w, "run %s: done, %d/%d steps%s\n", s.RunID, s.Done, s.Steps, mode)
		if s.Detail != "" {
			fmt.Fprintf(w, "  %s\n", ui.Safe(s.Detail))
		}
	default:
		fmt.Fprintf(w, "run %s: %s at step %s after %d/%d steps%s\n  %s\n  resume: %s\n", s.RunID, s.Outcome, ui.Safe(s.StoppedAt), s.Done, s.Steps, mode, ui.Safe(firstLine(s.Detail)), s.Resume)
	}
	return nil
}

// sopAsk asks a person on stderr (a review step, --step) and reads the
// answer from stdin.
type sopAsk struct {
	errw io.Writer
	in   *bufio.Reader
}

// Review shows the plans and asks, like repair apply: only "yes" goes on.
func (v *sopAsk) Review(_ context.Context, s sop.Step, ps []*plans.Plan) error {
	w := v.errw
	for _, p := range ps {
		if err := plans.Render(w, p, plans.RenderOptions{}); err != nil {
			return err
		}
	}
	if t := strings.TrimSpace(s.Text); t != "" {
		fmt.Fprintf(w, "\n%s\n", ui.SafeLines(t))
	}
	fmt.Fprintf(w, "\nGo on with these %d plan(s)?\n  Only 'yes' will be accepted: ", len(ps))
	return v.yes("the plans were not accepted; nothing was applied")
}

// Before asks before a step (--step).
func (v *sopAsk) Before(_ context.Context, index int, s sop.Step) error {
	fmt.Fprintf(v.errw, "Run step %d %s (%s)%s? [yes/no]: ", index, ui.Safe(s.Name), s.Type, stepWhat(s))
	return v.yes("the operator stopped the run")
}

func (v *sopAsk) yes(no string) error {
	line, _ := v.in.ReadString('\n')
	if strings.TrimSpace(line) != "yes" {
		return errors.New(no)
	}
	return nil
}

// sopLibraryView renders `opctl sop list|show|check`: one implementation
// per output format, chosen once.
type sopLibraryView interface {
	List(rbs []*sop.Runbook) error
	Show(rb *sop.Runbook) error
	// Checked is one file that parsed; Problems the errors of the others
	// (ok: no file had any other error).
	Checked(file string, rb *sop.Runbook) error
	Problems(all sop.ErrorList, ok bool) error
}

func newSopLibraryView(ios *iostreams.IOStreams, format Format) sopLibraryView {
	if format.IsJSON() {
		return &sopLibraryJSON{w: ios.Out, format: format}
	}
	return &sopLibraryHuman{w: ios.Out, table: tableFor(ios, format)}
}

type sopLibraryJSON struct {
	w      io.Writer
	format Format
}

func (v *sopLibraryJSON) List(rbs []*sop.Runbook) error {
	var vs []runbookView
	for _, rb := range rbs {
		vs = append(vs, viewOf(rb, false))
	}
	return encodeList(v.w, v.format, vs)
}

func (v *sopLibraryJSON) Show(rb *sop.Runbook) error {
	return jsonEncoder(v.w, v.format).Encode(viewOf(rb, true))
}

func (v *sopLibraryJSON) Checked(string, *sop.Runbook) error { return nil }

func (v *sopLibraryJSON) Problems(all sop.ErrorList, ok bool) error {
	type problem struct {
		File string `json:"file"`
		Line int    `json:"line"`
		Msg  string `json:"message"`
	}
	out := struct {
		OK       bool      `json:"ok"`
		Problems []problem `json:"problems"`
	}{OK: len(all) == 0 && ok, Problems: []problem{}}
	for _, e := range all {
		out.Problems = append(out.Problems, problem{e.File, e.Line, e.Msg})
	}
	return jsonEncoder(v.w, v.format).Encode(out)
}

type sopLibraryHuman struct {
	w     io.Writer
	table ui.TableOptions
}

func (v *sopLibraryHuman) List(rbs []*sop.Runbook) error {
	var rows [][]string
	for _, rb := range rbs {
		rows = append(rows, []string{ui.Safe(rb.Name), ui.Safe(rb.Title), codeList(rb.Verdicts), ui.Safe(rb.Source)})
	}
	// The title gives way first, the name last.
	t := v.table.WithGives(ui.Give{Col: 1, Floor: 16}, ui.Give{Col: 3, Floor: 12}, ui.Give{Col: 2, Floor: 12})
	return ui.FitTable(v.w, t, []string{"NAME", "TITLE", "VERDICTS", "SOURCE"}, rows)
}

func (v *sopLibraryHuman) Show(rb *sop.Runbook) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", ui.Safe(rb.Name), ui.Safe(rb.Title))
	fmt.Fprintf(&b, "  for      %s\n  source   %s\n", codeList(rb.Verdicts), ui.Safe(rb.Source))
	if rb.Mass() {
		b.WriteString("  runs on  reconcile's targets (no --biz-id)\n")
	} else {
		b.WriteString("  runs on  one operation (--biz-id)\n")
	}
	if d := strings.TrimSpace(rb.Description); d != "" {
		b.WriteString("\n")
		for _, l := range strings.Split(d, "\n") {
			b.WriteString(v.table.Wrap("  "+ui.Safe(l), "  "))
		}
	}
	b.WriteString("\nSTEPS\n")
	for i, s := range rb.Steps {
		b.WriteString(v.table.Wrap(fmt.Sprintf("  %d. %s (%s)%s", i+1, ui.Safe(s.Name), s.Type, stepWhat(s)), "       "))
		if t := strings.TrimSpace(s.Text); t != "" {
			for _, l := range strings.Split(t, "\n") {
				b.WriteString(v.table.Wrap("       "+ui.Safe(l), "       "))
			}
		}
	}
	_, err := io.WriteString(v.w, b.String())
	return err
}

func (v *sopLibraryHuman) Checked(file string, rb *sop.Runbook) error {
	_, err := fmt.Fprintf(v.w, "%s: ok (runbook %s, %d steps)\n", ui.Safe(file), ui.Safe(rb.Name), len(rb.Steps))
	return err
}

// Problems: the errors are the command's error, printed once on stderr.
func (v *sopLibraryHuman) Problems(sop.ErrorList, bool) error { return nil }
