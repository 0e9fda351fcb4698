package plans_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// TestNextPlansAsPrinted holds NEXT's repair lines (Next) against the
// planner itself (Build, as `opctl repair plan` calls it): every
// printed `repair plan` line, its words read as sh reads them with REASON
// and ATTEST set, makes a plan; a line with --attest (and no --action) needs
// it: without it the planner says bad input (exit 2); and where NEXT prints
// `where` again instead of a plan line, the planner does refuse that plan.
// lab/demo's TestNextRunsAsPrinted runs the lines on real incidents.
func TestNextPlansAsPrinted(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		p    *config.Pipeline
		ev   func(*sources.Evidence)
		code inspect.Code
		// attest: the plan line carries --attest (a manual action).
		attest bool
		// planLines: how many `repair plan` lines NEXT prints.
		planLines int
	}{
		{"duplicate debit, reversible", settlementP(true, "", ""), func(e *sources.Evidence) {
			debits(e, 2)
			ledger(e, 1)
			calls(e, 2, acked(t0, "PAY-1:notify:1"))
			st(e, "DONE")
			stored(e, 101)
		}, inspect.DuplicateEffect, false, 1},
		{"duplicate debit, no reverse statements", settlementP(false, "", ""), func(e *sources.Evidence) {
			debits(e, 2)
			ledger(e, 1)
			calls(e, 2, acked(t0, "PAY-1:notify:1"))
			st(e, "DONE")
			stored(e, 101)
		}, inspect.DuplicateEffect, true, 1},
		{"seed 000: debit reversible, notify without compensate", settlementP(true, "", ""), func(e *sources.Evidence) {
			debits(e, 2)
			ledger(e, 1)
			calls(e, 2, acked(t0, "PAY-1:notify:1"), acked(t0.Add(time.Minute), "PAY-1:notify:2"))
			st(e, "DONE")
			stored(e, 100)
		}, inspect.DuplicateEffect, true, 1},
		{"notify compensated by request id", settlementP(true, "http://d/compensate?request_id={request_id}", ""), func(e *sources.Evidence) {
			debits(e, 1)
			ledger(e, 1)
			calls(e, 2, acked(t0, "PAY-1:notify:1"), acked(t0.Add(time.Minute), "PAY-1:notify:2"))
			st(e, "DONE")
			stored(e, 101)
		}, inspect.DuplicateEffect, false, 1},
		// The downstream counts 2 effects, one call is known: which one to
		// compensate cannot be told, so it is undone by hand.
		{"compensate by request id, calls cannot be told apart", settlementP(true, "http://d/compensate?request_id={request_id}", "http://d/effects?biz_id={biz_id}"), func(e *sources.Evidence) {
			debits(e, 1)
			ledger(e, 1)
			calls(e, 2, acked(t0, "PAY-1:notify:1"))
			e.DB.Steps[2].BizProbe = &sources.ProbeResult{Outcome: sources.ProbeApplied, Count: intp(2)}
			st(e, "DONE")
			stored(e, 101)
		}, inspect.DuplicateEffect, true, 1},
		{"compensate by biz_id with the downstream's count", settlementP(true, "http://d/compensate?biz_id={biz_id}", "http://d/effects?biz_id={biz_id}"), func(e *sources.Evidence) {
			debits(e, 1)
			ledger(e, 1)
			e.DB.Steps[2].BizProbe = &sources.ProbeResult{Outcome: sources.ProbeApplied, Count: intp(2)}
			st(e, "DONE")
			stored(e, 101)
		}, inspect.DuplicateEffect, false, 1},
		{"seed 001: wms lock twice, no compensate", fulfilmentP(""), func(e *sources.Evidence) {
			rowsOf(e, 0, 1)
			e.DB.Steps[1].BizProbe = &sources.ProbeResult{Outcome: sources.ProbeApplied, Count: intp(2)}
			calls(e, 2, acked(t0, "F-1:logistics"))
			rowsOf(e, 3, 1)
			st(e, "DONE")
			stored(e, 101)
		}, inspect.DuplicateEffect, true, 1},
		{"duplicated outbox row", fulfilmentP("http://w/compensate?biz_id={biz_id}"), func(e *sources.Evidence) {
			rowsOf(e, 0, 1)
			e.DB.Steps[1].BizProbe = &sources.ProbeResult{Outcome: sources.ProbeApplied, Count: intp(1)}
			calls(e, 2, acked(t0, "F-1:logistics"))
			rowsOf(e, 3, 2)
			st(e, "DONE")
			stored(e, 101)
		}, inspect.DuplicateEffect, true, 1},
		{"unknown outcome, last step", settlementP(true, "", ""), func(e *sources.Evidence) {
			debits(e, 1)
			ledger(e, 1)
			calls(e, 2, unacked(t0, "PAY-1:notify:1"))
			st(e, "LEDGER_DONE")
			stored(e, 101)
		}, inspect.UnknownOutcome, true, 2},
		{"unknown outcome, last step, Kafka down", settlementP(true, "", ""), func(e *sources.Evidence) {
			debits(e, 1)
			ledger(e, 1)
			calls(e, 2, unacked(t0, "PAY-1:notify:1"))
			st(e, "LEDGER_DONE")
			kafkaDown(e)
		}, inspect.UnknownOutcome, true, 1},
		{"unknown outcome, middle step, Kafka down", fulfilmentP(""), func(e *sources.Evidence) {
			rowsOf(e, 0, 1)
			calls(e, 2, unacked(t0, "F-1:logistics"))
			st(e, "WMS_CONFIRMED")
			e.DB.Steps[1].BizProbe = &sources.ProbeResult{Outcome: sources.ProbeApplied, Count: intp(1)}
			kafkaDown(e)
		}, inspect.UnknownOutcome, true, 0},
		{"unknown outcome, inconclusive probe, no state row", fulfilmentP(""), func(e *sources.Evidence) {
			rowsOf(e, 0, 1)
			e.DB.Steps[1].BizProbe = &sources.ProbeResult{Outcome: sources.ProbeInconclusive, Detail: "connection refused"}
			e.Sources["probe"] = "wms: connection refused"
			stored(e, 101)
		}, inspect.UnknownOutcome, true, 2},
		{"unknown outcome, failed status: no state change is safe", settlementP(true, "", ""), func(e *sources.Evidence) {
			debits(e, 1)
			ledger(e, 1)
			calls(e, 2, unacked(t0, "PAY-1:notify:1"))
			st(e, "FAILED")
			stored(e, 101)
		}, inspect.UnknownOutcome, true, 0},
		// applied would advance past ledger, which has no effect; absent
		// republishes from notify.
		{"unknown outcome after a step without effect", settlementP(true, "", ""), func(e *sources.Evidence) {
			debits(e, 1)
			calls(e, 2, unacked(t0, "PAY-1:notify:1"))
			st(e, "DEBIT_DONE")
			stored(e, 101)
		}, inspect.UnknownOutcome, true, 1},
		{"wrongly skipped", skipP(), func(e *sources.Evidence) { skipped(e, t0); searched(e, 101) }, inspect.WronglySkipped, false, 1},
		{"wrongly skipped, Kafka down", skipP(), func(e *sources.Evidence) { skipped(e, t0); kafkaDown(e) }, inspect.WronglySkipped, false, 0},
		{"missing effect", settlementP(true, "", ""), func(e *sources.Evidence) {
			ledger(e, 1)
			calls(e, 2, acked(t0, "PAY-1:notify:1"))
			st(e, "DONE")
			stored(e, 101)
		}, inspect.MissingEffect, false, 1},
		{"missing effect, Kafka down", settlementP(true, "", ""), func(e *sources.Evidence) {
			ledger(e, 1)
			calls(e, 2, acked(t0, "PAY-1:notify:1"))
			st(e, "DONE")
			kafkaDown(e)
		}, inspect.MissingEffect, false, 0},
		{"state behind, republish from ledger", settlementP(true, "", ""), func(e *sources.Evidence) {
			debits(e, 1)
			st(e, "INIT")
			stored(e, 101)
		}, inspect.StateBehind, false, 1},
		{"state behind, republish, Kafka down", settlementP(true, "", ""), func(e *sources.Evidence) {
			debits(e, 1)
			st(e, "INIT")
			kafkaDown(e)
		}, inspect.StateBehind, false, 0},
		{"state behind up to the end, Kafka down: no republish", settlementP(true, "", ""), func(e *sources.Evidence) {
			debits(e, 1)
			ledger(e, 1)
			calls(e, 2, acked(t0, "PAY-1:notify:1"))
			st(e, "LEDGER_DONE")
			kafkaDown(e)
		}, inspect.StateBehind, false, 1},
		{"state behind, nothing contiguous to advance over", settlementP(true, "", ""), func(e *sources.Evidence) {
			ledger(e, 1)
			st(e, "INIT")
			stored(e, 101)
		}, inspect.StateBehind, false, 0},
		{"stranded, every step claimed by a status that is not terminal", notified(settlementP(true, "", "")), func(e *sources.Evidence) {
			debits(e, 1)
			ledger(e, 1)
			calls(e, 2, acked(t0, "PAY-1:notify:1"))
			st(e, "NOTIFIED")
			stored(e, 101)
		}, inspect.Stranded, false, 0},
		{"stranded", settlementP(true, "", ""), func(e *sources.Evidence) {
			debits(e, 1)
			st(e, "DEBIT_DONE")
			stored(e, 101)
		}, inspect.Stranded, false, 1},
		{"stranded, partitioner stored", stored2(settlementP(true, "", ""), ""), func(e *sources.Evidence) {
			debits(e, 1)
			st(e, "DEBIT_DONE")
			stored(e, 101)
		}, inspect.Stranded, false, 1},
		{"stranded, partitioner stored, another redrive topic", stored2(settlementP(true, "", ""), "settlement-redrive"), func(e *sources.Evidence) {
			debits(e, 1)
			st(e, "DEBIT_DONE")
			stored(e, 101)
		}, inspect.Stranded, false, 0},
		{"a step that could not be read", settlementP(true, "", ""), func(e *sources.Evidence) {
			debits(e, 2)
			ledger(e, 1)
			e.DB.Steps[2].Err = "step_intent: table missing"
			st(e, "DONE")
			stored(e, 101)
		}, inspect.DuplicateEffect, false, 0},
		{"status in no list", settlementP(true, "", ""), func(e *sources.Evidence) {
			debits(e, 2)
			st(e, "WEIRD")
			stored(e, 101)
		}, inspect.DuplicateEffect, false, 0},
	}
	env := map[string]string{"REASON": "INC-1 next test", "ATTEST": "the downstream team checked their journal"}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := evidenceOf(c.p, t0)
			c.ev(&ev)
			r := inspect.Diagnose(ev)
			if r.Verdict.Code != c.code {
				t.Fatalf("verdict %s, want %s; findings %v", r.Verdict.Code, c.code, r.Findings)
			}
			parts := int32(0)
			if ev.Sources["kafka"] == sources.StatusOK {
				parts = 8 // what `repair plan` reads when Kafka answered
			}
			cfg := &config.Config{Pipelines: []config.Pipeline{*c.p}}
			r.Verdict.Next = cmd.NextFlags{}.Lines(plans.Next(plans.Input{Config: cfg, Report: r, Evidence: &ev, RedrivePartitions: parts}))
			next := strings.Join(r.Verdict.Next, "\n")
			build := func(o plans.Options) error {
				_, err := plans.Build(plans.Input{Config: cfg, Report: r, Evidence: &ev, RedrivePartitions: parts, Options: o})
				return err
			}
			planned := map[string]bool{} // --outcome of each plan line ("" without)
			n := 0
			for _, line := range r.Verdict.Next {
				if !strings.HasPrefix(line, "opctl repair plan ") {
					continue
				}
				n++
				o, err := planOptions(line, r, env)
				if err != nil {
					t.Errorf("%s\n%v", line, err)
					continue
				}
				planned[o.Outcome] = true
				if err := build(o); err != nil {
					t.Errorf("$ %s\nthe planner says: %v (%T)\nNEXT:\n%s", line, err, err, next)
				}
				if strings.Contains(line, "--attest") != c.attest {
					t.Errorf("$ %s\n--attest printed: %v, want %v", line, strings.Contains(line, "--attest"), c.attest)
				}
				if o.Attest != "" && o.Action == "" {
					o.Attest = ""
					var in *plans.InputError
					if err := build(o); !errors.As(err, &in) {
						t.Errorf("$ %s\nwithout --attest the planner says %v, not bad input: the line asks for an attestation the plan does not need", line, err)
					}
				}
			}
			if n != c.planLines {
				t.Errorf("%d repair plan lines, want %d:\n%s", n, c.planLines, next)
			}
			// What NEXT did not print a plan line for is a plan the planner refuses.
			var refused *plans.RefusedError
			natural := []plans.Options{{Reason: env["REASON"], Attest: env["ATTEST"]}}
			if c.code == inspect.UnknownOutcome {
				natural = nil
				for _, oc := range []string{inspect.AttestApplied, inspect.AttestAbsent} {
					natural = append(natural, plans.Options{Reason: env["REASON"], Attest: env["ATTEST"], Action: plans.Manual, Outcome: oc})
				}
			}
			for _, o := range natural {
				if planned[o.Outcome] {
					continue
				}
				if err := build(o); !errors.As(err, &refused) {
					t.Errorf("no plan line for %+v, but the planner says %v: NEXT should print it\nNEXT:\n%s", o, err, next)
				}
			}
			if !strings.HasSuffix(next, "opctl explain "+string(c.code)) {
				t.Errorf("NEXT does not end with opctl explain %s:\n%s", c.code, next)
			}
		})
	}
}

