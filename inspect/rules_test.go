package inspect

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// documentedPrecedence is the table of verdict codes of docs/verdicts.md,
// highest precedence first, written out by hand.
var documentedPrecedence = []Code{"NOT_FOUND", "IN_FLIGHT", "REPAIR_INCOMPLETE", "DUPLICATE_EFFECT", "UNKNOWN_OUTCOME", "WRONGLY_SKIPPED", "MISSING_EFFECT",
	"STATE_BEHIND", "STRANDED", "READ_ERROR", "WILL_REDELIVER", "INCOMPLETE", "COMPLETE_UNCOMMITTED", "FAILED", "SKIPPED_OK", "COMPLETE"}

// The documented verdict precedence (docs/verdicts.md), highest first.
func TestPrecedenceIsTheDocumentedOrder(t *testing.T) {
	want := documentedPrecedence
	if got := Precedence(); !slices.Equal(got, want) {
		t.Fatalf("precedence\n got %v\nwant %v", got, want)
	}
}

func TestSeverities(t *testing.T) {
	cases := []struct {
		code Code
		want Severity // "": not a verdict
	}{
		{NotFound, SeverityNone},
		{InFlight, SeverityWatch},
		{DuplicateEffect, SeverityAction},
		{UnknownOutcome, SeverityAction},
		{WronglySkipped, SeverityAction},
		{MissingEffect, SeverityAction},
		{StateBehind, SeverityAction},
		{Stranded, SeverityAction},
		{ReadError, SeverityAction},
		{WillRedeliver, SeverityWatch},
		{Incomplete, SeverityWatch},
		{CompleteUncommitted, SeverityWatch},
		{Failed, SeverityWatch},
		{SkippedOK, SeverityOK},
		{Complete, SeverityOK},
		{UnknownStatus, ""},
		{EntityNotFound, ""},
		{MessageGone, ""},
		{Unverified, ""},
		{"BOGUS", ""},
	}
	for _, c := range cases {
		t.Run(string(c.code), func(t *testing.T) {
			if got := SeverityOf(c.code); got != c.want {
				t.Errorf("SeverityOf = %q, want %q", got, c.want)
			}
			// A verdict code is one of the documented table, an
			// informational finding is not (docs/verdicts.md).
			if got, want := IsVerdict(c.code), slices.Contains(documentedPrecedence, c.code); got != want {
				t.Errorf("IsVerdict = %v, want %v", got, want)
			}
		})
	}
}

// The table wires each code to its own rule, once, and only NOT_FOUND stops
// the table and only COMPLETE waits for no other verdict.
func TestTableWiring(t *testing.T) {
	want := []struct {
		code            Code
		see             func(*facts) []seen
		final, fallback bool
	}{
		{NotFound, seeNotFound, true, false},
		{UnknownStatus, seeUnknownStatus, false, false},
		{InFlight, seeInFlight, false, false},
		{RepairIncomplete, seeRepairIncomplete, false, false},
		{DuplicateEffect, seeDuplicateEffect, false, false},
		{UnknownOutcome, seeUnknownOutcome, false, false},
		{EntityNotFound, seeEntityNotFound, false, false},
		{WronglySkipped, seeWronglySkipped, false, false},
		{MissingEffect, seeMissingEffect, false, false},
		{StateBehind, seeStateBehind, false, false},
		{Stranded, seeStranded, false, false},
		{ReadError, seeReadError, false, false},
		{WillRedeliver, seeWillRedeliver, false, false},
		{Incomplete, seeIncomplete, false, false},
		{CompleteUncommitted, seeCompleteUncommitted, false, false},
		{Failed, seeFailed, false, false},
		{SkippedOK, seeSkippedOK, false, false},
		{Complete, seeComplete, false, true},
		{Unverified, seeUnverified, false, false},
	}
	if len(table) != len(want) {
		t.Fatalf("%d rules, want %d", len(table), len(want))
	}
	for i, w := range want {
		ru := table[i]
		t.Run(string(w.code), func(t *testing.T) {
			if ru.code != w.code {
				t.Fatalf("rule %d is %s", i, ru.code)
			}
			if reflect.ValueOf(ru.see).Pointer() != reflect.ValueOf(w.see).Pointer() {
				t.Errorf("wired to the wrong function")
			}
			if ru.final != w.final || ru.fallback != w.fallback {
				t.Errorf("final %v fallback %v", ru.final, ru.fallback)
			}
		})
	}
}

// sees returns a rule function that sees the given details.
func sees(details ...string) func(*facts) []seen {
	return func(*facts) []seen {
		var out []seen
		for _, d := range details {
			out = append(out, seen{detail: d})
		}
		return out
	}
}

