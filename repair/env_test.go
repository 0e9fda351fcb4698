package repair

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/connect"
	"github.com/opctl-dev/opctl/sources/probe"
	"github.com/opctl-dev/opctl/sources/schema"
)

// tenv is one seed fixture on a fresh MariaDB database and a kfake cluster,
// with the clients and the Service opctl uses (read path, write path,
// Kafka, probes).
type tenv struct {
	t     testing.TB
	db    *testenv.DB
	k     *testenv.Kafka
	cfg   *config.Config
	cl    *connect.Clients
	svc   *Service
	parts int32
	// topics are the topics the test created (8 partitions each).
	topics []string
}

func td(parts ...string) string {
	return filepath.Join(append([]string{"..", "testdata"}, parts...)...)
}

// newTenv loads the SQL files, creates the audit tables, starts kfake with
// topics (8 partitions each) and parses cfgPath with the database and
// brokers (and vars) as its environment.
func newTenv(t testing.TB, cfgPath string, sqlFiles []string, topics []string, vars map[string]string) *tenv {
	t.Helper()
	return newTenvOn(t, testenv.MySQL(t), cfgPath, sqlFiles, topics, vars)
}

// newTenvOn is newTenv on the database db (one on the binlog test server).
func newTenvOn(t testing.TB, db *testenv.DB, cfgPath string, sqlFiles []string, topics []string, vars map[string]string) *tenv {
	t.Helper()
	db, k := testenv.SeededOn(t, db, sqlFiles, schema.AuditDDL(""), topics, 8)
	env := map[string]string{"OPCTL_MYSQL_DSN": db.DSN, "OPCTL_BROKERS": k.Brokers[0]}
	for k, v := range vars {
		env[k] = v
	}
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseWithEnv(cfgPath, data, func(n string) (string, bool) { v, ok := env[n]; return v, ok })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cl, err := connect.Open(cfg, connect.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	cl.Collector.Prober = probe.New(2 * time.Second)
	svc := newService(cl)
	svc.Prober, svc.Poster = probe.New(2*time.Second), probe.New(2*time.Second)
	return &tenv{t: t, db: db, k: k, cfg: cfg, cl: cl, svc: svc, parts: 8, topics: topics}
}

func settlementEnv(t testing.TB) *tenv {
	return newTenv(t, td("config", "settlement.yaml"),
		[]string{td("schema", "settlement.sql"), td("incidents", "settlement.sql"), td("repair", "settlement_ops.sql")},
		[]string{"settlement-event"}, nil)
}

func (e *tenv) pipeline(name string) *config.Pipeline {
	p := e.cfg.Pipeline(name)
	if p == nil {
		e.t.Fatalf("no pipeline %s", name)
	}
	return p
}

// where triages like `opctl where`.
func (e *tenv) where(pipeline, biz string) inspect.Report {
	e.t.Helper()
	tr, err := e.svc.Triage.Triage(context.Background(), biz, pipeline)
	if err != nil {
		e.t.Fatalf("triage %s: %v", biz, err)
	}
	return tr.Ops[0].Report
}

// next is what `opctl where` says to do next: the planner's steps of a
// fresh triage.
func (e *tenv) next(pipeline, biz string) []plans.Step {
	e.t.Helper()
	tr, err := e.svc.Triage.Triage(context.Background(), biz, pipeline)
	if err != nil {
		e.t.Fatalf("triage %s: %v", biz, err)
	}
	op := tr.Ops[0]
	return plans.Next(plans.Input{Config: tr.Config, Report: op.Report, Evidence: &op.Evidence, RedrivePartitions: op.RedrivePartitions})
}

func (e *tenv) plan(pipeline, biz string, o plans.Options) (*plans.Plan, inspect.Report, error) {
	e.t.Helper()
	if o.Reason == "" {
		o.Reason = "test repair"
	}
	if o.Operator == "" {
		o.Operator = "tester"
	}
	p, op, err := e.svc.PlanID(context.Background(), biz, pipeline, o)
	if op == nil {
		return p, inspect.Report{}, err
	}
	return p, op.Report, err
}

func (e *tenv) mustPlan(pipeline, biz string, o plans.Options) *plans.Plan {
	e.t.Helper()
	p, rep, err := e.plan(pipeline, biz, o)
	if err != nil {
		e.t.Fatalf("plan %s (verdict %s: %s): %v", biz, rep.Verdict.Code, rep.Verdict.Summary, err)
	}
	return p
}

// applier is the executor the Service builds, with its Store.
func (e *tenv) applier() *Applier {
	e.t.Helper()
	st, err := e.svc.Store()
	if err != nil {
		e.t.Fatal(err)
	}
	return &Applier{Config: e.cfg, Store: st, Collector: e.svc.Collector, Publisher: e.cl.Kafka, Group: e.cl.Kafka, Partitions: e.cl.Kafka,
		Prober: e.svc.Prober, Poster: e.svc.Poster, Operator: "tester"}
}

func (e *tenv) apply(p *plans.Plan) (*Result, error) {
	return e.svc.Apply(context.Background(), p, ApplyOptions{Operator: "tester"})
}

func (e *tenv) dryRun(p *plans.Plan) (*Result, error) {
	return e.svc.Apply(context.Background(), p, ApplyOptions{Operator: "tester", DryRun: true})
}

func (e *tenv) mustApply(p *plans.Plan) *Result {
	e.t.Helper()
	res, err := e.apply(p)
	if err != nil {
		e.t.Fatalf("apply: %v\n%+v", err, res)
	}
	return res
}

// produce writes an operation's message (key = biz id, msg_id header) at
// ts, after a noise record, and returns its position.
func (e *tenv) produce(topic, key, msgID string, ts time.Time) (int32, int64) {
	e.t.Helper()
	return e.k.ProduceOp(e.t, topic, key, msgID, ts, e.parts, true)
}

// anchor produces a settlement operation's message, stores its position in
// the state row and commits the group's offset past it when committed.
func (e *tenv) anchor(biz string, committed bool) (int32, int64) {
	e.t.Helper()
	return testenv.AnchorSettlement(e.t, e.db, e.k, e.parts, biz, committed, true)
}

// published reads back the record a plan's republish wrote.
func (e *tenv) published(res *Result) *sources.Message {
	e.t.Helper()
	for _, a := range res.Actions {
		if a.Published != nil && a.Published.Offset >= 0 {
			loc, err := e.cl.Kafka.Locate(context.Background(), sources.LocateRequest{Topic: a.Published.Topic, Partition: a.Published.Partition, Offset: a.Published.Offset})
			if err != nil || loc.Message == nil {
				e.t.Fatalf("read back %+v: %v %+v", a.Published, err, loc)
			}
			return loc.Message
		}
	}
	e.t.Fatalf("no published record in %+v", res.Actions)
	return nil
}

// consumeSettlement plays the anchored settlement consumer on a republished
// record: it resumes at opctl-from-step, runs the remaining steps and
// commits the offset.
func (e *tenv) consumeSettlement(m *sources.Message) {
	e.t.Helper()
	biz := string(m.Key)
	from := m.Headers[plans.HeaderFromStep]
	steps := []string{"debit", "ledger", "notify"}
	run := false
	for _, s := range steps {
		if s == from {
			run = true
		}
		if !run {
			continue
		}
		switch s {
		case "debit":
			e.db.Exec(e.t, "INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) SELECT biz_id, 1000, -10.00, 'DEBIT', NOW(3) FROM biz_operation WHERE biz_id = ?", biz)
			e.db.Exec(e.t, "UPDATE biz_operation SET status = 'DEBIT_DONE', version = version + 1 WHERE biz_id = ?", biz)
		case "ledger":
			e.db.Exec(e.t, "INSERT INTO ledger_entry (biz_order_id, direction, amount, created_at) VALUES (?, 'OUT', 10.00, NOW(3))", biz)
			e.db.Exec(e.t, "UPDATE biz_operation SET status = 'LEDGER_DONE', version = version + 1 WHERE biz_id = ?", biz)
		case "notify":
			e.db.Exec(e.t, "INSERT INTO step_intent (request_id, biz_id, step, attempt, sent_at, acked_at, result) VALUES (?, ?, 'notify', 9, NOW(3), NOW(3), 'OK')", biz+":notify:replay", biz)
			e.db.Exec(e.t, "UPDATE biz_operation SET status = 'DONE', version = version + 1, updated_at = NOW(3) WHERE biz_id = ?", biz)
		}
	}
	e.k.Commit(e.t, "settlement-consumer", "settlement-event", m.Partition, m.Offset+1)
}

func (e *tenv) count(q string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.db.SQL.QueryRow(q, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (e *tenv) str(q string, args ...any) string {
	e.t.Helper()
	var s string
	if err := e.db.SQL.QueryRow(q, args...).Scan(&s); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return s
}

func wantVerdict(t *testing.T, r inspect.Report, codes ...inspect.Code) {
	t.Helper()
	for _, c := range codes {
		if r.Verdict.Code == c {
			return
		}
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	t.Fatalf("%s: verdict %s, want %v\n%s", r.BizID, r.Verdict.Code, codes, b)
}

// wms is a fake WMS: a lock journal per order, a probe keyed by {biz_id}
// ({"count": live locks}) and a compensation endpoint that releases the
// newest lock.
type wms struct {
	mu      sync.Mutex
	locks   map[string]int
	posts   int
	keys    []string
	srv     *httptest.Server
	failing bool
}

func newWMS(t testing.TB, locks map[string]int) *wms {
	w := &wms{locks: locks}
	mux := http.NewServeMux()
	mux.HandleFunc("/wms/locks", func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		defer w.mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(rw, `{"count":%d}`, w.locks[r.URL.Query().Get("biz_id")])
	})
	mux.HandleFunc("/wms/compensate", func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if r.Method != http.MethodPost {
			rw.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.posts++
		w.keys = append(w.keys, r.Header.Get("Idempotency-Key"))
		id := r.URL.Query().Get("biz_id")
		if w.failing || w.locks[id] == 0 {
			rw.WriteHeader(http.StatusNotFound)
			fmt.Fprint(rw, `{"status":"NOT_FOUND"}`)
			return
		}
		w.locks[id]--
		fmt.Fprint(rw, `{"status":"COMPENSATED"}`)
	})
	w.srv = httptest.NewServer(mux)
	t.Cleanup(w.srv.Close)
	return w
}

func (w *wms) count(id string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.locks[id]
}

func itoa(n int) string { return strconv.Itoa(n) }

// newService wires a Service on the clients as opctl's Factory does
// (cmd.NewRepairService, which this package's tests cannot import).
func newService(c *connect.Clients) *Service {
	s := &Service{Config: c.Config, Triage: c.Triage(), Collector: c.Collector, Prober: c.Prober, Poster: c.Prober, AuditLog: c.Reader, Timeout: c.Timeout,
		Store:    func() (sources.Store, error) { return c.Writer() },
		StoreFor: func(p *config.Pipeline) (sources.Store, error) { return c.WriterFor(p) }}
	for _, r := range c.Readers()[1:] {
		s.MoreAudit = append(s.MoreAudit, r)
	}
	if c.Kafka != nil {
		s.Kafka = c.Kafka
	}
	return s
}
