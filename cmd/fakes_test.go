package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// These are the gh-style command tests: flag parsing through runF
// (TestNewCmdX), and each command's run function against fakes of its
// dependencies, with stdout a terminal or not (TestXRun). None of them needs
// MariaDB or Kafka; the integration tests against both are in where_test.go,
// repair_test.go and reconcile_test.go.

// fakeTriager answers Triage with a fixed triage or error.
type fakeTriager struct {
	t     *triage.Result
	err   error
	asked []string
}

func (f *fakeTriager) Triage(_ context.Context, bizID, pipeline string) (*triage.Result, error) {
	f.asked = append(f.asked, bizID+"@"+pipeline)
	return f.t, f.err
}

func triageOf(rs ...inspect.Report) *triage.Result {
	t := &triage.Result{BizID: rs[0].BizID, Names: []string{"settlement", "orders"}}
	for _, r := range rs {
		t.Ops = append(t.Ops, triage.Operation{Pipeline: &config.Pipeline{Name: r.Pipeline}, Report: r})
	}
	return t
}

// notFound is what Diagnose says of an id a pipeline does not know.
func notFound(t *testing.T, pipeline string) inspect.Report {
	t.Helper()
	p := &config.Pipeline{Name: pipeline, Topic: "t", Steps: []config.Step{{Name: "s", Kind: config.KindLocal}}}
	ev := sources.Evidence{BizID: "NOPE-1", Pipeline: p, DB: sources.DBEvidence{Steps: []sources.StepEvidence{{Name: "s"}}},
		Kafka: sources.KafkaEvidence{Partition: -1, Offset: -1}, Sources: map[string]string{"mysql": "ok", "kafka": "ok"}}
	return inspect.Diagnose(ev)
}

func TestNewCmdWhere(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string // pipeline@window@limit when parsed
	}{
		{[]string{"PAY-1"}, ExitOK, "PAY-1@@5m0s@50000"},
		{[]string{"PAY-1", "--pipeline", "settlement", "--search-window", "10m", "--search-limit", "7"}, ExitOK, "PAY-1@settlement@10m0s@7"},
		{[]string{"it's; DROP TABLE x"}, ExitOK, "it's; DROP TABLE x@@5m0s@50000"},
		{[]string{}, ExitUsage, ""},
		{[]string{"a", "b"}, ExitUsage, ""},
		{[]string{""}, ExitUsage, ""},
		{[]string{"PAY\n1"}, ExitUsage, ""},
		{[]string{strings.Repeat("x", 513)}, ExitUsage, ""},
		{[]string{"PAY-1", "--search-limit", "0"}, ExitUsage, ""},
		{[]string{"PAY-1", "--search-window", "soon"}, ExitUsage, ""},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			ios, _, _, _ := iostreams.Test()
			f := NewFactory(ios, "test")
			var got *WhereOptions
			c := NewCmdWhere(f, func(_ context.Context, o *WhereOptions) error { got = o; return nil })
			c.SetFlagErrorFunc(func(_ *cobraCommand, err error) error { return &UsageError{Err: err} })
			c.SetArgs(tc.args)
			c.SetOut(io.Discard)
			c.SetErr(io.Discard)
			if code := exitCode(c.Execute(), false); code != tc.code {
				t.Fatalf("exit %d, want %d", code, tc.code)
			}
			if tc.want == "" {
				if got != nil {
					t.Fatalf("run called with %+v", got)
				}
				return
			}
			if s := got.BizID + "@" + got.Pipeline + "@" + got.SearchWindow.String() + "@" + itoa(got.SearchLimit); s != tc.want {
				t.Errorf("options %s, want %s", s, tc.want)
			}
		})
	}
}