// planOptions reads a `repair plan` line as sh would (the comment dropped,
// quotes removed, $VAR expanded from env: an unset one is an error) into
// the planner's options. A flag the planner does not take is an error.
func planOptions(line string, r inspect.Report, env map[string]string) (plans.Options, error) {
	words, err := shellWords(line, env)
	if err != nil {
		return plans.Options{}, err
	}
	var o plans.Options
	if n := len(words); n < 5 || words[n-2] != "--" || words[n-1] != r.BizID {
		return o, fmt.Errorf("want opctl repair plan ... -- %s, got %q", r.BizID, words)
	}
	words = words[:len(words)-2]
	for i := 3; i < len(words); i++ {
		flag := words[i]
		if i+1 >= len(words) {
			return o, fmt.Errorf("%s has no value", flag)
		}
		v := words[i+1]
		i++
		switch flag {
		case "--pipeline":
			if v != r.Pipeline {
				return o, fmt.Errorf("--pipeline %s, the report is of %s", v, r.Pipeline)
			}
		case "--reason":
			o.Reason = v
		case "--attest":
			o.Attest = v
		case "--action":
			o.Action = plans.ActionType(v)
		case "--from-step":
			o.FromStep = v
		case "--outcome":
			o.Outcome = v
		case "--out":
		default:
			return o, fmt.Errorf("flag %s: not one this test knows `repair plan` takes", flag)
		}
	}
	return o, nil
}

