package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
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

// env is one generated data set on a fresh database.
type env struct {
	db        *testenv.DB
	r         *mysqlsrc.Reader
	cfg       *config.Config
	pipelines []*config.Pipeline
	m         *gen.Manifest
}

// setup loads the settlement and skip schemas, adds the indexes `schema
// check` reports missing (unless bare), and generates o.
func setup(t *testing.T, o gen.Options, bare bool) *env {
	t.Helper()
	return setupAltered(t, o, bare)
}

// setupAltered is setup with the statements alter run on the schemas
// before anything else (a production table's own keys and indexes).
func setupAltered(t *testing.T, o gen.Options, bare bool, alter ...string) *env {
	t.Helper()
	db := testenv.MySQL(t)
	db.ExecFile(t, filepath.Join("..", "testdata", "schema", "settlement.sql"))
	db.ExecFile(t, filepath.Join("..", "testdata", "schema", "skip.sql"))
	for _, a := range alter {
		db.Exec(t, a)
	}
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "config", "reconcile.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseWithEnv("reconcile.yaml", raw, func(k string) (string, bool) {
		if k == "OPCTL_MYSQL_DSN" {
			return db.DSN, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := mysqlsrc.Open(db.DSN, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	var pipelines []*config.Pipeline
	for i := range cfg.Pipelines {
		pipelines = append(pipelines, &cfg.Pipelines[i])
	}
	ctx := context.Background()
	if !bare {
		var needs []schema.Need
		for _, p := range pipelines {
			needs = append(needs, reconcile.IndexNeeds(p)...)
		}
		rep, err := schema.Check(ctx, r, pipelines, needs, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Exec(ctx, rep.DDL()); err != nil {
			t.Fatal(err)
		}
		if rep2, _ := schema.Check(ctx, r, pipelines, needs, ""); len(rep2.Missing()) != 0 {
			t.Fatalf("still missing after applying the DDL: %+v", rep2.Missing())
		}
	}
	if o.End.IsZero() {
		o.End = time.Now().UTC().Add(-time.Hour)
	}
	m, err := gen.Generate(ctx, db.SQL, o)
	if err != nil {
		t.Fatal(err)
	}
	return &env{db: db, r: r, cfg: cfg, pipelines: pipelines, m: m}
}

// key identifies a finding for set comparison.
func key(pipeline, check, biz, verdict, step string) string {
	return strings.Join([]string{pipeline, check, biz, verdict, step}, " | ")
}

// expected is the manifest's anomalies of the given severity, optionally
// without those that need Kafka.
func expected(m *gen.Manifest, severity string, withKafka bool) []string {
	var out []string
	for _, a := range m.Anomalies {
		if a.Severity == severity && (withKafka || !a.NeedsKafka) {
			out = append(out, key(a.Pipeline, a.Check, a.BizID, a.Verdict, a.Step))
		}
	}
	sort.Strings(out)
	return out
}

type collected struct {
	mu      sync.Mutex
	results []reconcile.Result
}

func (c *collected) emit(r reconcile.Result) error {
	c.mu.Lock()
	c.results = append(c.results, r)
	c.mu.Unlock()
	return nil
}

// keys returns the sorted keys of the results of the given severity, and
// fails the test on a result reported twice.
func (c *collected) keys(t *testing.T, severity inspect.Severity) []string {
	t.Helper()
	var out []string
	seen := map[string]bool{}
	for _, r := range c.results {
		k := key(r.Pipeline, r.Check, r.BizID, string(r.Verdict), r.Step)
		if seen[r.Pipeline+r.Check+r.BizID] {
			t.Errorf("reported twice: %s", k)
		}
		seen[r.Pipeline+r.Check+r.BizID] = true
		if r.Severity == severity {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func diff(t *testing.T, what string, want, got []string) {
	t.Helper()
	missing, extra := setDiff(want, got), setDiff(got, want)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("%s: %d expected, %d found\nmissed: %v\nfalse positives: %v", what, len(want), len(got), head(missing), head(extra))
	}
}

func setDiff(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if !in[x] {
			out = append(out, x)
		}
	}
	return out
}

func head(s []string) []string {
	if len(s) > 10 {
		return append(s[:10:10], fmt.Sprintf("... %d more", len(s)-10))
	}
	return s
}

func baseOptions(e *env) reconcile.Options {
	return reconcile.Options{Pipelines: e.pipelines, Since: 7 * 24 * time.Hour, Timeout: 10 * time.Second}
}

// deps are the sources of a run on e's database as connect.Open assembles
// them: the reader, and a Collector on it reading the audit table, with
// kafka, or without Kafka ("not configured") when kafka is nil.
func (e *env) deps(kafka sources.Kafka) reconcile.Deps {
	col := &sources.Collector{DB: e.r, AuditTable: e.cfg.Audit.AuditTable(), Timeout: 10 * time.Second, KafkaMissing: "not configured"}
	if kafka != nil {
		col.Kafka, col.KafkaMissing = kafka, ""
	}
	return reconcile.Deps{DB: e.r, Collector: col}
}

// TestChecksFindTheSeededAnomalies: every check, on generated data, finds
// exactly the manifest's anomalies (no miss, no false positive), the
// look-alikes (in-flight leases, reversed duplicates, correct skips) are
// triaged but are not targets, and without Kafka the run is partial.
func TestChecksFindTheSeededAnomalies(t *testing.T) {
	e := setup(t, gen.Options{Ops: 4000, AnomalyRate: 0.02, Seed: 7}, false)
	var c collected
	sum, err := reconcile.Run(context.Background(), e.deps(nil), baseOptions(e), c.emit)
	if err != nil {
		t.Fatal(err)
	}
	want := expected(e.m, "action", false)
	if len(want) < 60 {
		t.Fatalf("the generator seeded only %d anomalies", len(want))
	}
	diff(t, "targets", want, c.keys(t, "action"))
	// Triaged in batches (one statement per query for a batch), not one
	// read per candidate.
	// The operations triaged only to cover notify (no scan block) are read
	// but not reported.
	// notify (no scan block) is covered over this whole history by the
	// keys of more than one row of step_intent (TestCoverBySweep).
	var coverOnly int64
	covered := false
	for _, ch := range sum.Checks {
		coverOnly += ch.CoverOnly
		for _, n := range ch.Notes {
			covered = covered || ch.Check == reconcile.CheckDuplicates && strings.Contains(n, "steps without a scan block (notify) covered by triaging")
		}
	}
	if !covered {
		t.Error("notify has no scan block, but the duplicates check does not say how it covered it")
	}
	if st := e.r.BatchStats(); st.Operations != len(c.results)+int(coverOnly) || st.Batches*10 > st.Operations {
		t.Errorf("batch reads %+v for %d triaged candidates and %d triaged to cover notify: want them all read, at least 10 a batch on average", st, len(c.results), coverOnly)
	}
	// Every candidate, target or not, reads as `where` reads it, one
	// operation at a time: same verdict, same summary, same partial flag.
	byName := map[string]*config.Pipeline{}
	for _, p := range e.pipelines {
		byName[p.Name] = p
	}
	col := &sources.Collector{DB: e.r, KafkaMissing: "not configured", AuditTable: e.cfg.Audit.AuditTable(), Timeout: 10 * time.Second}
	for _, r := range c.results {
		ev, err := col.Collect(context.Background(), byName[r.Pipeline], r.BizID)
		if err != nil {
			t.Fatal(err)
		}
		rep := inspect.Diagnose(ev)
		// An IN_FLIGHT summary says how long the lease still runs, from
		// the clock of each read: only its code and partial flag compare.
		sameDetail := rep.Verdict.Code == inspect.InFlight || rep.Verdict.Summary == r.Detail
		if rep.Verdict.Code != r.Verdict || !sameDetail || rep.Partial != r.Partial {
			t.Errorf("%s/%s %s: reconcile says %s %q (partial %v), where says %s %q (partial %v)", r.Pipeline, r.Check, r.BizID,
				r.Verdict, r.Detail, r.Partial, rep.Verdict.Code, rep.Verdict.Summary, rep.Partial)
		}
	}
	for _, r := range c.results {
		if r.IsTarget() && !r.Partial {
			t.Errorf("%s: without Kafka a target must be partial", r.BizID)
		}
	}
	if !sum.Partial || sum.Targets != int64(len(want)) {
		t.Errorf("summary: partial %v targets %d, want partial and %d", sum.Partial, sum.Targets, len(want))
	}
	// Why: the Collector's KafkaMissing.
	if !slices.Contains(sum.PartialWhy, "kafka: not configured") {
		t.Errorf("partial_why %q does not say Kafka is not configured", sum.PartialWhy)
	}
	status := map[string]string{}
	for _, cs := range sum.Checks {
		status[cs.Pipeline+"/"+cs.Check] = cs.Status
		if cs.Check == reconcile.CheckStuck && cs.Pipeline == gen.Settlement && cs.Verdicts[inspect.InFlight] != int64(e.m.Noise["in_flight"]) {
			t.Errorf("stuck: %d IN_FLIGHT candidates, want the %d live leases", cs.Verdicts[inspect.InFlight], e.m.Noise["in_flight"])
		}
		if cs.Check == reconcile.CheckSkipped && cs.Pipeline == gen.Orders && cs.Verdicts[inspect.SkippedOK] != int64(e.m.Noise["cancelled_skip"]) {
			t.Errorf("skipped: %d SKIPPED_OK, want %d (the stale skips must be dropped by the effect lookup)", cs.Verdicts[inspect.SkippedOK], e.m.Noise["cancelled_skip"])
		}
	}
	for k, want := range map[string]string{
		"settlement/stuck": reconcile.StatusOK, "settlement/duplicates": reconcile.StatusOK, "settlement/orphans": reconcile.StatusOK,
		"settlement/skipped": reconcile.StatusSkipped, "settlement/uncommitted": reconcile.StatusSkipped,
		"orders/skipped": reconcile.StatusOK, "orders/duplicates": reconcile.StatusOK, "orders/stuck": reconcile.StatusSkipped,
	} {
		if status[k] != want {
			t.Errorf("%s: status %q, want %q", k, status[k], want)
		}
	}
}

// TestChunkBoundaries: anomalies on every chunk edge (chunk 1), many rows
// sharing one timestamp (ties across pages) and keys with multibyte
// characters: the findings stay exact.
func TestChunkBoundaries(t *testing.T) {
	e := setup(t, gen.Options{Ops: 800, AnomalyRate: 0.05, Seed: 3, OpsPerTick: 40,
		SettlementPrefix: "支付-€", OrderPrefix: "订单-ü"}, false)
	want := expected(e.m, "action", false)
	for _, chunk := range []int{1, 3, 7, 1000} {
		t.Run(fmt.Sprintf("chunk%d", chunk), func(t *testing.T) {
			var c collected
			o := baseOptions(e)
			o.Chunk = chunk
			if _, err := reconcile.Run(context.Background(), e.deps(nil), o, c.emit); err != nil {
				t.Fatal(err)
			}
			diff(t, "targets", want, c.keys(t, "action"))
		})
	}
}

// TestShardsSplitTheWork: n workers with --shard i/n together find each
// anomaly exactly once, on either access path of the scan tables.
func TestShardsSplitTheWork(t *testing.T) {
	e := setup(t, gen.Options{Ops: 3000, AnomalyRate: 0.02, Seed: 11}, false)
	for _, access := range []string{reconcile.AccessWalk, reconcile.AccessSweep} {
		t.Run(access, func(t *testing.T) { shardsSplitTheWork(t, e, access) })
	}
}

func shardsSplitTheWork(t *testing.T, e *env, access string) {
	const n = 3
	var all collected
	perShard := make([]int, n)
	for i := range n {
		var c collected
		o := baseOptions(e)
		o.Shard, o.Shards, o.Chunk, o.Access = i, n, 50, access
		if _, err := reconcile.Run(context.Background(), e.deps(nil), o, c.emit); err != nil {
			t.Fatal(err)
		}
		for _, r := range c.results {
			if reconcile.ShardOf(r.BizID, n) != i {
				t.Errorf("shard %d reported %s, which belongs to shard %d", i, r.BizID, reconcile.ShardOf(r.BizID, n))
			}
			if r.IsTarget() {
				perShard[i]++
			}
		}
		all.results = append(all.results, c.results...)
	}
	diff(t, "targets of all shards", expected(e.m, "action", false), all.keys(t, "action"))
	for i, k := range perShard {
		if k == 0 {
			t.Errorf("shard %d found nothing: the split is not doing anything", i)
		}
	}
}

// TestRefusesAFullScan: on the testdata schema as is, ledger_entry has no
// index starting with created_at: duplicates is refused with the DDL that
// fixes it (balance_journal's (created_at) index serves, it is not asked
// for), and runs with AllowFullScan.
func TestRefusesAFullScan(t *testing.T) {
	e := setup(t, gen.Options{Ops: 600, AnomalyRate: 0.05, Seed: 5, Pipelines: []string{gen.Settlement}}, true)
	o := baseOptions(e)
	o.Pipelines = e.pipelines[:1]
	o.Checks = []string{reconcile.CheckDuplicates}
	var c collected
	sum, err := reconcile.Run(context.Background(), e.deps(nil), o, c.emit)
	if err != nil {
		t.Fatal(err)
	}
	cs := sum.Checks[0]
	if cs.Status != reconcile.StatusRefused || !sum.Refused || cs.Rows != 0 || len(c.results) != 0 {
		t.Fatalf("want a refusal before any row is read, got %+v", cs)
	}
	if !strings.Contains(cs.Reason, "no index on ledger_entry starting with (created_at)") || !strings.Contains(cs.Reason, "--allow-full-scan") ||
		strings.Contains(cs.Reason, "balance_journal") {
		t.Errorf("reason does not say what is missing (only that) and how to proceed: %s", cs.Reason)
	}
	wantDDL := []string{"ALTER TABLE `ledger_entry` ADD INDEX `ix_opctl_created_at_biz_order_id` (`created_at`, `biz_order_id`);"}
	if !slices.Equal(cs.DDL, wantDDL) {
		t.Errorf("DDL %q, want %q", cs.DDL, wantDDL)
	}

	o.AllowFullScan = true
	c = collected{}
	sum, err = reconcile.Run(context.Background(), e.deps(nil), o, c.emit)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Checks[0].Status != reconcile.StatusOK || len(sum.Checks[0].Notes) == 0 {
		t.Errorf("with AllowFullScan: %+v", sum.Checks[0])
	}
	var want []string
	for _, a := range e.m.Expected(gen.Settlement, reconcile.CheckDuplicates) {
		want = append(want, key(a.Pipeline, a.Check, a.BizID, a.Verdict, a.Step))
	}
	sort.Strings(want)
	diff(t, "duplicates on a full scan", want, c.keys(t, "action"))
}

// TestInterrupt: cancelling the context (Ctrl-C) stops the scan between
// statements: Run returns context.Canceled with how far it got, every
// pooled connection is back, and the server has no open transaction for
// this database.
func TestInterrupt(t *testing.T) {
	e := setup(t, gen.Options{Ops: 2000, Seed: 9, Pipelines: []string{gen.Settlement}}, false)
	// The window holds every row: a sweep, in pages of about 100 entries
	// between sampled keys; walked, pages of 10 rows, the next one read
	// while the lookups of the last run.
	reconcile.SetSweepRows(t, 100)
	for _, access := range []string{reconcile.AccessAuto, reconcile.AccessWalk} {
		t.Run(access, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			o := baseOptions(e)
			o.Pipelines = e.pipelines[:1]
			o.Checks = []string{reconcile.CheckDuplicates}
			o.Chunk = 10
			o.Access = access
			pages := 0
			o.Progress = func(p reconcile.Progress) {
				pages++
				if pages == 3 {
					cancel()
				}
			}
			var c collected
			sum, err := reconcile.Run(ctx, e.deps(nil), o, c.emit)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			in := sum.Interrupted
			if in == nil || in.Check != reconcile.CheckDuplicates || in.Pipeline != gen.Settlement || in.Rows < 30 || !strings.HasPrefix(in.LastKey, "PAY-") {
				t.Fatalf("interruption = %+v, want duplicates on settlement after >= 30 rows with the last key", in)
			}
			if sum.Checks[0].Status != reconcile.StatusInterrupted {
				t.Errorf("status %q", sum.Checks[0].Status)
			}
			if n := e.r.PoolInUse(); n != 0 {
				t.Errorf("%d connections still in use after Run returned", n)
			}
			var open int
			if err := e.db.SQL.QueryRow(`SELECT COUNT(*) FROM information_schema.INNODB_TRX t
		JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id WHERE p.DB = ?`, e.db.Name).Scan(&open); err != nil {
				t.Fatal(err)
			}
			if open != 0 {
				t.Errorf("%d open transactions on %s after the interrupt", open, e.db.Name)
			}
		})
	}
}

// TestKafka: with the Kafka layout of the manifest in place (records in
// every partition, the group committed below the tail), stuck finds the
// STRANDED operations, uncommitted reports the terminal ones past the
// committed offset (COMPLETE_UNCOMMITTED, watch), and every target's
// verdict is the one `where` computes (sources.Collector with the real
// Kafka reader, then inspect.Diagnose).
func TestKafka(t *testing.T) {
	e := setup(t, gen.Options{Ops: 800, AnomalyRate: 0.03, Seed: 13, Kafka: true, Pipelines: []string{gen.Settlement}}, false)
	kl := e.m.Kafka
	k := testenv.NewKafka(t, map[string]int32{kl.Topic: int32(kl.Partitions), "order-event": 1})
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

	o := baseOptions(e)
	o.Pipelines = e.pipelines[:1]
	var c collected
	sum, err := reconcile.Run(context.Background(), e.deps(kr), o, c.emit)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Partial {
		t.Fatalf("partial with Kafka up: %v", sum.PartialWhy)
	}
	// The group's lag on the topic, as produced and committed above.
	var lag int64
	for p := range kl.Partitions {
		lag += inspect.PartitionLag(sources.PartitionView{Committed: kl.Committed[p], LogEnd: kl.LogEnd[p]})
	}
	if len(sum.Lag) != 1 || sum.Lag[0] != (reconcile.PipelineLag{Pipeline: e.pipelines[0].Name, Topic: kl.Topic, Group: kl.Group, GroupLag: lag}) || lag == 0 {
		t.Errorf("lag %+v, want %d for %s", sum.Lag, lag, e.pipelines[0].Name)
	}
	want := expected(e.m, "action", true)
	if !slices.ContainsFunc(want, func(s string) bool { return strings.Contains(s, "STRANDED") }) {
		t.Fatal("the manifest has no STRANDED anomaly")
	}
	diff(t, "targets", want, c.keys(t, "action"))
	var uncommitted []string
	for _, r := range c.results {
		if r.Check == reconcile.CheckUncommitted {
			uncommitted = append(uncommitted, key(r.Pipeline, r.Check, r.BizID, string(r.Verdict), r.Step))
		}
	}
	sort.Strings(uncommitted)
	diff(t, "uncommitted", expected(e.m, "watch", true), uncommitted)

	// Same verdict as `where`.
	col := &sources.Collector{DB: e.r, Kafka: kr, AuditTable: e.cfg.Audit.AuditTable(), Timeout: 10 * time.Second}
	for _, r := range c.results {
		ev, err := col.Collect(context.Background(), e.pipelines[0], r.BizID)
		if err != nil {
			t.Fatal(err)
		}
		rep := inspect.Diagnose(ev)
		if rep.Verdict.Code != r.Verdict || rep.Partial != r.Partial {
			t.Errorf("%s: reconcile says %s (partial %v), where says %s (partial %v)", r.BizID, r.Verdict, r.Partial, rep.Verdict.Code, rep.Partial)
		}
		// What the console lists beside it is what where reads.
		s := r.Seen
		if s.Owner != rep.State.Owner || !eqTime(s.UpdatedAt, rep.State.UpdatedAt) || s.DBNow == nil ||
			(s.Partition != nil && (rep.Kafka.Partition == nil || *s.Partition != *rep.Kafka.Partition)) {
			t.Errorf("%s: seen %+v, where: owner %q updated %v partition %v", r.BizID, s, rep.State.Owner, rep.State.UpdatedAt, rep.Kafka.Partition)
		}
	}

	// Kafka unreachable: the same targets, computed without it, partial.
	dead := kafkasrc.New(config.Kafka{Brokers: []string{"127.0.0.1:1"}, Version: "3.5.0"}, 2*time.Second)
	defer dead.Close()
	c = collected{}
	o.Checks = []string{reconcile.CheckStuck, reconcile.CheckUncommitted}
	sum, err = reconcile.Run(context.Background(), e.deps(dead), o, c.emit)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Partial || len(sum.PartialWhy) == 0 {
		t.Fatalf("want partial, got %+v", sum)
	}
	for _, cs := range sum.Checks {
		if cs.Check == reconcile.CheckUncommitted && cs.Status != reconcile.StatusSkipped {
			t.Errorf("uncommitted without Kafka: %s", cs.Status)
		}
	}
	for _, r := range c.results {
		if !r.Partial {
			t.Errorf("%s: not marked partial", r.BizID)
		}
		if r.Verdict == inspect.Stranded {
			t.Errorf("%s: STRANDED without Kafka", r.BizID)
		}
	}
}

// TestSkippedEntityLookup: with entity.table/key/status the skipped check
// reads the entities of each chunk in one lookup and does not triage the
// SKIPPED records on a cancelling entity (they are counted SKIPPED_OK, not
// emitted); the targets and the verdict counts are those of the same
// pipeline without the block, which triages every record. An operation
// whose entity row is missing is not dropped: it is triaged as before.
func TestSkippedEntityLookup(t *testing.T) {
	e := setup(t, gen.Options{Ops: 2000, AnomalyRate: 0.02, Seed: 13, Pipelines: []string{gen.Orders}}, false)
	var orders *config.Pipeline
	for _, p := range e.pipelines {
		if p.Name == gen.Orders {
			orders = p
		}
	}
	if orders == nil || orders.Entity.Table == "" {
		t.Fatal("testdata/config/reconcile.yaml: the orders pipeline has no entity batch lookup")
	}
	plain := *orders
	ent := *orders.Entity
	ent.Table, ent.Key, ent.Status = "", "", ""
	plain.Entity = &ent

	// A refunded order whose SKIPPED record would be dropped by the lookup
	// loses its entity row: it must be triaged (finding ENTITY_NOT_FOUND),
	// with and without the block, to the same verdict.
	var gone string
	if err := e.db.SQL.QueryRow(`SELECT o.order_id FROM orders o JOIN consumer_idempotency i ON i.biz_id = o.order_id
		WHERE i.action = 'SKIPPED' AND o.status = 'REFUNDED' ORDER BY o.order_id LIMIT 1`).Scan(&gone); err != nil {
		t.Fatal(err)
	}
	e.db.Exec(t, "DELETE FROM orders WHERE order_id = ?", gone)

	run := func(p *config.Pipeline, chunk int) (*reconcile.CheckStats, *collected) {
		t.Helper()
		o := baseOptions(e)
		o.Pipelines, o.Checks, o.Chunk = []*config.Pipeline{p}, []string{reconcile.CheckSkipped}, chunk
		var c collected
		sum, err := reconcile.Run(context.Background(), e.deps(nil), o, c.emit)
		if err != nil {
			t.Fatal(err)
		}
		if len(sum.Checks) != 1 || sum.Checks[0].Status != reconcile.StatusOK {
			t.Fatalf("skipped check: %+v", sum.Checks)
		}
		return &sum.Checks[0], &c
	}
	var want []string
	for _, a := range e.m.Expected(gen.Orders, reconcile.CheckSkipped) {
		want = append(want, key(a.Pipeline, a.Check, a.BizID, a.Verdict, a.Step))
	}
	sort.Strings(want)
	cancelled := int64(e.m.Noise["cancelled_skip"]) - 1 // one lost its entity row
	if cancelled < 5 {
		t.Fatalf("the generator seeded only %d cancelled skips", cancelled)
	}
	verdicts := func(c *collected) map[inspect.Code]int64 {
		out := map[inspect.Code]int64{}
		for _, r := range c.results {
			out[r.Verdict]++
		}
		return out
	}
	isGone := func(c *collected) inspect.Code {
		for _, r := range c.results {
			if r.BizID == gone {
				return r.Verdict
			}
		}
		return ""
	}

	base, bc := run(&plain, 1000)
	if got := verdicts(bc)[inspect.SkippedOK]; got != cancelled {
		t.Fatalf("without the block: %d SKIPPED_OK triaged, want %d", got, cancelled)
	}
	goneVerdict := isGone(bc)
	if goneVerdict == "" {
		t.Fatalf("without the block: %s (no entity row) was not triaged", gone)
	}
	for _, chunk := range []int{1, 7, 1000} {
		t.Run(fmt.Sprintf("chunk%d", chunk), func(t *testing.T) {
			cs, c := run(orders, chunk)
			diff(t, "targets with the batch lookup", want, c.keys(t, "action"))
			if got := verdicts(c)[inspect.SkippedOK]; got != 0 {
				t.Errorf("%d SKIPPED_OK candidates were triaged: the batch lookup did not drop them", got)
			}
			if int64(len(c.results)) != base.Candidates-cancelled {
				t.Errorf("%d candidates triaged, want %d (%d without the lookup, minus %d cancelled)",
					len(c.results), base.Candidates-cancelled, base.Candidates, cancelled)
			}
			if v := isGone(c); v != goneVerdict {
				t.Errorf("%s (no entity row) triaged as %q, want %q as without the block", gone, v, goneVerdict)
			}
			if cs.Candidates != base.Candidates || cs.Targets != base.Targets || !maps.Equal(cs.Verdicts, base.Verdicts) {
				t.Errorf("counts with the lookup: candidates %d targets %d verdicts %v; without: %d %d %v",
					cs.Candidates, cs.Targets, cs.Verdicts, base.Candidates, base.Targets, base.Verdicts)
			}
			if cs.Rows <= base.Rows {
				t.Errorf("rows read %d with the lookup, %d without: the lookup's keys are not counted", cs.Rows, base.Rows)
			}
			if !slices.ContainsFunc(cs.Notes, func(n string) bool {
				return strings.Contains(n, fmt.Sprintf("%d SKIPPED record(s)", cancelled))
			}) {
				t.Errorf("notes %q do not say how many records the lookup decided", cs.Notes)
			}
		})
	}
}

// okKafka answers every group read with an empty view: Kafka read, nothing
// known of the positions (redelivery unknown), so a partial verdict is the
// MySQL read's doing.
type okKafka struct{}

func (okKafka) Group(_ context.Context, topic, group string) (sources.GroupView, error) {
	return sources.GroupView{Topic: topic, Group: group, GroupExists: true, GroupState: "Empty", Partitions: map[int32]sources.PartitionView{}}, nil
}

func (okKafka) Locate(context.Context, sources.LocateRequest) (sources.Location, error) {
	return sources.Location{Partition: -1, Offset: -1, Located: sources.LocatedUnknown}, nil
}

// TestBrokenEvidenceQueryHidesNoDoubleDebit: with a typo in the debit
// evidence query (a column that does not exist), every candidate of the
// duplicates check is a target, READ_ERROR on step debit, marked partial,
// and the run is partial (exit 6) saying which query failed: a broken
// evidence query cannot make a double debit read COMPLETE and drop out of
// the targets (docs/reconcile.md#targets).
func TestBrokenEvidenceQueryHidesNoDoubleDebit(t *testing.T) {
	e := setup(t, gen.Options{Ops: 600, AnomalyRate: 0.05, Seed: 5, Pipelines: []string{gen.Settlement}}, false)
	var doubles []string
	for _, a := range e.m.Expected(gen.Settlement, reconcile.CheckDuplicates) {
		if a.Step == "debit" {
			doubles = append(doubles, a.BizID)
		}
	}
	sort.Strings(doubles)
	if len(doubles) < 3 {
		t.Fatalf("the generator seeded only %d double debits", len(doubles))
	}
	run := func(p *config.Pipeline) (*reconcile.Summary, *collected) {
		t.Helper()
		o := baseOptions(e)
		o.Pipelines, o.Checks = []*config.Pipeline{p}, []string{reconcile.CheckDuplicates}
		d := e.deps(okKafka{})
		var c collected
		sum, err := reconcile.Run(context.Background(), d, o, c.emit)
		if err != nil {
			t.Fatal(err)
		}
		return sum, &c
	}
	targets := func(c *collected, verdict inspect.Code) []string {
		var out []string
		for _, r := range c.results {
			if r.IsTarget() && r.Verdict == verdict && r.Step == "debit" {
				out = append(out, r.BizID)
			}
		}
		sort.Strings(out)
		return out
	}

	// The sound query finds the double debits, and nothing is partial.
	sum, c := run(e.pipelines[0])
	diff(t, "double debits, sound query", doubles, targets(c, inspect.DuplicateEffect))
	if sum.Partial {
		t.Fatalf("partial with every query sound: %q", sum.PartialWhy)
	}

	broken := *e.pipelines[0]
	broken.Steps = slices.Clone(broken.Steps)
	ev := broken.Steps[0].Evidence
	broken.Steps[0].Evidence = strings.Replace(ev, "j.account_id", "j.acount_id", 1)
	if broken.Steps[0].Evidence == ev {
		t.Fatalf("the debit evidence query has no j.account_id: %s", ev)
	}
	sum, c = run(&broken)
	if len(c.results) == 0 {
		t.Fatalf("no candidate triaged: %+v", sum.Checks)
	}
	if missed := setDiff(doubles, targets(c, inspect.ReadError)); len(missed) > 0 {
		t.Errorf("broken query: %d of %d double debits are not READ_ERROR targets on debit: %v", len(missed), len(doubles), head(missed))
	}
	for _, r := range c.results {
		if r.Verdict == inspect.InFlight {
			continue // a live lease is never a target
		}
		if !r.IsTarget() || r.Verdict != inspect.ReadError || !r.Partial || r.Step != "debit" || !strings.Contains(r.Detail, "debit: evidence query") {
			t.Errorf("%s: %s %q (target %v, partial %v, step %q): want a partial READ_ERROR target on debit naming its query",
				r.BizID, r.Verdict, r.Detail, r.IsTarget(), r.Partial, r.Step)
		}
	}
	cs := sum.Checks[0]
	if cs.Targets == 0 || cs.Targets != cs.Candidates-cs.Verdicts[inspect.InFlight] || !cs.Partial {
		t.Errorf("duplicates check: %d targets of %d candidates (%d in flight), partial %v", cs.Targets, cs.Candidates, cs.Verdicts[inspect.InFlight], cs.Partial)
	}
	named := slices.ContainsFunc(sum.PartialWhy, func(w string) bool {
		return strings.Contains(w, "debit: evidence query") && strings.Contains(w, "acount_id")
	})
	if !sum.Partial || sum.ExitCode() != sources.ExitPartial || !named {
		t.Errorf("summary partial %v, exit %d, why %q: want partial (exit 6) naming the debit evidence query", sum.Partial, sum.ExitCode(), sum.PartialWhy)
	}
}

func eqTime(a, b *time.Time) bool { return (a == nil) == (b == nil) && (a == nil || a.Equal(*b)) }

// spelledTwice inserts double debits of one key under two spellings
// that utf8mb4_general_ci makes equal (case, accent), one before the
// one-day window and one in it, or (PAY-TWICE) both in it.
const spelledTwice = `INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES
	('PAY-SPELL', 1, -5.00, 'DEBIT', NOW(3) - INTERVAL 3 DAY), ('pay-spell', 1, -5.00, 'DEBIT', NOW(3) - INTERVAL 1 HOUR),
	('PAY-TWICE', 1, -5.00, 'DEBIT', NOW(3) - INTERVAL 2 HOUR), ('pay-twice', 1, -5.00, 'DEBIT', NOW(3) - INTERVAL 1 HOUR),
	('PAY-ACCENT', 1, -5.00, 'DEBIT', NOW(3) - INTERVAL 3 DAY), ('pÁy-accent', 1, -5.00, 'DEBIT', NOW(3) - INTERVAL 1 HOUR),
	('PAY-!LOW', 1, -5.00, 'DEBIT', NOW(3) - INTERVAL 3 DAY), ('pay-!low', 1, -5.00, 'DEBIT', NOW(3) - INTERVAL 1 HOUR),
	('PAY-~HIGH', 1, -5.00, 'DEBIT', NOW(3) - INTERVAL 3 DAY), ('pay-~high', 1, -5.00, 'DEBIT', NOW(3) - INTERVAL 1 HOUR)`

// TestDuplicateSpelledTwice: under a case-insensitive collation, a double
// debit whose first row (yesterday, PAY-SPELL) lies before the window and
// whose second (pay-spell) lies in it is one duplicated key: the walk of a
// one-day window finds it, once, whichever spelling the count names it by;
// so does the sweep. The same with an accent (pÁy-accent, not ASCII: the
// lookups list it instead of joining it). Two spellings of another key both
// in the window are one target too.
func TestDuplicateSpelledTwice(t *testing.T) {
	e := setup(t, gen.Options{Ops: 200, AnomalyRate: 0, Seed: 11, Pipelines: []string{gen.Settlement}}, false)
	e.db.Exec(t, spelledTwice)
	// The window's least and greatest keys (pay-!low, pay-~high) have a
	// spelling outside it: --access range bounds its sweep by the window's
	// spellings, and the collation puts the other one inside.
	for _, access := range []string{reconcile.AccessWalk, reconcile.AccessSweep, reconcile.AccessRange} {
		o := baseOptions(e)
		o.Since, o.Access = 24*time.Hour, access
		o.Checks = []string{reconcile.CheckDuplicates}
		var c collected
		sum, err := reconcile.Run(context.Background(), e.deps(okKafka{}), o, c.emit)
		if err != nil {
			t.Fatal(err)
		}
		if access == reconcile.AccessRange {
			var notes []string
			for _, cs := range sum.Checks {
				notes = append(notes, cs.Notes...)
			}
			if !slices.ContainsFunc(notes, func(n string) bool {
				return strings.HasPrefix(n, "balance_journal: the window's") && strings.Contains(n, "swept that range")
			}) {
				t.Errorf("--access range: balance_journal not swept by its window's key range (notes %q)", notes)
			}
		}
		found := map[string]int{}
		for _, r := range c.results {
			if r.IsTarget() && r.Verdict == inspect.DuplicateEffect && r.Step == "debit" {
				found[strings.ToUpper(strings.ReplaceAll(r.BizID, "Á", "A"))]++
			}
		}
		for _, k := range []string{"PAY-SPELL", "PAY-TWICE", "PAY-ACCENT", "PAY-!LOW", "PAY-~HIGH"} {
			if found[k] != 1 {
				t.Errorf("--access %s: %s reported %d times as a double debit, want once (%v)", access, k, found[k], found)
			}
		}
	}
}

// TestDuplicateSpelledTwiceSharded: the same double debits, split by
// --shard i/3. Each spelling hashes to another shard (CRC32 of its bytes),
// and every double debit whose window holds one spelling is reported by
// exactly one of the three workers, on every path; PAY-TWICE, with both
// spellings in the window, by one or two.
func TestDuplicateSpelledTwiceSharded(t *testing.T) {
	e := setup(t, gen.Options{Ops: 200, AnomalyRate: 0, Seed: 11, Pipelines: []string{gen.Settlement}}, false)
	e.db.Exec(t, spelledTwice)
	for _, access := range []string{reconcile.AccessWalk, reconcile.AccessSweep, reconcile.AccessRange} {
		found := map[string]int{}
		for shard := range 3 {
			o := baseOptions(e)
			o.Since, o.Access = 24*time.Hour, access
			o.Checks = []string{reconcile.CheckDuplicates}
			o.Shard, o.Shards = shard, 3
			var c collected
			if _, err := reconcile.Run(context.Background(), e.deps(okKafka{}), o, c.emit); err != nil {
				t.Fatal(err)
			}
			for _, r := range c.results {
				if r.IsTarget() && r.Verdict == inspect.DuplicateEffect && r.Step == "debit" {
					found[strings.ToUpper(strings.ReplaceAll(r.BizID, "Á", "A"))]++
				}
			}
		}
		for _, k := range []string{"PAY-SPELL", "PAY-ACCENT", "PAY-!LOW", "PAY-~HIGH"} {
			if found[k] != 1 {
				t.Errorf("--access %s, 3 shards: %s reported %d times, want once (%v)", access, k, found[k], found)
			}
		}
		if n := found["PAY-TWICE"]; n < 1 || n > 2 || n == 2 && access != reconcile.AccessWalk {
			t.Errorf("--access %s, 3 shards: PAY-TWICE reported %d times (%v)", access, n, found)
		}
	}
}

// TestCoverBySweep: notify (no scan block, counted by its intents) is
// covered over a whole history by the keys of more than one row of
// step_intent, and finds the same targets as the walk of every operation
// (--access walk): an operation with a second acked notify intent whose
// state row changed in the window is a DUPLICATE_EFFECT, one whose state
// row did not is not reported, and a second unacked intent is not a
// second effect.
func TestCoverBySweep(t *testing.T) {
	e := setup(t, gen.Options{Ops: 400, AnomalyRate: 0, Seed: 13, Pipelines: []string{gen.Settlement}}, false)
	var ids []string
	rows, err := e.db.SQL.Query("SELECT o.biz_id FROM biz_operation o WHERE o.status = 'DONE' AND (SELECT COUNT(*) FROM step_intent i WHERE i.biz_id = o.biz_id AND i.acked_at IS NOT NULL) = 1 ORDER BY o.biz_id LIMIT 3")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if len(ids) != 3 {
		t.Fatalf("only %d done operations with one acked notify intent", len(ids))
	}
	twice, old, unacked := ids[0], ids[1], ids[2]
	for _, id := range ids {
		acked := "NOW(3)"
		if id == unacked {
			acked = "NULL"
		}
		e.db.Exec(t, "INSERT INTO step_intent (request_id, biz_id, step, attempt, sent_at, acked_at, result) VALUES (?, ?, 'notify', 2, NOW(3), "+acked+", 'OK')", id+"-again", id)
	}
	e.db.Exec(t, "UPDATE biz_operation SET updated_at = NOW(3) - INTERVAL 30 DAY WHERE biz_id = ?", old)
	for _, access := range []string{reconcile.AccessAuto, reconcile.AccessSweep, reconcile.AccessWalk} {
		o := baseOptions(e)
		o.Access = access
		o.Checks = []string{reconcile.CheckDuplicates}
		var c collected
		sum, err := reconcile.Run(context.Background(), e.deps(okKafka{}), o, c.emit)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range c.results {
			if r.IsTarget() && r.Step == "notify" {
				got = append(got, r.BizID+" "+string(r.Verdict)+" "+r.Step)
			}
		}
		if want := []string{twice + " DUPLICATE_EFFECT notify"}; !slices.Equal(got, want) {
			t.Errorf("--access %s: targets %q, want %q", access, got, want)
		}
		swept := false
		for _, cs := range sum.Checks {
			if cs.Pipeline != gen.Settlement {
				continue
			}
			for _, n := range cs.Notes {
				if strings.Contains(n, "step_intent.biz_id, swept ix_biz_step") {
					swept = true
				}
			}
			// The sweep triages only the operations of more than one intent
			// (the unacked one is read, and is not a target); the walk every
			// operation of the window.
			if want := int64(1); access != reconcile.AccessWalk && cs.CoverOnly != want {
				t.Errorf("--access %s: %d operations triaged only for the cover, want %d (notes %q)", access, cs.CoverOnly, want, cs.Notes)
			}
			if access == reconcile.AccessWalk && cs.CoverOnly < 300 {
				t.Errorf("--access walk: %d operations triaged for the cover, want every operation of the window", cs.CoverOnly)
			}
		}
		if swept != (access != reconcile.AccessWalk) {
			t.Errorf("--access %s: cover swept step_intent %v (notes %q)", access, swept, sum.Checks[0].Notes)
		}
	}
}

// TestSharedSweepPastTheLastKey: a whole sweep shared by duplicates and
// orphans reads ledger_entry alongside balance_journal, page by page of
// balance_journal's keys; a ledger row whose key sorts after every key of
// balance_journal, without a state row, and two ledger rows of such a key
// are found on the last page (the lookups then read to the end), as the
// walk of each table finds them.
func TestSharedSweepPastTheLastKey(t *testing.T) {
	e := setup(t, gen.Options{Ops: 300, AnomalyRate: 0, Seed: 17, Pipelines: []string{gen.Settlement}}, false)
	e.db.Exec(t, `INSERT INTO ledger_entry (biz_order_id, direction, amount, created_at) VALUES
		('PAY-~zz-orphan', 'D', 1, NOW(3)), ('PAY-~zz-two', 'D', 1, NOW(3)), ('PAY-~zz-two', 'C', 1, NOW(3)),
		('PAY-~zz-state', 'D', 1, NOW(3))`)
	// Its state row: not an orphan, not even a candidate of orphans (the
	// lookups of the last page read past the last journal key).
	e.db.Exec(t, `INSERT INTO biz_operation (biz_id, status, msg_id, created_at, updated_at) VALUES ('PAY-~zz-state', 'DONE', 'm-zz', NOW(3), NOW(3))`)
	var results [3][]string
	var orphanCandidates [3]int64
	// The third: orphans alone, which sweeps both journals in step too.
	for i, access := range []string{reconcile.AccessAuto, reconcile.AccessWalk, reconcile.AccessAuto} {
		for _, chunk := range []int{1, 1000} {
			o := baseOptions(e)
			o.Access, o.Chunk = access, chunk
			o.Checks = []string{reconcile.CheckDuplicates, reconcile.CheckOrphans}
			alone := i == 2
			if alone {
				o.Checks = o.Checks[1:]
			}
			var c collected
			sum, err := reconcile.Run(context.Background(), e.deps(okKafka{}), o, c.emit)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range c.results {
				if r.IsTarget() && r.Pipeline == gen.Settlement {
					got = append(got, r.Check+" "+r.BizID)
				}
			}
			slices.Sort(got)
			if alone {
				// Duplicates did not run: its finds are not wanted.
				got = slices.DeleteFunc(got, func(k string) bool { return strings.HasPrefix(k, reconcile.CheckDuplicates) })
			}
			for _, want := range []string{"orphans PAY-~zz-orphan", "orphans PAY-~zz-two"} {
				if !slices.Contains(got, want) {
					t.Errorf("--access %s, chunk %d: %s not found (targets %q)", access, chunk, want, got)
				}
			}
			shared := 0
			for _, cs := range sum.Checks {
				for _, n := range cs.Notes {
					if strings.Contains(n, "once for both checks") {
						shared++
					}
				}
			}
			// settlement's two tables (orders has no rows here: walked).
			if want := map[string]int{reconcile.AccessAuto: 2, reconcile.AccessWalk: 0}[access]; !alone && shared != want {
				t.Errorf("--access %s: %d tables read once for both checks, want %d", access, shared, want)
			}
			if chunk == 1000 {
				results[i] = got
				for _, cs := range sum.Checks {
					if cs.Pipeline == gen.Settlement && cs.Check == reconcile.CheckOrphans {
						orphanCandidates[i] = cs.Candidates
					}
				}
			}
		}
	}
	if !slices.Equal(results[0], results[1]) || orphanCandidates[0] != orphanCandidates[1] {
		t.Errorf("shared sweep %q (%d orphans candidates), walk %q (%d)", results[0], orphanCandidates[0], results[1], orphanCandidates[1])
	}
	var orphansOnly []string
	for _, k := range results[1] {
		if strings.HasPrefix(k, reconcile.CheckOrphans) {
			orphansOnly = append(orphansOnly, k)
		}
	}
	if !slices.Equal(results[2], orphansOnly) || orphanCandidates[2] != orphanCandidates[1] {
		t.Errorf("orphans alone %q (%d candidates), walk %q (%d)", results[2], orphanCandidates[2], orphansOnly, orphanCandidates[1])
	}
}
