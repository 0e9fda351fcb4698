package inspect

import (
	"strings"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// NextCommands returns the exact commands an operator should run next for a
// report, ready to paste into a POSIX shell (the id is quoted).
func NextCommands(r *Report, p *config.Pipeline) []string {
	id := ShellQuote(r.BizID)
	pl := " --pipeline " + ShellQuote(r.Pipeline)
	explain := "opctl explain " + string(r.Verdict.Code)
	reason := ` --reason "$REASON"`
	plan := "opctl repair plan " + id + pl
	switch r.Verdict.Code {
	case NotFound:
		return []string{"opctl where " + id + "   # without --pipeline: try every configured pipeline"}
	case InFlight:
		return []string{"opctl where " + id + pl + "   # again after lease_until; repair is refused while the lease is live", explain}
	case UnknownOutcome:
		out := []string{}
		for _, f := range r.Findings {
			if f.Code != UnknownOutcome {
				continue
			}
			if i := p.StepIndex(f.Step); i >= 0 && p.Steps[i].Probe != "" {
				for _, in := range r.Steps[i].Intents {
					if in.Outcome == IntentUnknown {
						out = append(out, "curl -s "+ShellQuote(sources.Expand(p.Steps[i].Probe, map[string]string{"request_id": in.RequestID, "biz_id": r.BizID}, true))+"   # probe the downstream")
					}
				}
				if len(r.Steps[i].Intents) == 0 {
					out = append(out, "curl -s "+ShellQuote(sources.Expand(p.Steps[i].Probe, map[string]string{"biz_id": r.BizID}, true))+"   # probe the downstream")
				}
			}
		}
		// No answer says whether the call took effect: a plan needs what the
		// downstream's team says, attested (docs/repair.md).
		attest := plan + " --action manual" + stepFlag(r) + ` --attest "$ATTEST"` + reason
		return append(out,
			attest+" --outcome applied --out plan.json   # the downstream says the call took effect",
			attest+" --outcome absent --out plan.json   # the downstream says it never did",
			"opctl repair apply plan.json --dry-run", explain)
	case DuplicateEffect, WronglySkipped, MissingEffect, StateBehind, Stranded:
		return []string{plan + reason + " --out plan.json", "opctl repair apply plan.json --dry-run", explain}
	case WillRedeliver, CompleteUncommitted, Incomplete:
		return []string{"opctl where " + id + pl + "   # again once the consumer has caught up", explain}
	case Failed:
		return []string{explain}
	}
	return []string{}
}

// stepFlag names the first step whose outcome is unknown (--from-step),
// the one an attestation is about.
func stepFlag(r *Report) string {
	for _, f := range r.Findings {
		if f.Code == UnknownOutcome && f.Step != "" {
			return " --from-step " + ShellQuote(f.Step)
		}
	}
	return ""
}

// ShellQuote quotes s for a POSIX shell when it holds anything but safe
// characters.
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
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