// shellWords splits a line into words as a POSIX shell does for the
// quoting NEXT uses: '...', "..." with $VAR inside, bare words, and a
// comment from an unquoted # at a word's start.
func shellWords(line string, env map[string]string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	expand := func(s string, i int) (int, error) {
		j := i + 1
		for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9') {
			j++
		}
		name := s[i+1 : j]
		v, ok := env[name]
		if !ok || name == "" {
			return 0, fmt.Errorf("$%s is not set (the test sets %v)", name, keys(env))
		}
		cur.WriteString(v)
		return j, nil
	}
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
			i++
		case c == '#' && !inWord:
			return words, nil
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord, i = true, i+j+2
		case c == '"':
			i++
			inWord = true
			for i < len(line) && line[i] != '"' {
				if line[i] == '$' {
					var err error
					if i, err = expand(line, i); err != nil {
						return nil, err
					}
					continue
				}
				if line[i] == '\\' || line[i] == '`' {
					return nil, fmt.Errorf("this test does not read %q inside double quotes: %q", line[i], line)
				}
				cur.WriteByte(line[i])
				i++
			}
			if i >= len(line) {
				return nil, fmt.Errorf("unterminated \" in %q", line)
			}
			i++
		case c == '$':
			var err error
			if i, err = expand(line, i); err != nil {
				return nil, err
			}
			inWord = true
		case strings.IndexByte(`\;&|<>()`+"`", c) >= 0:
			return nil, fmt.Errorf("this test does not read %q outside quotes: %q", c, line)
		default:
			cur.WriteByte(c)
			inWord = true
			i++
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func intp(n int) *int { return &n }