func TestWhereRun(t *testing.T) {
	cases := []struct {
		name     string
		triage   *triage.Result
		pipeline string
		format   Format
		tty      bool
		code     int
		golden   string   // stdout must equal this golden file
		want     []string // stdout must contain each
	}{
		{name: "human on a terminal", triage: goldenTriage(t), format: FormatTable, tty: true, code: ExitAttention, golden: "where_tty.golden"},
		{name: "human piped", triage: goldenTriage(t), format: FormatTable, code: ExitAttention, golden: "where_piped.golden"},
		{name: "json", triage: goldenTriage(t), format: FormatJSON, code: ExitAttention, want: []string{`"code": "DUPLICATE_EFFECT"`, `"biz_id": "PAY-1"`}},
		{name: "known to one of two pipelines", triage: goldenTriage(t, notFound(t, "orders")), format: FormatJSON, code: ExitAttention,
			want: []string{`"pipeline": "settlement"`}},
		{name: "known to none", triage: triageOf(notFound(t, "settlement"), notFound(t, "orders")), format: FormatJSON, code: ExitNotFound,
			want: []string{`"code": "NOT_FOUND"`, `is not known to any pipeline (settlement, orders)`, `"pipeline": ""`}},
		{name: "not found in the pipeline asked", triage: func() *triage.Result {
			tr := triageOf(notFound(t, "orders"))
			tr.Pipeline = "orders"
			return tr
		}(), pipeline: "orders", format: FormatTable, code: ExitNotFound, want: []string{"NOT_FOUND", "is not known to pipeline orders"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ios, _, out, _ := iostreams.Test()
			ios.SetStdoutTTY(tc.tty)
			fake := &fakeTriager{t: tc.triage}
			err := runWhere(context.Background(), &WhereOptions{IO: ios, Format: tc.format, BizID: tc.triage.BizID, Pipeline: tc.pipeline,
				Triager: func() (Triager, error) { return fake, nil }})
			if code := exitCode(err, false); code != tc.code {
				t.Fatalf("exit %d (%v), want %d\n%s", code, err, tc.code, out)
			}
			var silent *SilentError
			if err != nil && !errors.As(err, &silent) {
				t.Errorf("the verdict's status is not silent: %v", err)
			}
			if tc.golden != "" {
				checkGolden(t, tc.golden, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if len(fake.asked) != 1 || fake.asked[0] != tc.triage.BizID+"@"+tc.pipeline {
				t.Errorf("triaged %v", fake.asked)
			}
		})
	}
}

func TestWhereRunErrors(t *testing.T) {
	conn := &sources.ConnError{Err: errors.New("mysql 127.0.0.1:1: connection refused")}
	for _, tc := range []struct {
		name string
		open error
		err  error
		code int
	}{
		{"mysql down", nil, conn, ExitError},
		{"bad config", errors.New("config opctl.yaml:3: unknown key"), nil, ExitError},
		{"unknown pipeline", nil, &config.PipelineError{Name: "nope", Have: []string{"settlement"}}, ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ios, _, out, _ := iostreams.Test()
			err := runWhere(context.Background(), &WhereOptions{IO: ios, Format: FormatTable, BizID: "PAY-1",
				Triager: func() (Triager, error) { return &fakeTriager{err: tc.err}, tc.open }})
			if code := exitCode(err, false); code != tc.code || out.Len() != 0 {
				t.Fatalf("exit %d (%v), want %d; stdout %q", code, err, tc.code, out)
			}
		})
	}
}

// fakeRepairer plans and applies from fixed answers.
type fakeRepairer struct {
	plan    *plans.Plan
	op      *triage.Operation
	planErr error
	batch   *repair.Batch
	results map[string]*repair.Result
	errs    map[string]error
	applied []string
	dry     []bool
	// stored are the plans of the audit, by id (StoredPlan).
	stored map[string]*plans.Plan
}

func (f *fakeRepairer) StoredPlan(_ context.Context, id string) (*plans.Plan, error) {
	if p := f.stored[id]; p != nil {
		return p, nil
	}
	return nil, &plans.InputError{Msg: "no plan " + id}
}

func (f *fakeRepairer) PlanID(context.Context, string, string, plans.Options) (*plans.Plan, *triage.Operation, error) {
	return f.plan, f.op, f.planErr
}

func (f *fakeRepairer) PlanTargets(context.Context, io.Reader, string, string, plans.Options) (*repair.Batch, error) {
	return f.batch, f.planErr
}

func (f *fakeRepairer) Apply(_ context.Context, p *plans.Plan, o repair.ApplyOptions) (*repair.Result, error) {
	f.applied = append(f.applied, p.BizID)
	f.dry = append(f.dry, o.DryRun)
	return f.results[p.BizID], f.errs[p.BizID]
}

// testPlan is a sealed one-action plan for bizID.
func testPlan(t *testing.T, bizID string) *plans.Plan {
	t.Helper()
	p := &plans.Plan{PlanVersion: plans.PlanVersion, Pipeline: "settlement", BizID: bizID, Verdict: inspect.StateBehind, Reason: "test",
		Actions: []plans.Action{{Index: 1, Type: plans.AdvanceState, Summary: "advance the state DEBIT_DONE → LEDGER_DONE", Guards: []plans.Guard{},
			State: &plans.StateChange{Table: "biz_operation", FromStatus: "DEBIT_DONE", ToStatus: "LEDGER_DONE"}}}}
	if err := p.Seal(); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRepairPlanRun(t *testing.T) {
	refused := &plans.RefusedError{Code: plans.CodeInFlight, Detail: "IN_FLIGHT: owner c-1 holds the lease"}
	nothing := &plans.NothingToRepairError{Verdict: inspect.Complete}
	op := &triage.Operation{Report: inspect.Report{BizID: "PAY-2", Pipeline: "settlement", Verdict: inspect.Verdict{Code: inspect.Complete, Summary: "state DONE"}}}
	cases := []struct {
		name   string
		fake   *fakeRepairer
		out    bool
		format Format
		code   int
		want   []string
	}{
		{name: "a plan, saved", fake: &fakeRepairer{plan: testPlan(t, "PAY-4")}, out: true, format: FormatTable, code: ExitOK,
			want: []string{"advance_state", "Saved the plan to", "opctl repair apply"}},
		{name: "a plan, not saved", fake: &fakeRepairer{plan: testPlan(t, "PAY-4")}, format: FormatTable, code: ExitOK,
			want: []string{"Not saved: add --out plan.json"}},
		{name: "a plan as json", fake: &fakeRepairer{plan: testPlan(t, "PAY-4")}, format: FormatJSON, code: ExitOK, want: []string{`"plan_version": 1`}},
		{name: "nothing to repair", fake: &fakeRepairer{op: op, planErr: nothing}, format: FormatTable, code: ExitOK,
			want: []string{"nothing to repair: COMPLETE", "state DONE"}},
		{name: "nothing to repair as json", fake: &fakeRepairer{op: op, planErr: nothing}, format: FormatJSON, code: ExitOK,
			want: []string{`"nothing_to_repair": true`}},
		{name: "in flight", fake: &fakeRepairer{planErr: refused}, format: FormatTable, code: ExitRefused},
		{name: "not found", fake: &fakeRepairer{planErr: &inspect.NotFoundError{BizID: "X", Pipelines: []string{"settlement"}}}, format: FormatTable, code: ExitNotFound},
		{name: "bad options", fake: &fakeRepairer{planErr: &plans.InputError{Msg: "--from-step 9: no such step"}}, format: FormatTable, code: ExitUsage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ios, _, stdout, _ := iostreams.Test()
			opts := &RepairPlanOptions{IO: ios, Format: tc.format, BizID: "PAY-4", Reason: "r", Repairer: func() (Repairer, error) { return tc.fake, nil }}
			if tc.out {
				opts.Out = filepath.Join(t.TempDir(), "plan.json")
			}
			err := runRepairPlan(context.Background(), opts)
			if code := exitCode(err, false); code != tc.code {
				t.Fatalf("exit %d (%v), want %d\n%s", code, err, tc.code, stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			if tc.out {
				ps, err := readPlans(opts.Out)
				if err != nil || len(ps) != 1 || ps[0].ID != tc.fake.plan.ID || ps[0].Verify() != nil {
					t.Errorf("the saved plan: %v %+v", err, ps)
				}
			}
		})
	}
}

func TestRepairApplyRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, ps ...*plans.Plan) string {
		path := filepath.Join(dir, name)
		var b strings.Builder
		enc := json.NewEncoder(&b)
		for _, p := range ps {
			_ = enc.Encode(p)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a, b := testPlan(t, "PAY-A"), testPlan(t, "PAY-B")
	one, two := write("one.json", a), write("two.jsonl", a, b)
	tampered := func() string {
		p := testPlan(t, "PAY-T")
		p.Reason = "changed after sealing"
		return write("tampered.json", p)
	}()
	truncated := func() string {
		path := write("truncated.json", a)
		data, _ := os.ReadFile(path)
		if err := os.WriteFile(path, data[:len(data)/2], 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}()
	notJSON := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notJSON, []byte("apply PAY-A please\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := func(biz string) *repair.Result {
		return &repair.Result{BizID: biz, Pipeline: "settlement", Outcome: repair.OutcomeApplied, Total: 1, Applied: 1}
	}
	refusal := &plans.RefusedError{Code: plans.CodeStale, Detail: "state.version 4 → 5"}
	cases := []struct {
		name    string
		file    string
		yes     bool
		dry     bool
		stdin   string
		tty     bool
		fake    *fakeRepairer
		code    int
		applied string
		want    []string
	}{
		{name: "applied", file: one, yes: true, fake: &fakeRepairer{results: map[string]*repair.Result{"PAY-A": ok("PAY-A")}}, code: ExitOK, applied: "PAY-A",
			want: []string{"applied 1/1", "opctl where --pipeline settlement -- PAY-A"}},
		{name: "dry run needs no confirmation", file: one, dry: true, fake: &fakeRepairer{results: map[string]*repair.Result{"PAY-A": {Outcome: repair.OutcomeWouldApply, DryRun: true, Total: 1, Applied: 1}}},
			code: ExitOK, applied: "PAY-A", want: []string{"DRY RUN", "would apply 1/1"}},
		{name: "no confirmation without a terminal", file: one, fake: &fakeRepairer{}, code: ExitRefused, applied: ""},
		{name: "confirmed on a terminal", file: one, tty: true, stdin: "yes\n", fake: &fakeRepairer{results: map[string]*repair.Result{"PAY-A": ok("PAY-A")}}, code: ExitOK, applied: "PAY-A"},
		{name: "not confirmed on a terminal", file: one, tty: true, stdin: "y\n", fake: &fakeRepairer{}, code: ExitRefused, applied: ""},
		{name: "refused", file: one, yes: true, fake: &fakeRepairer{results: map[string]*repair.Result{"PAY-A": {Outcome: repair.OutcomeRefused, Total: 1}}, errs: map[string]error{"PAY-A": refusal}},
			code: ExitRefused, applied: "PAY-A"},
		{name: "a refusal does not stop the other plans", file: two, yes: true,
			fake: &fakeRepairer{results: map[string]*repair.Result{"PAY-A": {Outcome: repair.OutcomeRefused, Total: 1}, "PAY-B": ok("PAY-B")}, errs: map[string]error{"PAY-A": refusal}},
			code: ExitRefused, applied: "PAY-A,PAY-B"},
		{name: "an error wins over a refusal", file: two, yes: true,
			fake: &fakeRepairer{results: map[string]*repair.Result{}, errs: map[string]error{"PAY-A": refusal, "PAY-B": errors.New("mysql: gone")}},
			code: ExitError, applied: "PAY-A,PAY-B"},
		{name: "an error before a refusal still wins", file: two, yes: true,
			fake: &fakeRepairer{results: map[string]*repair.Result{}, errs: map[string]error{"PAY-A": errors.New("mysql: gone"), "PAY-B": refusal}},
			code: ExitError, applied: "PAY-A,PAY-B"},
		{name: "a truncated file is refused", file: truncated, yes: true, fake: &fakeRepairer{}, code: ExitRefused, applied: ""},
		{name: "a file that is not a plan is refused", file: notJSON, yes: true, fake: &fakeRepairer{}, code: ExitRefused, applied: ""},
		{name: "a missing file", file: filepath.Join(dir, "nope.json"), yes: true, fake: &fakeRepairer{}, code: ExitError, applied: ""},
		{name: "a plan id: the plan recorded in the audit", file: a.ID, yes: true,
			fake: &fakeRepairer{stored: map[string]*plans.Plan{a.ID: a}, results: map[string]*repair.Result{"PAY-A": ok("PAY-A")}}, code: ExitOK, applied: "PAY-A"},
		{name: "a plan id prefix", file: a.ID[:12], yes: true,
			fake: &fakeRepairer{stored: map[string]*plans.Plan{a.ID[:12]: a}, results: map[string]*repair.Result{"PAY-A": ok("PAY-A")}}, code: ExitOK, applied: "PAY-A"},
		{name: "an unknown plan id", file: strings.Repeat("e", 64), yes: true, fake: &fakeRepairer{}, code: ExitUsage, applied: ""},
		{name: "a tampered plan is refused by the executor", file: tampered, yes: true,
			fake: &fakeRepairer{results: map[string]*repair.Result{}, errs: map[string]error{"PAY-T": &plans.RefusedError{Code: plans.CodeTampered, Detail: "id"}}},
			code: ExitRefused, applied: "PAY-T"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ios, stdin, stdout, _ := iostreams.Test()
			ios.SetStdinTTY(tc.tty)
			stdin.WriteString(tc.stdin)
			err := runRepairApply(context.Background(), &RepairApplyOptions{IO: ios, Format: FormatTable, File: tc.file, Yes: tc.yes, DryRun: tc.dry,
				Operator: "tester", Repairer: func() (Repairer, error) { return tc.fake, nil }})
			if code := exitCode(err, false); code != tc.code {
				t.Fatalf("exit %d (%v), want %d\n%s", code, err, tc.code, stdout)
			}
			if got := strings.Join(tc.fake.applied, ","); got != tc.applied {
				t.Errorf("applied %q, want %q", got, tc.applied)
			}
			for _, d := range tc.fake.dry {
				if d != tc.dry {
					t.Errorf("dry run %v, want %v", d, tc.dry)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}

func TestRepairShowRun(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	bad := filepath.Join(dir, "bad.json")
	p := testPlan(t, "PAY-4")
	b, _ := json.Marshal(p)
	_ = os.WriteFile(good, b, 0o600)
	p.Actions[0].State.ToStatus = "DONE"
	b, _ = json.Marshal(p)
	_ = os.WriteFile(bad, b, 0o600)
	for _, tc := range []struct {
		file string
		code int
		want string
	}{
		{good, ExitOK, "matches the plan's body"},
		{bad, ExitRefused, "TAMPERED"},
		{filepath.Join(dir, "missing.json"), ExitError, ""},
	} {
		ios, _, stdout, _ := iostreams.Test()
		err := runRepairShow(context.Background(), &RepairShowOptions{IO: ios, Format: FormatTable, File: tc.file})
		if code := exitCode(err, false); code != tc.code || !strings.Contains(stdout.String(), tc.want) {
			t.Errorf("%s: exit %d (%v), want %d and %q:\n%s", filepath.Base(tc.file), code, err, tc.code, tc.want, stdout)
		}
	}
}

// fakeAuditor returns a fixed log.
type fakeAuditor struct {
	log *sources.AuditLog
	got sources.AuditFilter
}

func (f *fakeAuditor) Audit(_ context.Context, flt sources.AuditFilter) (*sources.AuditLog, error) {
	f.got = flt
	return f.log, nil
}

func TestAuditRun(t *testing.T) {
	log := &sources.AuditLog{
		Actions:  []sources.AuditRow{{PlanID: strings.Repeat("a", 64), ActionIndex: 1, BizID: "PAY-6", Pipeline: "settlement", Action: "reverse", Operator: "alice", Reason: "INC-1", Outcome: "applied", AfterImage: json.RawMessage(`{"step":"debit","reversed_id":"9"}`)}},
		Attempts: []sources.AttemptRow{{PlanID: strings.Repeat("b", 64), BizID: "PAY-6", Operator: "bob", Outcome: "stale", Detail: json.RawMessage(`{"error":"stale plan"}`)}},
	}
	for _, tc := range []struct {
		format Format
		tty    bool
		want   []string
	}{
		{FormatTable, false, []string{"aaaaaaaaaaaa\t1\treverse\tapplied\tsettlement/PAY-6\talice\tstep=debit reversed_id=9 · reason: INC-1", "(attempt)\tstale\tPAY-6\tbob\tstale plan"}},
		{FormatTable, true, []string{"│", "reverse"}},
		{FormatJSON, false, []string{`"actions": [`, `"reversed_id": "9"`}},
	} {
		ios, _, stdout, _ := iostreams.Test()
		ios.SetStdoutTTY(tc.tty)
		fake := &fakeAuditor{log: log}
		err := runAudit(context.Background(), &AuditOptions{IO: ios, Format: tc.format, Timeout: 1e9, BizID: "PAY-6", Limit: 5,
			Auditor: func() (Auditor, error) { return fake, nil }})
		if err != nil || fake.got.BizID != "PAY-6" || fake.got.Limit != 5 {
			t.Fatalf("%s: %v, filter %+v", tc.format, err, fake.got)
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%s tty=%v: stdout lacks %q:\n%s", tc.format, tc.tty, w, stdout)
			}
		}
	}
}

func TestReconcileRunFake(t *testing.T) {
	cfg := &config.Config{Path: "opctl.yaml", Pipelines: []config.Pipeline{{Name: "settlement"}, {Name: "orders"}}}
	target := reconcile.Result{Target: reconcile.Target{BizID: "PAY-3", Pipeline: "settlement", Check: "stuck", Verdict: inspect.Stranded, Detail: "committed past it"},
		Severity: inspect.SeverityAction}
	watch := reconcile.Result{Target: reconcile.Target{BizID: "PAY-4", Pipeline: "settlement", Check: "stuck", Verdict: inspect.WillRedeliver}, Severity: inspect.SeverityWatch}
	for _, tc := range []struct {
		name     string
		pipeline string
		sum      reconcile.Summary
		code     int
		stdout   []string
		lines    int // lines of --out
	}{
		{name: "a target", sum: reconcile.Summary{Targets: 1, Candidates: 2}, code: ExitAttention, stdout: []string{`"biz_id":"PAY-3"`}, lines: 1},
		{name: "nothing found", sum: reconcile.Summary{Candidates: 2}, code: ExitOK, lines: 1},
		{name: "kafka down", sum: reconcile.Summary{Targets: 1, Partial: true, PartialWhy: []string{"kafka: refused"}}, code: ExitPartial, lines: 1},
		// Targets win over a refusal (still reported), partial over both.
		{name: "targets and a check refused", sum: reconcile.Summary{Targets: 1, Refused: true}, code: ExitAttention, lines: 1},
		{name: "a check refused, no target", sum: reconcile.Summary{Refused: true}, code: ExitRefused, lines: 1},
		{name: "partial and a check refused", sum: reconcile.Summary{Targets: 1, Refused: true, Partial: true, PartialWhy: []string{"kafka: refused"}}, code: ExitPartial, lines: 1},
		{name: "one pipeline", pipeline: "orders", sum: reconcile.Summary{}, code: ExitOK, lines: 1},
		{name: "unknown pipeline", pipeline: "nope", code: ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ios, _, stdout, _ := iostreams.Test()
			out := filepath.Join(t.TempDir(), "targets.jsonl")
			var asked reconcile.Options
			run := func(_ context.Context, o reconcile.Options, emit func(reconcile.Result) error) (*reconcile.Summary, error) {
				asked = o
				for _, r := range []reconcile.Result{target, watch} {
					if err := emit(r); err != nil {
						return nil, err
					}
				}
				sum := tc.sum
				return &sum, nil
			}
			err := runReconcile(context.Background(), &ReconcileOptions{IO: ios, Timeout: 1e9, Output: FormatJSONL, Out: out, Pipeline: tc.pipeline, Chunk: 10,
				Config: func() (*config.Config, error) { return cfg, nil }, Reconcile: func() (reconcile.Func, error) { return run, nil }})
			if code := exitCode(err, false); code != tc.code {
				t.Fatalf("exit %d (%v), want %d\n%s", code, err, tc.code, stdout)
			}
			if tc.code == ExitUsage {
				return
			}
			want := 2
			if tc.pipeline != "" {
				want = 1
			}
			// The audit table travels in the Collector now (reconcile.Deps;
			// sources/connect's TestOpenAssemblesTheCollector checks it).
			if len(asked.Pipelines) != want || asked.Chunk != 10 || asked.Timeout != 1e9 {
				t.Errorf("reconcile options %+v", asked)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			b, _ := os.ReadFile(out)
			if n := strings.Count(string(b), "\n"); n != tc.lines || !strings.Contains(string(b), "PAY-3") || strings.Contains(string(b), "PAY-4") {
				t.Errorf("--out has %d lines (want %d targets, no watch item):\n%s", n, tc.lines, b)
			}
		})
	}
}

// TestRepairPlanFileRun: `repair plan --from-file` writes every plan it
// made, reports each skipped target on stderr (human) or in the one JSON
// object (-o json), and exits 3 when one was skipped. No plan, an
// interrupt or MySQL unreachable: no file is written and an --out already
// there is left as it was. Nothing from the targets file reaches the
// terminal raw.
func TestRepairPlanFileRun(t *testing.T) {
	a, b := testPlan(t, "PAY-A"), testPlan(t, "PAY-B")
	// ESC, BEL and the C1 CSI (U+009B) from a targets line.
	evil := repair.Skip{Line: 3, BizID: "PAY\x1b]0;pwned\x07\u009b2J", Pipeline: "settlement", Why: "biz_id contains a control character (U+001B)"}
	attest := repair.Skip{Line: 5, BizID: "PAY-M", Pipeline: "settlement", Verdict: inspect.DuplicateEffect,
		Why: "this plan has a manual action (undo it): do it by hand, then plan again with --attest \"what was done\""}
	conn := &sources.ConnError{Err: errors.New("mysql 127.0.0.1:1: connection refused")}
	cases := []struct {
		name    string
		batch   *repair.Batch
		err     error
		cancel  bool
		format  Format
		old     bool // --out exists before
		code    int
		lines   int // plans in --out afterwards; -1: --out as it was (or absent)
		stdout  []string
		stderr  []string
		wantErr string
	}{
		{name: "all planned", batch: &repair.Batch{File: "t.jsonl", Plans: []*plans.Plan{a, b}, Lines: 2}, format: FormatTable, old: true,
			code: ExitOK, lines: 2, stdout: []string{"planned  " + a.Short(), "PAY-B"}, stderr: []string{"2 plan(s) written to ", ", 0 target(s) skipped."}},
		{name: "some skipped", batch: &repair.Batch{File: "t.jsonl", Plans: []*plans.Plan{a}, Skipped: []repair.Skip{evil, attest}, Lines: 5}, format: FormatTable,
			code: ExitAttention, lines: 1, stdout: []string{"PAY-A"},
			stderr: []string{`skipped "PAY\x1b]0;pwned\a\u009b2J" (settlement): t.jsonl:3: biz_id contains a control character (U+001B)` + "\n",
				"skipped PAY-M (settlement): t.jsonl:5: this plan has a manual action", ", 2 target(s) skipped."}},
		{name: "none planned", batch: &repair.Batch{File: "t.jsonl", Skipped: []repair.Skip{attest}, Lines: 5}, format: FormatTable, old: true,
			code: ExitAttention, lines: -1, stderr: []string{"no plan made: all 1 target(s) of t.jsonl were skipped; nothing was written to ", "earlier run's: do not apply it"}},
		{name: "no target", batch: &repair.Batch{File: "t.jsonl"}, format: FormatTable, code: ExitOK, lines: -1,
			stderr: []string{"no target in t.jsonl: nothing to plan"}},
		{name: "json", batch: &repair.Batch{File: "t.jsonl", Plans: []*plans.Plan{a}, Skipped: []repair.Skip{evil}, Lines: 3}, format: FormatJSON,
			code: ExitAttention, lines: 1, stdout: []string{`"plans_written": 1`, `"line": 3`, `"biz_id": "PAY\u001b]0;pwned\u0007\u009b2J"`, `"verdict": ""`, `"why": "biz_id contains`}},
		{name: "json, none planned", batch: &repair.Batch{File: "t.jsonl", Skipped: []repair.Skip{attest}, Lines: 5}, format: FormatJSON,
			code: ExitAttention, lines: -1, stdout: []string{`"plans_written": 0`, `"out": ""`, `"verdict": "DUPLICATE_EFFECT"`, `"line": 5`}},
		{name: "interrupted", batch: &repair.Batch{File: "t.jsonl", Plans: []*plans.Plan{a}, Lines: 2}, err: context.Canceled, cancel: true, format: FormatTable, old: true,
			code: ExitInterrupted, lines: -1, stderr: []string{"interrupted at line 2 of t.jsonl (1 plan(s) made, 0 target(s) skipped so far); nothing was written to --out "}},
		{name: "mysql unreachable", batch: &repair.Batch{File: "t.jsonl", Plans: []*plans.Plan{a}, Lines: 2}, err: conn, format: FormatTable, old: true,
			code: ExitError, lines: -1, wantErr: "connection refused; the batch stopped, nothing was written to --out "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			targets, out := filepath.Join(dir, "t.jsonl"), filepath.Join(dir, "plans.jsonl")
			if err := os.WriteFile(targets, []byte("{}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			const oldContent = "an earlier run's plans\n"
			if tc.old {
				if err := os.WriteFile(out, []byte(oldContent), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			ios, _, stdout, stderr := iostreams.Test()
			fake := &fakeRepairer{batch: tc.batch, planErr: tc.err}
			err := runRepairPlan(ctx, &RepairPlanOptions{IO: ios, Format: tc.format, FromFile: targets, Out: out, Reason: "r",
				Repairer: func() (Repairer, error) { return fake, nil }})
			if code := exitCode(err, false); code != tc.code {
				t.Fatalf("exit %d (%v), want %d\n%s\n%s", code, err, tc.code, stdout, stderr)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if s := stdout.String() + stderr.String(); strings.ContainsAny(s, "\x1b\x07\u009b") {
				t.Errorf("a control character reached the terminal raw:\n%q", s)
			}
			if tc.format == FormatJSON {
				var obj map[string]any
				if err := json.Unmarshal(stdout.Bytes(), &obj); err != nil {
					t.Errorf("stdout is not one JSON object: %v\n%s", err, stdout)
				} else if sk := obj["skipped"].([]any); len(sk) != len(tc.batch.Skipped) || sk[0].(map[string]any)["biz_id"] != tc.batch.Skipped[0].BizID {
					t.Errorf("skipped %v, want the ids as they are", obj["skipped"])
				}
			}
			got, rerr := os.ReadFile(out)
			switch {
			case tc.lines < 0 && tc.old && string(got) != oldContent:
				t.Errorf("--out was replaced: %q", got)
			case tc.lines < 0 && !tc.old && rerr == nil:
				t.Errorf("--out was written: %q", got)
			case tc.lines >= 0:
				ps, err := readPlans(out)
				if err != nil || len(ps) != tc.lines {
					t.Errorf("--out: %d plans (%v), want %d", len(ps), err, tc.lines)
				}
			}
			if ents, _ := os.ReadDir(dir); len(ents) > 2 {
				t.Errorf("files left in the directory: %v", ents)
			}
		})
	}
}
