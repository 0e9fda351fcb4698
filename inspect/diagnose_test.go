package inspect

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func tp(t time.Time) *time.Time { return &t }
func ip(v int64) *int64         { return &v }
func pp(v int32) *int32         { return &v }

// settlement mirrors testdata/config/settlement.yaml.
func settlement() *config.Pipeline {
	return &config.Pipeline{
		Name: "settlement", Topic: "settlement-event", Group: "settlement-consumer",
		Partitioner: "murmur2", MessageKey: "{biz_id}", OffsetReset: "latest",
		State: &config.State{Table: "biz_operation", Key: "biz_id", Status: "status", Version: "version",
			Owner: "owner", LeaseUntil: "lease_until", CreatedAt: "created_at", UpdatedAt: "updated_at",
			Initial: []string{"INIT"}, Terminal: []string{"DONE"}, Failed: []string{"FAILED"}},
		Steps: []config.Step{
			{Name: "debit", Kind: "local", DoneStatus: "DEBIT_DONE", Evidence: "SELECT id, account_id, delta, created_at FROM balance_journal WHERE biz_id = ?"},
			{Name: "ledger", Kind: "local", DoneStatus: "LEDGER_DONE", Evidence: "SELECT id FROM ledger_entry WHERE biz_order_id = ?"},
			{Name: "notify", Kind: "remote", DoneStatus: "DONE", Intent: "SELECT request_id FROM step_intent WHERE biz_id = ?",
				Probe: "http://127.0.0.1:8081/notify/status?request_id={request_id}"},
		},
	}
}

// skip mirrors testdata/config/skip.yaml: no state table.
func skipPipeline() *config.Pipeline {
	return &config.Pipeline{
		Name: "orders", Topic: "order-event", Group: "order-consumer", Partitioner: "murmur2", MessageKey: "{biz_id}",
		Steps:       []config.Step{{Name: "points", Kind: "local", Evidence: "SELECT id FROM points_grant WHERE order_id = ?"}},
		Idempotency: &config.Idempotency{Table: "consumer_idempotency", Key: "msg_id", BizID: "biz_id", Action: "action", CreatedAt: "created_at"},
		Entity:      &config.Entity{Query: "SELECT status FROM orders WHERE order_id = ?", Lifecycle: []string{"CREATED", "PAID", "SHIPPED"}, Cancels: []string{"REFUNDED", "CANCELLED"}, EffectStep: "points"},
	}
}

func row(id int64) sources.Row {
	return sources.Row{Columns: []string{"id", "created_at"}, Values: []sources.Value{id, t0}}
}

func rows(n int) []sources.Row {
	out := make([]sources.Row, n)
	for i := range out {
		out[i] = row(int64(i + 1))
	}
	return out
}

func acked(id string) sources.Intent {
	return sources.Intent{RequestID: id, SentAt: tp(t0), AckedAt: tp(t0.Add(time.Second))}
}

func unacked(id string) sources.Intent { return sources.Intent{RequestID: id, SentAt: tp(t0)} }

// ev builds the evidence of a settlement operation: state status, per-step
// evidence, and a Kafka position with the given committed offset.
type evOpt func(*sources.Evidence)

func newEv(p *config.Pipeline, opts ...evOpt) sources.Evidence {
	e := sources.Evidence{
		BizID: "PAY-1", Pipeline: p,
		DB: sources.DBEvidence{Now: t0.Add(10 * time.Minute), Steps: make([]sources.StepEvidence, len(p.Steps))},
		Kafka: sources.KafkaEvidence{Partition: -1, Offset: -1, Located: sources.LocatedUnknown,
			Group: sources.GroupView{Topic: p.Topic, Partitions: map[int32]sources.PartitionView{}}},
		Sources: map[string]string{"mysql": "ok", "kafka": "ok"},
	}
	for i, s := range p.Steps {
		e.DB.Steps[i].Name = s.Name
	}
	for _, o := range opts {
		o(&e)
	}
	return e
}

