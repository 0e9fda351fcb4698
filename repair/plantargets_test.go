package repair

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// A skipped target records the pipeline it was triaged in: with
// --pipeline, that one, not the target line's. (Both pipelines asked for
// are missing from the configuration, so nothing is read.)
func TestPlanTargetsSkipRecordsTheEffectivePipeline(t *testing.T) {
	cfg := &config.Config{Pipelines: []config.Pipeline{{Name: "settlement"}}}
	s := &Service{Config: cfg, Triage: &triage.Service{Config: cfg}}
	plan := func(t *testing.T, lines, override string) *Batch {
		t.Helper()
		b, err := s.PlanTargets(context.Background(), strings.NewReader(lines), "targets.jsonl", override, plans.Options{Reason: "test"})
		if err != nil {
			t.Fatalf("--pipeline %q: %v", override, err)
		}
		return b
	}
	t.Run("--pipeline", func(t *testing.T) {
		b := plan(t, `{"biz_id":"PAY-1","pipeline":"settlement"}`+"\n"+`{"biz_id":"PAY-2","pipeline":"gone"}`+"\n", "refunds")
		if len(b.Skipped) != 2 || b.Skipped[0].Pipeline != "refunds" || b.Skipped[1].Pipeline != "refunds" ||
			!strings.Contains(b.Skipped[0].Why, "refunds") {
			t.Errorf("skipped %+v, want PAY-1 and PAY-2 in refunds", b.Skipped)
		}
	})
	t.Run("the line's", func(t *testing.T) {
		b := plan(t, `{"biz_id":"PAY-2","pipeline":"gone"}`+"\n", "")
		if len(b.Skipped) != 1 || b.Skipped[0].BizID != "PAY-2" || b.Skipped[0].Pipeline != "gone" {
			t.Errorf("skipped %+v, want PAY-2 in gone", b.Skipped)
		}
	})
}

// fakeDB answers ReadOperation from fixed evidence per id; an id it does
// not have is a server that cannot be reached (a plain error: the
// Collector makes it a *sources.ConnError). It records what was read.
type fakeDB struct {
	mu     sync.Mutex
	ops    map[string]sources.DBEvidence
	read   []string
	onRead func(bizID string)
}

func (d *fakeDB) ReadOperation(ctx context.Context, _ *config.Pipeline, _ string, bizID string) (sources.DBEvidence, error) {
	d.mu.Lock()
	d.read = append(d.read, bizID)
	on := d.onRead
	d.mu.Unlock()
	if on != nil {
		on(bizID)
	}
	if err := ctx.Err(); err != nil {
		return sources.DBEvidence{}, err
	}
	ev, ok := d.ops[bizID]
	if !ok {
		return sources.DBEvidence{}, errors.New("mysql 127.0.0.1:1: connection refused")
	}
	return ev, nil
}

func (d *fakeDB) reads() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.read...)
}

// batchService is a Service on a fakeDB and no Kafka: pipeline settlement
// has a debit step with a reverse statement and a ledger step without one,
// so a duplicated debit plans a reverse and a duplicated ledger entry a
// manual action, which needs --attest (a *plans.InputError from Build).
func batchService(db *fakeDB) *Service {
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
	col := &sources.Collector{DB: db, KafkaMissing: "not configured", Timeout: time.Second}
	return &Service{Config: cfg, Triage: &triage.Service{Config: cfg, Collector: col}, Collector: col, Now: func() time.Time { return time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC) }}
}

// doneWith is a DONE operation with debits and ledger rows.
func doneWith(debits, ledgers int) sources.DBEvidence {
	v := int64(4)
	row := func(id int) sources.Row {
		return sources.Row{Columns: []string{"id", "delta"}, Values: []sources.Value{int64(id), "-5.00"}}
	}
	var d, l []sources.Row
	for i := range debits {
		d = append(d, row(10+i))
	}
	for i := range ledgers {
		l = append(l, sources.Row{Columns: []string{"id"}, Values: []sources.Value{int64(20 + i)}})
	}
	return sources.DBEvidence{Now: time.Now(), State: sources.StateRow{Found: true, Status: "DONE", Version: &v},
		Steps: []sources.StepEvidence{{Name: "debit", Rows: d}, {Name: "ledger", Rows: l}}}
}

