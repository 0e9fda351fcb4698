package cmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources/config"
)

// NextFlags are the global flags that the commands opctl prints for the
// user to run next carry, so that each reads what the command that
// printed it read (docs/README.md#next-commands): --config and --brokers
// as given, --mysql-dsn when it holds no password. A password is never
// printed; HiddenDSN says a --mysql-dsn was left out for that reason.
type NextFlags struct {
	Flags     string
	HiddenDSN bool
}

// Next returns the flags of g that next commands carry.
func (g GlobalOptions) Next() NextFlags {
	var n NextFlags
	if g.ConfigPath != "" {
		n.Flags += " --config " + inspect.ShellQuote(g.ConfigPath)
	}
	if g.MySQLDSN != "" {
		if config.RedactDSN(g.MySQLDSN) == g.MySQLDSN {
			n.Flags += " --mysql-dsn " + inspect.ShellQuote(g.MySQLDSN)
		} else {
			n.HiddenDSN = true
		}
	}
	if len(g.Brokers) > 0 {
		n.Flags += " --brokers " + inspect.ShellQuote(strings.Join(g.Brokers, ","))
	}
	return n
}

// Apply returns line with the flags after its leading "opctl"
// (inspect.WithFlags).
func (n NextFlags) Apply(line string) string { return inspect.WithFlags(line, n.Flags) }

// Note writes, when a --mysql-dsn was left out of the next commands, a
// line on w saying so.
func (n NextFlags) Note(w io.Writer) {
	if n.HiddenDSN {
		fmt.Fprintln(w, "note: the commands to run next do not repeat --mysql-dsn, whose password is never printed: add it when you run them")
	}
}

// Reports are the reports `opctl where` shows of t (triage.Result.Shown),
// each with its NEXT: the planner's steps (plans.Next) as shell lines
// (Lines) that carry the flags.
func (n NextFlags) Reports(t *triage.Result) []inspect.Report {
	ops := t.Shown()
	out := make([]inspect.Report, len(ops))
	for i, op := range ops {
		r := op.Report
		r.Verdict.Next = n.Lines(plans.Next(plans.Input{Config: t.Config, Report: r, Evidence: &op.Evidence, RedrivePartitions: op.RedrivePartitions}))
		out[i] = r
	}
	return out
}

// Lines are the steps as lines to paste into a POSIX shell with REASON
// set, and ATTEST when a line uses it, each opctl line with the flags
// after its "opctl": every id comes last, after "--" and shell-quoted
// (inspect.IDArg), so that an id that starts with "-", or holds spaces,
// quotes, "$(...)" or a newline, reaches the command as exactly that id,
// never as a flag or shell syntax (docs/README.md#next-commands).
// lab/demo's TestNextRunsAsPrinted runs every line of every incident as
// printed. Never nil: `verdict.next` is [] when there is nothing to do.
func (n NextFlags) Lines(steps []plans.Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = n.Apply(ShellLine(s))
	}
	return out
}

// ShellLine is one step as a shell line, without the global flags.
func ShellLine(s plans.Step) string {
	id := inspect.IDArg(s.BizID)
	pl := ""
	if s.Pipeline != "" {
		pl = " --pipeline " + inspect.ShellQuote(s.Pipeline)
	}
	switch s.Kind {
	case plans.StepWhere:
		return "opctl where" + pl + id + whereNote(s)
	case plans.StepExplain:
		return "opctl explain " + string(s.Verdict)
	case plans.StepProbe:
		line := "curl -s " + inspect.ShellQuote(s.URL) + "   # probe the downstream"
		if s.Redacted {
			line += "; the credentials of the configured URL were removed: add them (-u USER, curl asks for the password)"
		}
		return line
	case plans.StepDryRun:
		return "opctl repair apply plan.json --dry-run"
	case plans.StepFinish:
		return "opctl repair apply --dry-run" + inspect.IDArg(s.PlanID) + "   # review, then run it without --dry-run to finish the plan"
	case plans.StepPlan:
		return planLine(s, pl, id)
	}
	return "# " + string(s.Kind)
}

// whereNote is the comment of a `where` line: when to run it, or why
// there is no plan.
func whereNote(s plans.Step) string {
	if s.Refused != nil {
		if s.IfOutcome != "" {
			return "   # if the downstream says " + s.IfOutcome + ": no plan: " + plans.Why(s.Refused, plans.Flags)
		}
		return "   # no plan: " + plans.Why(s.Refused, plans.Flags)
	}
	switch s.Again {
	case plans.AgainAnywhere:
		return "   # without --pipeline: try every configured pipeline"
	case plans.AgainLease:
		return "   # again after lease_until; repair is refused while the lease is live"
	case plans.AgainRead:
		return "   # again once every query reads: fix the failed query PARTIAL names (opctl.yaml, the schema or a grant; opctl schema check)"
	case plans.AgainConsumer:
		return "   # again once the consumer has caught up"
	}
	return ""
}

// planLine is a `repair plan` line: its options in a fixed order, the id
// last, and what to do before running it.
func planLine(s plans.Step, pl, id string) string {
	line := "opctl repair plan" + pl
	if s.Action != "" {
		line += " --action " + string(s.Action)
	}
	if s.FromStep != "" {
		line += " --from-step " + inspect.ShellQuote(s.FromStep)
	}
	if s.Attest {
		line += ` --attest "$ATTEST"`
	}
	line += ` --reason "$REASON"`
	if s.Outcome != "" {
		line += " --outcome " + s.Outcome
	}
	line += " --out plan.json"
	switch {
	case s.Shared && s.Outcome == inspect.AttestAbsent:
		return line + "   # if none of them is this operation's, set ATTEST to how you know and run this line instead"
	case s.Shared:
		return line + "   # find out which of the shared changes of step " + s.FromStep + " are this operation's and undo any extra one by hand; when it has exactly one, set ATTEST to how you know and run this line"
	case s.Outcome == inspect.AttestAbsent:
		return line + id + "   # if it never took effect, set ATTEST to its answer and run this line instead"
	case s.Outcome != "":
		ask := "ask the downstream"
		if s.FromStep != "" {
			ask = "ask the downstream of step " + s.FromStep + " whether the call took effect"
		}
		return line + id + "   # " + ask + "; if it did, set ATTEST to its answer (who said what, when) and run this line"
	case s.Undo != "":
		return line + id + "   # first " + s.Undo + ", then set ATTEST to what was done"
	}
	return line + id
}