func state(status string) evOpt {
	return func(e *sources.Evidence) {
		e.DB.State = sources.StateRow{Found: true, Status: status, Version: ip(4), MsgID: "m-1", CreatedAt: tp(t0), UpdatedAt: tp(t0)}
	}
}

func lease(owner string, until time.Time) evOpt {
	return func(e *sources.Evidence) { e.DB.State.Owner, e.DB.State.LeaseUntil = owner, tp(until) }
}

func evidence(step int, n int) evOpt {
	return func(e *sources.Evidence) { e.DB.Steps[step].Rows = rows(n) }
}

func intents(step int, in ...sources.Intent) evOpt {
	return func(e *sources.Evidence) { e.DB.Steps[step].Intents = in }
}

// kafka puts the message at offset 100 of partition 3 with the given
// committed offset (-1: none) and log start.
func kafka(committed, logStart int64) evOpt {
	return func(e *sources.Evidence) {
		e.Kafka.Partition, e.Kafka.Offset, e.Kafka.Located = 3, 100, sources.LocatedStored
		e.Kafka.Group.Partitions[3] = sources.PartitionView{Partition: 3, Committed: committed, LogStart: logStart, LogEnd: 500}
		e.Kafka.Group.GroupState = "Stable"
	}
}

func kafkaDown() evOpt {
	return func(e *sources.Evidence) {
		e.Sources["kafka"] = "kafka 127.0.0.1:9: connection refused"
		e.Kafka.Group = sources.GroupView{}
	}
}

func idem(rows ...sources.IdempotencyRow) evOpt {
	return func(e *sources.Evidence) { e.DB.Idempotency = rows }
}

func entity(status string) evOpt {
	return func(e *sources.Evidence) { e.DB.Entity = &sources.EntityRow{Found: true, Status: status} }
}

// queryFailed records that the operation-level query q failed, as the
// Collector does (sources.mysql names it).
func queryFailed(q string) evOpt {
	return func(e *sources.Evidence) {
		f := sources.FailedQuery{Query: q, Err: "Error 1054 (42S22): Unknown column 'x' in 'field list'"}
		e.DB.Failed = append(e.DB.Failed, f)
		e.Sources["mysql"] = "mysql 127.0.0.1:3306: partial read: " + f.String()
	}
}

// stepFailed records that step's query failed, as sources/mysql does; it
// leaves sources.mysql as it is (Diagnose names the query there itself).
func stepFailed(step int) evOpt {
	return func(e *sources.Evidence) {
		q := "evidence"
		if e.Pipeline.Steps[step].Kind == config.KindRemote {
			q = "intent"
		}
		e.DB.Steps[step].Err = e.DB.Steps[step].Name + ": " + q + " query: Error 1054 (42S22): Unknown column 'j.acount_id' in 'field list'"
	}
}

func all(step0, step1 int, notify ...sources.Intent) []evOpt {
	return []evOpt{evidence(0, step0), evidence(1, step1), intents(2, notify...)}
}

func join(a []evOpt, b ...evOpt) []evOpt { return append(append([]evOpt{}, a...), b...) }

