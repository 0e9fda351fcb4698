package plans

// The DUPLICATE_EFFECT rule: reverse the newest duplicates of a local
// step, compensate a remote step's extra effects, or have them undone by
// hand (docs/repair.md "Which plan each verdict gets").

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// duplicates: one reverse / compensate_remote / manual per extra effect.
func (pl *planner) duplicates() error {
	any := false
	for k, v := range pl.r.Steps {
		if v.Status != inspect.StepDuplicated || (pl.from >= 0 && pl.from != k) {
			continue
		}
		s := pl.p.Steps[k]
		extra := v.EvidenceCount - 1
		switch {
		case s.Kind == config.KindLocal && len(s.Reverse) > 0 && pl.o.Action != Manual && len(reversible(v)) < extra && s.Binlog != nil:
			// A binlog step whose extra changes another operation may own,
			// or its own transaction ties: no reversal picks one
			// (docs/where.md#binlog-evidence).
			if !pl.allow(Manual) {
				pl.note("step %s: %d extra change(s), but no reversal can pick one: %s", s.Name, extra, sharedWhy(v))
				continue
			}
			pl.manualDuplicate(k, extra)
		case s.Kind == config.KindLocal && len(s.Reverse) > 0 && pl.o.Action != Manual:
			if !pl.allow(Reverse) {
				continue
			}
			if err := pl.reverseNewest(k, extra); err != nil {
				return err
			}
		case s.Kind == config.KindRemote && s.Compensate != "" && pl.o.Action != Manual:
			if !pl.allow(CompensateRemote) {
				continue
			}
			if err := pl.compensateNewest(k, extra); err != nil {
				return err
			}
		default:
			if !pl.allow(Manual) {
				pl.note("step %s: %d extra effect(s) are not in this plan (no %s configured)", s.Name, extra, map[bool]string{true: "reverse", false: "compensate"}[s.Kind != config.KindRemote])
				continue
			}
			pl.manualDuplicate(k, extra)
		}
		any = true
	}
	if !any {
		return refusedf(CodeNoSafePlan, "no duplicated step can be repaired with {action %s}", pl.o.Action)
	}
	return nil
}

// reversible returns the live evidence rows a reversal may pick, oldest
// identity first: every live row, except that of a binlog step's changes
// only those no other operation may own and no transaction ties to this
// one (attribution "message": docs/where.md#binlog-evidence) — the first
// change a transaction tied is the operation's own, never its duplicate.
func reversible(v inspect.StepView) []inspect.EvidenceRow {
	return slices.DeleteFunc(liveRows(v), func(e inspect.EvidenceRow) bool {
		if !e.IsBinlogChange() {
			return false
		}
		how, _ := e.Get("attribution")
		return how != sources.AttributedMessage
	})
}

// undoable returns the live rows a manual undo attests, newest first:
// those a reversal may pick, then (a binlog step's) the changes another
// operation may own in this one's place — interchangeable: the same row,
// the same delta — never a change its transaction ties to it.
func undoable(v inspect.StepView) []inspect.EvidenceRow {
	var out, shared []inspect.EvidenceRow
	rows := liveRows(v)
	for i := len(rows) - 1; i >= 0; i-- {
		e := rows[i]
		how, _ := e.Get("attribution")
		switch {
		case !e.IsBinlogChange() || how == sources.AttributedMessage:
			out = append(out, e)
		case how == sources.AttributedShared:
			shared = append(shared, e)
		}
	}
	return append(out, shared...)
}

// sharedWhy says why no change of a binlog step may be reversed.
func sharedWhy(v inspect.StepView) string {
	var with []string
	if v.Binlog != nil {
		for _, c := range v.Binlog.Competitors {
			with = append(with, c.BizID)
		}
	}
	if len(with) == 0 {
		return "its changes are tied to it by its transaction, or operations that were not found may own them; undo the extra one by hand (--action manual --attest)"
	}
	return "other operations (" + strings.Join(with, ", ") + ") may own its changes; undo the extra one by hand (--action manual --attest)"
}

// liveRows returns a step's live evidence rows, oldest identity first.
func liveRows(v inspect.StepView) []inspect.EvidenceRow {
	var out []inspect.EvidenceRow
	for _, e := range v.Evidence {
		if !e.Reversed {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return identityLess(inspect.IdentityString(out[i].Identity()), inspect.IdentityString(out[j].Identity()))
	})
	return out
}

