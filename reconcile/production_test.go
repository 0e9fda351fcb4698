package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/lab/gen"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	kafkasrc "github.com/opctl-dev/opctl/sources/kafka"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
	"github.com/opctl-dev/opctl/sources/schema"
)

// productionAlters key the state and idempotency tables by an
// auto-increment id (the business keys only unique), and give ledger_entry
// a (created_at) index: tables indexed as their owners need, none of the
// (time, key) indexes opctl would propose. balance_journal and
// points_grant keep their (created_at) index and auto-increment id.
var productionAlters = []string{
	"ALTER TABLE biz_operation DROP PRIMARY KEY, ADD COLUMN id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST, ADD UNIQUE KEY uk_biz (biz_id)",
	"ALTER TABLE consumer_idempotency DROP PRIMARY KEY, ADD COLUMN id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST, ADD UNIQUE KEY uk_msg (msg_id)",
	"ALTER TABLE ledger_entry ADD INDEX ix_created (created_at)",
}

// TestProductionSchemas: on tables whose walks are served only by the
// indexes they already have — a scan table with (created_at) and an
// auto-increment id, a state table whose key is not its primary key
// ((status, updated_at) + id), an idempotency table likewise ((action,
// created_at) + id) — schema check reports those indexes ok, no check is
// refused, and every check finds exactly the seeded anomalies: 1,500 rows
// of each pipeline sharing one millisecond in every time column, the
// anomalies their last rows (a keyset that lost rows on a tie would miss
// them), keys that sort after every ASCII key (工单-…) and keys with quotes
// and a backslash, at chunk sizes that cut the tie anywhere.
func TestProductionSchemas(t *testing.T) {
	const perPipeline = 1500
	e := setupAltered(t, gen.Options{Ops: 2 * perPipeline, AnomalyRate: 0.02, Seed: 17, OpsPerTick: 2 * perPipeline,
		SameInstant: true, AnomaliesLast: true, SettlementPrefix: "工单-", OrderPrefix: `O'Re"il\-`}, true, productionAlters...)
	ctx := context.Background()

	// Every time column of every row holds the same millisecond.
	for _, q := range []string{
		"SELECT COUNT(DISTINCT updated_at), COUNT(*) FROM biz_operation",
		"SELECT COUNT(DISTINCT created_at), COUNT(*) FROM balance_journal",
		"SELECT COUNT(DISTINCT created_at), COUNT(*) FROM ledger_entry",
		"SELECT COUNT(DISTINCT created_at), COUNT(*) FROM consumer_idempotency",
		"SELECT COUNT(DISTINCT created_at), COUNT(*) FROM points_grant",
	} {
		var distinct, n int
		if err := e.db.SQL.QueryRow(q).Scan(&distinct, &n); err != nil {
			t.Fatal(err)
		}
		if distinct != 1 || n < perPipeline*9/10 { // orphans have no state row
			t.Fatalf("%s: %d distinct times over %d rows, want 1 over about %d", q, distinct, n, perPipeline)
		}
	}

	// schema check: what the tables have serves; only the uncommitted walk
	// (no (src_partition, src_offset) index at all) is missing.
	var needs []schema.Need
	for _, p := range e.pipelines {
		needs = append(needs, reconcile.IndexNeeds(p)...)
	}
	rep, err := schema.Check(ctx, e.r, e.pipelines, needs, "")
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, it := range rep.Missing() {
		missing = append(missing, it.Table+" "+it.What)
	}
	if want := []string{"biz_operation (src_partition, src_offset)"}; !slices.Equal(missing, want) {
		t.Errorf("schema check: missing %q, want only %q", missing, want)
	}
	served := map[string]string{
		"biz_operation (status, updated_at)":        "ix_status_updated",
		"balance_journal (created_at)":              "ix_created",
		"ledger_entry (created_at)":                 "ix_created",
		"consumer_idempotency (action, created_at)": "ix_action_created",
		"points_grant (created_at)":                 "ix_created",
		"biz_operation (biz_id)":                    "uk_biz",
	}
	for _, it := range rep.Items {
		if want, ok := served[it.Table+" "+it.What]; ok {
			if it.Status != schema.StatusOK || it.Index != want {
				t.Errorf("schema check %s %s: %s by %q, want ok by %s", it.Table, it.What, it.Status, it.Index, want)
			}
			delete(served, it.Table+" "+it.What)
		}
	}
	if len(served) > 0 {
		t.Errorf("schema check has no item for %v", served)
	}

	want := expected(e.m, "action", false)
	if len(want) < 40 {
		t.Fatalf("the generator seeded only %d anomalies", len(want))
	}
	for _, a := range e.m.Anomalies {
		if a.Pipeline == gen.Settlement && !strings.HasPrefix(a.BizID, "工单-") || a.Pipeline == gen.Orders && !strings.HasPrefix(a.BizID, `O'Re"il\-`) {
			t.Fatalf("anomaly %s: not the key prefix asked for", a.BizID)
		}
	}
	for _, tc := range []struct {
		access string
		chunk  int
	}{{reconcile.AccessWalk, 1}, {reconcile.AccessWalk, 7}, {reconcile.AccessWalk, 1000},
		{reconcile.AccessSweep, 1}, {reconcile.AccessSweep, 7}, {reconcile.AccessAuto, 1000}} {
		t.Run(fmt.Sprintf("%s/chunk%d", tc.access, tc.chunk), func(t *testing.T) {
			o := baseOptions(e)
			o.Chunk = tc.chunk
			o.Access = tc.access
			var c collected
			sum, err := reconcile.Run(ctx, e.deps(nil), o, c.emit)
			if err != nil {
				t.Fatal(err)
			}
			for _, cs := range sum.Checks {
				if cs.Status == reconcile.StatusRefused || cs.Status == reconcile.StatusFailed {
					t.Errorf("%s/%s %s: %s", cs.Pipeline, cs.Check, cs.Status, cs.Reason)
				}
				swept := 0
				for _, n := range cs.Notes {
					if strings.Contains(n, "full scan") {
						t.Errorf("%s/%s: %s", cs.Pipeline, cs.Check, n)
					}
					if strings.Contains(n, "in key order") {
						swept++
					}
				}
				// Every scan table has an index that starts with its key; the
				// window holds the whole table, so auto sweeps too.
				if cs.Check == reconcile.CheckDuplicates || cs.Check == reconcile.CheckOrphans {
					want := map[string]int{gen.Settlement: 2, gen.Orders: 1}[cs.Pipeline]
					if tc.access == reconcile.AccessWalk {
						want = 0
					}
					if swept != want {
						t.Errorf("%s/%s: %d scan tables swept, want %d (notes %q)", cs.Pipeline, cs.Check, swept, want, cs.Notes)
					}
				}
			}
			diff(t, "targets", want, c.keys(t, "action"))
			if sum.Refused {
				t.Errorf("summary refused: %+v", sum.Checks)
			}
		})
	}
}