func TestVerdicts(t *testing.T) {
	healthy := all(1, 1, acked("PAY-1:notify"))
	cases := []struct {
		name     string
		p        *config.Pipeline
		opts     []evOpt
		want     Code
		findings []Code // codes that must all be among the findings
		partial  bool
	}{
		{"not found", settlement(), nil, NotFound, nil, false},
		{"complete", settlement(), join(healthy, state("DONE"), kafka(101, 0)), Complete, nil, false},
		{"complete uncommitted", settlement(), join(healthy, state("DONE"), kafka(100, 0)), CompleteUncommitted, nil, false},
		{"in flight beats everything", settlement(), join(all(2, 0), state("DEBIT_DONE"), lease("c-3", t0.Add(11*time.Minute)), kafka(100, 0)),
			InFlight, []Code{InFlight, DuplicateEffect, WillRedeliver}, false},
		{"expired lease is not in flight", settlement(), join(all(1, 0), state("DEBIT_DONE"), lease("c-3", t0.Add(9*time.Minute)), kafka(100, 0)),
			WillRedeliver, nil, false},
		{"duplicate local (seed 000)", settlement(), join(all(2, 1, acked("a"), acked("b")), state("DONE"), kafka(100, 0)),
			DuplicateEffect, []Code{DuplicateEffect, CompleteUncommitted}, false},
		{"duplicate beats unknown", settlement(), join(all(2, 1, unacked("a")), state("LEDGER_DONE"), kafka(100, 0)),
			DuplicateEffect, []Code{DuplicateEffect, UnknownOutcome}, false},
		{"unknown outcome", settlement(), join(all(1, 1, unacked("a")), state("LEDGER_DONE"), kafka(100, 0)),
			UnknownOutcome, []Code{UnknownOutcome, WillRedeliver}, false},
		{"unacked next to acked may be a duplicate", settlement(), join(all(1, 1, acked("a"), unacked("b")), state("DONE"), kafka(101, 0)),
			UnknownOutcome, nil, false},
		{"probe says applied twice: duplicate (seed 001)", settlement(), join(all(1, 1,
			sources.Intent{RequestID: "a", SentAt: tp(t0), Probe: &sources.ProbeResult{Outcome: sources.ProbeApplied}}, acked("b")),
			state("DONE"), kafka(101, 0)), DuplicateEffect, nil, false},
		{"probe says absent: not an effect", settlement(), join(all(1, 1,
			sources.Intent{RequestID: "a", SentAt: tp(t0), Probe: &sources.ProbeResult{Outcome: sources.ProbeAbsent}}),
			state("LEDGER_DONE"), kafka(100, 0)), WillRedeliver, nil, false},
		{"missing effect", settlement(), join(all(0, 1, acked("a")), state("DONE"), kafka(101, 0)), MissingEffect, nil, false},
		{"state behind", settlement(), join(all(1, 1), state("DEBIT_DONE"), kafka(100, 0)), StateBehind, []Code{StateBehind, WillRedeliver}, false},
		{"state behind without state row", settlement(), join(all(1, 0), kafka(100, 0)), StateBehind, nil, false},
		{"stranded: committed past", settlement(), join(all(1, 0), state("DEBIT_DONE"), kafka(101, 0)), Stranded, nil, false},
		{"stranded: deleted by retention", settlement(), join(all(1, 0), state("DEBIT_DONE"), kafka(50, 200)), Stranded, nil, false},
		{"stranded: never committed, latest", settlement(), join(all(1, 0), state("DEBIT_DONE"), kafka(-1, 0)), Stranded, nil, false},
		{"will redeliver: never committed, earliest", earliest(settlement()), join(all(1, 0), state("DEBIT_DONE"), kafka(-1, 0)), WillRedeliver, nil, false},
		{"will redeliver", settlement(), join(all(1, 0), state("DEBIT_DONE"), kafka(100, 0)), WillRedeliver, nil, false},
		{"init will redeliver", settlement(), join(nil, state("INIT"), kafka(99, 0)), WillRedeliver, nil, false},
		{"kafka down: incomplete, partial", settlement(), join(all(1, 0), state("DEBIT_DONE"), kafka(100, 0), kafkaDown()), Incomplete, nil, true},
		{"kafka down, terminal: complete, partial", settlement(), join(healthy, state("DONE"), kafka(100, 0), kafkaDown()), Complete, nil, true},
		{"message not located: incomplete", settlement(), join(all(1, 0), state("DEBIT_DONE")), Incomplete, nil, false},
		{"failed", settlement(), join(all(1, 0), state("FAILED"), kafka(101, 0)), Failed, nil, false},
		{"wrongly skipped (seed 003)", skipPipeline(), []evOpt{entity("SHIPPED"), idem(
			sources.IdempotencyRow{Key: "m-7392", Action: "DONE", CreatedAt: tp(t0)},
			sources.IdempotencyRow{Key: "m-7391", Action: "SKIPPED", CreatedAt: tp(t0.Add(time.Second))})}, WronglySkipped, nil, false},
		{"skipped ok", skipPipeline(), []evOpt{entity("REFUNDED"), idem(sources.IdempotencyRow{Key: "m-1", Action: "SKIPPED"})}, SkippedOK, nil, false},
		{"skipped, effect present: complete", skipPipeline(), []evOpt{entity("SHIPPED"), evidence(0, 1), idem(sources.IdempotencyRow{Key: "m-1", Action: "SKIPPED"})}, Complete, nil, false},
		{"skipped, entity missing: not claimed wrong", skipPipeline(), []evOpt{idem(sources.IdempotencyRow{Key: "m-1", Action: "SKIPPED"}),
			func(e *sources.Evidence) { e.DB.Entity = &sources.EntityRow{} }}, Complete, []Code{EntityNotFound}, false},
		{"pending without state row: incomplete", skipPipeline(), []evOpt{entity("PAID"), idem(sources.IdempotencyRow{Key: "m-1", Action: "PENDING"})}, Incomplete, nil, false},
		{"idempotency done: complete", skipPipeline(), []evOpt{entity("PAID"), evidence(0, 1), idem(sources.IdempotencyRow{Key: "m-1", Action: "DONE"})}, Complete, nil, false},
		{"republished stranded op reads will redeliver", settlement(), join(all(1, 0), state("DEBIT_DONE"), kafka(101, 0), func(e *sources.Evidence) {
			e.Kafka.Group.Partitions[4] = sources.PartitionView{Partition: 4, Committed: 10, LogStart: 0, LogEnd: 20}
			e.DB.Audit = []sources.AuditAction{{PlanID: "abc", Action: "republish", Outcome: "published", Partition: pp(4), Offset: ip(15), At: t0}}
		}), WillRedeliver, nil, false},
		{"reversed row stops counting", settlement(), join(all(2, 1, acked("a")), state("DONE"), kafka(101, 0), func(e *sources.Evidence) {
			e.DB.Audit = []sources.AuditAction{{PlanID: "abc", Action: "reverse", Outcome: "applied", Step: "debit", ReversedID: "2", At: t0}}
		}), Complete, nil, false},
		// A step that could not be read is a READ_ERROR, not an UNKNOWN_OUTCOME
		// nor NOT_FOUND; with no state row nothing anchors the Kafka position.
		{"read error is partial, never not found", settlement(), []evOpt{func(e *sources.Evidence) { e.DB.Steps[0].Err = "debit evidence: table missing" }},
			ReadError, []Code{ReadError, Incomplete}, true},
		// A failed read never yields an ok or watch verdict drawn from what
		// it would have shown (docs/verdicts.md#partial).
		{"typo in the debit query of a complete operation", settlement(), join(healthy, state("DONE"), kafka(101, 0), stepFailed(0)), ReadError, []Code{ReadError}, true},
		{"typo in the debit query, the offset uncommitted", settlement(), join(healthy, state("DONE"), kafka(100, 0), stepFailed(0)), ReadError, []Code{ReadError, CompleteUncommitted}, true},
		{"typo in the notify intent query", settlement(), join(healthy, state("DONE"), kafka(101, 0), stepFailed(2)), ReadError, []Code{ReadError}, true},
		{"a read step's duplicate is still the verdict", settlement(), join(all(2, 1, acked("a")), state("DONE"), kafka(101, 0), stepFailed(2)), DuplicateEffect, []Code{DuplicateEffect, ReadError}, true},
		{"a live lease is still in flight", settlement(), join(healthy, state("LEDGER_DONE"), lease("c-3", t0.Add(11*time.Minute)), kafka(100, 0), stepFailed(0)), InFlight, []Code{InFlight, ReadError}, true},
		{"state query failed, debit found: not STATE_BEHIND", settlement(), join(all(1, 0), kafka(100, 0), queryFailed(sources.QueryState)), ReadError, []Code{ReadError}, true},
		{"state query failed, records done: not COMPLETE", settlementSkip(), join(healthy, queryFailed(sources.QueryState), idem(sources.IdempotencyRow{Key: "m-1", Action: ActionDone})), ReadError, []Code{ReadError}, true},
		{"state query failed, nothing else: never NOT_FOUND", settlement(), []evOpt{queryFailed(sources.QueryState)}, ReadError, []Code{ReadError}, true},
		{"idempotency query failed, effect present: not INCOMPLETE", skipPipeline(), []evOpt{entity("PAID"), evidence(0, 1), queryFailed(sources.QueryIdempotency)}, ReadError, []Code{ReadError}, true},
		{"idempotency query failed, nothing else: never NOT_FOUND", skipPipeline(), []evOpt{queryFailed(sources.QueryIdempotency)}, ReadError, []Code{ReadError}, true},
		{"entity query failed on a skip: no SKIPPED_OK, no ENTITY_NOT_FOUND", skipPipeline(), []evOpt{idem(sources.IdempotencyRow{Key: "m-1", Action: "SKIPPED"}), queryFailed(sources.QueryEntity)}, ReadError, []Code{ReadError}, true},
		{"entity query failed, no skip: nothing rests on it", skipPipeline(), []evOpt{evidence(0, 1), idem(sources.IdempotencyRow{Key: "m-1", Action: "DONE"}), queryFailed(sources.QueryEntity)}, Complete, nil, true},
		{"entity query failed, nothing else: not found, partial", skipPipeline(), []evOpt{queryFailed(sources.QueryEntity)}, NotFound, nil, true},
		{"audit query failed on a complete operation", settlement(), join(healthy, state("DONE"), kafka(101, 0), queryFailed(sources.QueryAudit)), ReadError, []Code{ReadError}, true},
		{"MySQL failed without naming a query", settlement(), join(healthy, state("DONE"), kafka(101, 0), func(e *sources.Evidence) { e.Sources["mysql"] = "mysql 127.0.0.1:3306: partial read" }), ReadError, []Code{ReadError}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Diagnose(newEv(c.p, c.opts...))
			// Judge is the same report without the timeline.
			j, want := Judge(newEv(c.p, c.opts...)), r
			want.Timeline = []Event{}
			if !reflect.DeepEqual(j, want) {
				t.Errorf("Judge differs from Diagnose:\njudge    %+v\ndiagnose %+v", j, want)
			}
			if r.Verdict.Code != c.want {
				t.Fatalf("verdict %s, want %s; findings %v", r.Verdict.Code, c.want, r.Findings)
			}
			if want := documentedSeverity(r.Verdict.Code); r.Verdict.Severity != want || r.Verdict.Severity == "" {
				t.Errorf("severity %q for %s, want %q", r.Verdict.Severity, r.Verdict.Code, want)
			}
			var codes []Code
			for _, f := range r.Findings {
				codes = append(codes, f.Code)
			}
			for _, want := range c.findings {
				if !slices.Contains(codes, want) {
					t.Errorf("findings %v lack %s", codes, want)
				}
			}
			if r.Partial != c.partial {
				t.Errorf("partial %v, want %v", r.Partial, c.partial)
			}
			// A partial report always says why (the PARTIAL line).
			if r.Partial && len(r.Unread()) == 0 {
				t.Errorf("partial, but no source says why: %v", r.Sources)
			}
			if r.Verdict.Summary == "" {
				t.Errorf("empty summary")
			}
		})
	}
}

