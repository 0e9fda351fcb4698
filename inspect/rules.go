package inspect

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// rule is one row of the verdict table: the code it reports, the severity of
// that code as a verdict, and the pure function that looks for it.
type rule struct {
	code Code
	// severity is the code's severity as a verdict; "" marks an
	// informational rule, whose findings never become the verdict.
	severity Severity
	see      func(*facts) []seen
	// final: when the rule sees something, no later rule runs.
	final bool
	// fallback: the rule runs only when no earlier rule gave the verdict.
	fallback bool
	// unlessOK: the rule's verdict stands unless the verdict of the rules
	// after it is ok; its findings are then dropped.
	unlessOK bool
}

// isVerdict reports whether the rule's findings can be the verdict.
func (ru rule) isVerdict() bool { return ru.severity != "" }

// seen is one thing a rule saw: the step it is about ("" for the whole
// operation) and the detail shown to the operator.
type seen struct{ step, detail string }

// table is every rule, highest precedence first (docs/verdicts.md). The
// verdict is the first verdict rule that sees something; the findings are
// listed in table order, a rule's own in step order. The informational
// rules sit next to the verdict they explain. The compiler lays the table
// out statically: nothing runs at init.
var table = [...]rule{
	// Nothing found: nothing else to say.
	{code: NotFound, severity: SeverityNone, see: seeNotFound, final: true},
	{code: UnknownStatus, see: seeUnknownStatus},
	{code: InFlight, severity: SeverityWatch, see: seeInFlight},
	// A repair that stopped part-way; moot when the rest of the evidence
	// says the operation is fine (the consumer finished it).
	{code: RepairIncomplete, severity: SeverityAction, see: seeRepairIncomplete, unlessOK: true},
	{code: DuplicateEffect, severity: SeverityAction, see: seeDuplicateEffect},
	{code: UnknownOutcome, severity: SeverityAction, see: seeUnknownOutcome},
	{code: EntityNotFound, see: seeEntityNotFound},
	{code: WronglySkipped, severity: SeverityAction, see: seeWronglySkipped},
	{code: MissingEffect, severity: SeverityAction, see: seeMissingEffect},
	{code: StateBehind, severity: SeverityAction, see: seeStateBehind},
	{code: Stranded, severity: SeverityAction, see: seeStranded},
	// A query that failed: no verdict below, each of which says nothing
	// worse was seen, may rest on what it would have shown.
	{code: ReadError, severity: SeverityAction, see: seeReadError},
	{code: WillRedeliver, severity: SeverityWatch, see: seeWillRedeliver},
	{code: Incomplete, severity: SeverityWatch, see: seeIncomplete},
	{code: CompleteUncommitted, severity: SeverityWatch, see: seeCompleteUncommitted},
	{code: Failed, severity: SeverityWatch, see: seeFailed},
	{code: SkippedOK, severity: SeverityOK, see: seeSkippedOK},
	// COMPLETE is said only when nothing else is wrong.
	{code: Complete, severity: SeverityOK, see: seeComplete, fallback: true},
	{code: Unverified, see: seeUnverified},
}

// judge runs rules in order on f and returns the verdict finding and every
// finding, in rule order.
func judge(rules []rule, f *facts) (verdict Finding, findings []Finding) {
	findings = []Finding{}
	decided := false
	// tentative is the verdict of an unlessOK rule until a later rule
	// decides.
	var tentative *Finding
	for _, ru := range rules {
		if ru.fallback && decided {
			continue
		}
		saw := ru.see(f)
		if len(saw) == 0 {
			continue
		}
		first := len(findings)
		for _, s := range saw {
			findings = append(findings, Finding{Code: ru.code, Step: s.step, Detail: s.detail})
		}
		switch {
		case !ru.isVerdict() || decided:
		case ru.unlessOK && tentative == nil:
			v := findings[first]
			tentative = &v
		default:
			verdict, decided = findings[first], true
		}
		if ru.final {
			break
		}
	}
	if tentative != nil {
		if decided && SeverityOf(verdict.Code) == SeverityOK {
			findings = slices.DeleteFunc(findings, func(x Finding) bool { return x.Code == tentative.Code })
		} else {
			verdict, decided = *tentative, true
		}
	}
	// Cannot happen with the table: a terminal operation is at least COMPLETE,
	// an unfinished one STRANDED, WILL_REDELIVER or INCOMPLETE.
	if !decided {
		verdict = Finding{Code: Incomplete, Detail: "no rule matched"}
	}
	return verdict, findings
}

