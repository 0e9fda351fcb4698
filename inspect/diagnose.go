package inspect

import (
	"fmt"
	"maps"
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
// report partial. The findings and the verdict come from the rule table
// (see table, docs/verdicts.md); what to do next is the planner's
// (repair/plans.Next).
func Diagnose(ev sources.Evidence) Report {
	r := Judge(ev)
	r.Timeline = timeline(ev, &r)
	return r
}

// Judge is Diagnose without what only a reader of one report needs: the
// timeline stays empty (and NEXT is the planner's: repair/plans.Next). Everything else —
// verdict, findings, steps, state, sources, partial — is what Diagnose
// gives. reconcile judges thousands of candidates and keeps only that.
func Judge(ev sources.Evidence) Report {
	r, reached := survey(ev)
	f := newFacts(ev, &r, reached)
	verdict, findings := judge(table[:], &f)
	r.Findings = findings
	if verdict.Code == NotFound {
		// Without a row there is no timestamp to search the message from, so
		// an unreachable Kafka cannot hide it: only MySQL decides NOT_FOUND
		// (docs/where.md).
		r.Partial = r.Sources["mysql"] != sources.StatusOK
	}
	r.Verdict = Verdict{Code: verdict.Code, Severity: SeverityOf(verdict.Code), Summary: summary(verdict, &r)}
	return r
}

// survey builds the report's views of the evidence (sources, clock, state,
// steps, idempotency, entity, Kafka) before any rule runs, and what the state
// status claims. A failed source or a query that failed makes the report
// partial, and sources.mysql then names every query that failed, whoever
// assembled the evidence (docs/verdicts.md#partial).
func survey(ev sources.Evidence) (Report, reachedInfo) {
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
	maps.Copy(r.Sources, ev.Sources)
	if m := r.Sources["mysql"]; m == "" || m == sources.StatusOK || m == sources.StatusSkipped {
		if st := sources.MySQLStatus(ev.DB, nil); st != sources.StatusOK {
			r.Sources["mysql"] = st
		}
	}
	r.Partial = len(r.Unread()) > 0
	if !ev.DB.Now.IsZero() {
		now := ev.DB.Now
		r.DBNow = &now
	}
	reached := stateReached(p, ev.DB.State)
	r.State = stateView(ev.DB, reached)
	r.Kafka = kafkaView(p, ev)
	r.Steps = stepViews(p, ev.DB, reached, r.Kafka.CommittedPast())
	for _, row := range ev.DB.Idempotency {
		r.Idempotency = append(r.Idempotency, IdempotencyView{Key: row.Key, Action: row.Action, CreatedAt: row.CreatedAt})
	}
	if ev.DB.Entity != nil {
		r.Entity = &EntityView{Found: ev.DB.Entity.Found, Status: ev.DB.Entity.Status}
	}
	r.Repair = IncompleteRepair(ev.DB.Audit)
	return r, reached
}

// reachedInfo is what the state status claims, and the lists of the config
// it is in; every membership of the status is decided here, once.
type reachedInfo struct {
	// n is the number of steps the status claims done; -1: no claim.
	n int
	// row: the pipeline has a state table and the operation's row was found.
	// The flags below are false without one.
	row bool
	// terminal, failed: the status is in the terminal, the failed list.
	terminal, failed bool
	// unknownStatus: the status is in no list of the config.
	unknownStatus bool
}

// stateReached maps the state status to the number of steps it claims done
// (docs/verdicts.md, "What the state row claims").
func stateReached(p *config.Pipeline, st sources.StateRow) reachedInfo {
	if p.State == nil || !st.Found {
		return reachedInfo{n: -1}
	}
	ri := reachedInfo{n: -1, row: true,
		terminal: slices.Contains(p.State.Terminal, st.Status), failed: slices.Contains(p.State.Failed, st.Status)}
	switch {
	case ri.terminal:
		ri.n = len(p.Steps)
	case slices.Contains(p.State.Initial, st.Status):
		ri.n = 0
	default:
		for i, s := range p.Steps {
			if s.DoneStatus != "" && s.DoneStatus == st.Status {
				ri.n = i + 1
				return ri
			}
		}
		ri.unknownStatus = !ri.failed
	}
	return ri
}

func stateView(db sources.DBEvidence, reached reachedInfo) StateView {
	st := db.State
	v := StateView{Found: st.Found, Reached: reached.n}
	if !st.Found {
		return v
	}
	v.Status, v.Version, v.Owner, v.LeaseUntil = st.Status, st.Version, st.Owner, st.LeaseUntil
	v.MsgID, v.CreatedAt, v.UpdatedAt = st.MsgID, st.CreatedAt, st.UpdatedAt
	v.LeaseActive = st.LeaseLive(db.Now)
	return v
}

// isTerminal implements docs/verdicts.md: terminal by the state row (its
// status in the terminal or failed list), or with no state row by
// idempotency records that are all DONE or SKIPPED.
func isTerminal(reached reachedInfo, rows []sources.IdempotencyRow) bool {
	if reached.row {
		return reached.terminal || reached.failed
	}
	if len(rows) == 0 {
		return false
	}
	for _, r := range rows {
		if r.Action != ActionDone && r.Action != ActionSkipped {
			return false
		}
	}
	return true
}

// skippedRecord returns the newest SKIPPED idempotency record, or nil.
func skippedRecord(rows []IdempotencyView) *IdempotencyView {
	var out *IdempotencyView
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

// stepViews computes every step's view, in pipeline order. committedPast
// says the group committed past the operation's message
// (KafkaView.CommittedPast): what an unverified step's note says.
func stepViews(p *config.Pipeline, db sources.DBEvidence, reached reachedInfo, committedPast bool) []StepView {
	att := AuditAttestations(db.Audit)
	out := []StepView{}
	for i, s := range p.Steps {
		var se sources.StepEvidence
		if i < len(db.Steps) {
			se = db.Steps[i]
		}
		v := stepView(i, s, se, reached, att)
		if s.Unverified() && v.Error == "" {
			v.Status, v.Note = StepUnverified, unverifiedNote(p, committedPast)
		}
		out = append(out, v)
	}
	return out
}

// unverifiedNote says what is known of a remote step with neither intent
// nor probe (docs/verdicts.md#unverified-steps): it ran at least once when
// the consumer commits only after every step and the group committed past
// the message; otherwise nothing.
func unverifiedNote(p *config.Pipeline, committedPast bool) string {
	const lead = "not verified (no intent, no probe): "
	switch {
	case committedPast && p.EffectiveCommit() == config.CommitAfterSteps:
		return lead + "ran at least once, since the group committed past the message and the consumer commits after every step; how many times is unknown"
	case p.EffectiveCommit() != config.CommitAfterSteps:
		return lead + "whether it ran is unknown (commit: " + p.EffectiveCommit() + ": a commit proves nothing)"
	}
	return lead + "whether it ran is unknown until the group commits past the message"
}

// stepView computes one step's status (docs/verdicts.md, "Counting a step's
// effects"): its evidence rows, intents and {biz_id} probe counted as
// effects, less what opctl's audit says was reversed or compensated.
func stepView(i int, s config.Step, se sources.StepEvidence, reached reachedInfo, att Attestations) StepView {
	v := StepView{Index: i + 1, Name: s.Name, Kind: s.Kind, Error: se.Err}
	if v.Error == "" {
		v.Error = se.BinlogErr
	}
	if reached.n >= 0 && (i < reached.n || s.DoneStatus != "") {
		// A step past the claimed one with no done_status of its own
		// cannot be recorded by the state row (seed 001's order row holds
		// PROCESSING through WMS and logistics): no claim either way.
		b := i < reached.n
		v.Reached = &b
	}
	count, unknown := 0, 0
	v.Evidence, count = evidenceRows(s.Name, se.Rows, att)
	for _, in := range se.Intents {
		iv := intentView(s.Name, in, att)
		switch {
		case iv.Outcome.Counts():
			count++
		case iv.Outcome == IntentUnknown:
			unknown++
		}
		v.Intents = append(v.Intents, iv)
	}
	v.Probe, count, unknown = bizProbe(s.Name, se, att, count, unknown)
	v.EvidenceCount = count
	v.Status = stepStatus(s, v, unknown)
	if se.Binlog != nil && v.Error == "" {
		v.Binlog = binlogView(s.Name, se.Binlog, att)
		switch v.Binlog.Attested {
		case AttestApplied:
			v.EvidenceCount = 1
			v.Status = stepStatus(s, v, 0)
		case AttestAbsent:
			v.EvidenceCount = 0
			v.Status = stepStatus(s, v, 0)
		default:
			if v.Binlog.CountMin != v.Binlog.CountMax {
				v.Status = StepAmbiguous
			}
		}
	}
	return v
}

// binlogView is a binlog step's attribution (docs/where.md#binlog-evidence).
// What the audit attests of the step as a whole (a manual action that
// closed an ambiguous count) decides its count.
func binlogView(step string, b *sources.BinlogAttribution, att Attestations) *BinlogView {
	v := &BinlogView{Key: b.Key, Delta: b.Delta, CountMin: b.Count.Min, CountMax: b.Count.Max,
		Competitors: b.Competitors, Shared: b.Shared, Notes: b.Notes}
	if v.Competitors == nil {
		v.Competitors = []sources.Competitor{}
	}
	if v.Shared == nil {
		v.Shared = []sources.SharedChange{}
	}
	for _, o := range []string{AttestApplied, AttestAbsent} {
		if att.is(step, AttestAll, o) {
			v.Attested = o
			v.Notes = append(v.Notes, att.note(step, AttestAll))
		}
	}
	return v
}

// evidenceRows returns a step's evidence rows and how many of them count as
// an effect: a row opctl reversed, or whose `reversed` column is set, does
// not.
func evidenceRows(step string, rows []sources.Row, att Attestations) ([]EvidenceRow, int) {
	out, count := []EvidenceRow{}, 0
	for _, row := range rows {
		er := EvidenceRow{Row: row, Reversed: att.Reversed(step, row)}
		if !er.Reversed {
			count++
		}
		out = append(out, er)
	}
	return out, count
}

// intentView is one intent with its outcome: acked, applied, absent,
// compensated or unknown.
func intentView(step string, in sources.Intent, att Attestations) IntentView {
	iv := IntentView{RequestID: in.RequestID, SentAt: in.SentAt, AckedAt: in.AckedAt, Result: in.Result}
	outcome, attested := intentOutcome(step, in, att)
	iv.Outcome = outcome
	if in.Probe != nil {
		iv.Probe = probeText(*in.Probe)
	}
	if attested {
		iv.Probe = joinNote(iv.Probe, att.note(step, in.RequestID))
	}
	return iv
}

// intentOutcome decides an intent's outcome, and whether it comes from an
// attestation of opctl's audit: a compensation first, then the ack, then the
// probe, then what was attested.
func intentOutcome(step string, in sources.Intent, att Attestations) (outcome IntentOutcome, attested bool) {
	switch {
	case att.is(step, in.RequestID, AttestCompensated):
		return IntentCompensated, true
	case in.AckedAt != nil:
		return IntentAcked, false
	case in.Probe != nil && in.Probe.Outcome == sources.ProbeApplied:
		return IntentApplied, false
	case in.Probe != nil && in.Probe.Outcome == sources.ProbeAbsent:
		return IntentAbsent, false
	case att.is(step, in.RequestID, AttestApplied):
		return IntentApplied, true
	case att.is(step, in.RequestID, AttestAbsent):
		return IntentAbsent, true
	}
	return IntentUnknown, false
}

// bizProbe folds the answer of a step's probe keyed by {biz_id} into the
// effect count and the unknown count, and returns its view (nil without a
// probe).
func bizProbe(step string, se sources.StepEvidence, att Attestations, count, unknown int) (*ProbeView, int, int) {
	bp := se.BizProbe
	if bp == nil {
		return nil, count, unknown
	}
	v := &ProbeView{URL: bp.URL, Outcome: bp.Outcome, Count: bp.Count, Detail: bp.Detail}
	switch {
	case bp.Count != nil:
		// The downstream's own journal is the effect count, less the
		// effects opctl's audit attests were undone by hand
		// (docs/verdicts.md#counting-a-steps-effects).
		n := *bp.Count
		if u := att.undone(step); u > 0 {
			n = max(n-u, 0)
			v.Detail = joinNote(v.Detail, fmt.Sprintf("%d effect(s) attested undone by opctl's audit", u))
		}
		if n == 0 && att.is(step, AttestAll, AttestApplied) {
			// Made by hand where the downstream's count does not show it
			// (a skipped effect closed by a manual action).
			n = 1
			v.Detail = joinNote(v.Detail, att.note(step, AttestAll))
		}
		return v, n, 0
	case bp.Outcome == sources.ProbeApplied:
		return v, max(count, 1), unknown
	case bp.Outcome != sources.ProbeInconclusive || count != 0 || len(se.Intents) != 0:
		return v, count, unknown
	}
	// Inconclusive and nothing else known: what opctl's audit attested about
	// the step as a whole decides.
	switch {
	case att.is(step, AttestAll, AttestApplied):
		count = 1
		v.Detail = joinNote(v.Detail, att.note(step, AttestAll))
	case att.is(step, AttestAll, AttestAbsent):
		v.Detail = joinNote(v.Detail, att.note(step, AttestAll))
	default:
		unknown++
	}
	return v, count, unknown
}

// stepStatus is what a step's counted effects say. A remote step marked
// idempotent is never duplicated.
func stepStatus(s config.Step, v StepView, unknown int) StepStatus {
	dupOK := s.Kind == config.KindRemote && s.Idempotent
	switch {
	case v.Error != "":
		return StepUnknown
	case v.EvidenceCount >= 2 && !dupOK:
		return StepDuplicated
	case unknown > 0 && !dupOK:
		// An unacked intent next to an acked one may be a second effect.
		return StepUnknown
	case v.EvidenceCount >= 1 && v.Reached != nil && !*v.Reached:
		return StepAhead
	case v.EvidenceCount >= 1:
		return StepApplied
	}
	return StepAbsent
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
	lead := ""
	if f.Code == ReadError {
		lead = "a query failed, so what it would have shown is unknown: "
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
	return lead + strings.Join(parts, "; ")
}

// timeline gathers every timestamped fact, oldest first.
func timeline(ev sources.Evidence, r *Report) []Event {
	p := ev.Pipeline
	out := events{}
	if ev.DB.State.Found && p.State != nil {
		out.state(p.State.Table, ev.DB.State)
	}
	for i, s := range p.Steps {
		out.step(s, r.Steps[i])
	}
	if p.Idempotency != nil {
		for _, x := range ev.DB.Idempotency {
			out.add(x.CreatedAt, p.Idempotency.Table, fmt.Sprintf("message %s recorded %s", x.Key, x.Action))
		}
	}
	if m := ev.Kafka.Message; m != nil {
		t := m.Timestamp
		out.add(&t, "kafka", fmt.Sprintf("message produced to %s partition %d offset %d", p.Topic, m.Partition, m.Offset))
	}
	for _, a := range ev.DB.Audit {
		t := a.At
		out.add(&t, "opctl audit", fmt.Sprintf("%s %s (plan %.12s, action %d)", a.Action, a.Outcome, a.PlanID, a.ActionIndex))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].sortAt().Before(out[j].sortAt()) })
	return out
}

// events is a timeline being gathered.
type events []Event

// add appends an event when its time is known.
func (e *events) add(t *time.Time, src, what string) {
	if t != nil && !t.IsZero() {
		*e = append(*e, Event{At: *t, Source: src, What: what})
	}
}

// state adds the state row's creation, last update and lease expiry.
func (e *events) state(table string, st sources.StateRow) {
	e.add(st.CreatedAt, table, "state row created (msg "+orDash(st.MsgID)+")")
	what := "state " + st.Status
	if st.Version != nil {
		what += fmt.Sprintf(" (version %d)", *st.Version)
	}
	e.add(st.UpdatedAt, table, what+" last updated")
	if st.LeaseUntil != nil && st.Owner != "" {
		e.add(st.LeaseUntil, table, "lease of "+st.Owner+" expires")
	}
}

// step adds a step's evidence rows and its intents' calls and acks.
func (e *events) step(s config.Step, sv StepView) {
	src := tableOf(s.Evidence, s.Name)
	if s.Binlog != nil {
		src = "binlog " + s.Binlog.Table
	}
	for _, row := range sv.Evidence {
		what := fmt.Sprintf("%s: %s", s.Name, rowText(row.Row))
		if row.Reversed {
			what += " (reversed)"
		}
		t := firstTime(row.Row)
		if s.Binlog != nil && row.IsBinlogChange() && t != nil {
			// The binlog's time has a resolution of one second.
			*e = append(*e, Event{At: *t, Source: src, What: what, Resolution: ResolutionSecond})
			continue
		}
		e.add(t, src, what)
	}
	isrc := tableOf(s.Intent, s.Name)
	for _, in := range sv.Intents {
		e.add(in.SentAt, isrc, fmt.Sprintf("%s: call sent (request %s)", s.Name, in.RequestID))
		e.add(in.AckedAt, isrc, fmt.Sprintf("%s: call acked (request %s, %s)", s.Name, in.RequestID, orDash(in.Result)))
	}
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
		if t, ok := row.Values[i].(time.Time); ok && (c == "created_at" || c == "at" || strings.HasSuffix(c, "_at") || strings.HasSuffix(c, "time")) {
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