// identityLess orders identities numerically when both are integers, else
// as strings whose runs of digits compare as numbers: a binlog change's
// "0-1-9#0" is older than "0-1-10#0", "bin.000002:120#0" than
// "bin.000002:1024#0" (docs/repair.md#binlog-evidence).
func identityLess(a, b string) bool {
	x, ea := strconv.ParseInt(a, 10, 64)
	y, eb := strconv.ParseInt(b, 10, 64)
	if ea == nil && eb == nil {
		return x < y
	}
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

// digitRun is the length of s's leading run of ASCII digits.
func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// ImageOf converts an evidence row to plain text (values as ValueText
// renders them).
func ImageOf(row sources.Row) Image {
	im := make(Image, len(row.Columns))
	for i, c := range row.Columns {
		im[i].Name = c
		if row.Values[i] != nil {
			s := text(ValueText(row.Values[i]))
			im[i].Value = &s
		}
	}
	return im
}

// ValueText renders a value the way plans and guards compare it: times by
// wall clock (microseconds), everything else as inspect shows identities.
func ValueText(v any) string {
	if t, ok := v.(time.Time); ok {
		return wall(t)
	}
	return inspect.IdentityString(v)
}

func (pl *planner) reverseNewest(k, n int) error {
	s := pl.p.Steps[k]
	rows := reversible(pl.r.Steps[k])
	if n <= 0 || len(rows) == 0 {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "step " + s.Name + " has no live evidence row to reverse"}
	}
	for i := 0; i < n && i < len(rows); i++ {
		row := rows[len(rows)-1-i]
		id := inspect.IdentityString(row.Identity())
		if err := checkReverseParams(s, row.Row); err != nil {
			return err
		}
		guards := append(pl.stateGuards(),
			Guard{Check: CheckEvidenceN, Step: s.Name, Op: "==", Value: strconv.Itoa(pl.live[s.Name])},
			Guard{Check: CheckEvidenceRow, Step: s.Name, Key: id, Op: "live"})
		pl.add(Action{Type: Reverse, Step: s.Name,
			Summary: fmt.Sprintf("reverse %s row %s (the newest of %d live rows)", s.Name, id, pl.live[s.Name]),
			Guards:  guards,
			Reverse: &ReverseSpec{Identity: id, Row: ImageOf(row.Row), Statements: slices.Clone(s.Reverse)}})
		pl.live[s.Name]--
	}
	return nil
}

// checkReverseParams refuses reverse statements naming a :param the evidence
// row does not have.
func checkReverseParams(s config.Step, row sources.Row) error {
	for _, st := range s.Reverse {
		_, names, err := config.NamedParams(st)
		if err != nil {
			return &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("step %s: reverse statement %q: %v", s.Name, st, err)}
		}
		for _, n := range names {
			if n == "biz_id" {
				continue
			}
			if _, ok := row.Get(n); !ok {
				return &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("step %s: reverse statement binds :%s, but the evidence query returns no such column (it returns %s)", s.Name, n, strings.Join(row.Columns, ", "))}
			}
		}
	}
	return nil
}

// effectIntents are a remote step's intents that count as effects, oldest
// first (by sent_at, then request id).
func effectIntents(v inspect.StepView) []inspect.IntentView {
	var out []inspect.IntentView
	for _, in := range v.Intents {
		if in.Outcome.Counts() {
			out = append(out, in)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.SentAt != nil && b.SentAt != nil && !a.SentAt.Equal(*b.SentAt) {
			return a.SentAt.Before(*b.SentAt)
		}
		return a.RequestID < b.RequestID
	})
	return out
}

func probeByRequest(s config.Step) bool {
	return s.Probe != "" && strings.Contains(s.Probe, "{request_id}")
}

