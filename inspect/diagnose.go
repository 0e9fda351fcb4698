package inspect

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Idempotency actions with a meaning for opctl.
const (
	ActionDone    = "DONE"
	ActionSkipped = "SKIPPED"
	ActionPending = "PENDING"
)

// Diagnose computes the report for one operation from what was read. It does
// no I/O. ev.Pipeline must be set; ev.DB, ev.Kafka and ev.Sources are used as
// they are: a source that failed is reported in ev.Sources and makes the
// report partial.
func Diagnose(ev sources.Evidence) Report {
	p := ev.Pipeline
	r := Report{
		BizID:       ev.BizID,
		Pipeline:    p.Name,
		Findings:    []Finding{},
		Steps:       []StepView{},
		Idempotency: []IdempotencyView{},
		Timeline:    []Event{},
		Sources:     map[string]string{},
	}
	for k, v := range ev.Sources {
		r.Sources[k] = v
		if v != sources.StatusOK && v != sources.StatusSkipped {
			r.Partial = true
		}
	}
	if !ev.DB.Now.IsZero() {
		now := ev.DB.Now
		r.DBNow = &now
	}

	reached := stateReached(p, ev.DB.State)
	r.State = stateView(ev.DB, reached)
	if ev.DB.State.Found && reached.unknownStatus {
		r.add(UnknownStatus, "", fmt.Sprintf("state status %q is in no list of the config (initial, a step's done_status, terminal, failed)", ev.DB.State.Status))
	}

	att := AuditAttestations(ev.DB.Audit)
	for i, s := range p.Steps {
		var se sources.StepEvidence
		if i < len(ev.DB.Steps) {
			se = ev.DB.Steps[i]
		}
		r.Steps = append(r.Steps, stepView(i, s, se, reached, att))
	}
	for _, row := range ev.DB.Idempotency {
		r.Idempotency = append(r.Idempotency, IdempotencyView{Key: row.Key, Action: row.Action, CreatedAt: row.CreatedAt})
	}
	if ev.DB.Entity != nil {
		r.Entity = &EntityView{Found: ev.DB.Entity.Found, Status: ev.DB.Entity.Status}
	}
	r.Kafka = kafkaView(p, ev)

	if !exists(ev, r) {
		r.add(NotFound, "", "no state row, evidence, intent, idempotency record or message for this id")
		// Without a row there is no timestamp to search the message from, so
		// an unreachable Kafka cannot hide it: only MySQL decides NOT_FOUND.
		r.Partial = ev.Sources["mysql"] != sources.StatusOK
		r.finish(ev)
		return r
	}

	// Rules, in the order of the verdict precedence; every one that holds is
	// a finding, the first one is the verdict.
	st := ev.DB.State
	if st.Found && r.State.LeaseActive {
		r.add(InFlight, "", fmt.Sprintf("owner %q holds the lease until %s (database clock; %s from now)",
			st.Owner, fmtTime(*st.LeaseUntil), st.LeaseUntil.Sub(ev.DB.Now).Round(time.Second)))
	}
	for i, sv := range r.Steps {
		if sv.Error != "" {
			r.add(ReadError, sv.Name, sv.Error)
			r.Partial = true
		}
		if sv.Status == StepDuplicated {
			r.add(DuplicateEffect, sv.Name, effectDetail(p.Steps[i], sv))
		}
	}
	for i, sv := range r.Steps {
		if sv.Status == StepUnknown && sv.Error == "" {
			r.add(UnknownOutcome, sv.Name, unknownDetail(p.Steps[i], sv))
		}
	}
	skipped := skippedRecord(ev.DB.Idempotency)
	if skipped != nil && p.Entity != nil {
		effect := p.StepIndex(p.Entity.EffectStep)
		switch {
		case ev.DB.Entity == nil || !ev.DB.Entity.Found:
			r.add(EntityNotFound, p.Entity.EffectStep, fmt.Sprintf("record %s is SKIPPED but the entity was not found; opctl cannot tell whether the skip was right", skipped.Key))
		case slices.Contains(p.Entity.Cancels, ev.DB.Entity.Status):
			r.add(SkippedOK, p.Entity.EffectStep, fmt.Sprintf("record %s is SKIPPED and the entity is %s (cancels the effect)", skipped.Key, ev.DB.Entity.Status))
		case effect >= 0 && r.Steps[effect].Status == StepAbsent:
			r.add(WronglySkipped, p.Entity.EffectStep, fmt.Sprintf("record %s is SKIPPED, the entity is %s (not cancelling) and step %s has no effect", skipped.Key, ev.DB.Entity.Status, p.Entity.EffectStep))
		}
	}
	if st.Found && reached.n >= 0 {
		for i, sv := range r.Steps {
			if i < reached.n && sv.Status == StepAbsent {
				r.add(MissingEffect, sv.Name, fmt.Sprintf("state %s claims step %s done, but it left no %s", st.Status, sv.Name, effectNoun(p.Steps[i])))
			}
		}
	}
	terminal := isTerminal(p, ev.DB)
	for i, sv := range r.Steps {
		if sv.Status == StepAhead && !terminal {
			r.add(StateBehind, sv.Name, fmt.Sprintf("step %s took effect but the state is %s: a resume from the state row would do it again", sv.Name, st.Status))
		} else if p.State != nil && !st.Found && (sv.Status == StepApplied || sv.Status == StepDuplicated) && !terminal {
			r.add(StateBehind, sv.Name, fmt.Sprintf("step %s took effect (%s) but there is no state row: a redelivery would start from scratch", sv.Name, effectDetail(p.Steps[i], sv)))
		}
	}

	anchored := st.Found || r.Kafka.Located == sources.LocatedRepublished
	switch {
	case !terminal && anchored && r.Kafka.Redelivery == RedeliveryNo:
		r.add(Stranded, "", strandedDetail(r.Kafka))
	case !terminal && anchored && r.Kafka.Redelivery == RedeliveryYes:
		r.add(WillRedeliver, "", fmt.Sprintf("committed offset %s ≤ message offset %s and the message is retained", fmtPtr(r.Kafka.Committed), fmtPtr(r.Kafka.Offset)))
	case !terminal:
		r.add(Incomplete, "", incompleteDetail(anchored, r.Kafka))
	case st.Found && r.Kafka.Redelivery == RedeliveryYes:
		r.add(CompleteUncommitted, "", fmt.Sprintf("terminal (%s) but committed offset %s ≤ message offset %s: it will be read again", st.Status, fmtPtr(r.Kafka.Committed), fmtPtr(r.Kafka.Offset)))
	}
	if st.Found && slices.Contains(stateFailed(p), st.Status) {
		r.add(Failed, "", fmt.Sprintf("state %s is a failed status", st.Status))
	}
	if terminal {
		r.add(Complete, "", completeDetail(st, &r))
	}
	r.finish(ev)
	return r
}