// facts is what the rules look at: the views Diagnose built from the
// evidence, and the flags several rules share. Rules only read it.
type facts struct {
	pipeline *config.Pipeline
	state    StateView
	// unknownStatus: the state status is in no list of the config.
	unknownStatus bool
	// failed: the state status is in the failed list.
	failed bool
	// now is the database clock.
	now time.Time
	// steps has one view per pipeline step, in pipeline order.
	steps       []StepView
	idempotency []IdempotencyView
	// skipped is the newest SKIPPED idempotency record when the pipeline
	// names the entity a skip decision read, nil otherwise (skippedOf).
	skipped *IdempotencyView
	entity  *EntityView
	kafka   KafkaView
	// message is the Kafka record read back, nil when none was.
	message *sources.Message
	// audit is opctl's own audit of the operation.
	audit []sources.AuditAction
	// repair is the newest plan of the audit when it stopped part-way.
	repair *RepairView
	// terminal: the state row, or without one the idempotency records, say
	// the operation ended (docs/verdicts.md).
	terminal bool
	// unsettled: whether the operation ended is unknown: the query that
	// decides it (the state row's, or without a row the idempotency
	// records') failed. The rules that need to know see nothing.
	unsettled bool
	// anchored: the Kafka position is anchored by a state row, by a
	// message opctl republished, or, for an operation with neither a state
	// table nor an idempotency record, by its message's position.
	anchored bool
	// byCommit: terminal because the group committed past the message of
	// a consumer that commits after every step (no state table, no
	// record: endedByCommit).
	byCommit bool
	// failedQueries are the operation-level queries that failed (state,
	// idempotency, entity, audit); a step's is in its view's Error.
	failedQueries []sources.FailedQuery
	// mysql is the MySQL source status (sources.StatusOK or why not).
	mysql string
}

// newFacts gathers the facts the rules read from the evidence and the
// report's views of it.
func newFacts(ev sources.Evidence, r *Report, reached reachedInfo) facts {
	f := facts{
		pipeline: ev.Pipeline, state: r.State, unknownStatus: reached.unknownStatus, failed: reached.failed, now: ev.DB.Now,
		steps: r.Steps, idempotency: r.Idempotency, skipped: skippedOf(ev.Pipeline, r.Idempotency), entity: r.Entity, kafka: r.Kafka,
		message: ev.Kafka.Message, audit: ev.DB.Audit, repair: r.Repair,
		terminal:      isTerminal(reached, ev.DB.Idempotency),
		anchored:      r.State.Found || r.Kafka.Located == sources.LocatedRepublished,
		failedQueries: ev.DB.Failed, mysql: ev.Sources["mysql"],
	}
	if ev.Pipeline.State == nil && len(ev.DB.Idempotency) == 0 {
		// Neither a state table nor a record (seed 000's own schema): the
		// message's position anchors the Kafka verdicts, and the commit
		// says whether the operation ended (docs/verdicts.md#terminal).
		f.anchored = f.anchored || r.Kafka.Offset != nil
		f.terminal, f.byCommit = f.endedWithoutRow()
	}
	// Without a state row read, the idempotency records decide whether the
	// operation ended (isTerminal).
	stateUnread := ev.Pipeline.State != nil && f.unread(sources.QueryState)
	recordsDecide := !reached.row && ev.Pipeline.Idempotency != nil
	f.unsettled = stateUnread || (recordsDecide && f.unread(sources.QueryIdempotency))
	return f
}

// endedWithoutRow reports whether an operation of a pipeline without a
// state table, and with no idempotency record, ended
// (docs/verdicts.md#terminal), and whether the commit said so. No step may
// be seen absent (one that is: STRANDED once the group moved past it).
// Under commit: after_steps the commit is the consumer's own statement
// that every step ran, and nothing else is: the group must have committed
// past the message (until then a redelivery redoes the steps:
// WILL_REDELIVER). Under before_steps or auto a commit proves nothing, and
// the steps' effects decide.
func (f *facts) endedWithoutRow() (ended, byCommit bool) {
	for _, v := range f.steps {
		if v.Status == StepAbsent {
			return false, false
		}
	}
	if f.pipeline.EffectiveCommit() == config.CommitAfterSteps {
		past := f.kafka.CommittedPast()
		return past, past
	}
	return true, false
}