func earliest(p *config.Pipeline) *config.Pipeline { p.OffsetReset = "earliest"; return p }

// documentedVerdicts is the verdict table of docs/verdicts.md ("The verdict
// codes"), code and severity, written out by hand.
var documentedVerdicts = []struct {
	code     Code
	severity Severity
}{
	{"NOT_FOUND", "—"}, {"IN_FLIGHT", "watch"}, {"REPAIR_INCOMPLETE", "action"}, {"DUPLICATE_EFFECT", "action"}, {"UNKNOWN_OUTCOME", "action"},
	{"WRONGLY_SKIPPED", "action"}, {"MISSING_EFFECT", "action"}, {"STATE_BEHIND", "action"}, {"STRANDED", "action"}, {"READ_ERROR", "action"},
	{"WILL_REDELIVER", "watch"}, {"INCOMPLETE", "watch"}, {"COMPLETE_UNCOMMITTED", "watch"}, {"FAILED", "watch"},
	{"SKIPPED_OK", "ok"}, {"COMPLETE", "ok"},
}

// documentedSeverity returns the documented severity of a verdict code, ""
// for a code that is not in the table.
func documentedSeverity(code Code) Severity {
	for _, d := range documentedVerdicts {
		if d.code == code {
			return d.severity
		}
	}
	return ""
}

