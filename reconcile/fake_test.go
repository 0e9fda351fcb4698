package reconcile_test

import (
	"context"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
)

// fakeDB is a state table in memory, read the way a run reads MySQL:
// its statuses, a walk by (status, updated_at), and each operation's
// evidence for the triage. A method the run is not expected to call is
// the embedded nil DB's: calling it fails the test with a panic.
type fakeDB struct {
	reconcile.DB
	now time.Time
	ops map[string]sources.DBEvidence
	mu  sync.Mutex
	// walks are the walks asked, as "status from..to".
	walks []string
}

func (f *fakeDB) Now(context.Context) (time.Time, error) { return f.now, nil }

func (f *fakeDB) TableInfo(_ context.Context, table string) (mysqlsrc.TableInfo, error) {
	if table != "biz_operation" {
		return mysqlsrc.TableInfo{Table: table}, nil
	}
	cols := []string{"biz_id", "status", "version", "owner", "lease_until", "src_partition", "src_offset", "msg_id", "created_at", "updated_at"}
	return mysqlsrc.TableInfo{Table: table, Exists: true, Columns: cols, Types: make([]string, len(cols)), Collations: make([]string, len(cols)),
		Indexes: []mysqlsrc.Index{
			{Name: "PRIMARY", Columns: []string{"biz_id"}, Unique: true, Primary: true},
			{Name: "ix_status_updated", Columns: []string{"status", "updated_at"}},
		}, RowsEstimate: int64(len(f.ops))}, nil
}

// NextValue is the loose index scan of the statuses: the least one after
// after.
func (f *fakeDB) NextValue(_ context.Context, _, _ string, after *string) (string, bool, error) {
	var next string
	found := false
	for _, ev := range f.ops {
		s := ev.State.Status
		if (after == nil || s > *after) && (!found || s < next) {
			next, found = s, true
		}
	}
	return next, found, nil
}

// WalkPage walks the rows of status w.EqVal with updated_at in [From, To),
// in updated_at order, in one page.
func (f *fakeDB) WalkPage(_ context.Context, w mysqlsrc.Walk, after mysqlsrc.Cursor, _ int) ([]mysqlsrc.WalkRow, error) {
	from, _ := w.From.(time.Time)
	to, _ := w.To.(time.Time)
	f.mu.Lock()
	f.walks = append(f.walks, w.EqVal.(string))
	f.mu.Unlock()
	if after.Set {
		return nil, nil
	}
	var rows []mysqlsrc.WalkRow
	for id, ev := range f.ops {
		u := *ev.State.UpdatedAt
		if ev.State.Status == w.EqVal && !u.Before(from) && (to.IsZero() || u.Before(to)) {
			rows = append(rows, mysqlsrc.WalkRow{Pos: u, Key: id})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Pos.(time.Time).Before(rows[j].Pos.(time.Time)) })
	return rows, nil
}

func (f *fakeDB) AuditByOperation(context.Context, string, string) (map[string][]sources.AuditAction, error) {
	return nil, nil
}

func (f *fakeDB) ReadOperation(ctx context.Context, p *config.Pipeline, audit, id string) (sources.DBEvidence, error) {
	evs, errs, err := f.ReadOperations(ctx, p, audit, []string{id})
	if err != nil {
		return sources.DBEvidence{}, err
	}
	return evs[0], errs[0]
}

func (f *fakeDB) ReadOperations(_ context.Context, p *config.Pipeline, _ string, ids []string) ([]sources.DBEvidence, []error, error) {
	evs := make([]sources.DBEvidence, len(ids))
	for i, id := range ids {
		ev, ok := f.ops[id]
		if !ok {
			ev = sources.DBEvidence{Steps: make([]sources.StepEvidence, len(p.Steps))}
			for k, s := range p.Steps {
				ev.Steps[k].Name = s.Name
			}
		}
		ev.Now = f.now
		evs[i] = ev
	}
	return evs, make([]error, len(ids)), nil
}