// redone lists the steps whose effect a redelivery of the message would
// make again: with no state row to resume from, a step that took effect
// (or may have: unverified) and that nothing stops from running twice;
// with a state row, a step it cannot record (no done_status) that took
// effect. Each entry reads "run debit again (...)".
func (f *facts) redone() []string {
	noRow := !f.state.Found
	return Redone(f.pipeline, f.steps, func(i int) bool { return noRow || f.steps[i].Reached == nil })
}

// Redone lists, in step order, the steps of p among those redo selects
// (by index) that took effect, or may have (unverified), and that nothing
// stops from running twice (not idempotent): what a redelivery, or a
// republish read as one, would make again. Each entry reads "run debit
// again (...)" (docs/verdicts.md#will_redeliver).
func Redone(p *config.Pipeline, steps []StepView, redo func(i int) bool) []string {
	var out []string
	gap := false // an earlier step is absent
	for i, v := range steps {
		if i >= len(p.Steps) {
			break
		}
		s := p.Steps[i]
		// An unverified step may have run only if every step before it
		// did: the consumer runs its steps in order.
		took := v.Status == StepApplied || v.Status == StepDuplicated || v.Status == StepAhead || (v.Status == StepUnverified && !gap)
		gap = gap || v.Status == StepAbsent
		if s.Idempotent || !took || !redo(i) {
			continue
		}
		switch {
		case s.Binlog != nil:
			out = append(out, fmt.Sprintf("run %s again (an UPDATE of %s: nothing records that it ran)", s.Name, s.Binlog.Table))
		case s.Kind == config.KindRemote && v.Status == StepUnverified:
			out = append(out, fmt.Sprintf("call %s again if it ran (not idempotent)", s.Name))
		case s.Kind == config.KindRemote:
			out = append(out, fmt.Sprintf("call %s again (not idempotent)", s.Name))
		default:
			out = append(out, fmt.Sprintf("write %s again unless a unique key stops it (not marked idempotent)", s.Name))
		}
	}
	return out
}

// unread reports whether the operation-level query q failed.
func (f *facts) unread(q string) bool {
	return slices.ContainsFunc(f.failedQueries, func(x sources.FailedQuery) bool { return x.Is(q) })
}

// ended and unfinished report that the operation is known to have ended,
// and known not to have.
func (f *facts) ended() bool      { return f.terminal && !f.unsettled }
func (f *facts) unfinished() bool { return !f.terminal && !f.unsettled }

// one is a rule's single sighting.
func one(step, detail string) []seen { return []seen{{step: step, detail: detail}} }

// perStep collects, in step order, the detail look returns for each step;
// "" means look saw nothing on that step.
func perStep(f *facts, look func(i int, s config.Step, v StepView) string) []seen {
	var out []seen
	for i, v := range f.steps {
		if d := look(i, f.pipeline.Steps[i], v); d != "" {
			out = append(out, seen{step: v.Name, detail: d})
		}
	}
	return out
}

// seeNotFound: nothing at all was found for the id.
func seeNotFound(f *facts) []seen {
	if f.found() {
		return nil
	}
	return one("", "no state row, evidence, intent, idempotency record or message for this id")
}

// found reports whether anything at all was found for the id. A query that
// could have shown the operation and failed counts (a step's, the state's,
// the idempotency's, the audit's; not the entity's, which reads the
// business object): opctl does not claim NOT_FOUND on a read error.
func (f *facts) found() bool {
	if f.state.Found || len(f.idempotency) > 0 || f.message != nil {
		return true
	}
	if slices.ContainsFunc(f.failedQueries, func(x sources.FailedQuery) bool { return x.Query != sources.QueryEntity }) {
		return true
	}
	for _, s := range f.steps {
		if len(s.Evidence) > 0 || len(s.Intents) > 0 || s.Error != "" || (s.Probe != nil && s.Probe.Count != nil && *s.Probe.Count > 0) {
			return true
		}
	}
	return slices.ContainsFunc(f.audit, func(a sources.AuditAction) bool { return a.Outcome != "" })
}

// seeUnknownStatus: the state status is in no list of the config.
func seeUnknownStatus(f *facts) []seen {
	if !f.state.Found || !f.unknownStatus {
		return nil
	}
	return one("", fmt.Sprintf("state status %q is in no list of the config (initial, a step's done_status, terminal, failed)", f.state.Status))
}

// seeInFlight: a live owner holds the lease by the database clock.
func seeInFlight(f *facts) []seen {
	st := f.state
	if !st.Found || !st.LeaseActive || st.LeaseUntil == nil {
		return nil
	}
	return one("", fmt.Sprintf("owner %q holds the lease until %s (database clock; %s from now)",
		st.Owner, fmtTime(*st.LeaseUntil), st.LeaseUntil.Sub(f.now).Round(time.Second)))
}

