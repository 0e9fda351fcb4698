package repair

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// The executor on fakes: what the dry-run decorator and the committing
// path do with the store, and that audit failures come back. No database.

// fakeStore records what the executor asks of the write path.
type fakeStore struct {
	state     sources.StateRow
	rows      sources.LockedRows
	attemptOK error
	begins    int
	dos       int
	commits   int
	rollbacks int
	writes    []string
	audits    []sources.AuditEntry
	attempts  []sources.Attempt
	readOnly  []string
}

func (s *fakeStore) Do(ctx context.Context, fn func(sources.Tx) error) error {
	s.dos++
	tx, _ := s.Begin(ctx)
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (s *fakeStore) Begin(context.Context) (sources.Tx, error) {
	s.begins++
	return &fakeTx{s: s}, nil
}

func (s *fakeStore) AuditDone(context.Context, string, string) ([]sources.AuditDone, error) {
	return nil, nil
}

func (s *fakeStore) RecordAttempt(_ context.Context, _ string, a sources.Attempt) error {
	s.attempts = append(s.attempts, a)
	return s.attemptOK
}

func (s *fakeStore) Lock(_ context.Context, name string, _ time.Duration) (sources.Lock, error) {
	return &fakeLock{name: name, lost: make(chan struct{})}, nil
}

func (s *fakeStore) TouchAudit(context.Context, string, string, int, string, string) (bool, error) {
	return true, nil
}

func (s *fakeStore) ClaimAudit(context.Context, string, string, int, string, time.Time, json.RawMessage) (bool, error) {
	return true, nil
}

func (s *fakeStore) ReadOnly(context.Context) ([]string, error) { return s.readOnly, nil }

// fakeLock is a lock nobody else wants.
type fakeLock struct {
	name string
	lost chan struct{}
}

func (l *fakeLock) Name() string          { return l.name }
func (l *fakeLock) Contended() string     { return "" }
func (l *fakeLock) Lost() <-chan struct{} { return l.lost }
func (l *fakeLock) Release() error        { return nil }

type fakeTx struct{ s *fakeStore }

func (t *fakeTx) LockState(context.Context, *config.Pipeline, string) (sources.StateRow, time.Time, error) {
	return t.s.state, time.Now(), nil
}
func (t *fakeTx) LockIdempotency(context.Context, *config.Pipeline, string, string) (string, bool, error) {
	return "", false, nil
}
func (t *fakeTx) LockRows(context.Context, string, string) (sources.LockedRows, error) {
	return t.s.rows, nil
}
func (t *fakeTx) LockIntents(context.Context, string, string) ([]sources.Intent, error) {
	return nil, nil
}
func (t *fakeTx) LockEntity(context.Context, string, string) (sources.EntityRow, error) {
	return sources.EntityRow{}, nil
}
func (t *fakeTx) LockAudit(context.Context, string, string, string) ([]sources.AuditAction, error) {
	return nil, nil
}
func (t *fakeTx) WriteState(_ context.Context, _ *config.Pipeline, _ string, w sources.StateWrite) (sources.Statement, error) {
	t.s.writes = append(t.s.writes, "state")
	t.s.state.Status = w.Status
	if v := t.s.state.Version; v != nil {
		n := *v + 1
		t.s.state.Version = &n
	}
	return sources.Statement{SQL: "UPDATE state", Rows: 1}, nil
}
func (t *fakeTx) FlipIdempotency(context.Context, *config.Pipeline, string, string, string, string) (sources.Statement, error) {
	t.s.writes = append(t.s.writes, "flip")
	return sources.Statement{SQL: "UPDATE idem", Rows: 1}, nil
}
func (t *fakeTx) LockRecord(context.Context, *config.Pipeline, string, string) (sources.Row, bool, error) {
	return sources.Row{}, false, nil
}
func (t *fakeTx) Reverse(_ context.Context, stmt, _ string, rows sources.LockedRows, i int) (sources.Statement, error) {
	t.s.writes = append(t.s.writes, "reverse "+inspect.IdentityString(rows.Row(i).Identity()))
	return sources.Statement{SQL: stmt, Rows: 1}, nil
}
func (t *fakeTx) InsertAudit(_ context.Context, _ string, e sources.AuditEntry) error {
	t.s.audits = append(t.s.audits, e)
	return nil
}
func (t *fakeTx) SetAuditOutcome(context.Context, string, string, int, string, string, json.RawMessage) error {
	return nil
}
func (t *fakeTx) DeleteAudit(context.Context, string, string, int, string) error { return nil }
func (t *fakeTx) Commit() error                                                  { t.s.commits++; return nil }
func (t *fakeTx) Rollback() error                                                { t.s.rollbacks++; return nil }

// fakeCollector returns fixed evidence (the stale check).
type fakeCollector struct{ ev sources.Evidence }

func (c fakeCollector) ReadActionColumn(context.Context, *sources.Evidence) {}

func (c fakeCollector) Collect(context.Context, *config.Pipeline, string) (sources.Evidence, error) {
	return c.ev, nil
}

// failWriter is an audit.file that cannot be written.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// duplicateDebit is a settlement operation with two live debits (10, 11):
// its plan reverses 11.
func duplicateDebit(t *testing.T) (*config.Config, sources.Evidence, *plans.Plan, *fakeStore) {
	t.Helper()
	cfg := &config.Config{Pipelines: []config.Pipeline{{
		Name: "settlement", Topic: "settlement-event", Group: "g", Partitioner: "murmur2", MessageKey: "{biz_id}",
		State: &config.State{Table: "biz_operation", Key: "biz_id", Status: "status", Version: "version",
			Initial: []string{"INIT"}, Terminal: []string{"DONE"}, Failed: []string{"FAILED"}},
		Steps: []config.Step{
			{Name: "debit", Kind: "local", DoneStatus: "DEBIT_DONE", Evidence: "SELECT id, delta FROM j WHERE biz_id = ?",
				Reverse: []string{"INSERT INTO j (biz_id, delta, reverses_id) VALUES (:biz_id, -:delta, :id)"}},
			{Name: "ledger", Kind: "local", DoneStatus: "DONE", Evidence: "SELECT id FROM l WHERE biz_id = ?"},
		},
	}}}
	p := cfg.Pipeline("settlement")
	v := int64(4)
	debit := func(id int64) sources.Row {
		return sources.Row{Columns: []string{"id", "delta"}, Values: []sources.Value{id, "-5.00"}}
	}
	ev := sources.Evidence{BizID: "PAY-9", Pipeline: p, Sources: map[string]string{"mysql": "ok", "kafka": "ok"},
		DB: sources.DBEvidence{Now: time.Now(), State: sources.StateRow{Found: true, Status: "DONE", Version: &v},
			Steps: []sources.StepEvidence{{Name: "debit", Rows: []sources.Row{debit(10), debit(11)}}, {Name: "ledger", Rows: []sources.Row{{Columns: []string{"id"}, Values: []sources.Value{int64(1)}}}}}},
		Kafka: sources.KafkaEvidence{Partition: -1, Offset: -1, Located: sources.LocatedUnknown}}
	plan, err := plans.Build(plans.Input{Config: cfg, Report: inspect.Diagnose(ev), Evidence: &ev, Options: plans.Options{Reason: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Actions) != 1 || plan.Actions[0].Type != plans.Reverse || plan.Actions[0].Reverse.Identity != "11" {
		t.Fatalf("plan %+v", plan.Actions)
	}
	st := &fakeStore{state: ev.DB.State, rows: sources.LockedRows{Columns: []string{"id", "delta"}, Decimal: []bool{false, true},
		Values: [][]sources.Value{{int64(10), "-5.00"}, {int64(11), "-5.00"}}}}
	return cfg, ev, plan, st
}

func TestDryRunIsADecoratorOfTheStore(t *testing.T) {
	cfg, ev, plan, st := duplicateDebit(t)
	var mirror bytes.Buffer
	a := &Applier{Config: cfg, Store: st, Collector: fakeCollector{ev}, Operator: "t", Mirror: NewMirror(&mirror)}
	res, err := a.DryRun(context.Background(), plan)
	if err != nil || res.Outcome != OutcomeWouldApply || !res.DryRun || res.Actions[0].Outcome != OutcomeWouldApply {
		t.Fatalf("dry run: %v %+v", err, res)
	}
	// The action ran its writes in one transaction that was never committed.
	if st.dos != 0 || st.begins != 1 || st.commits != 0 || st.rollbacks != 1 {
		t.Errorf("Do %d, Begin %d, Commit %d, Rollback %d: want 0, 1, 0, 1", st.dos, st.begins, st.commits, st.rollbacks)
	}
	if strings.Join(st.writes, ",") != "reverse 11" || len(st.audits) != 1 {
		t.Errorf("writes %v audits %d", st.writes, len(st.audits))
	}
	if len(st.attempts) != 1 || st.attempts[0].Outcome != AttemptDryRun || !strings.Contains(string(st.attempts[0].Detail), `"result":"would_apply"`) {
		t.Errorf("attempts %+v", st.attempts)
	}
	if strings.Count(mirror.String(), "\n") != 1 || !strings.Contains(mirror.String(), `"outcome":"dry_run"`) {
		t.Errorf("mirror (the dry_run attempt only): %s", mirror.String())
	}
}

func TestApplyCommitsEachAction(t *testing.T) {
	cfg, ev, plan, st := duplicateDebit(t)
	var mirror bytes.Buffer
	a := &Applier{Config: cfg, Store: st, Collector: fakeCollector{ev}, Operator: "t", Mirror: NewMirror(&mirror)}
	res, err := a.Apply(context.Background(), plan)
	if err != nil || res.Outcome != OutcomeApplied || res.DryRun || res.Applied != 1 {
		t.Fatalf("apply: %v %+v", err, res)
	}
	if st.dos != 1 || st.commits != 1 || st.rollbacks != 0 || len(st.attempts) != 0 {
		t.Errorf("Do %d, Commit %d, Rollback %d, attempts %d: want 1, 1, 0, 0", st.dos, st.commits, st.rollbacks, len(st.attempts))
	}
	if !strings.Contains(mirror.String(), `"action":"reverse"`) || !strings.Contains(mirror.String(), `"outcome":"applied"`) {
		t.Errorf("mirror: %s", mirror.String())
	}
}

func TestDryRunRollsBackAFailedAction(t *testing.T) {
	cfg, ev, plan, st := duplicateDebit(t)
	v := int64(5)
	st.state.Version = &v // the guard state.version == 4 fails
	a := &Applier{Config: cfg, Store: st, Collector: fakeCollector{ev}, Operator: "t"}
	_, err := a.DryRun(context.Background(), plan)
	var rf *plans.RefusedError
	if !errors.As(err, &rf) || rf.Code != plans.CodeGuardFailed {
		t.Fatalf("want a guard refusal, got %v", err)
	}
	if st.commits != 0 || st.rollbacks != 1 || len(st.writes) != 0 {
		t.Errorf("Commit %d Rollback %d writes %v", st.commits, st.rollbacks, st.writes)
	}
	if len(st.attempts) != 1 || st.attempts[0].Outcome != AttemptDryRun {
		t.Errorf("attempts %+v", st.attempts)
	}
}

func TestAuditFailuresAreReturned(t *testing.T) {
	t.Run("attempt", func(t *testing.T) {
		cfg, ev, plan, st := duplicateDebit(t)
		st.attemptOK = errors.New("table is read only")
		changed := ev
		v := int64(5)
		changed.DB.State.Version = &v // the plan is stale
		a := &Applier{Config: cfg, Store: st, Collector: fakeCollector{changed}, Operator: "t"}
		_, err := a.Apply(context.Background(), plan)
		var rf *plans.RefusedError
		if !errors.As(err, &rf) || rf.Code != plans.CodeStale || !strings.Contains(err.Error(), "could not be recorded") {
			t.Fatalf("want the stale refusal and the failed attempt, got %v", err)
		}
		if rf.ExitCode() != sources.ExitRefused {
			t.Errorf("exit %d", rf.ExitCode())
		}
		// The whole error, refusal and failed record joined, is what the CLI
		// maps to an exit code: still 5.
		var coded interface{ ExitCode() int }
		if !errors.As(err, &coded) || coded.ExitCode() != sources.ExitRefused {
			t.Errorf("the joined error %v maps to exit %v, want %d", err, coded, sources.ExitRefused)
		}
	})
	t.Run("mirror", func(t *testing.T) {
		cfg, ev, plan, st := duplicateDebit(t)
		a := &Applier{Config: cfg, Store: st, Collector: fakeCollector{ev}, Operator: "t", Mirror: NewMirror(failWriter{})}
		res, err := a.Apply(context.Background(), plan)
		if err == nil || !strings.Contains(err.Error(), "audit.file: disk full") || res.Outcome != OutcomeApplied || st.commits != 1 {
			t.Fatalf("want the applied result and the mirror error, got %v %+v", err, res)
		}
	})
}

// withSend is a plan whose second action needs a sender, as the planner
// makes it: advance_state then republish (STATE_BEHIND: the debit exists,
// the state says INIT, Kafka will not redeliver), or reverse then
// compensate_remote (a debit and a notify call each made twice).
func withSend(t *testing.T, typ plans.ActionType) (*config.Config, sources.Evidence, *plans.Plan, *fakeStore) {
	t.Helper()
	cfg, ev, _, st := duplicateDebit(t)
	p := cfg.Pipeline("settlement")
	p.RedriveTopic = "settlement-redrive"
	parts := int32(0)
	switch typ {
	case plans.Republish:
		ev.DB.State.Status = "INIT"
		ev.DB.Steps[0].Rows = ev.DB.Steps[0].Rows[:1]
		ev.DB.Steps[1].Rows = nil
		part, off := int32(2), int64(100)
		ev.DB.State.Partition, ev.DB.State.Offset = &part, &off
		ev.Kafka = sources.KafkaEvidence{Partition: 2, Offset: 100, Located: sources.LocatedStored,
			Group: sources.GroupView{Topic: "settlement-event", Group: "g", GroupExists: true, GroupState: "Stable",
				Partitions: map[int32]sources.PartitionView{2: {Partition: 2, Committed: 200, LogStart: 0, LogEnd: 300}}}}
		parts = 8
		st.state = ev.DB.State
		st.rows.Values = st.rows.Values[:1]
	case plans.CompensateRemote:
		p.Steps = append(p.Steps, config.Step{Name: "notify", Kind: "remote", Intent: "SELECT request_id, sent_at, acked_at, result FROM i WHERE biz_id = ?",
			Compensate: "http://notify/compensate/{request_id}"})
		sent := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		acked := sent.Add(time.Second)
		ev.DB.Steps = append(ev.DB.Steps, sources.StepEvidence{Name: "notify", Intents: []sources.Intent{
			{RequestID: "r-1", SentAt: &sent, AckedAt: &acked}, {RequestID: "r-2", SentAt: &acked, AckedAt: &acked}}})
	}
	plan, err := plans.Build(plans.Input{Config: cfg, Report: inspect.Diagnose(ev), Evidence: &ev, RedrivePartitions: parts, Options: plans.Options{Reason: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Actions) != 2 || plan.Actions[1].Type != typ {
		t.Fatalf("plan %+v: want a second action %s", plan.Actions, typ)
	}
	return cfg, ev, plan, st
}

// fixedPartitions answers every topic's partition count with n.
type fixedPartitions int32

func (n fixedPartitions) PartitionCount(context.Context, string) (int32, error) { return int32(n), nil }

// A plan that needs a sender the apply has not (no Kafka for a republish,
// no poster for a compensation) is stopped before its first action, dry or
// real, and the attempt is recorded: a dry run must not say "would apply"
// for what the real apply would fail at after committing the reverse.
func TestNoSenderStopsThePlanBeforeAnyAction(t *testing.T) {
	for _, c := range []struct {
		typ  plans.ActionType
		want string
	}{
		{plans.Republish, "action 2 (republish to settlement-redrive) needs Kafka"},
		{plans.CompensateRemote, "action 2 (compensate_remote of step notify) needs an HTTP client"},
	} {
		for _, dry := range []bool{true, false} {
			name := string(c.typ) + "/apply"
			if dry {
				name = string(c.typ) + "/dry-run"
			}
			t.Run(name, func(t *testing.T) {
				cfg, ev, plan, st := withSend(t, c.typ)
				var mirror bytes.Buffer
				a := &Applier{Config: cfg, Store: st, Collector: fakeCollector{ev}, Operator: "t", Mirror: NewMirror(&mirror)}
				run := a.Apply
				if dry {
					run = a.DryRun
				}
				res, err := run(context.Background(), plan)
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("want %q, got %v", c.want, err)
				}
				if c.typ == plans.Republish && !strings.Contains(err.Error(), "kafka.brokers") {
					t.Errorf("the error should say how to configure Kafka: %v", err)
				}
				if res.Outcome != OutcomeFailed || res.Applied != 0 || res.Actions[0].Outcome != OutcomeNotRun || res.Actions[1].Outcome != OutcomeNotRun {
					t.Errorf("result %+v: want failed, no action run", res)
				}
				if st.begins != 0 || st.dos != 0 || len(st.writes) != 0 || len(st.audits) != 0 {
					t.Errorf("Begin %d Do %d writes %v audits %d: nothing may run", st.begins, st.dos, st.writes, len(st.audits))
				}
				wantOutcome := AttemptError
				if dry {
					wantOutcome = AttemptDryRun
				}
				if len(st.attempts) != 1 || st.attempts[0].Outcome != wantOutcome || st.attempts[0].ActionIndex != 2 ||
					!strings.Contains(string(st.attempts[0].Detail), `"result":"failed"`) {
					t.Errorf("attempts %+v: want one %s attempt at action 2", st.attempts, wantOutcome)
				}
				if strings.Count(mirror.String(), "\n") != 1 {
					t.Errorf("mirror (the attempt only): %s", mirror.String())
				}
			})
		}
	}
}

// With a sender, a dry run wraps it with one that sends nothing, and the
// plan would apply.
func TestDryRunSendsNothing(t *testing.T) {
	cfg, ev, plan, st := withSend(t, plans.Republish)
	pub := &countingPublisher{}
	a := &Applier{Config: cfg, Store: st, Collector: fakeCollector{ev}, Operator: "t", Publisher: pub, Partitions: fixedPartitions(8)}
	res, err := a.DryRun(context.Background(), plan)
	if err != nil || res.Outcome != OutcomeWouldApply || res.Applied != 2 {
		t.Fatalf("dry run: %v %+v", err, res)
	}
	if pub.sent != 0 || res.Actions[1].Published == nil || res.Actions[1].Published.Offset != -1 {
		t.Errorf("sent %d, published %+v: want nothing sent, offset -1", pub.sent, res.Actions[1].Published)
	}
}

// countingPublisher counts the records it is asked to send.
type countingPublisher struct{ sent int }

func (p *countingPublisher) Publish(_ context.Context, _ string, partition int32, _, _ []byte, _ map[string]string) (int32, int64, error) {
	p.sent++
	return partition, 42, nil
}

func (p *countingPublisher) LogEnd(context.Context, string, int32) (int64, error) { return 42, nil }

func (p *countingPublisher) FindPublished(context.Context, string, int32, int64, map[string]string) (int64, bool, error) {
	return -1, false, nil
}

// A write DSN on a read-only server (a replica): apply says so before it
// runs anything (it would fail on its first write, unable to record why),
// and the attempt goes to the audit mirror.
func TestReadOnlyWriteServer(t *testing.T) {
	cfg, ev, plan, st := duplicateDebit(t)
	st.readOnly = []string{"read_only", "super_read_only"}
	var mirror bytes.Buffer
	a := &Applier{Config: cfg, Store: st, Collector: fakeCollector{ev}, Operator: "t", Mirror: NewMirror(&mirror)}
	res, err := a.Apply(context.Background(), plan)
	if err == nil || !strings.Contains(err.Error(), "read-only (@@read_only=ON, @@super_read_only=ON)") || res.Outcome != OutcomeFailed {
		t.Fatalf("apply on a read-only server: %v %+v", err, res)
	}
	if st.begins != 0 || st.dos != 0 || len(st.attempts) != 0 {
		t.Errorf("Begin %d Do %d attempts %d: nothing may run", st.begins, st.dos, len(st.attempts))
	}
	if !strings.Contains(mirror.String(), `"outcome":"error"`) {
		t.Errorf("mirror: %s", mirror.String())
	}
}