func (r *Report) add(code Code, step, detail string) {
	r.Findings = append(r.Findings, Finding{Code: code, Step: step, Detail: detail})
}

// finish picks the verdict, sorts the timeline and writes the next commands.
func (r *Report) finish(ev sources.Evidence) {
	best := -1
	var f Finding
	for _, x := range r.Findings {
		if k := rank(x.Code); k >= 0 && (best < 0 || k < best) {
			best, f = k, x
		}
	}
	if best < 0 { // cannot happen: every path adds a verdict finding
		f = Finding{Code: Incomplete, Detail: "no rule matched"}
	}
	// Complete is only the verdict when nothing else is wrong; the finding
	// list keeps only verdict-relevant facts, so drop a Complete that lost.
	if f.Code != Complete {
		out := r.Findings[:0]
		for _, x := range r.Findings {
			if x.Code != Complete {
				out = append(out, x)
			}
		}
		r.Findings = out
	}
	r.Verdict = Verdict{Code: f.Code, Severity: SeverityOf(f.Code), Summary: summary(f, r)}
	r.Verdict.Next = NextCommands(r, ev.Pipeline)
	r.Timeline = timeline(ev, r)
}

// reachedInfo is what the state status claims.
type reachedInfo struct {
	// n is the number of steps the status claims done; -1: no claim.
	n             int
	unknownStatus bool
}

func stateFailed(p *config.Pipeline) []string {
	if p.State == nil {
		return nil
	}
	return p.State.Failed
}

// stateReached maps the state status to the number of steps it claims done.
func stateReached(p *config.Pipeline, st sources.StateRow) reachedInfo {
	if p.State == nil || !st.Found {
		return reachedInfo{n: -1}
	}
	if slices.Contains(p.State.Terminal, st.Status) {
		return reachedInfo{n: len(p.Steps)}
	}
	if slices.Contains(p.State.Initial, st.Status) {
		return reachedInfo{n: 0}
	}
	for i, s := range p.Steps {
		if s.DoneStatus != "" && s.DoneStatus == st.Status {
			return reachedInfo{n: i + 1}
		}
	}
	if slices.Contains(p.State.Failed, st.Status) {
		return reachedInfo{n: -1}
	}
	return reachedInfo{n: -1, unknownStatus: true}
}