// settlementP is seed 000's pipeline (testdata/config/settlement.yaml); the
// debit's reverse statements, notify's compensate and probe as given.
func settlementP(reverse bool, compensate, probe string) *config.Pipeline {
	p := &config.Pipeline{
		Name: "settlement", Topic: "settlement-event", Group: "settlement-consumer",
		Partitioner: "murmur2", MessageKey: "{biz_id}", OffsetReset: "latest", HonoursOpctlHeaders: true,
		State: &config.State{Table: "biz_operation", Key: "biz_id", Status: "status", Version: "version",
			Owner: "owner", LeaseUntil: "lease_until", CreatedAt: "created_at", UpdatedAt: "updated_at",
			Initial: []string{"INIT"}, Terminal: []string{"DONE"}, Failed: []string{"FAILED"}},
		Steps: []config.Step{
			{Name: "debit", Kind: "local", DoneStatus: "DEBIT_DONE", Evidence: "SELECT id, account_id, delta, created_at FROM balance_journal WHERE biz_id = ?"},
			{Name: "ledger", Kind: "local", DoneStatus: "LEDGER_DONE", Evidence: "SELECT id FROM ledger_entry WHERE biz_order_id = ?"},
			{Name: "notify", Kind: "remote", DoneStatus: "DONE", Intent: "SELECT request_id FROM step_intent WHERE biz_id = ?",
				Compensate: compensate, Probe: probe},
		},
	}
	if reverse {
		p.Steps[0].Reverse = []string{"INSERT INTO balance_journal (biz_id, account_id, delta, reverses_id) VALUES (:biz_id, :account_id, -:delta, :id)"}
	}
	return p
}