func TestJudge(t *testing.T) {
	cases := []struct {
		name     string
		rules    []rule
		verdict  Finding
		findings []Finding
	}{
		{"the first verdict rule that sees something is the verdict, with its first finding",
			[]rule{{code: "A", severity: SeverityWatch, see: sees()}, {code: "B", severity: SeverityAction, see: sees("b1", "b2")}, {code: "C", severity: SeverityWatch, see: sees("c")}},
			Finding{Code: "B", Detail: "b1"}, []Finding{{Code: "B", Detail: "b1"}, {Code: "B", Detail: "b2"}, {Code: "C", Detail: "c"}}},
		{"an informational rule is never the verdict",
			[]rule{{code: "I", see: sees("i")}, {code: "B", severity: SeverityAction, see: sees("b")}},
			Finding{Code: "B", Detail: "b"}, []Finding{{Code: "I", Detail: "i"}, {Code: "B", Detail: "b"}}},
		{"a final rule that sees something stops the table",
			[]rule{{code: "F", severity: SeverityNone, see: sees("f"), final: true}, {code: "B", severity: SeverityAction, see: sees("b")}},
			Finding{Code: "F", Detail: "f"}, []Finding{{Code: "F", Detail: "f"}}},
		{"a final rule that sees nothing does not stop the table",
			[]rule{{code: "F", severity: SeverityNone, see: sees(), final: true}, {code: "B", severity: SeverityAction, see: sees("b")}},
			Finding{Code: "B", Detail: "b"}, []Finding{{Code: "B", Detail: "b"}}},
		{"a fallback rule does not run once a verdict is given",
			[]rule{{code: "B", severity: SeverityAction, see: sees("b")}, {code: "X", severity: SeverityOK, see: sees("x"), fallback: true}},
			Finding{Code: "B", Detail: "b"}, []Finding{{Code: "B", Detail: "b"}}},
		{"a fallback rule after informational findings only is the verdict",
			[]rule{{code: "I", see: sees("i")}, {code: "X", severity: SeverityOK, see: sees("x"), fallback: true}},
			Finding{Code: "X", Detail: "x"}, []Finding{{Code: "I", Detail: "i"}, {Code: "X", Detail: "x"}}},
		{"later verdict rules still add findings",
			[]rule{{code: "A", severity: SeverityAction, see: sees("a")}, {code: "B", severity: SeverityWatch, see: sees("b")}},
			Finding{Code: "A", Detail: "a"}, []Finding{{Code: "A", Detail: "a"}, {Code: "B", Detail: "b"}}},
		{"no verdict rule saw anything: INCOMPLETE, which is not a finding",
			[]rule{{code: "I", see: sees("i")}, {code: "B", severity: SeverityAction, see: sees()}},
			Finding{Code: Incomplete, Detail: "no rule matched"}, []Finding{{Code: "I", Detail: "i"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			verdict, findings := judge(c.rules, &facts{})
			if verdict != c.verdict {
				t.Errorf("verdict %+v, want %+v", verdict, c.verdict)
			}
			if !slices.Equal(findings, c.findings) {
				t.Errorf("findings %+v, want %+v", findings, c.findings)
			}
		})
	}
	if _, findings := judge(nil, &facts{}); findings == nil {
		t.Error("findings nil: the JSON would say null, not []")
	}
}

// ruleCase is one case of a rule test: set changes the base facts
// (settlement, nothing found, redelivery unknown).
type ruleCase struct {
	name string
	set  func(f *facts)
	want []seen
}

func baseFacts() facts {
	return facts{
		pipeline: settlement(),
		state:    StateView{Reached: -1},
		now:      t0.Add(10 * time.Minute),
		steps:    []StepView{stepAs("debit", StepAbsent, 0), stepAs("ledger", StepAbsent, 0), stepAs("notify", StepAbsent, 0)},
		kafka:    KafkaView{Topic: "settlement-event", Redelivery: RedeliveryUnknown, Located: sources.LocatedUnknown},
	}
}

func stepAs(name string, status StepStatus, count int) StepView {
	return StepView{Name: name, Status: status, EvidenceCount: count, Evidence: []EvidenceRow{}}
}

// stateAt sets a state row with the given status claiming n steps done, and
// the flags newFacts takes from the status, for the pipeline set so far.
func stateAt(status string, n int) func(*facts) {
	return func(f *facts) {
		f.state = StateView{Found: true, Status: status, Reached: n}
		ri := stateReached(f.pipeline, sources.StateRow{Found: true, Status: status})
		f.failed, f.unknownStatus = ri.failed, ri.unknownStatus
	}
}

func testRule(t *testing.T, see func(*facts) []seen, cases []ruleCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := baseFacts()
			if c.set != nil {
				c.set(&f)
			}
			// As newFacts does, from the pipeline and records set.
			f.skipped = skippedOf(f.pipeline, f.idempotency)
			if got := see(&f); !slices.Equal(got, c.want) {
				t.Errorf("saw %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestSeeNotFound(t *testing.T) {
	nf := one("", "no state row, evidence, intent, idempotency record or message for this id")
	n0, n1 := 0, 1
	testRule(t, seeNotFound, []ruleCase{
		{"nothing at all is not found", nil, nf},
		{"a state row is found", stateAt("INIT", 0), nil},
		{"an idempotency record is found", func(f *facts) { f.idempotency = []IdempotencyView{{Key: "m-1", Action: ActionPending}} }, nil},
		{"a message read back is found", func(f *facts) { f.message = &sources.Message{Offset: 100} }, nil},
		{"an evidence row is found", func(f *facts) { f.steps[1].Evidence = []EvidenceRow{{Row: row(1)}} }, nil},
		{"an intent is found", func(f *facts) { f.steps[2].Intents = []IntentView{{RequestID: "a", Outcome: "unknown"}} }, nil},
		{"a probe counting effects is found", func(f *facts) { f.steps[2].Probe = &ProbeView{Outcome: sources.ProbeApplied, Count: &n1} }, nil},
		{"a probe counting no effect is not", func(f *facts) { f.steps[2].Probe = &ProbeView{Outcome: sources.ProbeAbsent, Count: &n0} }, nf},
		{"a step that could not be read is never not found", func(f *facts) { f.steps[0].Error = "debit evidence: table missing" }, nil},
		{"a failed state query is never not found", failedQuery(sources.QueryState), nil},
		{"a failed idempotency query is never not found", failedQuery(sources.QueryIdempotency), nil},
		{"a failed audit query is never not found", failedQuery(sources.QueryAudit), nil},
		{"a failed query the reader did not name is never not found", failedQuery(""), nil},
		{"a failed entity query alone is: the entity is not the operation", failedQuery(sources.QueryEntity), nf},
		{"an audit action with an outcome is found", func(f *facts) { f.audit = []sources.AuditAction{{Action: "republish", Outcome: "publishing"}} }, nil},
		{"an audit action without an outcome is not", func(f *facts) { f.audit = []sources.AuditAction{{Action: "republish"}} }, nf},
	})
}

func TestSeeUnknownStatus(t *testing.T) {
	testRule(t, seeUnknownStatus, []ruleCase{
		{"a status in no list of the config", func(f *facts) { stateAt("WEIRD", -1)(f); f.unknownStatus = true },
			one("", `state status "WEIRD" is in no list of the config (initial, a step's done_status, terminal, failed)`)},
		{"a known status", stateAt("DEBIT_DONE", 1), nil},
		{"no state row", func(f *facts) { f.unknownStatus = true }, nil},
	})
}

func TestSeeInFlight(t *testing.T) {
	lease := func(active bool, until time.Time) func(*facts) {
		return func(f *facts) {
			stateAt("DEBIT_DONE", 1)(f)
			f.state.Owner, f.state.LeaseUntil, f.state.LeaseActive = "c-3", tp(until), active
		}
	}
	testRule(t, seeInFlight, []ruleCase{
		{"a live lease, timed by the database clock", lease(true, t0.Add(11*time.Minute+400*time.Millisecond)),
			one("", `owner "c-3" holds the lease until 2026-11-29 10:11:00.400 (database clock; 1m0s from now)`)},
		{"an expired lease", lease(false, t0.Add(9*time.Minute)), nil},
		{"no state row", func(f *facts) { lease(true, t0.Add(11*time.Minute))(f); f.state.Found = false }, nil},
	})
}

// failedQuery records that the operation-level query q failed.
func failedQuery(q string) func(*facts) {
	return func(f *facts) {
		f.failedQueries = append(f.failedQueries, sources.FailedQuery{Query: q, Err: "Error 1054 (42S22): Unknown column 'x'"})
		f.mysql = "mysql 127.0.0.1:3306: partial read: ..."
	}
}

func TestSeeReadError(t *testing.T) {
	testRule(t, seeReadError, []ruleCase{
		{"every step that could not be read, in step order", func(f *facts) {
			f.steps[2].Error, f.steps[0].Error = "notify intent: timeout", "debit evidence: table missing"
		}, []seen{{"debit", "debit evidence: table missing"}, {"notify", "notify intent: timeout"}}},
		{"every step read", nil, nil},
		{"the state query", failedQuery(sources.QueryState), one("", "state query: Error 1054 (42S22): Unknown column 'x'")},
		{"the operation's queries first, then the steps'", and(failedQuery(sources.QueryIdempotency), failedQuery(sources.QueryAudit),
			func(f *facts) { f.steps[1].Error = "ledger: evidence query: boom" }), []seen{
			{"", "idempotency query: Error 1054 (42S22): Unknown column 'x'"}, {"", "audit query: Error 1054 (42S22): Unknown column 'x'"},
			{"ledger", "ledger: evidence query: boom"}}},
		{"a query the reader did not name", failedQuery(""), one("", "Error 1054 (42S22): Unknown column 'x'")},
		{"the entity query, with a skip to judge", and(skipCase(nil, skip1()), failedQuery(sources.QueryEntity)),
			one("", "entity query: Error 1054 (42S22): Unknown column 'x'")},
		{"the entity query, with no skip: nothing rests on it", and(skipCase(nil, done2()), failedQuery(sources.QueryEntity)), nil},
		{"MySQL failed and named no query", func(f *facts) { f.mysql = "mysql 127.0.0.1:3306: partial read" },
			one("", "mysql: mysql 127.0.0.1:3306: partial read")},
		{"MySQL ok", func(f *facts) { f.mysql = sources.StatusOK }, nil},
		{"MySQL skipped", func(f *facts) { f.mysql = sources.StatusSkipped }, nil},
	})
}

func TestSeeDuplicateEffect(t *testing.T) {
	n := 2
	testRule(t, seeDuplicateEffect, []ruleCase{
		{"a local step counts evidence rows", func(f *facts) { f.steps[0] = stepAs("debit", StepDuplicated, 2) },
			one("debit", "2 evidence rows")},
		{"a remote step counts calls", func(f *facts) { f.steps[2] = stepAs("notify", StepDuplicated, 3) },
			one("notify", "3 acked or confirmed calls")},
		{"the downstream's own count wins", func(f *facts) {
			f.steps[2] = stepAs("notify", StepDuplicated, 2)
			f.steps[2].Probe = &ProbeView{Outcome: sources.ProbeApplied, Count: &n}
		}, one("notify", "the downstream reports 2 effects")},
		{"several steps, in step order", func(f *facts) {
			f.steps[2], f.steps[0] = stepAs("notify", StepDuplicated, 2), stepAs("debit", StepDuplicated, 3)
		}, []seen{{"debit", "3 evidence rows"}, {"notify", "2 acked or confirmed calls"}}},
		{"an effect applied once", func(f *facts) { f.steps[0] = stepAs("debit", StepApplied, 1) }, nil},
	})
}

func TestSeeUnknownOutcome(t *testing.T) {
	unknown := func(count int, in ...IntentView) func(*facts) {
		return func(f *facts) { f.steps[2] = stepAs("notify", StepUnknown, count); f.steps[2].Intents = in }
	}
	a := IntentView{RequestID: "a", Outcome: "unknown"}
	testRule(t, seeUnknownOutcome, []ruleCase{
		{"an unacked call nobody answered for", unknown(0, a), one("notify", "sent, no ack and no conclusive probe: a")},
		{"the probe's answer is shown", unknown(0, IntentView{RequestID: "a", Outcome: "unknown", Probe: "inconclusive: timeout after 2s"}),
			one("notify", "sent, no ack and no conclusive probe: a (probe inconclusive: timeout after 2s)")},
		{"a step with no probe says so", func(f *facts) { unknown(0, a)(f); f.pipeline.Steps[2].Probe = "" },
			one("notify", "sent, no ack and no conclusive probe: a (no probe configured)")},
		{"next to an effect it may be a duplicate", unknown(1, IntentView{RequestID: "b", Outcome: "acked"}, a),
			one("notify", "sent, no ack and no conclusive probe: a; 1 other call(s) took effect, so this one may be a duplicate")},
		{"an inconclusive {biz_id} probe without intents", func(f *facts) {
			unknown(0)(f)
			f.steps[2].Probe = &ProbeView{Outcome: sources.ProbeInconclusive, Detail: "connection refused"}
		}, one("notify", "no intent recorded and the probe was inconclusive: connection refused")},
		{"a step that could not be read is a read error instead", func(f *facts) { unknown(0, a)(f); f.steps[2].Error = "boom" }, nil},
		{"an acked call", func(f *facts) { f.steps[2] = stepAs("notify", StepApplied, 1) }, nil},
	})
}

// skipCase sets the seed-003 pipeline, whose one step points is absent, with
// the entity and idempotency records given.
func skipCase(entity *EntityView, rows ...IdempotencyView) func(*facts) {
	return func(f *facts) {
		f.pipeline, f.entity, f.idempotency = skipPipeline(), entity, rows
		f.steps = []StepView{stepAs("points", StepAbsent, 0)}
	}
}

// skip1 and done2 are idempotency records: m-1 SKIPPED, m-2 DONE.
func skip1() IdempotencyView { return IdempotencyView{Key: "m-1", Action: ActionSkipped} }
func done2() IdempotencyView { return IdempotencyView{Key: "m-2", Action: ActionDone} }

func TestSeeEntityNotFound(t *testing.T) {
	want := one("points", "record m-1 is SKIPPED but the entity was not found; opctl cannot tell whether the skip was right")
	testRule(t, seeEntityNotFound, []ruleCase{
		{"a skip and no entity row read", skipCase(nil, skip1()), want},
		{"a skip and the entity row missing", skipCase(&EntityView{}, skip1()), want},
		{"the newest skip is named", skipCase(nil, IdempotencyView{Key: "m-0", Action: ActionSkipped}, done2(), skip1()), want},
		{"the entity found", skipCase(&EntityView{Found: true, Status: "SHIPPED"}, skip1()), nil},
		{"no skip recorded", skipCase(nil, done2()), nil},
		{"a pipeline without entity", func(f *facts) { skipCase(nil, skip1())(f); f.pipeline.Entity = nil }, nil},
		{"the entity query failed: a READ_ERROR, not a missing row", and(skipCase(nil, skip1()), failedQuery(sources.QueryEntity)), nil},
	})
}

func TestSeeWronglySkipped(t *testing.T) {
	shipped := &EntityView{Found: true, Status: "SHIPPED"}
	testRule(t, seeWronglySkipped, []ruleCase{
		{"a skip, the entity not cancelling, the effect missing (seed 003)", skipCase(shipped, done2(), skip1()),
			one("points", "record m-1 is SKIPPED, the entity is SHIPPED (not cancelling) and step points has no effect")},
		{"the effect present", func(f *facts) { skipCase(shipped, skip1())(f); f.steps[0].Status = StepApplied }, nil},
		{"the entity cancelling", skipCase(&EntityView{Found: true, Status: "REFUNDED"}, skip1()), nil},
		{"the entity missing", skipCase(&EntityView{}, skip1()), nil},
		{"an effect step the pipeline lacks", func(f *facts) { skipCase(shipped, skip1())(f); f.pipeline.Entity.EffectStep = "nosuch" }, nil},
		{"no skip recorded", skipCase(shipped, done2()), nil},
	})
}

func TestSeeSkippedOK(t *testing.T) {
	refunded := &EntityView{Found: true, Status: "REFUNDED"}
	want := one("points", "record m-1 is SKIPPED and the entity is REFUNDED (cancels the effect)")
	testRule(t, seeSkippedOK, []ruleCase{
		{"a skip and the entity cancelling", skipCase(refunded, skip1()), want},
		{"cancelling, whatever the effect step says", func(f *facts) { skipCase(refunded, skip1())(f); f.steps[0].Status = StepApplied }, want},
		{"the entity not cancelling", skipCase(&EntityView{Found: true, Status: "PAID"}, skip1()), nil},
		{"the entity missing", skipCase(&EntityView{Status: "REFUNDED"}, skip1()), nil},
		{"no skip recorded", skipCase(refunded, done2()), nil},
	})
}

func TestSeeMissingEffect(t *testing.T) {
	testRule(t, seeMissingEffect, []ruleCase{
		{"a claimed local step without evidence", func(f *facts) { stateAt("LEDGER_DONE", 2)(f); f.steps[0].Status = StepApplied },
			one("ledger", "state LEDGER_DONE claims step ledger done, but it left no evidence row")},
		{"a claimed remote step without a call", func(f *facts) {
			stateAt("DONE", 3)(f)
			f.steps[0].Status, f.steps[1].Status = StepApplied, StepApplied
		}, one("notify", "state DONE claims step notify done, but it left no acked or confirmed call")},
		{"several steps, in step order", stateAt("LEDGER_DONE", 2), []seen{
			{"debit", "state LEDGER_DONE claims step debit done, but it left no evidence row"},
			{"ledger", "state LEDGER_DONE claims step ledger done, but it left no evidence row"}}},
		{"an unclaimed step may be absent", func(f *facts) { stateAt("DEBIT_DONE", 1)(f); f.steps[0].Status = StepApplied }, nil},
		{"an unknown step is not missing", func(f *facts) { stateAt("DEBIT_DONE", 1)(f); f.steps[0].Status = StepUnknown }, nil},
		{"a status that claims nothing", stateAt("FAILED", -1), nil},
		{"no state row", func(f *facts) { f.state.Reached = 2 }, nil},
	})
}

func TestSeeStateBehind(t *testing.T) {
	testRule(t, seeStateBehind, []ruleCase{
		{"a step ahead of the state", func(f *facts) { stateAt("DEBIT_DONE", 1)(f); f.steps[1] = stepAs("ledger", StepAhead, 1) },
			one("ledger", "step ledger took effect but the state is DEBIT_DONE: a resume from the state row would do it again")},
		{"an effect and no state row", func(f *facts) { f.steps[0] = stepAs("debit", StepApplied, 1) },
			one("debit", "step debit took effect (1 evidence rows) but there is no state row: a redelivery would start from scratch")},
		{"a duplicate and no state row", func(f *facts) { f.steps[2] = stepAs("notify", StepDuplicated, 2) },
			one("notify", "step notify took effect (2 acked or confirmed calls) but there is no state row: a redelivery would start from scratch")},
		{"several steps, in step order", func(f *facts) {
			stateAt("INIT", 0)(f)
			f.steps[2], f.steps[0] = stepAs("notify", StepAhead, 1), stepAs("debit", StepAhead, 1)
		}, []seen{
			{"debit", "step debit took effect but the state is INIT: a resume from the state row would do it again"},
			{"notify", "step notify took effect but the state is INIT: a resume from the state row would do it again"}}},
		{"a terminal operation is never behind", func(f *facts) {
			stateAt("DEBIT_DONE", 1)(f)
			f.steps[1], f.terminal = stepAs("ledger", StepAhead, 1), true
		}, nil},
		{"a terminal operation without state row neither", func(f *facts) { f.steps[0], f.terminal = stepAs("debit", StepApplied, 1), true }, nil},
		{"a pipeline without state table", func(f *facts) { f.pipeline.State = nil; f.steps[0] = stepAs("debit", StepApplied, 1) }, nil},
		{"an applied step the state claims", func(f *facts) { stateAt("DEBIT_DONE", 1)(f); f.steps[0] = stepAs("debit", StepApplied, 1) }, nil},
		{"an effect and a state query that failed: the row may exist", func(f *facts) {
			f.steps[0], f.unsettled = stepAs("debit", StepApplied, 1), true
		}, nil},
	})
}

// at places the message at offset off with the group's committed offset
// (-1: none) and log start, and the redelivery answer.
func at(off, committed, logStart int64, red RedeliveryAnswer) func(*facts) {
	return func(f *facts) {
		f.kafka.Partition, f.kafka.Offset, f.kafka.LogStart = pp(3), ip(off), ip(logStart)
		if committed >= 0 {
			f.kafka.Committed = ip(committed)
		}
		f.kafka.Redelivery, f.kafka.Located = red, sources.LocatedStored
	}
}

// and applies several changes in order.
func and(sets ...func(*facts)) func(*facts) {
	return func(f *facts) {
		for _, s := range sets {
			s(f)
		}
	}
}

// anchor and ended set the anchored and terminal flags; unsettled says
// the query that decides whether the operation ended failed.
func anchor(f *facts)    { f.anchored = true }
func ended(f *facts)     { f.terminal = true }
func unsettled(f *facts) { f.unsettled = true }

func TestSeeStranded(t *testing.T) {
	testRule(t, seeStranded, []ruleCase{
		{"the group committed past the message", and(anchor, at(100, 101, 0, RedeliveryNo)),
			one("", "committed offset 101 > message offset 100: the group has moved past it")},
		{"the message deleted by retention", and(anchor, at(50, 40, 200, RedeliveryNo)),
			one("", "message offset 50 is below log start 200: deleted by retention, never redelivered")},
		{"the stored position read below log start, and the group's numbers agree", and(anchor, at(50, 60, 200, RedeliveryNo), func(f *facts) {
			f.kafka.Detail = "offset 50 is below log start 200: deleted by retention"
		}), one("", "message offset 50 is below log start 200: deleted by retention, never redelivered")},
		{"the numbers decide, not the detail's text (retention ran between the group read and the locate)", and(anchor, at(50, 60, 40, RedeliveryNo), func(f *facts) {
			f.kafka.Detail = "offset 50 is below log start 55: deleted by retention"
		}), one("", "committed offset 60 > message offset 50: the group has moved past it")},
		{"never committed, offset_reset latest", and(anchor, at(100, -1, 0, RedeliveryNo)),
			one("", "the group has no committed offset and offset_reset is latest: the message will not be read again")},
		{"a terminal operation", and(anchor, ended, at(100, 101, 0, RedeliveryNo)), nil},
		{"no anchor", at(100, 101, 0, RedeliveryNo), nil},
		{"Kafka will redeliver", and(anchor, at(100, 100, 0, RedeliveryYes)), nil},
		{"redelivery unknown", anchor, nil},
		{"whether it ended is unknown", and(anchor, unsettled, at(100, 101, 0, RedeliveryNo)), nil},
	})
}

func TestSeeWillRedeliver(t *testing.T) {
	testRule(t, seeWillRedeliver, []ruleCase{
		{"anchored and redelivered", and(anchor, at(100, 100, 0, RedeliveryYes)),
			one("", "committed offset 100 ≤ message offset 100 and the message is retained")},
		{"redelivered, never committed, offset_reset earliest", and(anchor, at(100, -1, 0, RedeliveryYes)),
			one("", "committed offset none ≤ message offset 100 and the message is retained")},
		{"a terminal operation", and(anchor, ended, at(100, 100, 0, RedeliveryYes)), nil},
		{"no anchor", at(100, 100, 0, RedeliveryYes), nil},
		{"Kafka will not redeliver", and(anchor, at(100, 101, 0, RedeliveryNo)), nil},
		{"redelivery unknown", anchor, nil},
		{"whether it ended is unknown", and(anchor, unsettled, at(100, 100, 0, RedeliveryYes)), nil},
	})
}

func TestSeeIncomplete(t *testing.T) {
	testRule(t, seeIncomplete, []ruleCase{
		{"no anchor, whatever Kafka says", at(100, 100, 0, RedeliveryYes),
			one("", "not terminal, and its message could not be placed in Kafka")},
		{"anchored, redelivery unknown", anchor, one("", "not terminal, and whether Kafka will redeliver is unknown")},
		{"anchored, redelivery unknown, with why", and(anchor, func(f *facts) { f.kafka.Detail = "scanned 5000 records" }),
			one("", "not terminal, and whether Kafka will redeliver is unknown: scanned 5000 records")},
		{"anchored and redelivered", and(anchor, at(100, 100, 0, RedeliveryYes)), nil},
		{"anchored and not redelivered", and(anchor, at(100, 101, 0, RedeliveryNo)), nil},
		{"a terminal operation", ended, nil},
		{"whether it ended is unknown", unsettled, nil},
	})
}

func TestSeeCompleteUncommitted(t *testing.T) {
	testRule(t, seeCompleteUncommitted, []ruleCase{
		{"a terminal state row and Kafka will redeliver", and(stateAt("DONE", 3), ended, at(100, 100, 0, RedeliveryYes)),
			one("", "terminal (DONE) but committed offset 100 ≤ message offset 100: it will be read again")},
		{"committed past the message", and(stateAt("DONE", 3), ended, at(100, 101, 0, RedeliveryNo)), nil},
		{"redelivery unknown", and(stateAt("DONE", 3), ended), nil},
		{"not terminal", and(stateAt("LEDGER_DONE", 2), at(100, 100, 0, RedeliveryYes)), nil},
		{"terminal by idempotency records, no state row", and(ended, at(100, 100, 0, RedeliveryYes)), nil},
		{"whether it ended is unknown", and(stateAt("DONE", 3), ended, unsettled, at(100, 100, 0, RedeliveryYes)), nil},
	})
}

func TestSeeFailed(t *testing.T) {
	testRule(t, seeFailed, []ruleCase{
		{"a failed status", stateAt("FAILED", -1), one("", "state FAILED is a failed status")},
		{"a terminal status", stateAt("DONE", 3), nil},
		{"no state row", nil, nil},
		{"a failed status on a row that was not found", func(f *facts) { f.state.Status = "FAILED" }, nil},
		{"a pipeline without state table", func(f *facts) { f.pipeline.State = nil; stateAt("FAILED", -1)(f) }, nil},
	})
}

func TestSeeComplete(t *testing.T) {
	testRule(t, seeComplete, []ruleCase{
		{"a terminal state row", and(stateAt("DONE", 3), ended, at(100, 101, 0, RedeliveryNo)),
			one("", "state DONE, every step applied once, redelivery no")},
		{"terminal by idempotency records", and(ended, func(f *facts) { f.idempotency = []IdempotencyView{done2(), skip1()} }),
			one("", "no state row; idempotency records: m-2 DONE, m-1 SKIPPED")},
		{"not terminal", stateAt("LEDGER_DONE", 2), nil},
		{"terminal by records whose query failed in part", and(ended, unsettled), nil},
	})
}

// newFacts anchors the Kafka position by a state row or by opctl's
// republish, takes terminal from isTerminal, failed from the state status and
// the skip record once.
func TestNewFacts(t *testing.T) {
	republished := func(e *sources.Evidence) {
		e.Kafka.Group.Partitions[4] = sources.PartitionView{Partition: 4, Committed: 10, LogEnd: 20}
		e.DB.Audit = []sources.AuditAction{{PlanID: "abc", Action: "republish", Outcome: "published", Partition: pp(4), Offset: ip(15), At: t0}}
	}
	cases := []struct {
		name                       string
		p                          *config.Pipeline
		opts                       []evOpt
		anchored, terminal, failed bool
		unsettled                  bool
	}{
		{"a state row anchors", settlement(), []evOpt{state("DEBIT_DONE")}, true, false, false, false},
		{"a republished message anchors", settlement(), []evOpt{republished}, true, false, false, false},
		{"a message found by search alone does not", settlement(), []evOpt{kafka(100, 0)}, false, false, false, false},
		{"a terminal state row", settlement(), []evOpt{state("DONE")}, true, true, false, false},
		{"a failed state row is terminal", settlement(), []evOpt{state("FAILED")}, true, true, true, false},
		{"a status in no list is neither", settlement(), []evOpt{state("WEIRD")}, true, false, false, false},
		{"idempotency records all done or skipped", settlement(), []evOpt{idem(sources.IdempotencyRow{Key: "m-1", Action: ActionDone}, sources.IdempotencyRow{Key: "m-2", Action: ActionSkipped})}, false, true, false, false},
		{"a pending idempotency record", settlement(), []evOpt{idem(sources.IdempotencyRow{Key: "m-1", Action: ActionPending})}, false, false, false, false},
		{"a state row decides, not the idempotency records", settlement(), []evOpt{state("DEBIT_DONE"), idem(sources.IdempotencyRow{Key: "m-1", Action: ActionDone})}, true, false, false, false},
		// Whether it ended is unknown when the query that decides it failed.
		{"a state query that failed", settlementSkip(), []evOpt{queryFailed(sources.QueryState), idem(sources.IdempotencyRow{Key: "m-1", Action: ActionDone})}, false, true, false, true},
		{"an idempotency query that failed, no state row", settlementSkip(), []evOpt{queryFailed(sources.QueryIdempotency)}, false, false, false, true},
		{"an idempotency query that failed, no state table", skipPipeline(), []evOpt{queryFailed(sources.QueryIdempotency)}, false, false, false, true},
		{"an idempotency query that failed, the state row decides", settlementSkip(), []evOpt{state("DONE"), queryFailed(sources.QueryIdempotency)}, true, true, false, false},
		{"a query the reader did not name", settlementSkip(), []evOpt{state("DONE"), queryFailed("")}, true, true, false, true},
		{"an audit query that failed decides nothing of it", settlementSkip(), []evOpt{state("DONE"), queryFailed(sources.QueryAudit)}, true, true, false, false},
		{"a step query that failed decides nothing of it", settlement(), []evOpt{state("DONE"), stepFailed(0)}, true, true, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := newEv(c.p, c.opts...)
			r, reached := survey(ev)
			f := newFacts(ev, &r, reached)
			if f.anchored != c.anchored || f.terminal != c.terminal {
				t.Errorf("anchored %v terminal %v, want %v %v", f.anchored, f.terminal, c.anchored, c.terminal)
			}
			if f.failed != c.failed {
				t.Errorf("failed %v, want %v", f.failed, c.failed)
			}
			if f.unsettled != c.unsettled {
				t.Errorf("unsettled %v, want %v", f.unsettled, c.unsettled)
			}
			if len(f.steps) != len(r.Steps) || f.kafka.Located != r.Kafka.Located || f.state != r.State {
				t.Errorf("facts do not carry the report's views: %+v", f)
			}
		})
	}
}

// newFacts picks the newest SKIPPED record once, and only for a pipeline
// that names the entity a skip decision read.
func TestNewFactsSkipped(t *testing.T) {
	rows := idem(sources.IdempotencyRow{Key: "m-0", Action: ActionSkipped}, sources.IdempotencyRow{Key: "m-1", Action: ActionSkipped},
		sources.IdempotencyRow{Key: "m-2", Action: ActionDone})
	for _, c := range []struct {
		name string
		p    *config.Pipeline
		opts []evOpt
		want string // key of the record, "" for none
	}{
		{"the newest skip", skipPipeline(), []evOpt{rows}, "m-1"},
		{"no skip recorded", skipPipeline(), []evOpt{idem(sources.IdempotencyRow{Key: "m-2", Action: ActionDone})}, ""},
		{"a pipeline without entity", settlement(), []evOpt{rows}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := newEv(c.p, c.opts...)
			r, reached := survey(ev)
			f := newFacts(ev, &r, reached)
			got := ""
			if f.skipped != nil {
				got = f.skipped.Key
				if i := slices.IndexFunc(r.Idempotency, func(v IdempotencyView) bool { return v.Key == got }); i < 0 || &r.Idempotency[i] != f.skipped {
					t.Errorf("skipped %+v is not the report's record %+v", *f.skipped, r.Idempotency)
				}
			}
			if got != c.want {
				t.Errorf("skipped %q, want %q", got, c.want)
			}
		})
	}
}

// settlementSkip is the settlement pipeline with an idempotency table and an
// entity whose skip decision guards the ledger step: a pipeline on which
// both the state row and a skip can be wrong.
func settlementSkip() *config.Pipeline {
	p := settlement()
	p.Idempotency = &config.Idempotency{Table: "consumer_idempotency", Key: "msg_id", BizID: "biz_id", Action: "action", CreatedAt: "created_at"}
	p.Entity = &config.Entity{Query: "SELECT status FROM payment WHERE biz_id = ?", Lifecycle: []string{"CREATED", "PAID"},
		Cancels: []string{"REFUNDED"}, EffectStep: "ledger"}
	return p
}

// Diagnose, through the whole table: where two findings occur together, the
// higher row is the verdict and the findings are in table order
// (docs/verdicts.md). A row deleted from the table, or swapped with its
// neighbour, changes one of these.
func TestDiagnosePrecedence(t *testing.T) {
	skippedRec := idem(sources.IdempotencyRow{Key: "m-1", Action: ActionSkipped})
	readErr := func(step int) evOpt {
		return func(e *sources.Evidence) { e.DB.Steps[step].Err = "evidence: table missing" }
	}
	live := lease("c-3", t0.Add(11*time.Minute))
	cases := []struct {
		name     string
		p        *config.Pipeline
		opts     []evOpt
		verdict  Code
		findings []Code // every finding's code, in order
	}{
		{"UNKNOWN_STATUS is a finding, never the verdict", settlement(), join(all(1, 0), state("WEIRD"), kafka(100, 0)),
			WillRedeliver, []Code{UnknownStatus, WillRedeliver}},
		{"UNKNOWN_STATUS is listed before IN_FLIGHT", settlement(), join(all(1, 0), state("WEIRD"), live, kafka(100, 0)),
			InFlight, []Code{UnknownStatus, InFlight, WillRedeliver}},
		{"IN_FLIGHT is listed before READ_ERROR", settlement(), join(all(1, 0), state("DEBIT_DONE"), live, readErr(1), kafka(100, 0)),
			InFlight, []Code{InFlight, ReadError, WillRedeliver}},
		{"DUPLICATE_EFFECT beats READ_ERROR", settlement(), join(all(2, 0), state("DEBIT_DONE"), readErr(1), kafka(100, 0)),
			DuplicateEffect, []Code{DuplicateEffect, ReadError, WillRedeliver}},
		{"STRANDED beats READ_ERROR", settlement(), join(all(1, 0), state("DEBIT_DONE"), readErr(2), kafka(101, 0)),
			Stranded, []Code{Stranded, ReadError}},
		{"READ_ERROR beats WILL_REDELIVER", settlement(), join(all(1, 0), state("DEBIT_DONE"), readErr(1), kafka(100, 0)),
			ReadError, []Code{ReadError, WillRedeliver}},
		{"READ_ERROR beats INCOMPLETE", settlement(), join(all(1, 0), state("DEBIT_DONE"), readErr(1)),
			ReadError, []Code{ReadError, Incomplete}},
		{"READ_ERROR beats COMPLETE_UNCOMMITTED", settlement(), join(all(1, 1, acked("a")), state("DONE"), readErr(0), kafka(100, 0)),
			ReadError, []Code{ReadError, CompleteUncommitted}},
		{"READ_ERROR beats FAILED", settlement(), join(all(1, 0), state("FAILED"), readErr(1), kafka(101, 0)),
			ReadError, []Code{ReadError, Failed}},
		{"READ_ERROR beats SKIPPED_OK", settlementSkip(), join(nil, skippedRec, entity("REFUNDED"), readErr(1), kafka(101, 0)),
			ReadError, []Code{ReadError, SkippedOK}},
		{"READ_ERROR beats COMPLETE, which is dropped", settlement(), join(all(1, 1, acked("a")), state("DONE"), readErr(0), kafka(101, 0)),
			ReadError, []Code{ReadError}},
		{"UNKNOWN_OUTCOME is listed before ENTITY_NOT_FOUND", settlementSkip(), join(all(1, 1, unacked("a")), state("LEDGER_DONE"), skippedRec,
			func(e *sources.Evidence) { e.DB.Entity = &sources.EntityRow{} }, kafka(100, 0)),
			UnknownOutcome, []Code{UnknownOutcome, EntityNotFound, WillRedeliver}},
		{"WRONGLY_SKIPPED beats MISSING_EFFECT", settlementSkip(), join(all(1, 0), state("LEDGER_DONE"), skippedRec, entity("PAID"), kafka(101, 0)),
			WronglySkipped, []Code{WronglySkipped, MissingEffect, Stranded}},
		{"MISSING_EFFECT beats STATE_BEHIND", settlement(), join(all(0, 1, acked("a")), state("LEDGER_DONE"), kafka(100, 0)),
			MissingEffect, []Code{MissingEffect, StateBehind, WillRedeliver}},
		{"STATE_BEHIND beats STRANDED", settlement(), join(all(1, 1), state("DEBIT_DONE"), kafka(101, 0)),
			StateBehind, []Code{StateBehind, Stranded}},
		{"COMPLETE_UNCOMMITTED beats FAILED", settlement(), join(all(1, 0), state("FAILED"), kafka(100, 0)),
			CompleteUncommitted, []Code{CompleteUncommitted, Failed}},
		{"FAILED beats SKIPPED_OK", settlementSkip(), join(nil, state("FAILED"), skippedRec, entity("REFUNDED"), kafka(101, 0)),
			Failed, []Code{Failed, SkippedOK}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Diagnose(newEv(c.p, c.opts...))
			codes := []Code{}
			for _, f := range r.Findings {
				codes = append(codes, f.Code)
			}
			if r.Verdict.Code != c.verdict {
				t.Errorf("verdict %s, want %s; findings %v", r.Verdict.Code, c.verdict, codes)
			}
			if !slices.Equal(codes, c.findings) {
				t.Errorf("findings %v, want %v", codes, c.findings)
			}
		})
	}
}