// seeRepairIncomplete: opctl's newest plan of the operation stopped
// part-way.
func seeRepairIncomplete(f *facts) []seen {
	if f.repair == nil {
		return nil
	}
	return one("", f.repair.detail())
}

// seeReadError: a query whose answer the verdict needs failed: the state,
// idempotency or audit query, the entity query when there is a skip to
// judge, a step's evidence or intent query (in step order); or MySQL says
// the read failed without naming a query.
func seeReadError(f *facts) []seen {
	var out []seen
	for _, q := range f.failedQueries {
		if q.Query == sources.QueryEntity && f.skipped == nil {
			continue // the entity only judges a skip
		}
		out = append(out, seen{detail: q.String()})
	}
	out = append(out, perStep(f, func(_ int, _ config.Step, v StepView) string { return v.Error })...)
	if len(out) == 0 && len(f.failedQueries) == 0 && f.mysql != "" && f.mysql != sources.StatusOK && f.mysql != sources.StatusSkipped {
		return one("", "mysql: "+f.mysql)
	}
	return out
}

// seeDuplicateEffect: a step's effect exists more than once.
func seeDuplicateEffect(f *facts) []seen {
	return perStep(f, func(_ int, s config.Step, v StepView) string {
		if v.Status != StepDuplicated {
			return ""
		}
		return effectDetail(s, v)
	})
}

// seeUnknownOutcome: nothing says whether a step took effect, or how many
// times: a binlog step whose count depends on which changes other
// operations own (a step whose query failed is a READ_ERROR instead).
func seeUnknownOutcome(f *facts) []seen {
	return perStep(f, func(_ int, s config.Step, v StepView) string {
		switch {
		case v.Status == StepAmbiguous:
			return ambiguousDetail(f.pipeline, s, v)
		case v.Status != StepUnknown || v.Error != "":
			return ""
		}
		return unknownDetail(s, v)
	})
}

// ambiguousDetail says which changes other operations may own, and what
// settles it (docs/where.md#binlog-evidence).
func ambiguousDetail(p *config.Pipeline, s config.Step, v StepView) string {
	b := v.Binlog
	var who []string
	for _, c := range b.Competitors {
		var w string
		if c.Found == sources.AttributedMessage {
			w = c.BizID + " (its message names the row"
		} else {
			w = c.BizID + " (its transaction tied a change"
		}
		if c.Processed != "" {
			w += "; it ran: " + c.Processed
		}
		who = append(who, w+")")
	}
	var ids []string
	unknown := false
	for _, sc := range b.Shared {
		ids = append(ids, sc.ID)
		unknown = unknown || sc.Unknown
	}
	if unknown {
		who = append(who, "operations that were not found")
	}
	return fmt.Sprintf("%d to %d of the changes of %s %s by %s in the binlog are this operation's: %s may own %s, and the binlog cannot tell whose: find out, undo any extra change by hand, and attest the outcome",
		b.CountMin, b.CountMax, s.Binlog.Table, b.Key, b.Delta, strings.Join(who, ", "), strings.Join(ids, ", "))
}

// seeEntityNotFound: a skip was recorded but the entity it read is missing,
// so opctl cannot judge the skip.
func seeEntityNotFound(f *facts) []seen {
	rec := f.skipped
	if rec == nil || f.entityFound() || f.unread(sources.QueryEntity) {
		return nil // an entity query that failed is a READ_ERROR
	}
	return one(f.pipeline.Entity.EffectStep, fmt.Sprintf("record %s is SKIPPED but the entity was not found; opctl cannot tell whether the skip was right", rec.Key))
}

// seeWronglySkipped: a skip was recorded, the entity does not cancel the
// effect, and the effect step has none.
func seeWronglySkipped(f *facts) []seen {
	rec := f.skipped
	if rec == nil || !f.entityFound() || f.entityCancels() {
		return nil
	}
	e := f.pipeline.Entity
	i := f.pipeline.StepIndex(e.EffectStep)
	if i < 0 || i >= len(f.steps) || f.steps[i].Status != StepAbsent {
		return nil
	}
	return one(e.EffectStep, fmt.Sprintf("record %s is SKIPPED, the entity is %s (not cancelling) and step %s has no effect", rec.Key, f.entity.Status, e.EffectStep))
}

