package cmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

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

// sopView renders a run: one line per step on a terminal or in a pipe,
// one JSON object per step with -o json.
type sopView struct {
	opts *SopOptions
	enc  interface{ Encode(any) error }
	in   *bufio.Reader
}

func newSopView(opts *SopOptions) *sopView {
	v := &sopView{opts: opts, in: bufio.NewReader(opts.IO.In)}
	if opts.Format != FormatTable {
		v.enc = jsonEncoder(opts.IO.Out, FormatJSONL)
	}
	return v
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

func (v *sopView) Event(ev sop.Event) error {
	if v.enc != nil {
		return v.enc.Encode(ev)
	}
	w := v.opts.IO.Out
	fmt.Fprintf(w, "step %d %s (%s): %s", ev.Index, ui.Safe(ev.Step), ev.Type, outcomeMark(ev.Outcome))
	if ev.Detail != "" {
		fmt.Fprintf(w, ": %s", ui.Safe(firstLine(ev.Detail)))
	}
	fmt.Fprintln(w)
	if ev.Type == sop.StepNote {
		for _, l := range strings.Split(strings.TrimSpace(ev.Detail), "\n")[1:] {
			fmt.Fprintf(w, "    %s\n", ui.Safe(l))
		}
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func (v *sopView) Summary(s *sop.Summary) error {
	if v.enc != nil {
		return v.enc.Encode(s)
	}
	w := v.opts.IO.Out
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

// Review shows the plans and asks, like repair apply: only "yes" goes on.
func (v *sopView) Review(_ context.Context, s sop.Step, ps []*plans.Plan) error {
	w := v.opts.IO.ErrOut
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
func (v *sopView) Before(_ context.Context, index int, s sop.Step) error {
	fmt.Fprintf(v.opts.IO.ErrOut, "Run step %d %s (%s)%s? [yes/no]: ", index, ui.Safe(s.Name), s.Type, stepWhat(s))
	return v.yes("the operator stopped the run")
}

func (v *sopView) yes(no string) error {
	line, _ := v.in.ReadString('\n')
	if strings.TrimSpace(line) != "yes" {
		return errors.New(no)
	}
	return nil
}