func stateView(db sources.DBEvidence, reached reachedInfo) StateView {
	st := db.State
	v := StateView{Found: st.Found, Reached: reached.n}
	if !st.Found {
		return v
	}
	v.Status, v.Version, v.Owner, v.LeaseUntil = st.Status, st.Version, st.Owner, st.LeaseUntil
	v.MsgID, v.CreatedAt, v.UpdatedAt = st.MsgID, st.CreatedAt, st.UpdatedAt
	v.LeaseActive = st.Owner != "" && st.LeaseUntil != nil && !db.Now.IsZero() && st.LeaseUntil.After(db.Now)
	return v
}

// isTerminal implements SPEC §6: terminal by the state row (terminal or failed
// list), or with no state row by idempotency records that are all DONE or
// SKIPPED.
func isTerminal(p *config.Pipeline, db sources.DBEvidence) bool {
	if db.State.Found && p.State != nil {
		return slices.Contains(p.State.Terminal, db.State.Status) || slices.Contains(p.State.Failed, db.State.Status)
	}
	if len(db.Idempotency) == 0 {
		return false
	}
	for _, r := range db.Idempotency {
		if r.Action != ActionDone && r.Action != ActionSkipped {
			return false
		}
	}
	return true
}

// skippedRecord returns the newest SKIPPED idempotency record, or nil.
func skippedRecord(rows []sources.IdempotencyRow) *sources.IdempotencyRow {
	var out *sources.IdempotencyRow
	for i := range rows {
		if rows[i].Action == ActionSkipped {
			out = &rows[i]
		}
	}
	return out
}