func TestEveryVerdictHasAnExplanationAndSeverity(t *testing.T) {
	for _, d := range documentedVerdicts {
		e, ok := Explain(d.code)
		if !ok || e.Meaning == "" || e.Repair == "" || len(e.Safe) == 0 {
			t.Errorf("%s: incomplete explanation %+v", d.code, e)
		}
		if e.Severity != d.severity {
			t.Errorf("%s: explained with severity %q, documented %q", d.code, e.Severity, d.severity)
		}
	}
	for _, c := range Precedence() {
		if got, want := SeverityOf(c), documentedSeverity(c); got != want || got == "" {
			t.Errorf("%s: severity %q, documented %q", c, got, want)
		}
	}
	if got, want := len(Precedence()), len(documentedVerdicts); got != want {
		t.Errorf("%d verdict codes, %d documented", got, want)
	}
	if _, ok := Explain("BOGUS"); ok {
		t.Error("BOGUS explained")
	}
}

func TestStepStatuses(t *testing.T) {
	p := settlement()
	cases := []struct {
		name   string
		status string // state status
		step   int
		opts   []evOpt
		want   StepStatus
	}{
		{"applied", "DONE", 0, []evOpt{evidence(0, 1)}, StepApplied},
		{"absent", "INIT", 0, nil, StepAbsent},
		{"duplicated", "DONE", 0, []evOpt{evidence(0, 3)}, StepDuplicated},
		{"ahead", "DEBIT_DONE", 1, []evOpt{evidence(1, 1)}, StepAhead},
		{"ahead without claim is applied", "", 1, []evOpt{evidence(1, 1)}, StepApplied},
		{"unknown: unacked intent", "LEDGER_DONE", 2, []evOpt{intents(2, unacked("a"))}, StepUnknown},
		{"unknown: inconclusive probe", "LEDGER_DONE", 2, []evOpt{intents(2, sources.Intent{RequestID: "a", Probe: &sources.ProbeResult{Outcome: sources.ProbeInconclusive, Detail: "timeout after 2s"}})}, StepUnknown},
		{"applied: acked", "DONE", 2, []evOpt{intents(2, acked("a"))}, StepApplied},
		{"absent: probe absent", "LEDGER_DONE", 2, []evOpt{intents(2, sources.Intent{RequestID: "a", Probe: &sources.ProbeResult{Outcome: sources.ProbeAbsent}})}, StepAbsent},
		{"duplicated: biz probe count", "DONE", 2, []evOpt{func(e *sources.Evidence) {
			n := 2
			e.DB.Steps[2].BizProbe = &sources.ProbeResult{Outcome: sources.ProbeApplied, Count: &n}
		}}, StepDuplicated},
		{"unknown: biz probe down and no intents", "DONE", 2, []evOpt{func(e *sources.Evidence) {
			e.DB.Steps[2].BizProbe = &sources.ProbeResult{Outcome: sources.ProbeInconclusive, Detail: "connection refused"}
		}}, StepUnknown},
		{"unknown: query error", "DONE", 0, []evOpt{func(e *sources.Evidence) { e.DB.Steps[0].Err = "boom" }}, StepUnknown},
		{"reversed column excluded", "DONE", 0, []evOpt{func(e *sources.Evidence) {
			e.DB.Steps[0].Rows = []sources.Row{
				{Columns: []string{"id", "reversed"}, Values: []sources.Value{int64(1), int64(0)}},
				{Columns: []string{"id", "reversed"}, Values: []sources.Value{int64(2), int64(1)}},
			}
		}}, StepApplied},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			if c.status != "" {
				opts = append([]evOpt{state(c.status)}, opts...)
			}
			r := Diagnose(newEv(p, opts...))
			if got := r.Steps[c.step].Status; got != c.want {
				t.Fatalf("step %d status %s, want %s (%+v)", c.step, got, c.want, r.Steps[c.step])
			}
		})
	}
}