// A reconcile run with no database: the stuck check over fakeDB walks
// every non-terminal status found in the table (a status the
// configuration does not list too), bounded by --since and --older-than,
// and triages each candidate as where does (inspect.Diagnose); an
// operation in flight and one updated too recently are not targets, a
// DONE one is never walked, and without Kafka the run is partial.
func TestStuckOverFakes(t *testing.T) {
	data, err := os.ReadFile("../testdata/config/settlement.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseWithEnv("settlement.yaml", data, func(n string) (string, bool) {
		return map[string]string{"OPCTL_MYSQL_DSN": "u@tcp(127.0.0.1:1)/db"}[n], true
	})
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Pipeline("settlement")
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	op := func(status string, age time.Duration, leaseLeft time.Duration, effects int) sources.DBEvidence {
		created, updated := now.Add(-age-time.Minute), now.Add(-age)
		v := int64(2)
		ev := sources.DBEvidence{State: sources.StateRow{Found: true, Status: status, Version: &v, MsgID: "m", CreatedAt: &created, UpdatedAt: &updated},
			Steps: make([]sources.StepEvidence, len(p.Steps))}
		if leaseLeft > 0 {
			until := now.Add(leaseLeft)
			ev.State.Owner, ev.State.LeaseUntil = "c-1", &until
		}
		for k, s := range p.Steps {
			ev.Steps[k].Name = s.Name
			if k < effects {
				ev.Steps[k].Rows = []sources.Row{{Columns: []string{"id"}, Values: []any{int64(k + 1)}}}
			}
		}
		return ev
	}
	db := &fakeDB{now: now, ops: map[string]sources.DBEvidence{
		"STUCK-1":  op("DEBIT_DONE", time.Hour, 0, 1),
		"STUCK-2":  op("INIT", 2*time.Hour, 0, 0),
		"ODD-1":    op("PAUSED", time.Hour, 0, 0), // not in the configuration
		"YOUNG-1":  op("DEBIT_DONE", time.Minute, 0, 1),
		"LEASED-1": op("DEBIT_DONE", time.Hour, time.Minute, 1),
		"OLD-1":    op("INIT", 30*24*time.Hour, 0, 0), // before --since
		"DONE-1":   op("DONE", time.Hour, 0, 3),
	}}
	col := &sources.Collector{DB: db, AuditTable: cfg.Audit.AuditTable(), Timeout: time.Second, KafkaMissing: "not configured"}
	var mu sync.Mutex
	got := map[string]reconcile.Result{}
	sum, err := reconcile.Run(context.Background(), reconcile.Deps{DB: db, Collector: col},
		reconcile.Options{Pipelines: []*config.Pipeline{p}, Checks: []string{reconcile.CheckStuck}, Since: 7 * 24 * time.Hour,
			OlderThan: 5 * time.Minute, Timeout: time.Second},
		func(r reconcile.Result) error {
			mu.Lock()
			defer mu.Unlock()
			got[r.BizID] = r
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Checks) != 1 || sum.Checks[0].Status != reconcile.StatusOK {
		t.Fatalf("checks %+v", sum.Checks)
	}
	if !sum.Partial {
		t.Errorf("a run without Kafka is partial: %+v", sum)
	}
	var targets []string
	for id, r := range got {
		if r.IsTarget() {
			targets = append(targets, id)
		}
		// The verdict is where's: the same Collector, one operation, then
		// inspect.Diagnose.
		ev, err := col.Collect(context.Background(), p, id)
		if err != nil {
			t.Fatal(err)
		}
		if rep := inspect.Diagnose(ev); rep.Verdict.Code != r.Verdict || !r.Partial {
			t.Errorf("%s: verdict %s (partial %v), where says %s", id, r.Verdict, r.Partial, rep.Verdict.Code)
		}
	}
	slices.Sort(targets)
	if want := []string{"ODD-1", "STUCK-1", "STUCK-2"}; !slices.Equal(targets, want) {
		t.Errorf("targets %v, want %v (results %+v)", targets, want, got)
	}
	if r, ok := got["LEASED-1"]; !ok || r.Verdict != inspect.InFlight || r.IsTarget() {
		t.Errorf("the operation in flight: triaged %v, %+v: want IN_FLIGHT, not a target", ok, r)
	}
	walked := slices.Sorted(slices.Values(db.walks))
	walked = slices.Compact(walked)
	if want := []string{"DEBIT_DONE", "INIT", "PAUSED"}; !slices.Equal(walked, want) {
		t.Errorf("walked statuses %v, want %v (DONE and FAILED are terminal)", walked, want)
	}
}