// TestStuckTargets: a stuck target is what the definition says —
// non-terminal, older than --older-than, no live lease — whatever Kafka
// answers: with Kafka up, STRANDED, STATE_BEHIND, MISSING_EFFECT and a
// WILL_REDELIVER (watch, still a target); with Kafka unreachable the very
// same operations, each marked partial, the STRANDED and WILL_REDELIVER
// ones now INCOMPLETE. IN_FLIGHT is never a target, and an operation
// younger than --older-than is not one.
func TestStuckTargets(t *testing.T) {
	e := setup(t, gen.Options{Ops: 800, AnomalyRate: 0.03, Seed: 13, Kafka: true, Pipelines: []string{gen.Settlement}}, false)
	kl := e.m.Kafka
	k := testenv.NewKafka(t, map[string]int32{kl.Topic: int32(kl.Partitions)})
	for p := range kl.Partitions {
		keys := make([]string, kl.LogEnd[p])
		for i := range keys {
			keys[i] = fmt.Sprintf("k-%d-%d", p, i)
		}
		k.ProduceBatch(t, kl.Topic, int32(p), keys, time.Time{})
		k.Commit(t, kl.Group, kl.Topic, int32(p), kl.Committed[p])
	}
	kr := kafkasrc.New(config.Kafka{Brokers: k.Brokers, Version: "3.5.0"}, 10*time.Second)
	defer kr.Close()

	// One uncommitted operation (its message past the committed offset)
	// made stuck and consistent: LEDGER_DONE with its debit and ledger row,
	// no notify intent. Kafka will hand it to the group again: WILL_REDELIVER.
	var redeliver string
	for _, a := range e.m.Anomalies {
		if a.Check == reconcile.CheckUncommitted {
			redeliver = a.BizID
			break
		}
	}
	if redeliver == "" {
		t.Fatal("the manifest has no uncommitted operation")
	}
	e.db.Exec(t, "UPDATE biz_operation SET status = 'LEDGER_DONE' WHERE biz_id = ?", redeliver)
	e.db.Exec(t, "DELETE FROM step_intent WHERE biz_id = ?", redeliver)
	// A stuck operation touched a moment ago: younger than --older-than.
	var young string
	if err := e.db.SQL.QueryRow("SELECT biz_id FROM biz_operation WHERE status = 'INIT' ORDER BY biz_id LIMIT 1").Scan(&young); err != nil {
		t.Fatal(err)
	}
	e.db.Exec(t, "UPDATE biz_operation SET updated_at = NOW(3) WHERE biz_id = ?", young)

	o := baseOptions(e)
	o.Pipelines = e.pipelines[:1]
	o.Checks = []string{reconcile.CheckStuck}
	o.OlderThan = 10 * time.Minute
	stuck := func(kafka sources.Kafka) (map[string]reconcile.Result, *reconcile.Summary) {
		t.Helper()
		var c collected
		sum, err := reconcile.Run(context.Background(), e.deps(kafka), o, c.emit)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]reconcile.Result{}
		for _, r := range c.results {
			if r.Verdict == inspect.InFlight && r.IsTarget() {
				t.Errorf("%s: IN_FLIGHT reported as a target", r.BizID)
			}
			if r.IsTarget() {
				out[r.BizID] = r
			}
		}
		return out, sum
	}

	up, sum := stuck(kr)
	if sum.Partial {
		t.Fatalf("partial with Kafka up: %v", sum.PartialWhy)
	}
	want := map[string]inspect.Code{redeliver: inspect.WillRedeliver}
	for _, a := range e.m.Expected(gen.Settlement, reconcile.CheckStuck) {
		if a.BizID != young {
			want[a.BizID] = inspect.Code(a.Verdict)
		}
	}
	if !slices.Contains(mapsValues(want), inspect.Stranded) {
		t.Fatal("the manifest has no STRANDED operation")
	}
	check := func(what string, got map[string]reconcile.Result, verdict func(inspect.Code) inspect.Code, partial bool) {
		t.Helper()
		for id, v := range want {
			r, ok := got[id]
			switch {
			case !ok:
				t.Errorf("%s: %s (%s) not a target", what, id, verdict(v))
			case r.Verdict != verdict(v) || r.Partial != partial:
				t.Errorf("%s: %s is %s (partial %v), want %s (partial %v)", what, id, r.Verdict, r.Partial, verdict(v), partial)
			}
		}
		for id, r := range got {
			if _, ok := want[id]; !ok {
				t.Errorf("%s: false positive %s %s", what, id, r.Verdict)
			}
		}
		if _, ok := got[young]; ok {
			t.Errorf("%s: %s, updated a moment ago, is a target", what, young)
		}
	}
	check("Kafka up", up, func(c inspect.Code) inspect.Code { return c }, false)
	if sum.ExitCode() != sources.ExitAttention {
		t.Errorf("Kafka up: exit %d, want 3", sum.ExitCode())
	}

	dead := kafkasrc.New(config.Kafka{Brokers: []string{"127.0.0.1:1"}, Version: "3.5.0"}, 2*time.Second)
	defer dead.Close()
	down, sum := stuck(dead)
	check("Kafka unreachable", down, func(c inspect.Code) inspect.Code {
		if c == inspect.Stranded || c == inspect.WillRedeliver {
			return inspect.Incomplete // the Kafka part is unknown
		}
		return c
	}, true)
	if !sum.Partial || sum.ExitCode() != sources.ExitPartial || sum.Targets != int64(len(want)) {
		t.Errorf("Kafka unreachable: partial %v exit %d targets %d, want partial, 6 and %d", sum.Partial, sum.ExitCode(), sum.Targets, len(want))
	}
}

func mapsValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestExitCodeOrder: partial (6) wins over targets (3), which win over a
// refusal (5): a run that found targets exits 3 even when another check was
// refused.
func TestExitCodeOrder(t *testing.T) {
	for _, c := range []struct {
		sum  reconcile.Summary
		want int
	}{
		{reconcile.Summary{Partial: true, Targets: 2, Refused: true}, sources.ExitPartial},
		{reconcile.Summary{Partial: true, Refused: true}, sources.ExitPartial},
		{reconcile.Summary{Targets: 2, Refused: true}, sources.ExitAttention},
		{reconcile.Summary{Targets: 2}, sources.ExitAttention},
		{reconcile.Summary{Refused: true}, sources.ExitRefused},
		{reconcile.Summary{}, sources.ExitOK},
	} {
		if got := c.sum.ExitCode(); got != c.want {
			t.Errorf("partial %v targets %d refused %v: exit %d, want %d", c.sum.Partial, c.sum.Targets, c.sum.Refused, got, c.want)
		}
	}
}

// TestInterruptNamesEachPipeline: pipelines are scanned in parallel; an
// interrupt while both are mid-walk names the check each was running, with
// its own rows and last key.
func TestInterruptNamesEachPipeline(t *testing.T) {
	e := setup(t, gen.Options{Ops: 4000, Seed: 9}, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := baseOptions(e)
	o.Checks = []string{reconcile.CheckDuplicates}
	o.Chunk = 1 // the window holds every row: a sweep
	// in pages of about 10 entries between sampled keys
	reconcile.SetSweepRows(t, 10)
	// Each pipeline, at its third page, waits for the other to reach its
	// own: the cancel finds both mid-walk, however fast either is.
	var mu sync.Mutex
	pages := map[string]int{}
	both := make(chan struct{})
	o.Progress = func(p reconcile.Progress) {
		mu.Lock()
		pages[p.Pipeline]++
		n := pages[p.Pipeline]
		if pages[gen.Settlement] >= 3 && pages[gen.Orders] >= 3 && ctx.Err() == nil {
			cancel()
			close(both)
		}
		mu.Unlock()
		if n == 3 {
			select {
			case <-both:
			case <-time.After(10 * time.Second):
			}
		}
	}
	var c collected
	sum, err := reconcile.Run(ctx, e.deps(nil), o, c.emit)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	got := map[string]reconcile.Interruption{}
	for _, in := range sum.Interruptions {
		got[in.Pipeline] = in
	}
	for p, prefix := range map[string]string{gen.Settlement: "PAY-", gen.Orders: "ORD-"} {
		in, ok := got[p]
		if !ok || in.Check != reconcile.CheckDuplicates || in.Rows < 30 || !strings.HasPrefix(in.LastKey, prefix) {
			t.Errorf("%s: interruption %+v (of %+v), want duplicates after >= 30 rows at a %s key", p, in, sum.Interruptions, prefix)
		}
	}
	if sum.Interrupted == nil || *sum.Interrupted != sum.Interruptions[0] {
		t.Errorf("Interrupted %+v is not the first of %+v", sum.Interrupted, sum.Interruptions)
	}
}

// TestPartialReasonNeverEmpty: with Kafka fine, a step whose evidence
// cannot be read makes the verdicts partial, and the summary says why.
func TestPartialReasonNeverEmpty(t *testing.T) {
	e := setup(t, gen.Options{Ops: 400, AnomalyRate: 0.05, Seed: 13, Kafka: true, Pipelines: []string{gen.Settlement}}, false)
	kl := e.m.Kafka
	k := testenv.NewKafka(t, map[string]int32{kl.Topic: int32(kl.Partitions)})
	for p := range kl.Partitions {
		k.Commit(t, kl.Group, kl.Topic, int32(p), 0)
	}
	kr := kafkasrc.New(config.Kafka{Brokers: k.Brokers, Version: "3.5.0"}, 10*time.Second)
	defer kr.Close()
	p := *e.pipelines[0]
	p.Steps = slices.Clone(p.Steps)
	p.Steps[1].Evidence = "SELECT id, no_such_column FROM ledger_entry WHERE biz_order_id = ?"
	o := baseOptions(e)
	o.Pipelines = []*config.Pipeline{&p}
	o.Checks = []string{reconcile.CheckStuck}
	var c collected
	sum, err := reconcile.Run(context.Background(), e.deps(kr), o, c.emit)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.results) == 0 || !sum.Partial {
		t.Fatalf("%d results, partial %v: want partial verdicts", len(c.results), sum.Partial)
	}
	if len(sum.PartialWhy) == 0 || !slices.ContainsFunc(sum.PartialWhy, func(w string) bool { return strings.Contains(w, "no_such_column") }) {
		t.Errorf("partial_why %q does not say which read failed", sum.PartialWhy)
	}
	for _, w := range sum.PartialWhy {
		if strings.HasPrefix(w, "kafka") {
			t.Errorf("partial_why names Kafka, which answered: %q", w)
		}
	}
}