// fulfilmentP is seed 001's pipeline (testdata/config/fulfilment.yaml),
// with wms_lock's compensate as given.
func fulfilmentP(compensate string) *config.Pipeline {
	return &config.Pipeline{
		Name: "fulfilment", Topic: "order-fulfilment", Group: "fulfilment-consumer", Partitioner: "murmur2", MessageKey: "{biz_id}", HonoursOpctlHeaders: true,
		State: &config.State{Table: "fulfil_state", Key: "biz_id", Status: "status", Version: "version",
			Owner: "owner", LeaseUntil: "lease_until", CreatedAt: "created_at", UpdatedAt: "updated_at",
			Initial: []string{"RECEIVED"}, Terminal: []string{"DONE"}, Failed: []string{"ROLLED_BACK"}},
		Steps: []config.Step{
			{Name: "order_row", Kind: "local", DoneStatus: "DB_WRITTEN", Evidence: "SELECT id, status FROM fulfil_order WHERE biz_id = ?"},
			{Name: "wms_lock", Kind: "remote", DoneStatus: "WMS_CONFIRMED", Probe: "http://w/wms/locks?biz_id={biz_id}", Compensate: compensate},
			{Name: "logistics", Kind: "remote", DoneStatus: "LOGISTICS_CONFIRMED", Intent: "SELECT request_id FROM step_intent WHERE biz_id = ?"},
			{Name: "notice", Kind: "outbox", DoneStatus: "DONE", Evidence: "SELECT id, kind FROM outbox WHERE biz_id = ?"},
		},
	}
}

// skipP is seed 003's pipeline (testdata/config/skip.yaml): no state table.
func skipP() *config.Pipeline {
	return &config.Pipeline{
		Name: "orders", Topic: "order-event", Group: "order-consumer", Partitioner: "murmur2", MessageKey: "{biz_id}", HonoursOpctlHeaders: true,
		Steps:       []config.Step{{Name: "points", Kind: "local", Evidence: "SELECT id FROM points_grant WHERE order_id = ?"}},
		Idempotency: &config.Idempotency{Table: "consumer_idempotency", Key: "msg_id", BizID: "biz_id", Action: "action", CreatedAt: "created_at"},
		Entity:      &config.Entity{Query: "SELECT status FROM orders WHERE order_id = ?", Lifecycle: []string{"CREATED", "PAID", "SHIPPED"}, Cancels: []string{"REFUNDED"}, EffectStep: "points"},
	}
}