// seeSkippedOK: a skip was recorded and the entity cancels the effect.
func seeSkippedOK(f *facts) []seen {
	rec := f.skipped
	if rec == nil || !f.entityCancels() {
		return nil
	}
	return one(f.pipeline.Entity.EffectStep, fmt.Sprintf("record %s is SKIPPED and the entity is %s (cancels the effect)", rec.Key, f.entity.Status))
}

// skippedOf returns the newest SKIPPED idempotency record of rows when the
// pipeline names the entity a skip decision read, nil otherwise.
func skippedOf(p *config.Pipeline, rows []IdempotencyView) *IdempotencyView {
	if p.Entity == nil {
		return nil
	}
	return skippedRecord(rows)
}

// entityFound reports whether the entity row was read and found.
func (f *facts) entityFound() bool { return f.entity != nil && f.entity.Found }

// entityCancels reports whether the entity was found in a status that
// cancels the effect. Call it only when skipped is a record.
func (f *facts) entityCancels() bool {
	return f.entityFound() && slices.Contains(f.pipeline.Entity.Cancels, f.entity.Status)
}

// seeMissingEffect: the state claims a step done that left no effect.
func seeMissingEffect(f *facts) []seen {
	st := f.state
	if !st.Found || st.Reached < 0 {
		return nil
	}
	return perStep(f, func(i int, s config.Step, v StepView) string {
		if i >= st.Reached || v.Status != StepAbsent {
			return ""
		}
		return fmt.Sprintf("state %s claims step %s done, but it left no %s", st.Status, v.Name, effectNoun(s))
	})
}

// seeStateBehind: a step of an unfinished operation took effect that the
// state row does not claim (or there is no state row at all; a state query
// that failed leaves it unsettled instead).
func seeStateBehind(f *facts) []seen {
	if !f.unfinished() {
		return nil
	}
	noRow := f.pipeline.State != nil && !f.state.Found
	return perStep(f, func(_ int, s config.Step, v StepView) string {
		switch {
		case v.Status == StepAhead:
			return fmt.Sprintf("step %s took effect but the state is %s: a resume from the state row would do it again", v.Name, f.state.Status)
		case noRow && (v.Status == StepApplied || v.Status == StepDuplicated):
			return fmt.Sprintf("step %s took effect (%s) but there is no state row: a redelivery would start from scratch", v.Name, effectDetail(s, v))
		}
		return ""
	})
}

// seeStranded: unfinished, anchored, and Kafka will not redeliver.
func seeStranded(f *facts) []seen {
	if !f.unfinished() || !f.anchored || f.kafka.Redelivery != RedeliveryNo {
		return nil
	}
	return one("", strandedDetail(f.kafka))
}

// seeWillRedeliver: unfinished, anchored, and Kafka will redeliver.
func seeWillRedeliver(f *facts) []seen {
	k := f.kafka
	if !f.unfinished() || !f.anchored || k.Redelivery != RedeliveryYes {
		return nil
	}
	d := fmt.Sprintf("committed offset %s ≤ message offset %s and the message is retained", fmtPtr(k.Committed), fmtPtr(k.Offset))
	if redo := f.redone(); len(redo) > 0 {
		d += "; the redelivery will " + strings.Join(redo, ", ")
	}
	return one("", d)
}

// seeIncomplete: unfinished, and whether Kafka will redeliver is unknown or
// not anchored.
func seeIncomplete(f *facts) []seen {
	known := f.kafka.Redelivery == RedeliveryYes || f.kafka.Redelivery == RedeliveryNo
	if !f.unfinished() || (f.anchored && known) {
		return nil
	}
	return one("", incompleteDetail(f.anchored, f.kafka))
}

// seeCompleteUncommitted: the state row is terminal but Kafka will
// redeliver.
func seeCompleteUncommitted(f *facts) []seen {
	k := f.kafka
	if !f.ended() || !(f.state.Found || f.anchored) || k.Redelivery != RedeliveryYes {
		return nil
	}
	what := "every step took effect"
	if f.state.Found {
		what = "terminal (" + f.state.Status + ")"
	}
	d := fmt.Sprintf("%s but committed offset %s ≤ message offset %s: it will be read again", what, fmtPtr(k.Committed), fmtPtr(k.Offset))
	if redo := f.redone(); len(redo) > 0 {
		d += "; the redelivery will " + strings.Join(redo, ", ")
	}
	return one("", d)
}