// TestAccessPathByShare: on a 40-day history whose anomalies lie in the
// newest day, --access auto reads a one-day window (about 2.5% of each
// table) by walking the time index (orphans) or by sweeping the key range
// of the window's keys (duplicates: the generator's ids grow with time),
// and sweeps the key index for the whole history; every path finds
// exactly the seeded duplicates and orphans, and the notes say which path
// each table took. A window whose keys spread over the table is walked.
func TestAccessPathByShare(t *testing.T) {
	e := setupAltered(t, gen.Options{Ops: 4000, AnomalyRate: 0.02, Seed: 23, Span: 40 * 24 * time.Hour, AnomalySpan: 20 * time.Hour}, true, productionAlters...)
	ctx := context.Background()
	for _, q := range []string{"balance_journal", "ledger_entry", "points_grant", "biz_operation", "consumer_idempotency"} {
		e.db.Exec(t, "ANALYZE TABLE "+q)
	}
	for _, tc := range []struct {
		since time.Duration
		// the note each check's tables have: "" none (walked by time)
		notes map[string]string
		// sweepRows > 0: a whole duplicates sweep reads pages of that many
		// entries between sampled keys (one statement otherwise)
		sweepRows int
		// alone: duplicates without orphans (a whole sweep of both is one
		// read of each table for the two checks, not SweepRange's pages)
		alone bool
	}{
		{since: 24 * time.Hour, notes: map[string]string{reconcile.CheckDuplicates: "swept that range in key order", reconcile.CheckOrphans: ""}},
		{since: 41 * 24 * time.Hour, notes: map[string]string{reconcile.CheckDuplicates: "in key order", reconcile.CheckOrphans: "in key order once for both checks"}},
		{since: 41 * 24 * time.Hour, notes: map[string]string{reconcile.CheckDuplicates: "in key order", reconcile.CheckOrphans: "in key order once for both checks"}, sweepRows: 300},
		{since: 41 * 24 * time.Hour, notes: map[string]string{reconcile.CheckDuplicates: "in key order"}, alone: true},
		{since: 41 * 24 * time.Hour, notes: map[string]string{reconcile.CheckDuplicates: "in key order"}, sweepRows: 300, alone: true},
	} {
		t.Run(fmt.Sprintf("%s/pages%d/alone%v", tc.since, tc.sweepRows, tc.alone), func(t *testing.T) {
			if tc.sweepRows > 0 {
				reconcile.SetSweepRows(t, tc.sweepRows)
			}
			o := baseOptions(e)
			o.Since = tc.since
			o.Checks = []string{reconcile.CheckDuplicates, reconcile.CheckOrphans}
			if tc.alone {
				o.Checks = o.Checks[:1]
			}
			var c collected
			d := e.deps(nil)
			db := &countingDB{DB: d.DB}
			d.DB = db
			sum, err := reconcile.Run(ctx, d, o, c.emit)
			if err != nil {
				t.Fatal(err)
			}
			// The window's share of each of the 3 scan tables is asked once,
			// though both checks read them.
			if n := db.ranges.Load(); n != 3 {
				t.Errorf("%d RangeRows estimates, want 3 (one per scan table)", n)
			}
			// Pages between sampled keys: the 3 tables' bounds, then more
			// pages than tables. Over the whole history the cover of notify
			// (no scan block) sweeps step_intent too, a fourth table, whose
			// key is not an integer: no sample, SweepMulti's pages.
			whole := tc.since > 24*time.Hour
			if tc.alone && tc.sweepRows > 0 && (db.bounds.Load() != 3+1 || db.pages.Load() <= 6) {
				t.Errorf("%d tables sampled, %d pages between samples; want 3 (and step_intent's try) and many", db.bounds.Load(), db.pages.Load())
			}
			if tc.alone && tc.sweepRows == 0 && (db.bounds.Load() != 0 || db.pages.Load() != 3+1) {
				t.Errorf("%d tables sampled, %d pages; want 0 and one statement per table (and step_intent)", db.bounds.Load(), db.pages.Load())
			}
			// With orphans, a whole sweep reads each table's keys once for
			// both checks: no duplicates page of its own (step_intent's
			// aside).
			if !tc.alone && whole && tc.sweepRows == 0 && (db.bounds.Load() != 0 || db.pages.Load() != 1) {
				t.Errorf("%d tables sampled, %d duplicates pages; want only step_intent's: one read of each scan table for both checks", db.bounds.Load(), db.pages.Load())
			}
			if !tc.alone && whole && tc.sweepRows > 0 && (db.bounds.Load() != 1 || db.pages.Load() != 0) {
				t.Errorf("%d tables sampled, %d duplicates pages; want only step_intent's try: one read of each scan table for both checks", db.bounds.Load(), db.pages.Load())
			}
			for _, cs := range sum.Checks {
				if cs.Status != reconcile.StatusOK {
					t.Errorf("%s/%s %s: %s", cs.Pipeline, cs.Check, cs.Status, cs.Reason)
				}
				tables := 0
				for _, n := range cs.Notes {
					if strings.Contains(n, "in key order") || strings.Contains(n, "walked by time") {
						tables++
						if want := tc.notes[cs.Check]; want == "" || !strings.Contains(n, want) {
							t.Errorf("%s/%s since %s: note %q, want %q", cs.Pipeline, cs.Check, tc.since, n, want)
						}
					}
				}
				if want := map[string]int{"settlement": 2, "orders": 1}[cs.Pipeline]; tc.notes[cs.Check] != "" && tables != want {
					t.Errorf("%s/%s since %s: %d tables noted, want %d (notes %q)", cs.Pipeline, cs.Check, tc.since, tables, want, cs.Notes)
				}
			}
			var want []string
			for _, k := range expected(e.m, "action", false) {
				if strings.Contains(k, " | "+reconcile.CheckDuplicates+" | ") || !tc.alone && strings.Contains(k, " | "+reconcile.CheckOrphans+" | ") {
					want = append(want, k)
				}
			}
			if len(want) < 5 {
				t.Fatalf("only %d duplicates and orphans seeded", len(want))
			}
			diff(t, "targets", want, c.keys(t, "action"))
		})
	}
}