// notified gives notify the done_status NOTIFIED, which is not terminal.
func notified(p *config.Pipeline) *config.Pipeline { p.Steps[2].DoneStatus = "NOTIFIED"; return p }

func stored2(p *config.Pipeline, redrive string) *config.Pipeline {
	p.Partitioner, p.RedriveTopic = config.PartitionerStored, redrive
	return p
}

func evidenceOf(p *config.Pipeline, t0 time.Time) sources.Evidence {
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
	return e
}

func st(e *sources.Evidence, status string) {
	v := int64(4)
	now := e.DB.Now.Add(-5 * time.Minute)
	e.DB.State = sources.StateRow{Found: true, Status: status, Version: &v, MsgID: "m-1", CreatedAt: &now, UpdatedAt: &now}
}

func debits(e *sources.Evidence, n int) {
	for i := 0; i < n; i++ {
		e.DB.Steps[0].Rows = append(e.DB.Steps[0].Rows, sources.Row{Columns: []string{"id", "account_id", "delta", "created_at"},
			Values: []sources.Value{int64(i + 3), int64(1001), "-30.00", e.DB.Now}})
	}
}

func ledger(e *sources.Evidence, n int) { rowsOf(e, 1, n) }

func rowsOf(e *sources.Evidence, step, n int) {
	for i := 0; i < n; i++ {
		e.DB.Steps[step].Rows = append(e.DB.Steps[step].Rows, sources.Row{Columns: []string{"id"}, Values: []sources.Value{int64(i + 1)}})
	}
}

func calls(e *sources.Evidence, step int, in ...sources.Intent) { e.DB.Steps[step].Intents = in }

func acked(t time.Time, id string) sources.Intent {
	a := t.Add(time.Second)
	return sources.Intent{RequestID: id, SentAt: &t, AckedAt: &a, Result: "OK"}
}

func unacked(t time.Time, id string) sources.Intent { return sources.Intent{RequestID: id, SentAt: &t} }

// stored puts the message at partition 3 offset 100 (the state row's
// position) with the group's committed offset: 101 is past it (no
// redelivery), 100 redelivers it.
func stored(e *sources.Evidence, committed int64) {
	p, off := int32(3), int64(100)
	e.DB.State.Partition, e.DB.State.Offset = &p, &off
	e.Kafka.Partition, e.Kafka.Offset, e.Kafka.Located = 3, 100, sources.LocatedStored
	e.Kafka.Group.Partitions[3] = sources.PartitionView{Partition: 3, Committed: committed, LogStart: 0, LogEnd: 500}
	e.Kafka.Group.GroupState = "Empty"
	e.Kafka.Message = &sources.Message{Partition: 3, Offset: 100, Key: []byte(e.BizID), Value: []byte("{}"), Headers: map[string]string{"msg_id": "m-1"}}
}

// searched is stored without a stored position in the state row.
func searched(e *sources.Evidence, committed int64) {
	stored(e, committed)
	e.DB.State.Partition, e.DB.State.Offset = nil, nil
	e.Kafka.Located = sources.LocatedSearched
	e.Kafka.Message.Headers["msg_id"] = "m-7391"
}

func kafkaDown(e *sources.Evidence) {
	e.Sources["kafka"] = "kafka 127.0.0.1:9: connection refused"
	e.Kafka.Group = sources.GroupView{}
}

func skipped(e *sources.Evidence, t0 time.Time) {
	e.DB.Entity = &sources.EntityRow{Found: true, Status: "SHIPPED"}
	e.DB.Idempotency = []sources.IdempotencyRow{
		{Key: "m-7392", Action: "DONE", CreatedAt: &t0},
		{Key: "m-7391", Action: "SKIPPED", CreatedAt: &t0},
	}
}