// seeFailed: the state status is a failed status.
func seeFailed(f *facts) []seen {
	if !f.state.Found || !f.failed {
		return nil
	}
	return one("", fmt.Sprintf("state %s is a failed status", f.state.Status))
}

// seeComplete: the operation is terminal.
func seeComplete(f *facts) []seen {
	if !f.ended() {
		return nil
	}
	return one("", completeDetail(f))
}

func effectNoun(s config.Step) string {
	if s.Kind == config.KindRemote {
		return "acked or confirmed call"
	}
	return "evidence row"
}

func effectDetail(s config.Step, v StepView) string {
	if v.Probe != nil && v.Probe.Count != nil {
		return fmt.Sprintf("the downstream reports %d effects", *v.Probe.Count)
	}
	if s.Kind == config.KindRemote {
		return fmt.Sprintf("%d acked or confirmed calls", v.EvidenceCount)
	}
	if s.Binlog != nil {
		return fmt.Sprintf("%d changes of %s in the binlog", v.EvidenceCount, s.Binlog.Table)
	}
	return fmt.Sprintf("%d evidence rows", v.EvidenceCount)
}

func unknownDetail(s config.Step, v StepView) string {
	var unknown []string
	for _, in := range v.Intents {
		if in.Outcome == IntentUnknown {
			d := in.RequestID
			if in.Probe != "" {
				d += " (probe " + in.Probe + ")"
			} else if s.Probe == "" {
				d += " (no probe configured)"
			}
			unknown = append(unknown, d)
		}
	}
	if len(unknown) == 0 && v.Probe != nil {
		return fmt.Sprintf("no intent recorded and the probe was inconclusive: %s", v.Probe.Detail)
	}
	msg := fmt.Sprintf("sent, no ack and no conclusive probe: %s", strings.Join(unknown, ", "))
	if v.EvidenceCount > 0 {
		msg += fmt.Sprintf("; %d other call(s) took effect, so this one may be a duplicate", v.EvidenceCount)
	}
	return msg
}

func strandedDetail(k KafkaView) string {
	// The numbers decide, as they decided the redelivery
	// (docs/verdicts.md#redelivery-yes-no-unknown): STRANDED needs a
	// redelivery answer, so the group's log start is known.
	if k.Offset != nil && k.LogStart != nil && *k.Offset < *k.LogStart {
		return fmt.Sprintf("message offset %s is below log start %s: deleted by retention, never redelivered", fmtPtr(k.Offset), fmtPtr(k.LogStart))
	}
	if k.Committed == nil {
		return "the group has no committed offset and offset_reset is latest: the message will not be read again"
	}
	return fmt.Sprintf("committed offset %s > message offset %s: the group has moved past it", fmtPtr(k.Committed), fmtPtr(k.Offset))
}

func incompleteDetail(anchored bool, k KafkaView) string {
	if !anchored {
		if k.Detail != "" {
			return "not terminal, and its message could not be placed in Kafka: " + k.Detail
		}
		return "not terminal, and its message could not be placed in Kafka"
	}
	if k.Detail != "" {
		return "not terminal, and whether Kafka will redeliver is unknown: " + k.Detail
	}
	return "not terminal, and whether Kafka will redeliver is unknown"
}

func completeDetail(f *facts) string {
	var unverified []string
	for _, v := range f.steps {
		if v.Status == StepUnverified {
			unverified = append(unverified, v.Name)
		}
	}
	note := ""
	if len(unverified) > 0 {
		note = "; not verified (no intent, no probe): " + strings.Join(unverified, ", ")
	}
	if f.state.Found {
		return fmt.Sprintf("state %s, every step applied once, redelivery %s", f.state.Status, f.kafka.Redelivery) + note
	}
	if f.byCommit {
		return fmt.Sprintf("no state row; the group committed past the message (committed offset %s > offset %s) and the consumer commits after every step; every step read applied once",
			fmtPtr(f.kafka.Committed), fmtPtr(f.kafka.Offset)) + note
	}
	acts := make([]string, 0, len(f.idempotency))
	for _, x := range f.idempotency {
		acts = append(acts, x.Key+" "+x.Action)
	}
	return "no state row; idempotency records: " + strings.Join(acts, ", ") + note
}

// seeUnverified: remote steps with neither intent nor probe; the report
// says so (docs/verdicts.md#unverified-steps).
func seeUnverified(f *facts) []seen {
	return perStep(f, func(_ int, _ config.Step, v StepView) string {
		if v.Status != StepUnverified {
			return ""
		}
		return v.Note
	})
}
