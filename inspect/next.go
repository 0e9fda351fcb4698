package inspect

import (
	"slices"
	"strings"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// NextCommands returns the commands an operator should run next for a
// report, ready to paste into a POSIX shell with REASON set, and ATTEST
// when a line uses it: every id comes last, after "--" and shell-quoted
// (IDArg), so that an id the database holds that starts with "-", or holds
// spaces, quotes, "$(...)" or a newline, reaches the command as exactly
// that id, never as a flag or shell syntax (docs/README.md#next-commands).
// For a verdict that calls for a plan these are the lines of the common
// case (`repair plan`, then a dry run); repair (Service.Triage, through
// repair/plans Next) replaces them with what the planner itself makes of
// the report: `--attest` when the plan has a manual action, or `where`
// again with the planner's reason when it would refuse. lab/demo's
// TestNextRunsAsPrinted runs every line of every incident as printed.
func NextCommands(r *Report, p *config.Pipeline) []string {
	id := IDArg(r.BizID)
	pl := " --pipeline " + ShellQuote(r.Pipeline)
	explain := "opctl explain " + string(r.Verdict.Code)
	reason := ` --reason "$REASON"`
	plan := "opctl repair plan" + pl
	where := "opctl where" + pl + id
	dryRun := "opctl repair apply plan.json --dry-run"
	switch r.Verdict.Code {
	case NotFound:
		return []string{"opctl where" + id + "   # without --pipeline: try every configured pipeline"}
	case InFlight:
		return []string{where + "   # again after lease_until; repair is refused while the lease is live", explain}
	case RepairIncomplete:
		if r.Repair == nil {
			return []string{explain}
		}
		return []string{"opctl repair apply --dry-run" + IDArg(r.Repair.PlanID) + "   # review, then run it without --dry-run to finish the plan", explain}
	case UnknownOutcome:
		// No answer says whether the call took effect: a plan needs what
		// the downstream's team says, attested (docs/repair.md).
		out := probeCommands(r, p)
		step := unknownStep(r)
		attest := plan + " --action manual" + stepFlag(step) + ` --attest "$ATTEST"` + reason
		ask := "ask the downstream"
		if step != "" {
			ask = "ask the downstream of step " + step + " whether the call took effect"
		}
		if v := stepNamed(r, step); v != nil && v.Status == StepAmbiguous {
			// Whose changes they are is settled by the people who know
			// the operations (docs/where.md#binlog-evidence).
			return append(out,
				attest+" --outcome applied --out plan.json   # find out which of the shared changes of step "+step+" are this operation's and undo any extra one by hand; when it has exactly one, set ATTEST to how you know and run this line",
				attest+" --outcome absent --out plan.json   # if none of them is this operation's, set ATTEST to how you know and run this line instead",
				dryRun, explain)
		}
		return append(out,
			attest+" --outcome applied --out plan.json"+id+"   # "+ask+"; if it did, set ATTEST to its answer (who said what, when) and run this line",
			attest+" --outcome absent --out plan.json"+id+"   # if it never took effect, set ATTEST to its answer and run this line instead",
			dryRun, explain)
	case DuplicateEffect, WronglySkipped, MissingEffect, StateBehind, Stranded:
		return []string{plan + reason + " --out plan.json" + id, dryRun, explain}
	case ReadError:
		return []string{where + "   # again once every query reads: fix the failed query PARTIAL names (opctl.yaml, the schema or a grant; opctl schema check)", explain}
	case WillRedeliver, CompleteUncommitted, Incomplete:
		return []string{where + "   # again once the consumer has caught up", explain}
	case Failed:
		return []string{explain}
	}
	return []string{}
}

// IDArg is an id as the last argument of a printed command: " -- " and the
// id shell-quoted. After "--" the command takes it as an argument whatever
// it starts with ("-o", "--from-file=F").
func IDArg(id string) string { return " -- " + ShellQuote(id) }

// probeCommands are the curl lines of UNKNOWN_OUTCOME: one GET per unknown
// call of a step whose probe has {request_id}, one per step whose probe has
// {biz_id}; the URL without its userinfo (sources.RedactURL).
func probeCommands(r *Report, p *config.Pipeline) []string {
	var out []string
	for _, f := range r.Findings {
		if f.Code != UnknownOutcome {
			continue
		}
		i := p.StepIndex(f.Step)
		if i < 0 || i >= len(r.Steps) || p.Steps[i].Probe == "" {
			continue
		}
		var urls []string
		if strings.Contains(p.Steps[i].Probe, "{request_id}") {
			for _, in := range r.Steps[i].Intents {
				if in.Outcome == IntentUnknown {
					urls = append(urls, sources.Expand(p.Steps[i].Probe, map[string]string{"request_id": in.RequestID, "biz_id": r.BizID}, true))
				}
			}
		} else {
			urls = append(urls, sources.Expand(p.Steps[i].Probe, map[string]string{"biz_id": r.BizID}, true))
		}
		for _, u := range urls {
			// Never the configured credentials (docs/where.md#next-commands).
			line := "curl -s " + ShellQuote(sources.RedactURL(u)) + "   # probe the downstream"
			if sources.RedactURL(u) != u {
				line += "; the credentials of the configured URL were removed: add them (-u USER, curl asks for the password)"
			}
			if !slices.Contains(out, line) {
				out = append(out, line)
			}
		}
	}
	return out
}

// unknownStep is the step an UNKNOWN_OUTCOME plan attests (the first
// finding's; the planner takes it as --from-step).
func unknownStep(r *Report) string {
	for _, f := range r.Findings {
		if f.Code == UnknownOutcome && f.Step != "" {
			return f.Step
		}
	}
	return ""
}

// stepNamed is the view of the step named step, nil when none is.
func stepNamed(r *Report, step string) *StepView {
	for i := range r.Steps {
		if r.Steps[i].Name == step {
			return &r.Steps[i]
		}
	}
	return nil
}

// stepFlag is --from-step for step, or nothing without one.
func stepFlag(step string) string {
	if step == "" {
		return ""
	}
	return " --from-step " + ShellQuote(step)
}

// WithFlags returns the command line with flags (" --config c.yaml ...")
// after its leading "opctl"; a line that is not an opctl command is
// returned as it is.
func WithFlags(line, flags string) string {
	if flags == "" || !strings.HasPrefix(line, "opctl ") {
		return line
	}
	return "opctl" + flags + line[len("opctl"):]
}

// ShellQuote quotes s for a POSIX shell when it holds anything but safe
// characters, in single quotes (a ' as '\”), which keep everything else
// as written: spaces, $(...), backquotes, a newline. A value that starts
// with "-" is quoted too; only "--" before it keeps a command from taking
// it for a flag (IDArg).
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := s[0] != '-'
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/@%+=,", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