// TestPlanTargetsSkipsAndGoesOn: every target that gets no plan — a line
// that is not JSON, no biz_id, an id with a control character, a line
// over MaxTargetLine, a pipeline that is gone, nothing to repair, and a
// plan the options cannot make (a manual action without --attest, which
// used to abort the whole batch) — is skipped with its line and why; the
// targets after it are still planned.
func TestPlanTargetsSkipsAndGoesOn(t *testing.T) {
	db := &fakeDB{ops: map[string]sources.DBEvidence{
		"PAY-D": doneWith(2, 1), "PAY-L": doneWith(1, 2), "PAY-OK": doneWith(1, 1), "PAY-D2": doneWith(2, 1),
	}}
	s := batchService(db)
	lines := strings.Join([]string{
		`{"biz_id":"PAY-D","pipeline":"settlement","check":"duplicates","verdict":"DUPLICATE_EFFECT"}`, // 1: planned
		`{"biz_id":"PAY-L","pipeline":"settlement","check":"duplicates"}`,                              // 2: manual needs --attest
		`not json at all`,           // 3
		``,                          // 4: blank, ignored
		`{"pipeline":"settlement"}`, // 5: no biz_id
		`{"biz_id":"PAY\u001b[2J","pipeline":"settlement"}`,       // 6: control character
		`{"biz_id":"PAY-OK","pipeline":"settlement"}`,             // 7: nothing to repair
		`{"biz_id":"PAY-G","pipeline":"gone"}`,                    // 8: no such pipeline
		`{"biz_id":"` + strings.Repeat("x", MaxTargetLine) + `"}`, // 9: too long
		"\t{\"biz_id\":\"PAY-D2\",\"pipeline\":\"settlement\"}\r", // 10: planned (CRLF)
	}, "\n") // no newline after the last line
	b, err := s.PlanTargets(context.Background(), strings.NewReader(lines), "targets.jsonl", "", plans.Options{Reason: "test", Operator: "tester"})
	if err != nil {
		t.Fatalf("the batch stopped: %v", err)
	}
	if len(b.Plans) != 2 || b.Plans[0].BizID != "PAY-D" || b.Plans[1].BizID != "PAY-D2" || b.Plans[0].Actions[0].Type != plans.Reverse {
		t.Fatalf("plans %+v, want PAY-D and PAY-D2 reversed", b.Plans)
	}
	if b.File != "targets.jsonl" || b.Lines != 10 {
		t.Errorf("file %q lines %d, want targets.jsonl and 10", b.File, b.Lines)
	}
	want := []struct {
		line     int
		biz      string
		pipeline string
		verdict  inspect.Code
		why      string
	}{
		{2, "PAY-L", "settlement", inspect.DuplicateEffect, "--attest"},
		{3, "", "", "", "not a target line (invalid character"},
		{5, "", "settlement", "", `no "biz_id"`},
		{6, "PAY\x1b[2J", "settlement", "", "control character (U+001B)"},
		{7, "PAY-OK", "settlement", inspect.Complete, "nothing to repair"},
		{8, "PAY-G", "gone", "", "gone"},
		{9, "", "", "", "longer than 1048576 bytes"},
	}
	if len(b.Skipped) != len(want) {
		t.Fatalf("skipped %d, want %d: %+v", len(b.Skipped), len(want), b.Skipped)
	}
	for i, w := range want {
		s := b.Skipped[i]
		if s.Line != w.line || s.BizID != w.biz || s.Pipeline != w.pipeline || s.Verdict != w.verdict || !strings.Contains(s.Why, w.why) {
			t.Errorf("skipped[%d] = %+v, want line %d %q in %q, verdict %q, why containing %q", i, s, w.line, w.biz, w.pipeline, w.verdict, w.why)
		}
	}
	if got := strings.Join(db.reads(), ","); got != "PAY-D,PAY-L,PAY-OK,PAY-D2" {
		t.Errorf("read %s: bad lines must not be read, good ones once each", got)
	}
}

// TestPlanTargetsStops: a MySQL that cannot be reached at all stops the
// batch with a *sources.ConnError naming the file and line, and so does an
// interrupt (the context's error); the targets after it are not read. An
// error reading the file stops it too.
func TestPlanTargetsStops(t *testing.T) {
	lines := `{"biz_id":"PAY-D","pipeline":"settlement"}
{"biz_id":"DOWN","pipeline":"settlement"}
{"biz_id":"PAY-D2","pipeline":"settlement"}
`
	ops := map[string]sources.DBEvidence{"PAY-D": doneWith(2, 1), "PAY-D2": doneWith(2, 1)}
	t.Run("mysql unreachable", func(t *testing.T) {
		db := &fakeDB{ops: ops}
		b, err := batchService(db).PlanTargets(context.Background(), strings.NewReader(lines), "t.jsonl", "", plans.Options{Reason: "test"})
		var ce *sources.ConnError
		if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), "t.jsonl:2: ") {
			t.Fatalf("err %v, want a ConnError at t.jsonl:2", err)
		}
		if b == nil || len(b.Plans) != 1 || b.Lines != 2 || strings.Join(db.reads(), ",") != "PAY-D,DOWN" {
			t.Errorf("batch %+v, read %v: want one plan, stopped at line 2", b, db.reads())
		}
	})
	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The interrupt comes while the second target is read: it is
		// neither planned nor skipped.
		db := &fakeDB{ops: ops, onRead: func(id string) {
			if id == "DOWN" {
				cancel()
			}
		}}
		b, err := batchService(db).PlanTargets(ctx, strings.NewReader(lines), "t.jsonl", "", plans.Options{Reason: "test"})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		if len(b.Plans) != 1 || len(b.Skipped) != 0 || strings.Join(db.reads(), ",") != "PAY-D,DOWN" {
			t.Errorf("batch %+v, read %v", b, db.reads())
		}
	})
	t.Run("unreadable file", func(t *testing.T) {
		db := &fakeDB{ops: ops}
		r := io.MultiReader(strings.NewReader(`{"biz_id":"PAY-D","pipeline":"settlement"}`+"\n"), iotest.ErrReader(errors.New("input/output error")))
		_, err := batchService(db).PlanTargets(context.Background(), r, "t.jsonl", "", plans.Options{Reason: "test"})
		if err == nil || !strings.Contains(err.Error(), "read t.jsonl at line 2: input/output error") {
			t.Fatalf("err %v", err)
		}
	})
}
