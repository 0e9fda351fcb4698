package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// t0 is the fixed clock of the tests: the database's and the header's.
var t0 = time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC)

func i64(v int64) *int64        { return &v }
func tp(t time.Time) *time.Time { return &t }

// settlementConfig is testdata/config/settlement.yaml (seed 000).
func settlementConfig(t testing.TB) *config.Config {
	t.Helper()
	data, err := os.ReadFile("../testdata/config/settlement.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseWithEnv("settlement.yaml", data, func(string) (string, bool) { return "root@tcp(127.0.0.1:3306)/x", true })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// opSpec describes one operation of the fake: its state, evidence and
// Kafka position.
type opSpec struct {
	id, status     string
	debits, ledger int
	notify         []sources.Intent
	owner          string
	lease          *time.Time
	committed      int64
	age            time.Duration
}

func row(id int64) sources.Row {
	return sources.Row{Columns: []string{"id", "account_id", "delta", "created_at"}, Values: []sources.Value{id, int64(1001), "-30.00", t0.Add(-time.Hour)}}
}

func (s opSpec) evidence(p *config.Pipeline) sources.Evidence {
	ev := sources.Evidence{BizID: s.id, Pipeline: p, Sources: map[string]string{"mysql": "ok", "kafka": "ok"}}
	ev.DB.Now = t0
	upd := t0.Add(-s.age)
	ev.DB.State = sources.StateRow{Found: true, Status: s.status, Version: i64(4), MsgID: "m-" + s.id, Owner: s.owner, LeaseUntil: s.lease,
		CreatedAt: tp(t0.Add(-time.Hour)), UpdatedAt: &upd}
	steps := []sources.StepEvidence{{Name: "debit"}, {Name: "ledger"}, {Name: "notify", Intents: s.notify}}
	for i := range s.debits {
		steps[0].Rows = append(steps[0].Rows, row(int64(11+i)))
	}
	for i := range s.ledger {
		steps[1].Rows = append(steps[1].Rows, sources.Row{Columns: []string{"id", "direction", "amount", "created_at"}, Values: []sources.Value{int64(21 + i), "OUT", "30.00", t0.Add(-time.Hour)}})
	}
	ev.DB.Steps = steps
	ev.Kafka = sources.KafkaEvidence{Partition: 3, Offset: 100, Located: sources.LocatedStored,
		Message: &sources.Message{Partition: 3, Offset: 100, Key: []byte(s.id), Value: []byte(`{"biz_id":"` + s.id + `"}`), Headers: map[string]string{"msg_id": "m-" + s.id}},
		Group: sources.GroupView{Topic: p.Topic, Group: p.Group, GroupState: "Stable", GroupExists: true,
			Partitions: map[int32]sources.PartitionView{3: {Partition: 3, Committed: s.committed, LogStart: 0, LogEnd: 500, Owner: "c-3"}, 4: {Partition: 4, Committed: 40, LogStart: 0, LogEnd: 60}}}}
	return ev
}

func acked(id string) sources.Intent {
	return sources.Intent{RequestID: id, SentAt: tp(t0.Add(-time.Hour)), AckedAt: tp(t0.Add(-time.Hour))}
}

// fakeOps are the fake's operations: one per verdict the console treats
// differently.
func fakeOps() []opSpec {
	return []opSpec{
		{id: "PAY-1", status: "DONE", debits: 2, ledger: 1, notify: []sources.Intent{acked("PAY-1:notify")}, committed: 101, age: 12 * time.Minute},
		{id: "PAY-2", status: "LEDGER_DONE", debits: 1, ledger: 1, committed: 101, age: 40 * time.Minute},
		{id: "PAY-3", status: "DEBIT_DONE", debits: 1, owner: "c-3", lease: tp(t0.Add(time.Minute)), committed: 90, age: 30 * time.Second},
		{id: "PAY-4", status: "LEDGER_DONE", debits: 1, ledger: 1, notify: []sources.Intent{{RequestID: "PAY-4:notify", SentAt: tp(t0.Add(-time.Hour))}}, committed: 101, age: 5 * time.Minute},
	}
}

// fake is the console's Service and reconcile on fixed operations; it
// records what it was asked to apply.
type fake struct {
	cfg *config.Config
	mu  sync.Mutex
	ops map[string]opSpec
	// extra are more list rows (benchmarks); failReconcile makes every
	// reconcile fail.
	extra         int
	failReconcile error
	applied       []*plans.Plan
	applyOpts     []repair.ApplyOptions
	// dried are the plans dry-run; planned counts the plans made.
	dried   []*plans.Plan
	planned int
}

func newFake(t testing.TB) *fake {
	f := &fake{cfg: settlementConfig(t), ops: map[string]opSpec{}}
	for _, o := range fakeOps() {
		f.ops[o.id] = o
	}
	return f
}

func (f *fake) pipeline() *config.Pipeline { return f.cfg.Pipeline("settlement") }

func (f *fake) op(id string) triage.Operation {
	f.mu.Lock()
	s, ok := f.ops[id]
	f.mu.Unlock()
	p := f.pipeline()
	var ev sources.Evidence
	if ok {
		ev = s.evidence(p)
	} else {
		ev = sources.Evidence{BizID: id, Pipeline: p, Sources: map[string]string{"mysql": "ok", "kafka": "ok"},
			DB:    sources.DBEvidence{Now: t0, Steps: make([]sources.StepEvidence, len(p.Steps))},
			Kafka: sources.KafkaEvidence{Partition: -1, Offset: -1, Located: sources.LocatedUnknown}}
		for i, st := range p.Steps {
			ev.DB.Steps[i].Name = st.Name
		}
	}
	return triage.Operation{Pipeline: p, Evidence: ev, Report: inspect.Diagnose(ev), RedrivePartitions: 8}
}

func (f *fake) Triage(_ context.Context, bizID, pipeline string) (*triage.Result, error) {
	if err := sources.ValidateBizID(bizID); err != nil {
		return nil, err
	}
	return &triage.Result{Config: f.cfg, BizID: bizID, Pipeline: pipeline, Ops: []triage.Operation{f.op(bizID)}, Names: f.cfg.PipelineNames()}, nil
}

func (f *fake) Plan(_ context.Context, op *triage.Operation, o plans.Options) (*plans.Plan, error) {
	o.Now = t0
	f.mu.Lock()
	f.planned++
	f.mu.Unlock()
	return plans.Build(plans.Input{Config: f.cfg, Report: op.Report, Evidence: &op.Evidence, RedrivePartitions: 8, Options: o})
}

// Apply refuses what the real one refuses first (a plan that does not
// verify or rederive) and otherwise repairs the operation: its next triage
// is COMPLETE.
func (f *fake) Apply(_ context.Context, p *plans.Plan, o repair.ApplyOptions) (*repair.Result, error) {
	if err := plans.Rederive(f.cfg, p); err != nil {
		return &repair.Result{PlanID: p.ID, BizID: p.BizID, Outcome: repair.OutcomeRefused, Refused: err.Error()}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	res := &repair.Result{PlanID: p.ID, BizID: p.BizID, Pipeline: p.Pipeline, DryRun: o.DryRun, Total: len(p.Actions), Applied: len(p.Actions), Outcome: repair.OutcomeApplied}
	out := repair.OutcomeApplied
	if o.DryRun {
		res.Outcome, out = repair.OutcomeWouldApply, repair.OutcomeWouldApply
	}
	for _, a := range p.Actions {
		ar := repair.ActionResult{Index: a.Index, Type: a.Type, Step: a.Step, Summary: a.Summary, Outcome: out}
		if a.Reverse != nil {
			for _, s := range a.Reverse.Statements {
				ar.Statements = append(ar.Statements, sources.Statement{SQL: s, Rows: 1})
			}
		}
		res.Actions = append(res.Actions, ar)
	}
	if o.DryRun {
		f.dried = append(f.dried, p)
	} else {
		f.applied = append(f.applied, p)
		f.applyOpts = append(f.applyOpts, o)
		s := f.ops[p.BizID]
		s.debits, s.status = 1, "DONE"
		f.ops[p.BizID] = s
	}
	return res, nil
}

func (f *fake) Audit(_ context.Context, flt sources.AuditFilter) (*sources.AuditLog, error) {
	log := &sources.AuditLog{Actions: []sources.AuditRow{}, Attempts: []sources.AttemptRow{}}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.applied {
		if p.BizID != flt.BizID {
			continue
		}
		for _, a := range p.Actions {
			log.Actions = append(log.Actions, sources.AuditRow{PlanID: p.ID, ActionIndex: a.Index, BizID: p.BizID, Pipeline: p.Pipeline,
				Action: string(a.Type), Operator: "alice", Reason: p.Reason, Outcome: "applied", CreatedAt: t0, UpdatedAt: t0})
		}
	}
	return log, nil
}

// reconcile emits the fake's operations (and f.extra more), each with the
// verdict Diagnose gives it, and a summary with a refused check.
func (f *fake) reconcile(_ context.Context, o reconcile.Options, emit func(reconcile.Result) error) (*reconcile.Summary, error) {
	if f.failReconcile != nil {
		return nil, f.failReconcile
	}
	for _, s := range fakeOps() {
		op := f.op(s.id)
		r := op.Report
		res := reconcile.Result{Target: reconcile.Target{BizID: r.BizID, Pipeline: r.Pipeline, Check: "stuck", Verdict: r.Verdict.Code},
			Severity: r.Verdict.Severity, Seen: reconcile.Seen{UpdatedAt: r.State.UpdatedAt, DBNow: r.DBNow, Partition: r.Kafka.Partition, Offset: r.Kafka.Offset, Owner: r.State.Owner}}
		if len(r.Findings) > 0 {
			res.Step = r.Findings[0].Step
		}
		if err := emit(res); err != nil {
			return nil, err
		}
	}
	for i := range f.extra {
		sev, code := inspect.SeverityAction, inspect.Stranded
		if i%3 == 0 {
			sev, code = inspect.SeverityWatch, inspect.WillRedeliver
		}
		upd := t0.Add(-time.Duration(i) * time.Second)
		part, off := int32(i%8), int64(i)
		if err := emit(reconcile.Result{Target: reconcile.Target{BizID: fmt.Sprintf("BULK-%05d", i), Pipeline: "settlement", Check: "stuck", Verdict: code, Step: "ledger"},
			Severity: sev, Seen: reconcile.Seen{UpdatedAt: &upd, DBNow: tp(t0), Partition: &part, Offset: &off, Owner: fmt.Sprintf("c-%d", i%6)}}); err != nil {
			return nil, err
		}
	}
	return &reconcile.Summary{DBNow: t0, Checks: []reconcile.CheckStats{
		{Pipeline: "settlement", Check: "stuck", Status: reconcile.StatusOK},
		{Pipeline: "settlement", Check: "orphans", Status: reconcile.StatusRefused, Reason: "would need a full scan of ledger_entry"},
	}}, nil
}

// options are the console's options on the fake.
func (f *fake) options() Options {
	return Options{
		Triage:    func() (Triager, error) { return f, nil },
		Service:   func() (Service, error) { return f, nil },
		Reconcile: func() (reconcile.Func, error) { return f.reconcile, nil },
		Pipelines: []*config.Pipeline{f.pipeline()}, Refresh: time.Hour, Operator: "alice", Incident: "INC-7",
		Now: func() time.Time { return t0 },
	}
}

// newModel is a console on the fake, sized w×h, its first refresh done.
func newModel(t testing.TB, f *fake, o Options, w, h int) Model {
	t.Helper()
	m := New(context.Background(), o, NewStyles(false))
	m = step(t, m, tea.WindowSizeMsg{Width: w, Height: h})
	m = step(t, m, m.reconcileCmd(m.list.gen)())
	if m.detail.d != nil {
		m = step(t, m, m.whereCmd(m.detail.d.bizID, m.detail.d.pipeline)())
	}
	return m
}

// step is one Update.
func step(t testing.TB, m Model, msg tea.Msg) Model {
	t.Helper()
	next, _ := m.Update(msg)
	return next.(Model)
}

// press sends keys and runs the I/O command each returns that is one of
// the console's (triage, plan, apply, audit): what the program would do.
func press(t testing.TB, m Model, keys ...tea.KeyPressMsg) Model {
	t.Helper()
	for _, k := range keys {
		next, cmd := m.Update(k)
		m = next.(Model)
		m = run(t, m, cmd)
	}
	return m
}

// run runs cmd when it is one of the console's I/O commands and folds its
// message in; the others (cursor blink, spinner, ticks) are left alone.
func run(t testing.TB, m Model, cmd tea.Cmd) Model {
	t.Helper()
	if cmd == nil || !m.busyOrLoading() {
		return m
	}
	msg := cmd()
	switch msg.(type) {
	case whereMsg, planMsg, applyMsg, auditMsg, refreshMsg, crashMsg:
		return step(t, m, msg)
	}
	return m
}

func (m Model) busyOrLoading() bool {
	return m.detail.loading || m.list.refreshing || (m.detail.d != nil && m.detail.d.busy != "")
}

func keyRunes(s string) tea.KeyPressMsg {
	r := []rune(s)
	return tea.KeyPressMsg{Code: r[0], Text: s}
}

var (
	keyEnter = tea.KeyPressMsg{Code: tea.KeyEnter}
	keyEsc   = tea.KeyPressMsg{Code: tea.KeyEsc}
	keyDown  = tea.KeyPressMsg{Code: tea.KeyDown}
	keyUp    = tea.KeyPressMsg{Code: tea.KeyUp}
	keyTab   = tea.KeyPressMsg{Code: tea.KeyTab}
	keyCtrlC = tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
)

// typeText is one key per rune, as a person types.
func typeText(s string) []tea.KeyPressMsg {
	var out []tea.KeyPressMsg
	for _, r := range s {
		out = append(out, tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	return out
}

var errBoom = errors.New("dial tcp 127.0.0.1:3306: connect: connection refused")