func TestIdempotentRemoteStepIsNotDuplicated(t *testing.T) {
	p := settlement()
	p.Steps[2].Idempotent = true
	r := Diagnose(newEv(p, join(all(1, 1, acked("a"), acked("b")), state("DONE"), kafka(101, 0))...))
	if r.Verdict.Code != Complete || r.Steps[2].Status != StepApplied {
		t.Fatalf("verdict %s step %s", r.Verdict.Code, r.Steps[2].Status)
	}
}

func TestRedelivery(t *testing.T) {
	cases := []struct {
		off, committed, start, end int64
		reset                      string
		want                       RedeliveryAnswer
	}{
		{-1, 5, 0, 10, "latest", RedeliveryUnknown},
		{5, 5, 0, 10, "latest", RedeliveryYes},
		{5, 4, 0, 10, "latest", RedeliveryYes},
		{5, 6, 0, 10, "latest", RedeliveryNo},
		{5, -1, 0, 10, "latest", RedeliveryNo},
		{5, -1, 0, 10, "earliest", RedeliveryYes},
		{5, 2, 3, 10, "earliest", RedeliveryYes}, // committed below log start → reset
		{5, 2, 3, 10, "latest", RedeliveryNo},
		{2, 0, 3, 10, "earliest", RedeliveryNo}, // below log start: gone
		{12, 0, 0, 10, "earliest", RedeliveryUnknown},
	}
	for _, c := range cases {
		if got := Redelivery(c.off, c.committed, c.start, c.end, c.reset); got != c.want {
			t.Errorf("Redelivery(%d, %d, %d, %d, %s) = %s, want %s", c.off, c.committed, c.start, c.end, c.reset, got, c.want)
		}
	}
}

