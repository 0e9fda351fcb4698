package plans

import (
	"errors"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
)

// Next is the NEXT of a report whose verdict calls for a plan, made by the
// planner itself rather than guessed (docs/where.md "NEXT"): the report's
// own lines (inspect.NextCommands) are kept when Build makes the plan they
// ask for; a plan with a manual action gets `--attest "$ATTEST"` and a
// comment saying what to undo by hand first; a plan the planner would
// refuse is replaced by `opctl where` again with the planner's reason.
// UNKNOWN_OUTCOME keeps its probes and gets one line per downstream answer
// (applied, absent) that makes a plan. Other verdicts keep their lines. It
// does no I/O: in is what `opctl repair plan` would build from (its
// Options are ignored).
func Next(in Input) []string {
	r := in.Report
	base := r.Verdict.Next
	id, pl := inspect.IDArg(r.BizID), " --pipeline "+inspect.ShellQuote(r.Pipeline)
	where := "opctl where" + pl + id
	explain := "opctl explain " + string(r.Verdict.Code)
	plan := "opctl repair plan" + pl
	dryRun := "opctl repair apply plan.json --dry-run"
	try := func(o Options) (*Plan, error) {
		o.Reason, o.Operator, o.Now = "next", "", time.Unix(0, 0)
		in.Options = o
		return Build(in)
	}
	switch r.Verdict.Code {
	case inspect.DuplicateEffect, inspect.WronglySkipped, inspect.MissingEffect, inspect.StateBehind, inspect.Stranded:
		p, err := try(Options{Attest: "next"})
		if err != nil {
			return []string{where + "   # no plan: " + why(err), explain}
		}
		if undo := manualUndo(p); undo != "" {
			return []string{plan + ` --attest "$ATTEST" --reason "$REASON" --out plan.json` + id + `   # first ` + undo + `, then set ATTEST to what was done`, dryRun, explain}
		}
		return []string{plan + ` --reason "$REASON" --out plan.json` + id, dryRun, explain}
	case inspect.UnknownOutcome:
		var out []string
		for _, l := range base {
			if strings.HasPrefix(l, "curl ") {
				out = append(out, l)
			}
		}
		step := ""
		for _, f := range r.Findings {
			if f.Code == inspect.UnknownOutcome && f.Step != "" {
				step = f.Step
				break
			}
		}
		planned := 0
		for _, l := range base {
			if !strings.HasPrefix(l, "opctl repair plan ") {
				continue
			}
			outcome := inspect.AttestApplied
			if strings.Contains(l, " --outcome "+inspect.AttestAbsent) {
				outcome = inspect.AttestAbsent
			}
			if _, err := try(Options{Action: Manual, FromStep: step, Outcome: outcome, Attest: "next"}); err != nil {
				out = append(out, where+"   # if the downstream says "+outcome+": no plan: "+why(err))
				continue
			}
			out = append(out, l)
			planned++
		}
		if planned > 0 {
			out = append(out, dryRun)
		}
		return append(out, explain)
	}
	return base
}

// manualUndo says what the plan's manual actions leave to the operator
// ("undo 1 extra effect(s) of step notify by hand (PAY-1:notify:2)"), ""
// without any.
func manualUndo(p *Plan) string {
	var s []string
	for _, a := range p.Actions {
		if a.Type == Manual && a.Manual != nil {
			s = append(s, a.Manual.Instructions)
		}
	}
	return shellComment(strings.Join(s, "; "))
}

// why is a planner error as one line of a shell comment.
func why(err error) string {
	var rf *RefusedError
	if errors.As(err, &rf) && rf.Detail != "" {
		return shellComment(rf.Detail)
	}
	return shellComment(err.Error())
}

// shellComment is a text on one line of a shell comment: Printable, so
// that a control character or a newline from the database is an escape.
func shellComment(s string) string { return Printable(s) }

// NextLines is the NEXT of an operation as `opctl where` prints it: for a
// verdict that calls for a plan, what the planner makes of it (Next);
// otherwise the report's own lines.
func NextLines(in Input) []string {
	code := in.Report.Verdict.Code
	if len(CalledFor(code)) == 0 || code == inspect.InFlight {
		return in.Report.Verdict.Next
	}
	return Next(in)
}
