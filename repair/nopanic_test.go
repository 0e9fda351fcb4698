package repair

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
)

// noRowStore is a store whose reverse statements change no row.
type noRowStore struct{ *fakeStore }

func (s noRowStore) Begin(ctx context.Context) (sources.Tx, error) {
	tx, err := s.fakeStore.Begin(ctx)
	return noRowTx{tx}, err
}

func (s noRowStore) Do(ctx context.Context, fn func(sources.Tx) error) error {
	return s.fakeStore.Do(ctx, func(tx sources.Tx) error { return fn(noRowTx{tx}) })
}

type noRowTx struct{ sources.Tx }

func (t noRowTx) Reverse(ctx context.Context, stmt, biz string, rows sources.LockedRows, i int) (sources.Statement, error) {
	st, err := t.Tx.Reverse(ctx, stmt, biz, rows, i)
	st.Rows = 0
	return st, err
}

// A reverse statement that changes no row refuses its action (it used to
// panic in stopAt on the refusal's missing guard), dry run or not, with
// the attempt recorded.
func TestReverseThatChangesNoRowIsRefused(t *testing.T) {
	for _, dry := range []bool{false, true} {
		cfg, ev, plan, st := duplicateDebit(t)
		a := &Applier{Config: cfg, Store: noRowStore{st}, Collector: fakeCollector{ev}, Operator: "t"}
		run := a.Apply
		if dry {
			run = a.DryRun
		}
		res, err := run(context.Background(), plan)
		var rf *plans.RefusedError
		if !errors.As(err, &rf) || rf.Code != plans.CodeGuardFailed || !strings.Contains(err.Error(), "changed no row") {
			t.Fatalf("dry %v: %v", dry, err)
		}
		if res.Outcome != OutcomeRefused || res.Actions[0].Outcome != OutcomeRefused || len(st.audits) != 0 {
			t.Fatalf("dry %v: result %+v audits %d", dry, res, len(st.audits))
		}
		want := AttemptError
		if dry {
			want = AttemptDryRun
		}
		if len(st.attempts) != 1 || st.attempts[0].Outcome != want || st.attempts[0].ActionIndex != 1 {
			t.Fatalf("dry %v: attempts %+v", dry, st.attempts)
		}
	}
}

// A re-hashed manual action without its manual part (it used to panic on
// the nil spec) is refused as tampered before anything runs.
func TestManualWithoutSpecIsTampered(t *testing.T) {
	cfg, ev, plan, st := duplicateDebit(t)
	plan.Actions[0].Type, plan.Actions[0].Reverse = plans.Manual, nil
	if err := plan.Seal(); err != nil {
		t.Fatal(err)
	}
	a := &Applier{Config: cfg, Store: st, Collector: fakeCollector{ev}, Operator: "t"}
	res, err := a.Apply(context.Background(), plan)
	var rf *plans.RefusedError
	if !errors.As(err, &rf) || rf.Code != plans.CodeTampered || res.Outcome != OutcomeRefused {
		t.Fatalf("%v %+v", err, res)
	}
	if st.begins != 0 || len(st.attempts) != 1 || st.attempts[0].Outcome != AttemptTampered {
		t.Fatalf("begins %d attempts %+v", st.begins, st.attempts)
	}
}

// panicStore panics when the apply reads the audit, like a bug of opctl
// would.
type panicStore struct{ *fakeStore }

func (s panicStore) AuditDone(context.Context, string, string) ([]sources.AuditDone, error) {
	var m map[string]int
	m["boom"]++ // assignment to entry in nil map
	return nil, nil
}

// A panic during an apply is an *sources.InternalError (exit 1) and an
// error attempt that keeps the stack.
func TestPanicInApplyIsRecorded(t *testing.T) {
	cfg, _, plan, st := duplicateDebit(t)
	svc := &Service{Config: cfg, Store: func() (sources.Store, error) { return panicStore{st}, nil }}
	res, err := svc.Apply(context.Background(), plan, ApplyOptions{Operator: "t"})
	var ie *sources.InternalError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "internal error: assignment to entry in nil map") || ie.ExitCode() != 1 {
		t.Fatalf("err %v", err)
	}
	if res == nil || res.Outcome != OutcomeFailed || res.PlanID != plan.ID {
		t.Fatalf("result %+v", res)
	}
	if len(st.attempts) != 1 || st.attempts[0].Outcome != AttemptError || !strings.Contains(string(st.attempts[0].Detail), "panicStore") {
		t.Fatalf("attempts %+v: want one error attempt with the stack", st.attempts)
	}
}