// countingDB counts the window estimates, window key ranges and extents
// a run asks for.
type countingDB struct {
	reconcile.DB
	ranges, windows, extents, bounds, pages atomic.Int32
}

func (c *countingDB) SweepBounds(ctx context.Context, s mysqlsrc.Sweep, pk string, n int) ([]mysqlsrc.KeyCount, error) {
	c.bounds.Add(1)
	return c.DB.SweepBounds(ctx, s, pk, n)
}

func (c *countingDB) SweepRange(ctx context.Context, s mysqlsrc.Sweep, after, upTo mysqlsrc.Bound) ([]string, mysqlsrc.SweepEnd, error) {
	c.pages.Add(1)
	return c.DB.SweepRange(ctx, s, after, upTo)
}

func (c *countingDB) WindowKeys(ctx context.Context, table, index, keyCol, timeCol string, from, to time.Time) (lo, hi mysqlsrc.KeyCount, rows int64, err error) {
	c.windows.Add(1)
	return c.DB.WindowKeys(ctx, table, index, keyCol, timeCol, from, to)
}

func (c *countingDB) KeysExtent(ctx context.Context, table, index, keyCol string, keys []mysqlsrc.KeyCount) (lo, hi mysqlsrc.KeyCount, err error) {
	c.extents.Add(1)
	return c.DB.KeysExtent(ctx, table, index, keyCol, keys)
}