// IdentityString renders an evidence row identity for comparisons and plans.
func IdentityString(v sources.Value) string {
	switch x := v.(type) {
	case nil:
		return ""
	case []byte:
		return string(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

func truthy(v sources.Value) bool {
	switch x := v.(type) {
	case int64:
		return x != 0
	case bool:
		return x
	case string:
		return x == "1" || strings.EqualFold(x, "true") || strings.EqualFold(x, "yes")
	case []byte:
		return truthy(string(x))
	}
	return false
}

// stepView computes one step's status (SPEC §6 "Counting a step's effects").
func stepView(i int, s config.Step, se sources.StepEvidence, reached reachedInfo, att Attestations) StepView {
	v := StepView{Index: i + 1, Name: s.Name, Kind: s.Kind, Evidence: []EvidenceRow{}, Error: se.Err}
	if reached.n >= 0 {
		b := i < reached.n
		v.Reached = &b
	}
	count, unknown := 0, 0
	for _, row := range se.Rows {
		er := EvidenceRow{Row: row}
		if att.is(s.Name, IdentityString(row.Identity()), AttestReversed) {
			er.Reversed = true
		} else if rv, ok := row.Get("reversed"); ok && truthy(rv) {
			er.Reversed = true
		}
		if !er.Reversed {
			count++
		}
		v.Evidence = append(v.Evidence, er)
	}
	for _, in := range se.Intents {
		iv := IntentView{RequestID: in.RequestID, SentAt: in.SentAt, AckedAt: in.AckedAt, Result: in.Result}
		attested := false
		switch {
		case att.is(s.Name, in.RequestID, AttestCompensated):
			iv.Outcome, attested = AttestCompensated, true
		case in.AckedAt != nil:
			iv.Outcome = "acked"
			count++
		case in.Probe != nil && in.Probe.Outcome == sources.ProbeApplied:
			iv.Outcome = "applied"
			count++
		case in.Probe != nil && in.Probe.Outcome == sources.ProbeAbsent:
			iv.Outcome = "absent"
		case att.is(s.Name, in.RequestID, AttestApplied):
			iv.Outcome, attested = "applied", true
			count++
		case att.is(s.Name, in.RequestID, AttestAbsent):
			iv.Outcome, attested = "absent", true
		default:
			iv.Outcome = "unknown"
			unknown++
		}
		if in.Probe != nil {
			iv.Probe = probeText(*in.Probe)
		}
		if attested {
			iv.Probe = joinNote(iv.Probe, att.note(s.Name, in.RequestID))
		}
		v.Intents = append(v.Intents, iv)
	}
	if bp := se.BizProbe; bp != nil {
		v.Probe = &ProbeView{URL: bp.URL, Outcome: bp.Outcome, Count: bp.Count, Detail: bp.Detail}
		switch {
		case bp.Count != nil:
			// The downstream's own journal is the effect count (SPEC §6).
			count = *bp.Count
			unknown = 0
		case bp.Outcome == sources.ProbeApplied:
			if count == 0 {
				count = 1
			}
		case bp.Outcome == sources.ProbeInconclusive && count == 0 && len(se.Intents) == 0:
			switch {
			case att.is(s.Name, AttestAll, AttestApplied):
				count = 1
				v.Probe.Detail = joinNote(v.Probe.Detail, att.note(s.Name, AttestAll))
			case att.is(s.Name, AttestAll, AttestAbsent):
				v.Probe.Detail = joinNote(v.Probe.Detail, att.note(s.Name, AttestAll))
			default:
				unknown++
			}
		}
	}
	v.EvidenceCount = count
	dupOK := s.Kind == config.KindRemote && s.Idempotent
	switch {
	case se.Err != "":
		v.Status = StepUnknown
	case count >= 2 && !dupOK:
		v.Status = StepDuplicated
	case unknown > 0 && !dupOK:
		// An unacked intent next to an acked one may be a second effect.
		v.Status = StepUnknown
	case count >= 1 && v.Reached != nil && !*v.Reached:
		v.Status = StepAhead
	case count >= 1:
		v.Status = StepApplied
	default:
		v.Status = StepAbsent
	}
	return v
}

func probeText(p sources.ProbeResult) string {
	switch {
	case p.Count != nil:
		return fmt.Sprintf("%s (count %d)", p.Outcome, *p.Count)
	case p.Detail != "":
		return fmt.Sprintf("%s: %s", p.Outcome, p.Detail)
	case p.Status != "":
		return fmt.Sprintf("%s (%s)", p.Outcome, p.Status)
	}
	return p.Outcome
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
	return fmt.Sprintf("%d evidence rows", v.EvidenceCount)
}

func unknownDetail(s config.Step, v StepView) string {
	var unknown []string
	for _, in := range v.Intents {
		if in.Outcome == "unknown" {
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
	if strings.Contains(k.Detail, "below log start") || (k.Offset != nil && k.LogStart != nil && *k.Offset < *k.LogStart) {
		return fmt.Sprintf("message offset %s is below log start %s: deleted by retention, never redelivered", fmtPtr(k.Offset), fmtPtr(k.LogStart))
	}
	if k.Committed == nil {
		return "the group has no committed offset and offset_reset is latest: the message will not be read again"
	}
	return fmt.Sprintf("committed offset %s > message offset %s: the group has moved past it", fmtPtr(k.Committed), fmtPtr(k.Offset))
}

func incompleteDetail(anchored bool, k KafkaView) string {
	if !anchored {
		return "not terminal and there is no state row to anchor the Kafka position"
	}
	if k.Detail != "" {
		return "not terminal, and whether Kafka will redeliver is unknown: " + k.Detail
	}
	return "not terminal, and whether Kafka will redeliver is unknown"
}

func completeDetail(st sources.StateRow, r *Report) string {
	if st.Found {
		return fmt.Sprintf("state %s, every step applied once, redelivery %s", st.Status, r.Kafka.Redelivery)
	}
	acts := make([]string, 0, len(r.Idempotency))
	for _, x := range r.Idempotency {
		acts = append(acts, x.Key+" "+x.Action)
	}
	return "no state row; idempotency records: " + strings.Join(acts, ", ")
}

// exists reports whether anything at all was found for the id.
func exists(ev sources.Evidence, r Report) bool {
	if ev.DB.State.Found || len(ev.DB.Idempotency) > 0 || ev.Kafka.Message != nil {
		return true
	}
	for _, s := range r.Steps {
		if len(s.Evidence) > 0 || len(s.Intents) > 0 || (s.Probe != nil && s.Probe.Count != nil && *s.Probe.Count > 0) {
			return true
		}
		if s.Error != "" {
			return true // could not read: do not claim NOT_FOUND
		}
	}
	for _, a := range ev.DB.Audit {
		if a.Outcome != "" {
			return true
		}
	}
	return false
}

func fmtTime(t time.Time) string { return t.Format("2006-01-02 15:04:05.000") }

func fmtPtr[T int32 | int64](p *T) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

func summary(f Finding, r *Report) string {
	switch f.Code {
	case NotFound:
		return fmt.Sprintf("%s is not known to pipeline %s", r.BizID, r.Pipeline)
	case Complete, SkippedOK:
		return f.Detail
	}
	// Every finding of the verdict's code, one clause per step.
	var parts []string
	for _, x := range r.Findings {
		if x.Code != f.Code {
			continue
		}
		s := x.Detail
		if x.Step != "" && !strings.Contains(s, x.Step) {
			s = x.Step + ": " + s
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// timeline gathers every timestamped fact, oldest first.
func timeline(ev sources.Evidence, r *Report) []Event {
	p := ev.Pipeline
	ev2 := []Event{}
	add := func(t *time.Time, src, what string) {
		if t != nil && !t.IsZero() {
			ev2 = append(ev2, Event{At: *t, Source: src, What: what})
		}
	}
	st := ev.DB.State
	if st.Found && p.State != nil {
		add(st.CreatedAt, p.State.Table, "state row created (msg "+orDash(st.MsgID)+")")
		what := "state " + st.Status
		if st.Version != nil {
			what += fmt.Sprintf(" (version %d)", *st.Version)
		}
		add(st.UpdatedAt, p.State.Table, what+" last updated")
		if st.LeaseUntil != nil && st.Owner != "" {
			add(st.LeaseUntil, p.State.Table, "lease of "+st.Owner+" expires")
		}
	}
	for i, s := range p.Steps {
		sv := r.Steps[i]
		src := tableOf(s.Evidence, s.Name)
		for _, row := range sv.Evidence {
			t := firstTime(row.Row)
			what := fmt.Sprintf("%s: %s", s.Name, rowText(row.Row))
			if row.Reversed {
				what += " (reversed)"
			}
			add(t, src, what)
		}
		isrc := tableOf(s.Intent, s.Name)
		for _, in := range sv.Intents {
			add(in.SentAt, isrc, fmt.Sprintf("%s: call sent (request %s)", s.Name, in.RequestID))
			add(in.AckedAt, isrc, fmt.Sprintf("%s: call acked (request %s, %s)", s.Name, in.RequestID, orDash(in.Result)))
		}
	}
	if p.Idempotency != nil {
		for _, x := range ev.DB.Idempotency {
			add(x.CreatedAt, p.Idempotency.Table, fmt.Sprintf("message %s recorded %s", x.Key, x.Action))
		}
	}
	if m := ev.Kafka.Message; m != nil {
		t := m.Timestamp
		add(&t, "kafka", fmt.Sprintf("message produced to %s partition %d offset %d", p.Topic, m.Partition, m.Offset))
	}
	for _, a := range ev.DB.Audit {
		t := a.At
		add(&t, "opctl audit", fmt.Sprintf("%s %s (plan %.12s, action %d)", a.Action, a.Outcome, a.PlanID, a.ActionIndex))
	}
	sort.SliceStable(ev2, func(i, j int) bool { return ev2[i].At.Before(ev2[j].At) })
	return ev2
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// tableOf extracts the first table name after FROM in a query, for the
// timeline's source column; it falls back to the step name.
func tableOf(query, fallback string) string {
	f := strings.Fields(query)
	for i := 0; i+1 < len(f); i++ {
		if strings.EqualFold(f[i], "FROM") {
			t := strings.Trim(f[i+1], "`();,")
			if config.ValidIdent(t) {
				return t
			}
			break
		}
	}
	return fallback
}

func firstTime(row sources.Row) *time.Time {
	for i, c := range row.Columns {
		if t, ok := row.Values[i].(time.Time); ok && (c == "created_at" || strings.HasSuffix(c, "_at") || strings.HasSuffix(c, "time")) {
			return &t
		}
	}
	for _, v := range row.Values {
		if t, ok := v.(time.Time); ok {
			return &t
		}
	}
	return nil
}

// rowText renders the non-time columns of a row: "id 11, account_id 1001, delta -30.00".
func rowText(row sources.Row) string {
	parts := make([]string, 0, len(row.Columns))
	for i, c := range row.Columns {
		if _, ok := row.Values[i].(time.Time); ok {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s", c, IdentityString(row.Values[i])))
	}
	return strings.Join(parts, ", ")
}