func (pl *planner) compensateNewest(k, n int) error {
	s := pl.p.Steps[k]
	v := pl.r.Steps[k]
	byRequest := strings.Contains(s.Compensate, "{request_id}")
	if byRequest {
		ints := effectIntents(v)
		if len(ints) < n+1 {
			pl.note("step %s: %d effects but only %d known calls: compensating by request id is not possible; undo them by hand", s.Name, v.EvidenceCount, len(ints))
			if !pl.allow(Manual) {
				return &RefusedError{Code: CodeNoSafePlan, Detail: "step " + s.Name + ": cannot tell which calls to compensate"}
			}
			pl.manualDuplicate(k, n)
			return nil
		}
		for i := 0; i < n; i++ {
			in := ints[len(ints)-1-i]
			guards := pl.stateGuards()
			if in.AckedAt != nil {
				guards = append(guards, Guard{Check: CheckIntentAcked, Step: s.Name, Key: in.RequestID, Op: "==", Value: "true"})
			}
			if probeByRequest(s) {
				guards = append(guards, Guard{Check: CheckProbeOutcome, Step: s.Name, Key: in.RequestID, Op: "==", Value: sources.ProbeApplied})
			}
			url := sources.RedactURL(sources.Expand(s.Compensate, map[string]string{"request_id": in.RequestID, "biz_id": pl.r.BizID}, true))
			pl.add(Action{Type: CompensateRemote, Step: s.Name,
				Summary:    fmt.Sprintf("compensate %s call %s (the newest of %d effects) at the downstream", s.Name, in.RequestID, pl.live[s.Name]),
				Guards:     guards,
				Compensate: &CompensateSpec{URL: url, RequestID: in.RequestID},
				Attested:   map[string]string{in.RequestID: inspect.AttestCompensated}})
			pl.live[s.Name]--
		}
		return nil
	}
	for i := 0; i < n; i++ {
		guards := pl.stateGuards()
		spec := &CompensateSpec{URL: sources.RedactURL(sources.Expand(s.Compensate, map[string]string{"biz_id": pl.r.BizID}, true))}
		if v.Probe != nil && v.Probe.Count != nil {
			c := pl.live[s.Name]
			spec.ProbeCount = &c
			guards = append(guards, Guard{Check: CheckProbeCount, Step: s.Name, Op: "==", Value: strconv.Itoa(c)})
		}
		pl.add(Action{Type: CompensateRemote, Step: s.Name,
			Summary:    fmt.Sprintf("compensate one %s effect of %s at the downstream (%d → %d)", s.Name, pl.r.BizID, pl.live[s.Name], pl.live[s.Name]-1),
			Guards:     guards,
			Compensate: spec})
		pl.live[s.Name]--
	}
	return nil
}

// manualDuplicate asks the operator to undo n extra effects by hand and
// attests it: the newest extra calls (compensated) or rows (reversed) stop
// counting.
func (pl *planner) manualDuplicate(k, n int) {
	s := pl.p.Steps[k]
	v := pl.r.Steps[k]
	guards := append(pl.stateGuards(), pl.effectGuards(k)...)
	att := map[string]string{}
	var what []string
	if s.Kind == config.KindRemote {
		if v.Probe == nil || v.Probe.Count == nil {
			ints := effectIntents(v)
			for i := 0; i < n && i < len(ints); i++ {
				id := ints[len(ints)-1-i].RequestID
				att[id] = inspect.AttestCompensated
				what = append(what, id)
			}
		} else {
			// The downstream's journal counts the effects and names none:
			// the audit attests n of them undone, and the step's count is
			// the journal's less those (docs/verdicts.md#counting-a-steps-effects).
			for i := 1; i <= n; i++ {
				att[fmt.Sprintf("%s%d", inspect.AttestUndonePrefix, i)] = inspect.AttestCompensated
			}
		}
	} else {
		rows := undoable(v)
		for i := 0; i < n && i < len(rows); i++ {
			id := inspect.IdentityString(rows[i].Identity())
			att[id] = inspect.AttestReversed
			guards = append(guards, Guard{Check: CheckEvidenceRow, Step: s.Name, Key: id, Op: "live"})
			what = append(what, "row "+id)
		}
	}
	instr := fmt.Sprintf("undo %d extra effect(s) of step %s by hand", n, s.Name)
	if len(what) > 0 {
		instr += " (" + strings.Join(what, ", ") + ")"
	} else if s.Kind == config.KindRemote {
		instr += " at the downstream (its journal is the count opctl reads)"
	}
	if len(att) == 0 {
		att = nil
	}
	pl.add(Action{Type: Manual, Step: s.Name, Summary: instr, Guards: guards,
		Manual: &ManualSpec{Instructions: instr, Attest: pl.o.Attest}, Attested: att})
	pl.live[s.Name] -= n
}