func (c *countingDB) RangeRows(ctx context.Context, table, index, col string, from time.Time) (int64, bool, error) {
	c.ranges.Add(1)
	return c.DB.RangeRows(ctx, table, index, col, from)
}

// TestWindowKeysSpread: when the window's keys spread over the key index
// (two rows in the window whose keys sort before and after every other),
// duplicates walk that table by time, sweep the others' key ranges, and
// find the same targets; an empty window reads nothing.
func TestWindowKeysSpread(t *testing.T) {
	e := setupAltered(t, gen.Options{Ops: 4000, AnomalyRate: 0.02, Seed: 29, Span: 40 * 24 * time.Hour, AnomalySpan: 20 * time.Hour}, true, productionAlters...)
	e.db.Exec(t, `INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES
		('!first', 1, -5.00, 'DEBIT', NOW(3) - INTERVAL 2 HOUR), ('~last', 1, -5.00, 'DEBIT', NOW(3) - INTERVAL 2 HOUR)`)
	for _, q := range []string{"balance_journal", "ledger_entry", "points_grant", "biz_operation", "consumer_idempotency"} {
		e.db.Exec(t, "ANALYZE TABLE "+q)
	}
	o := baseOptions(e)
	o.Since = 24 * time.Hour
	o.Checks = []string{reconcile.CheckDuplicates}
	var c collected
	sum, err := reconcile.Run(context.Background(), e.deps(nil), o, c.emit)
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, cs := range sum.Checks {
		notes = append(notes, cs.Notes...)
	}
	for _, want := range []string{"balance_journal: the window's", "ledger_entry: the window's", "points_grant: the window's"} {
		i := slices.IndexFunc(notes, func(n string) bool { return strings.HasPrefix(n, want) })
		if i < 0 {
			t.Errorf("no note %q… in %q", want, notes)
			continue
		}
		path := "swept that range"
		if strings.HasPrefix(want, "balance_journal") {
			path = "walked by time"
		}
		if !strings.Contains(notes[i], path) {
			t.Errorf("note %q: want %q", notes[i], path)
		}
	}
	var want []string
	for _, k := range expected(e.m, "action", false) {
		if strings.Contains(k, " | "+reconcile.CheckDuplicates+" | ") {
			want = append(want, k)
		}
	}
	if len(want) < 3 {
		t.Fatalf("only %d duplicates seeded", len(want))
	}
	diff(t, "targets", want, c.keys(t, "action"))

	// The window read in slices of 7 rows: the same paths and targets.
	reconcile.SetWindowSlice(t, 7)
	d := e.deps(nil)
	db := &countingDB{DB: d.DB}
	d.DB = db
	var cs collected
	sliced, err := reconcile.Run(context.Background(), d, o, cs.emit)
	if err != nil {
		t.Fatal(err)
	}
	if n := db.windows.Load(); n < 6 {
		t.Errorf("%d window statements for windows of ~24 to ~60 rows in slices of 7, want more", n)
	}
	if db.extents.Load() != 3 {
		t.Errorf("%d extents of the slices' keys, want 3 (one per scan table)", db.extents.Load())
	}
	for i, cs := range sliced.Checks {
		if !slices.Equal(cs.Notes, sum.Checks[i].Notes) {
			t.Errorf("sliced notes %q, want %q", cs.Notes, sum.Checks[i].Notes)
		}
	}
	diff(t, "targets, sliced", want, cs.keys(t, "action"))

	// A window before the first row: nothing to read, nothing found.
	e.db.Exec(t, "UPDATE balance_journal SET created_at = created_at - INTERVAL 100 DAY")
	o.Checks = []string{reconcile.CheckDuplicates}
	o.Since = time.Hour
	e.db.Exec(t, "ANALYZE TABLE balance_journal")
	var c2 collected
	sum, err = reconcile.Run(context.Background(), e.deps(nil), o, c2.emit)
	if err != nil {
		t.Fatal(err)
	}
	notes = nil
	for _, cs := range sum.Checks {
		notes = append(notes, cs.Notes...)
	}
	if !slices.Contains(notes, "balance_journal: no row in the window") {
		t.Errorf("notes %q: want balance_journal: no row in the window", notes)
	}
	for _, k := range c2.keys(t, "action") {
		if strings.Contains(k, "debit") {
			t.Errorf("a debit target from an empty window: %s", k)
		}
	}
}