func TestPrecedenceOrderIsTheSpecs(t *testing.T) {
	want := []Code{"NOT_FOUND", "IN_FLIGHT", "REPAIR_INCOMPLETE", "DUPLICATE_EFFECT", "UNKNOWN_OUTCOME", "WRONGLY_SKIPPED", "MISSING_EFFECT",
		"STATE_BEHIND", "STRANDED", "WILL_REDELIVER", "COMPLETE_UNCOMMITTED", "SKIPPED_OK", "COMPLETE"}
	got := []Code{}
	for _, c := range Precedence() {
		if c != Incomplete && c != Failed && c != ReadError {
			got = append(got, c)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("precedence %v", got)
	}
}

func TestJSONShape(t *testing.T) {
	r := Diagnose(newEv(settlement(), join(all(2, 1, acked("a")), state("DONE"), kafka(100, 0))...))
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"biz_id", "pipeline", "verdict", "findings", "state", "steps", "idempotency", "entity", "kafka", "timeline", "partial", "sources"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	// Evidence rows keep the query's column order (id first, as selected),
	// which a map would lose: check the raw bytes.
	if !strings.Contains(string(b), `"evidence":[{"id":1,"created_at":`) {
		t.Errorf("evidence row not in column order: %s", b)
	}
	k := m["kafka"].(map[string]any)
	if k["partition"].(float64) != 3 || k["offset"].(float64) != 100 || k["committed"].(float64) != 100 || k["redelivery"] != "yes" {
		t.Errorf("kafka section %v", k)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"PAY-1": "PAY-1", "a b": "'a b'", "x' OR '1'='1": `'x'\'' OR '\''1'\''='\''1'`, "": "''"} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestFailedReadIsNeverOK: whatever an operation would read as, ok or
// watch, a failed state, idempotency, audit, evidence or intent query makes
// it READ_ERROR (action), partial, with sources.mysql naming the failed
// query and the failed step unknown (docs/verdicts.md#partial).
func TestFailedReadIsNeverOK(t *testing.T) {
	healthy := all(1, 1, acked("PAY-1:notify"))
	done := idem(sources.IdempotencyRow{Key: "m-1", Action: ActionDone})
	skipped := idem(sources.IdempotencyRow{Key: "m-1", Action: ActionSkipped})
	bases := []struct {
		name string
		opts []evOpt
		want Code // without the failure
	}{
		{"complete", join(healthy, state("DONE"), done, kafka(101, 0)), Complete},
		{"complete uncommitted", join(healthy, state("DONE"), done, kafka(100, 0)), CompleteUncommitted},
		{"will redeliver", join(all(1, 0), state("DEBIT_DONE"), kafka(100, 0)), WillRedeliver},
		{"incomplete", join(all(1, 0), state("DEBIT_DONE")), Incomplete},
		{"failed", join(all(1, 0), state("FAILED"), kafka(101, 0)), Failed},
		{"skipped ok", []evOpt{skipped, entity("REFUNDED")}, SkippedOK},
		{"complete by its records, no state row", join(healthy, done), Complete},
	}
	failures := []struct {
		name  string
		opt   evOpt
		names string // what sources.mysql must name
		step  int    // the step left unknown, -1 for none
	}{
		{"state query", queryFailed(sources.QueryState), "state query", -1},
		{"idempotency query", queryFailed(sources.QueryIdempotency), "idempotency query", -1},
		{"audit query", queryFailed(sources.QueryAudit), "audit query", -1},
		{"debit evidence query", stepFailed(0), "debit: evidence query", 0},
		{"notify intent query", stepFailed(2), "notify: intent query", 2},
	}
	for _, b := range bases {
		if r := Diagnose(newEv(settlementSkip(), b.opts...)); r.Verdict.Code != b.want || r.Partial {
			t.Fatalf("%s: verdict %s (partial %v) without a failure, want %s; findings %v", b.name, r.Verdict.Code, r.Partial, b.want, r.Findings)
		}
		for _, fl := range failures {
			t.Run(b.name+"/"+fl.name, func(t *testing.T) {
				r := Diagnose(newEv(settlementSkip(), join(b.opts, fl.opt)...))
				if r.Verdict.Code != ReadError || r.Verdict.Severity != SeverityAction {
					t.Errorf("verdict %s (%s), want READ_ERROR (action); findings %v", r.Verdict.Code, r.Verdict.Severity, r.Findings)
				}
				if !r.Partial || !strings.Contains(r.Sources["mysql"], fl.names) || !slices.Contains(r.Unread(), "mysql") {
					t.Errorf("partial %v, sources %v: want partial, sources.mysql naming %q", r.Partial, r.Sources, fl.names)
				}
				if !strings.Contains(r.Verdict.Summary, fl.names) {
					t.Errorf("summary %q does not name %q", r.Verdict.Summary, fl.names)
				}
				if fl.step >= 0 && r.Steps[fl.step].Status != StepUnknown {
					t.Errorf("step %s is %s, want unknown", r.Steps[fl.step].Name, r.Steps[fl.step].Status)
				}
				if ExitCode([]Report{r}) != sources.ExitPartial {
					t.Errorf("exit %d, want %d", ExitCode([]Report{r}), sources.ExitPartial)
				}
			})
		}
	}
}

// The lag of the message's partition and the group's total are in the
// Kafka view when Kafka was read, and null when it was not.
func TestDiagnoseLag(t *testing.T) {
	for _, tc := range []struct {
		name          string
		opts          []evOpt
		lag, groupLag *int64
	}{
		{"committed inside the log", []evOpt{state("DEBIT_DONE"), kafka(90, 0)}, ip(410), ip(410)},
		{"no committed offset", []evOpt{state("DEBIT_DONE"), kafka(-1, 20)}, ip(480), ip(480)},
		{"kafka unreachable", []evOpt{state("DEBIT_DONE"), kafka(90, 0), kafkaDown()}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Diagnose(newEv(settlement(), tc.opts...))
			if !eqPtr(r.Kafka.Lag, tc.lag) || !eqPtr(r.Kafka.GroupLag, tc.groupLag) {
				t.Errorf("lag %v group_lag %v, want %v %v", deref(r.Kafka.Lag), deref(r.Kafka.GroupLag), deref(tc.lag), deref(tc.groupLag))
			}
		})
	}
}

func eqPtr(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
