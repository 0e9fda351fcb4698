package mysql

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// labPipeline is pipeline name of the lab's configuration
// (lab/opctl.yaml.tmpl), rendered as the lab renders it (placeholder URLs
// and seed databases: nothing here reaches them).
func labPipeline(t testing.TB, name string) *config.Pipeline {
	t.Helper()
	b, err := os.ReadFile("../../lab/opctl.yaml.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	urls := map[string]string{"Notify": "http://127.0.0.1:1", "WMS": "http://127.0.0.1:1", "Logistics": "http://127.0.0.1:1", "Points": "http://127.0.0.1:1"}
	var sb strings.Builder
	err = template.Must(template.New("opctl.yaml").Parse(string(b))).Execute(&sb, map[string]any{
		"DSN": "root@tcp(127.0.0.1:3306)/lab", "BrokersYAML": `"127.0.0.1:9092"`,
		"Naive": urls, "Anchored": urls, "Seeds": urls,
		"Seed000DB": "", "Seed001DB": "lab_seed001", "Seed003DB": "lab_seed003",
	})
	if err != nil {
		t.Fatal(err)
	}
	return pipelineOf(t, "opctl.yaml", []byte(sb.String()), name)
}

// presetPipeline is the one pipeline of a preset (config.Preset).
func presetPipeline(t testing.TB, preset string) *config.Pipeline {
	t.Helper()
	b, err := config.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	return pipelineOf(t, preset+".yaml", b, "")
}

func pipelineOf(t testing.TB, file string, b []byte, name string) *config.Pipeline {
	t.Helper()
	env := map[string]string{"OPCTL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/x"}
	c, err := config.ParseWithEnv(file, b, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for i := range c.Pipelines {
		if name == "" || c.Pipelines[i].Name == name {
			return &c.Pipelines[i]
		}
	}
	t.Fatalf("%s: no pipeline %q", file, name)
	return nil
}

// hybridCase is a pipeline on its schema, with the data of n operations
// (ids of ident(1..n)) in their many shapes, and the ids a batch asks for.
type hybridCase struct {
	name   string
	p      func(t testing.TB) *config.Pipeline
	schema string
	// fill loads the data of n operations.
	fill func(t testing.TB, db *testenv.DB, n int)
	// id is operation i's biz_id; extra are ids a batch adds (missing,
	// another case, a trailing space, non-ASCII, a repeat).
	id    func(i int) string
	extra []string
	// single is how many of the pipeline's queries a hybrid read runs per
	// operation (none of them a lookup).
	single int
}

// hybridCases are the lab's settlement pipelines (naive and anchored: the
// debit evidence's NOT EXISTS, intents, leases), its orders pipeline
// (idempotency records by biz_id, the entity) and the seeds' presets on
// their own schemas.
func hybridCases() []hybridCase {
	payID := func(i int) string { return fmt.Sprintf("PAY-%06d", i) }
	return []hybridCase{
		{
			name: "lab settlement", p: func(t testing.TB) *config.Pipeline { return labPipeline(t, "settlement") },
			schema: "../../lab/schema.sql", fill: fillLabSettlement, id: payID,
			extra:  []string{"PAY-MISSING", "pay-000003", "PAY-000004 ", "工单-1", "PAY-000010"},
			single: 1, // the debit evidence's NOT EXISTS
		},
		{
			name: "lab settlement_anchored", p: func(t testing.TB) *config.Pipeline { return labPipeline(t, "settlement_anchored") },
			schema: "../../lab/schema.sql", fill: fillLabAnchored, id: payID,
			extra:  []string{"PAY-MISSING", "pay-000003", "PAY-000004 ", "工单-1", "PAY-000010"},
			single: 1, // the debit evidence's NOT EXISTS
		},
		{
			name: "lab orders", p: func(t testing.TB) *config.Pipeline { return labPipeline(t, "orders") },
			schema: "../../lab/schema.sql", fill: fillLabOrders,
			id:    func(i int) string { return fmt.Sprintf("O-%06d", i) },
			extra: []string{"O-MISSING", "o-000003", "O-000004 ", "工单-1", "O-000010"},
		},
		{
			name: "seed000 preset", p: func(t testing.TB) *config.Pipeline { return presetPipeline(t, "seed000") },
			schema: "../../testdata/schema/seed000.sql", fill: fillSeed000, id: payID,
			extra: []string{"PAY-MISSING", "pay-000006", "PAY-000005 ", "工单-1", "PAY-000010"},
		},
		{
			name: "seed001 preset", p: func(t testing.TB) *config.Pipeline { return presetPipeline(t, "seed001") },
			schema: "../../testdata/schema/seed001.sql", fill: fillSeed001,
			id:    func(i int) string { return fmt.Sprintf("SO-%06d:PAID", i) },
			extra: []string{"SO-MISSING:PAID", "so-000003:paid", "SO-000004:PAID ", "工单-1", "SO-000010:PAID"},
		},
		{
			name: "seed003 preset", p: func(t testing.TB) *config.Pipeline { return presetPipeline(t, "seed003") },
			schema: "../../testdata/schema/seed003.sql", fill: fillSeed003,
			id:    func(i int) string { return fmt.Sprint(i) },
			extra: []string{"99999", "007", "8 ", "1e1", "abc", "工单-1", "10"},
		},
	}
}

// fillAudit writes opctl's audit rows: a plan of three actions for every
// ninth operation, and a row of another pipeline for the same id.
func fillAudit(t testing.TB, db *testenv.DB, pipeline, idExpr string, n int) {
	t.Helper()
	for a := range 3 {
		db.Exec(t, fmt.Sprintf(`INSERT INTO opctl_audit (plan_id, action_index, biz_id, pipeline, action, operator, reason, outcome, after_image, created_at, updated_at)
			SELECT CONCAT('plan-', seq), %d, %s, ?, 'reverse_step', 'op', 'test', IF(%d = 2 AND seq %% 2 = 0, 'FAILED', 'APPLIED'),
			JSON_OBJECT('step', 'debit', 'reversed_id', seq, 'plan_actions', 3, 'partition', 1, 'offset', seq), NOW(6) - INTERVAL %d SECOND, NOW(6)
			FROM seq_1_to_%d WHERE seq %% 9 = 0`, a, idExpr, a, 3-a, n), pipeline)
	}
	db.Exec(t, fmt.Sprintf(`INSERT INTO opctl_audit (plan_id, action_index, biz_id, pipeline, action, operator, reason, outcome, created_at, updated_at)
		SELECT CONCAT('other-', seq), 0, %s, 'other', 'note', 'op', 'test', 'APPLIED', NOW(6), NOW(6) FROM seq_1_to_%d WHERE seq %% 9 = 0`, idExpr, n))
}

const payExpr = "CONCAT('PAY-', LPAD(seq, 6, '0'))"

// fillLabSettlement: a state row for six operations in seven (msg_id a
// number for even ones), one debit for most, two for every fifth, a
// reversal of some debits, none for every thirteenth; a ledger OUT row for
// two in three, an IN row too for every tenth. debit_log gets the
// (reverses_id, kind) index the watch's benchmark gives it
// (lab/bench/watch -evidence-index, its default), without which the debit
// evidence's NOT EXISTS reads the whole table for each debit.
func fillLabSettlement(t testing.TB, db *testenv.DB, n int) {
	t.Helper()
	db.Exec(t, "CREATE INDEX ix_reverses ON debit_log (reverses_id, kind)")
	db.Exec(t, fmt.Sprintf(`INSERT INTO biz_operation (biz_id, status, version, msg_id, src_partition, src_offset, created_at, updated_at)
		SELECT %s, ELT(1 + seq %% 4, 'INIT', 'DEBIT_DONE', 'LEDGER_DONE', 'DONE'), seq %% 4, IF(seq %% 2 = 0, CAST(seq AS CHAR), CONCAT('m-', seq)),
		seq %% 3, seq, NOW(3) - INTERVAL seq SECOND, NOW(3) - INTERVAL seq MICROSECOND FROM seq_1_to_%d WHERE seq %% 7 <> 0`, payExpr, n))
	db.Exec(t, fmt.Sprintf(`INSERT INTO debit_log (biz_id, account_id, delta, kind, reverses_id, created_at)
		SELECT %s, seq %% 50, -10.25, 'DEBIT', 0, NOW(3) - INTERVAL seq SECOND FROM seq_1_to_%d WHERE seq %% 13 <> 0`, payExpr, n))
	db.Exec(t, fmt.Sprintf(`INSERT INTO debit_log (biz_id, account_id, delta, kind, reverses_id, created_at)
		SELECT %s, seq %% 50, -10.25, 'DEBIT', 0, NOW(3) FROM seq_1_to_%d WHERE seq %% 5 = 0`, payExpr, n))
	every := reversalEvery(n)
	db.Exec(t, `INSERT INTO debit_log (biz_id, account_id, delta, kind, reverses_id, created_at)
		SELECT biz_id, account_id, -delta, 'REVERSAL', id, NOW(3) FROM debit_log WHERE kind = 'DEBIT' AND id % ? = 0`, every)
	db.Exec(t, fmt.Sprintf(`INSERT INTO ledger_entry (biz_order_id, direction, amount, created_at)
		SELECT %s, 'OUT', 10.25, NOW(3) FROM seq_1_to_%d WHERE seq %% 3 <> 0`, payExpr, n))
	db.Exec(t, fmt.Sprintf(`INSERT INTO ledger_entry (biz_order_id, direction, amount, created_at)
		SELECT %s, 'IN', 10.25, NOW(3) FROM seq_1_to_%d WHERE seq %% 10 = 0`, payExpr, n))
	fillAudit(t, db, "settlement", payExpr, n)
}

// reversalEvery is how many debits of n operations there are for one
// reversal: few, as in production and in the lab, where only the
// incidents' debits are reversed (one in 5,000 in a large table: then
// reverses_id has so few values that MariaDB 10.11 reads the batched NOT
// EXISTS by materializing it, a scan of the whole (reverses_id, kind)
// index per statement, where one operation's statement looks its one
// debit up in it); one in 11 in a small table, so that a test's batch
// holds some.
func reversalEvery(n int) int {
	if n > 1000 {
		return 5000
	}
	return 11
}

// fillLabAnchored: the settlement_anchored pipeline's tables: a state row
// for six operations in seven (a live lease for every fourth), a journal
// debit for most and reversals as fillLabSettlement's, a ledger row for two
// in three, a notify intent for four in five (acked but for every third),
// a second attempt for every sixth.
func fillLabAnchored(t testing.TB, db *testenv.DB, n int) {
	t.Helper()
	db.Exec(t, "CREATE INDEX ix_reverses ON balance_journal (reverses_id, kind)")
	db.Exec(t, fmt.Sprintf(`INSERT INTO pay_state (biz_id, status, version, owner, lease_until, msg_id, src_partition, src_offset, created_at, updated_at)
		SELECT %s, ELT(1 + seq %% 4, 'INIT', 'DEBIT_DONE', 'LEDGER_DONE', 'DONE'), seq %% 4, IF(seq %% 4 = 0, CONCAT('worker-', seq %% 3), NULL),
		IF(seq %% 4 = 0, NOW(3) + INTERVAL 30 SECOND, NULL), CONCAT('m-', seq), seq %% 3, seq, NOW(3) - INTERVAL seq SECOND, NOW(3) FROM seq_1_to_%d WHERE seq %% 7 <> 0`, payExpr, n))
	db.Exec(t, fmt.Sprintf(`INSERT INTO balance_journal (biz_id, account_id, delta, kind, reverses_id, created_at)
		SELECT %s, seq %% 50, -10.25, 'DEBIT', 0, NOW(3) - INTERVAL seq SECOND FROM seq_1_to_%d WHERE seq %% 13 <> 0`, payExpr, n))
	every := reversalEvery(n)
	db.Exec(t, `INSERT INTO balance_journal (biz_id, account_id, delta, kind, reverses_id, created_at)
		SELECT biz_id, account_id, -delta, 'REVERSAL', id, NOW(3) FROM balance_journal WHERE kind = 'DEBIT' AND id % ? = 0`, every)
	db.Exec(t, fmt.Sprintf(`INSERT INTO pay_ledger (biz_order_id, direction, amount, created_at)
		SELECT %s, 'OUT', 10.25, NOW(3) FROM seq_1_to_%d WHERE seq %% 3 <> 0`, payExpr, n))
	db.Exec(t, fmt.Sprintf(`INSERT INTO pay_intent (request_id, biz_id, step, attempt, sent_at, acked_at, result)
		SELECT CONCAT('r-', seq, '-1'), %s, 'notify', 1, NOW(3) - INTERVAL seq SECOND, IF(seq %% 3 = 0, NULL, NOW(3)), IF(seq %% 3 = 0, NULL, 'OK')
		FROM seq_1_to_%d WHERE seq %% 5 <> 0`, payExpr, n))
	db.Exec(t, fmt.Sprintf(`INSERT INTO pay_intent (request_id, biz_id, step, attempt, sent_at, acked_at, result)
		SELECT CONCAT('r-', seq, '-2'), %s, 'notify', 2, NOW(3), NOW(3), 'OK' FROM seq_1_to_%d WHERE seq %% 6 = 0`, payExpr, n))
	fillAudit(t, db, "settlement_anchored", payExpr, n)
}

// fillLabOrders: the lab's orders pipeline (seed 003's design with a
// biz_id in its idempotency table): an order for six in seven, a DONE
// record for most, a SKIPPED one before it for every fourth, several
// records created at the same time (ordered by their key) for every
// tenth.
func fillLabOrders(t testing.TB, db *testenv.DB, n int) {
	t.Helper()
	const oExpr = "CONCAT('O-', LPAD(seq, 6, '0'))"
	db.Exec(t, fmt.Sprintf(`INSERT INTO orders (order_id, status, updated_at)
		SELECT %s, ELT(1 + seq %% 6, 'CREATED', 'PAID', 'SHIPPED', 'DELIVERED', 'REFUNDED', 'CANCELLED'), NOW(3) - INTERVAL seq SECOND
		FROM seq_1_to_%d WHERE seq %% 7 <> 0`, oExpr, n))
	db.Exec(t, fmt.Sprintf(`INSERT INTO idempotent (msg_id, biz_id, action, created_at)
		SELECT CONCAT('m-', seq, '-b'), %s, 'DONE', NOW(3) - INTERVAL seq SECOND FROM seq_1_to_%d WHERE seq %% 9 <> 0`, oExpr, n))
	db.Exec(t, fmt.Sprintf(`INSERT INTO idempotent (msg_id, biz_id, action, created_at)
		SELECT CONCAT('m-', seq, '-a'), %s, 'SKIPPED', NOW(3) - INTERVAL seq + 60 SECOND FROM seq_1_to_%d WHERE seq %% 4 = 0`, oExpr, n))
	db.Exec(t, fmt.Sprintf(`INSERT INTO idempotent (msg_id, biz_id, action, created_at)
		SELECT CONCAT('m-', o.seq, '-', k.seq), CONCAT('O-', LPAD(o.seq, 6, '0')), 'SKIPPED', '2026-01-01 00:00:00'
		FROM seq_1_to_%d AS o JOIN seq_1_to_3 AS k WHERE o.seq %% 10 = 0`, n))
	fillAudit(t, db, "orders", oExpr, n)
}

// fillSeed000: seed 000's ledger rows (OUT for two in three, IN too for
// every tenth) and account balances.
func fillSeed000(t testing.TB, db *testenv.DB, n int) {
	t.Helper()
	db.Exec(t, "INSERT INTO account_balance (account_id, balance) SELECT seq, 1000 FROM seq_1_to_50")
	db.Exec(t, fmt.Sprintf(`INSERT INTO ledger_entry (biz_order_id, direction, amount, created_at)
		SELECT %s, 'OUT', 10.25, NOW(3) - INTERVAL seq SECOND FROM seq_1_to_%d WHERE seq %% 3 <> 0`, payExpr, n))
	db.Exec(t, fmt.Sprintf(`INSERT INTO ledger_entry (biz_order_id, direction, amount, created_at)
		SELECT %s, 'IN', 10.25, NOW(3) FROM seq_1_to_%d WHERE seq %% 10 = 0`, payExpr, n))
	fillAudit(t, db, "settlement", payExpr, n)
}

const soExpr = "CONCAT('SO-', LPAD(seq, 6, '0'), ':PAID')"

// fillSeed001: seed 001's order row for six in seven (PROCESSING or DONE),
// outbox rows: a notice for every other, two for every tenth, another kind
// for every third.
func fillSeed001(t testing.TB, db *testenv.DB, n int) {
	t.Helper()
	db.Exec(t, fmt.Sprintf(`INSERT INTO fulfil_order (biz_id, order_no, event_type, order_status, status, created_at, updated_at)
		SELECT %s, CONCAT('SO-', LPAD(seq, 6, '0')), 'PAID', 'PAID', IF(seq %% 2 = 0, 'DONE', 'PROCESSING'), NOW(3) - INTERVAL seq SECOND, NOW(3)
		FROM seq_1_to_%d WHERE seq %% 7 <> 0`, soExpr, n))
	db.Exec(t, fmt.Sprintf(`INSERT INTO outbox (biz_id, kind, payload, created_at)
		SELECT %s, 'notice', '{}', NOW(3) - INTERVAL seq SECOND FROM seq_1_to_%d WHERE seq %% 2 = 0`, soExpr, n))
	db.Exec(t, fmt.Sprintf(`INSERT INTO outbox (biz_id, kind, payload, created_at)
		SELECT %s, 'notice', '{}', NOW(3) FROM seq_1_to_%d WHERE seq %% 10 = 0`, soExpr, n))
	db.Exec(t, fmt.Sprintf(`INSERT INTO outbox (biz_id, kind, payload, created_at)
		SELECT %s, 'other', '{}', NOW(3) FROM seq_1_to_%d WHERE seq %% 3 = 0`, soExpr, n))
	fillAudit(t, db, "fulfilment", soExpr, n)
}

// fillSeed003: seed 003's orders (a BIGINT key, an ENUM status) for six
// in seven, and its idempotency records (no biz_id: not read by a
// ReadOperation).
func fillSeed003(t testing.TB, db *testenv.DB, n int) {
	t.Helper()
	db.Exec(t, fmt.Sprintf(`INSERT INTO orders (order_id, status, created_at, updated_at)
		SELECT seq, ELT(1 + seq %% 6, 'CREATED', 'PAID', 'SHIPPED', 'DELIVERED', 'REFUNDED', 'CANCELLED'), NOW(3) - INTERVAL seq SECOND, NOW(3) - INTERVAL seq MICROSECOND
		FROM seq_1_to_%d WHERE seq %% 7 <> 0`, n))
	db.Exec(t, fmt.Sprintf(`INSERT INTO idempotent (msg_id, action, created_at) SELECT CONCAT('m-', seq), 'DONE', NOW(3) FROM seq_1_to_%d`, n))
	fillAudit(t, db, "orders", "CAST(seq AS CHAR)", n)
}

// loadCase creates the case's database with n operations and opens a
// Reader on it.
func loadCase(t testing.TB, c hybridCase, n int) (*testenv.DB, *Reader) {
	t.Helper()
	db := testenv.MySQL(t)
	db.ExecFile(t, c.schema)
	db.Exec(t, auditDDL)
	c.fill(t, db, n)
	db.Exec(t, "ANALYZE TABLE opctl_audit")
	r, err := Open(db.DSN, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return db, r
}

// sameAsOne checks that evs[i], errs[i] are what ReadOperation returns
// for ids[i]: the same evidence, Now apart (each statement reads its own
// clock: both set or both zero), and the same error, by type and text.
func sameAsOne(t *testing.T, r *Reader, p *config.Pipeline, audit string, ids []string, evs []sources.DBEvidence, errs []error) {
	t.Helper()
	if len(evs) != len(ids) || len(errs) != len(ids) {
		t.Fatalf("%d evidences and %d errors for %d ids", len(evs), len(errs), len(ids))
	}
	ctx := context.Background()
	for i, id := range ids {
		one, err := r.ReadOperation(ctx, p, audit, id)
		got := evs[i]
		if one.Now.IsZero() != got.Now.IsZero() {
			t.Errorf("%q: Now %v, ReadOperation's %v", id, got.Now, one.Now)
		}
		one.Now, got.Now = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, one) {
			t.Errorf("%q: hybrid read\n%+v\nReadOperation\n%+v", id, got, one)
		}
		var pe1, pe2 *PartialError
		switch {
		case (err == nil) != (errs[i] == nil):
			t.Errorf("%q: hybrid error %v, ReadOperation's %v", id, errs[i], err)
		case err != nil && (err.Error() != errs[i].Error() || errors.As(err, &pe1) != errors.As(errs[i], &pe2)):
			t.Errorf("%q: hybrid error %T %q, ReadOperation's %T %q", id, errs[i], errs[i], err, err)
		}
	}
}

// TestReadOperationsHybrid: on MariaDB, for the lab's settlement and
// orders pipelines and each seed's preset on its own schema, a hybrid read of a batch
// returns for every operation exactly what ReadOperation returns
// (missing rows, several rows, another case, a trailing space, non-ASCII,
// an id twice), in one statement per lookup query and one per operation
// of each other query.
func TestReadOperationsHybrid(t *testing.T) {
	const n = 150
	for _, c := range hybridCases() {
		t.Run(c.name, func(t *testing.T) {
			_, r := loadCase(t, c, n)
			p := c.p(t)
			ids := []string{}
			for i := 1; i <= n; i++ {
				ids = append(ids, c.id(i))
			}
			ids = append(ids, c.extra...)
			ctx := context.Background()
			for _, size := range []int{1, 2, 64, len(ids)} {
				t.Run(fmt.Sprintf("batch=%d", size), func(t *testing.T) {
					for from := 0; from < len(ids); from += size {
						batch := ids[from:min(from+size, len(ids))]
						before := r.BatchStats()
						evs, errs, err := r.ReadOperationsHybrid(ctx, p, "opctl_audit", batch)
						if err != nil {
							t.Fatal(err)
						}
						st := r.BatchStats()
						if got, want := st.Single-before.Single, c.single*len(batch); got != want {
							t.Errorf("%d per-operation statements for %d operations, want %d", got, len(batch), want)
						}
						if st.Fallbacks != before.Fallbacks {
							t.Errorf("%d batched statements fell back", st.Fallbacks-before.Fallbacks)
						}
						sameAsOne(t, r, p, "opctl_audit", batch, evs, errs)
						if size > 2 {
							break // one batch of each size past the smallest
						}
					}
				})
			}
			// The operations did not all read the same: the data is what
			// the comparison says it is.
			evs, _, err := r.ReadOperationsHybrid(ctx, p, "opctl_audit", ids[:20])
			if err != nil {
				t.Fatal(err)
			}
			shapes := map[string]bool{}
			for _, ev := range evs {
				rows := 0
				for _, s := range ev.Steps {
					rows += len(s.Rows)
				}
				shapes[fmt.Sprintf("%v/%d/%d", ev.State.Found || ev.Entity != nil && ev.Entity.Found, rows, len(ev.Audit))] = true
			}
			if len(shapes) < 3 {
				t.Errorf("the first 20 operations read only %v: the data does not vary", shapes)
			}
		})
	}
}

// TestReadOperationsHybridFailures: queries that fail are reported per
// operation as ReadOperation reports them: a lookup that names a missing
// column (batched, then the failure for each), a NOT EXISTS on a missing
// table (per operation), an intent on a missing table, an entity query
// the server rejects (a *PartialError), a state column whose value is not
// a number for some operations only, and a missing audit table (no
// error).
func TestReadOperationsHybridFailures(t *testing.T) {
	c := hybridCases()[0]
	_, r := loadCase(t, c, 60)
	p := labPipeline(t, "settlement")
	p.State.Version = "msg_id" // a number for even operations only
	p.Steps[0].Evidence = strings.ReplaceAll(p.Steps[0].Evidence, "FROM debit_log r", "FROM no_such_log r")
	p.Steps[1].Evidence = "SELECT id, nope FROM ledger_entry WHERE biz_order_id = ?"
	p.Steps[2].Intent = "SELECT request_id, sent_at, acked_at, result FROM no_such_intent WHERE biz_id = ? AND step = 'notify'"
	p.Entity = &config.Entity{Query: "SELECT status FROM biz_operation WHERE biz_id = ? AND nope = 1"}
	ids := []string{"PAY-MISSING", "工单-1"}
	for i := 1; i <= 60; i++ {
		ids = append(ids, c.id(i))
	}
	ctx := context.Background()
	for _, audit := range []string{"opctl_audit", "no_such_audit"} {
		t.Run(audit, func(t *testing.T) {
			evs, errs, err := r.ReadOperationsHybrid(ctx, p, audit, ids)
			if err != nil {
				t.Fatal(err)
			}
			sameAsOne(t, r, p, audit, ids, evs, errs)
			var pe *PartialError
			for i, id := range ids {
				if !errors.As(errs[i], &pe) {
					t.Fatalf("%q: error %v, want a *PartialError (the entity query fails)", id, errs[i])
				}
				for _, s := range evs[i].Steps[:2] {
					if s.Err == "" {
						t.Errorf("%q: step %s has no error", id, s.Name)
					}
				}
			}
			// The state column fails for some operations, not for others.
			if !strings.Contains(errs[4].Error(), "version column") || strings.Contains(errs[3].Error(), "version column") {
				t.Errorf("state errors: %q (PAY-000003), %q (PAY-000002)", errs[4], errs[3])
			}
		})
	}
}

// TestReadOperationsHybridDown: a server that cannot be reached fails the
// hybrid read as a whole with a *ConnError, as ReadOperations.
func TestReadOperationsHybridDown(t *testing.T) {
	r, err := Open("root@tcp(127.0.0.1:1)/x", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, _, err = r.ReadOperationsHybrid(context.Background(), settlementPipeline(), "opctl_audit", []string{"PAY-1", "PAY-2"})
	var ce *ConnError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *ConnError", err)
	}
}

// TestSplitSortsByLastColumn: the audit's batched rows come unordered
// (query.sortLast); each operation keeps its MaxRows rows of the smallest
// ids, in id order, as its own statement's ORDER BY id LIMIT gives them.
func TestSplitSortsByLastColumn(t *testing.T) {
	res := result{cols: []string{"opctl_op", "plan_id", "id"}, types: []string{"BIGINT", "CHAR", "BIGINT"}}
	for id := MaxRows + 5; id >= 1; id-- {
		res.rows = append(res.rows, []sources.Value{int64(0), "p", int64(id)})
		if id%400 == 0 {
			res.rows = append(res.rows, []sources.Value{int64(1), "p", int64(5000 - id)})
		}
	}
	results := [][]result{make([]result, 1), make([]result, 1), make([]result, 1)}
	split(res, 3, query{kind: kindAudit, sortLast: true}, 0, results)
	for op, want := range [][]int64{{1, MaxRows, MaxRows}, {4200, 4600, 2}, {0, 0, 0}} {
		rows := results[op][0].rows
		if int64(len(rows)) != want[2] {
			t.Fatalf("operation %d: %d rows, want %d", op, len(rows), want[2])
		}
		if len(rows) == 0 {
			continue
		}
		for k := 1; k < len(rows); k++ {
			if rows[k-1][1].(int64) >= rows[k][1].(int64) {
				t.Fatalf("operation %d: ids not ascending at %d: %v, %v", op, k, rows[k-1], rows[k])
			}
		}
		if first, last := rows[0][1].(int64), rows[len(rows)-1][1].(int64); first != want[0] || last != want[1] {
			t.Errorf("operation %d: ids %d..%d, want %d..%d", op, first, last, want[0], want[1])
		}
	}
}
