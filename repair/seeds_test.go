package repair

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/connect"
	"github.com/opctl-dev/opctl/sources/schema"
)

// journal is a downstream that keeps its own journal of effects per
// biz_id and answers the {"count": N} probe (seed 001's WMS and logistics,
// seed 003's points service): GET /<list>?<param>=ID counts; POST
// /<do>?<param>=ID makes one effect, once per Idempotency-Key header; POST
// /<undo>?<param>=ID removes one.
type journal struct {
	mu     sync.Mutex
	count  map[string]int
	keys   map[string]bool
	posts  int
	param  string
	server *httptest.Server
}

func newJournal(t testing.TB, list, do, undo, param string) *journal {
	j := &journal{count: map[string]int{}, keys: map[string]bool{}, param: param}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /"+list, func(w http.ResponseWriter, r *http.Request) {
		j.mu.Lock()
		n := j.count[r.URL.Query().Get(param)]
		j.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"count": n})
	})
	mux.HandleFunc("POST /"+do, func(w http.ResponseWriter, r *http.Request) {
		j.mu.Lock()
		defer j.mu.Unlock()
		j.posts++
		if k := r.Header.Get("Idempotency-Key"); k != "" {
			if j.keys[k] {
				_ = json.NewEncoder(w).Encode(map[string]any{"status": "DUPLICATE"})
				return
			}
			j.keys[k] = true
		}
		j.count[r.URL.Query().Get(param)]++
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "APPLIED"})
	})
	mux.HandleFunc("POST /"+undo, func(w http.ResponseWriter, r *http.Request) {
		j.mu.Lock()
		defer j.mu.Unlock()
		j.posts++
		if id := r.URL.Query().Get(param); j.count[id] > 0 {
			j.count[id]--
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "APPLIED"})
	})
	j.server = httptest.NewServer(mux)
	t.Cleanup(j.server.Close)
	return j
}

func (j *journal) set(id string, n int) {
	j.mu.Lock()
	j.count[id] = n
	j.mu.Unlock()
}

func (j *journal) get(id string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.count[id]
}

// seedEnv is a tenv on one seed's own schema, configured by the seed's
// preset (sources/config/presets), unmodified but for the addresses.
func seedEnv(t testing.TB, preset string, schemaFile string, topic string, vars map[string]string) *tenv {
	t.Helper()
	b, err := config.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/" + preset + ".yaml"
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return newTenv(t, path, []string{td("schema", schemaFile)}, []string{topic}, vars)
}

// seed003 is seed 003's own schema: orders(status ENUM), idempotent(msg_id
// UNIQUE, action ENUM('DONE','SKIPPED')) without a biz_id, the points
// service's journal.
type seed003 struct {
	*tenv
	points *journal
}

func newSeed003(t testing.TB) *seed003 {
	pts := newJournal(t, "grants", "grant", "revoke", "order_id")
	e := seedEnv(t, "seed003", "seed003.sql", "order-event", map[string]string{"OPCTL_POINTS_URL": pts.server.URL})
	return &seed003{tenv: e, points: pts}
}

// event produces one order event the way the seed's producer does: key =
// the order id, value {"msgId","orderId","expectedStatus"}, no headers;
// the consumer's record (action, "" for none) and a commit past it when
// committed.
func (s *seed003) event(order int64, msgID, expected, action string, at time.Time, committed bool) int64 {
	s.t.Helper()
	key := fmt.Sprint(order)
	p, err := sources.PartitionFor("murmur2", []byte(key), s.parts)
	if err != nil {
		s.t.Fatal(err)
	}
	off := s.k.Produce(s.t, "order-event", p, key, fmt.Sprintf(`{"msgId":%q,"orderId":%d,"expectedStatus":%q}`, msgID, order, expected), nil, at)
	if action != "" {
		s.db.Exec(s.t, "INSERT INTO idempotent (msg_id, action, created_at) VALUES (?, ?, ?)", msgID, action, at.Add(50*time.Millisecond))
	}
	if committed {
		s.k.Commit(s.t, "order-consumer", "order-event", p, off+1)
	}
	return off
}

func (s *seed003) order(id int64, status string, created, updated time.Time) {
	s.db.Exec(s.t, "INSERT INTO orders (order_id, status, created_at, updated_at) VALUES (?, ?, ?, ?)", id, status, created, updated)
}

// Seed 003's incident on its own schema: SHIPPED handled before PAID, PAID
// recorded SKIPPED, the points grant lost. opctl links the records (no
// biz_id column) through the order's messages and reads WRONGLY_SKIPPED;
// a refunded order's skip is SKIPPED_OK; a healthy order is COMPLETE; an
// order whose PAID was skipped but whose points were granted (a look-alike:
// the effect exists) is not flagged.
func TestSeed003Where(t *testing.T) {
	s := newSeed003(t)
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)

	// 8821: the incident. PAID (msg-7391) then SHIPPED (msg-7392); SHIPPED
	// was processed first, PAID found SHIPPED ≠ PAID and was SKIPPED.
	s.order(8821, "SHIPPED", t0, t0.Add(2*time.Second))
	s.event(8821, "msg-7391", "PAID", "SKIPPED", t0.Add(time.Second), true)
	s.event(8821, "msg-7392", "SHIPPED", "DONE", t0.Add(2*time.Second), true)

	// 8822: healthy; PAID granted the points, SHIPPED later.
	s.order(8822, "SHIPPED", t0, t0.Add(3*time.Second))
	s.event(8822, "msg-8001", "PAID", "DONE", t0.Add(time.Second), true)
	s.event(8822, "msg-8002", "SHIPPED", "DONE", t0.Add(3*time.Second), true)
	s.points.set("8822", 1)

	// 8823: refunded before PAID was processed: the skip was right.
	s.order(8823, "REFUNDED", t0, t0.Add(2*time.Second))
	s.event(8823, "msg-8101", "PAID", "SKIPPED", t0.Add(time.Second), true)

	// 8824: a look-alike of 8821: PAID skipped, but the points were granted
	// (by hand, earlier): nothing is missing.
	s.order(8824, "SHIPPED", t0, t0.Add(2*time.Second))
	s.event(8824, "msg-8201", "PAID", "SKIPPED", t0.Add(time.Second), true)
	s.event(8824, "msg-8202", "SHIPPED", "DONE", t0.Add(2*time.Second), true)
	s.points.set("8824", 1)

	for _, tc := range []struct {
		id   string
		want inspect.Code
		says string
	}{
		{"8821", inspect.WronglySkipped, "record msg-7391 is SKIPPED, the entity is SHIPPED (not cancelling) and step points has no effect"},
		{"8822", inspect.Complete, "idempotency records: msg-8001 DONE, msg-8002 DONE"},
		{"8823", inspect.SkippedOK, "record msg-8101 is SKIPPED and the entity is REFUNDED"},
		{"8824", inspect.Complete, "msg-8201 SKIPPED"},
		{"9999", inspect.NotFound, ""},
	} {
		t.Run(tc.id, func(t *testing.T) {
			r := s.where("orders", tc.id)
			if r.Verdict.Code != tc.want || !strings.Contains(r.Verdict.Summary, tc.says) {
				t.Fatalf("verdict %s (%s), want %s with %q\nsources %v\nkafka %+v", r.Verdict.Code, r.Verdict.Summary, tc.want, tc.says, r.Sources, r.Kafka)
			}
			if r.Partial {
				t.Errorf("partial: %v", r.Sources)
			}
		})
	}
	// The incident's report places the skipped PAID message, whose record
	// says SKIPPED: the position is of msg-7391.
	r := s.where("orders", "8821")
	if len(r.Idempotency) != 2 || r.Idempotency[0].Key != "msg-7391" || r.Idempotency[0].Action != "SKIPPED" {
		t.Errorf("idempotency = %+v", r.Idempotency)
	}
	if r.Kafka.Offset == nil || r.Kafka.Redelivery != inspect.RedeliveryNo {
		t.Errorf("kafka = %+v", r.Kafka)
	}

	// reconcile --check skipped finds the incident, and only it, though
	// the records name no order: each SKIPPED record's message is read
	// from the topic around it.
	targets, sum := s.reconcile("orders", reconcile.CheckSkipped)
	if strings.Join(targets, ",") != "8821:WRONGLY_SKIPPED" {
		t.Fatalf("reconcile targets %v (checks %+v)", targets, sum.Checks)
	}
	if ch := sum.Checks[0]; len(ch.Uncovered) > 0 || ch.Verdicts[inspect.SkippedOK] != 1 || sum.Partial {
		t.Errorf("check %+v partial %v", ch, sum.Partial)
	}
}

// reconcile runs the check on the pipeline as `opctl reconcile --check C
// --older-than 0s` does and returns its targets as "id:VERDICT".
func (e *tenv) reconcile(pipeline, check string) ([]string, *reconcile.Summary) {
	e.t.Helper()
	var got []string
	sum, err := reconcile.Run(context.Background(), reconcile.Deps{DB: e.cl.Reader, Collector: e.svc.Collector},
		reconcile.Options{Pipelines: []*config.Pipeline{e.cfg.Pipeline(pipeline)}, Checks: []string{check}},
		func(res reconcile.Result) error {
			if res.IsTarget() {
				got = append(got, res.BizID+":"+string(res.Verdict))
			}
			return nil
		})
	if err != nil {
		e.t.Fatal(err)
	}
	slices.Sort(got)
	return got, sum
}

// seed001 is seed 001's own schema: fulfil_order (status PROCESSING →
// DONE, unique biz_id), outbox, WMS's and logistics' journals.
type seed001 struct {
	*tenv
	wms, logistics *journal
}

func newSeed001(t testing.TB) *seed001 {
	wms := newJournal(t, "locks", "locks/lock", "locks/release", "biz_id")
	lg := newJournal(t, "waybills", "waybills/new", "waybills/cancel", "biz_id")
	e := seedEnv(t, "seed001", "seed001.sql", "order-fulfilment",
		map[string]string{"OPCTL_WMS_URL": wms.server.URL, "OPCTL_LOGISTICS_URL": lg.server.URL})
	return &seed001{tenv: e, wms: wms, logistics: lg}
}

// op writes what the seed's consumer leaves: the business row (status),
// the WMS locks and waybills, the outbox notice when done, its message,
// and a commit past it when committed.
func (s *seed001) op(biz, status string, locks, waybills int, notice, committed bool, at time.Time) {
	s.t.Helper()
	order, event, _ := strings.Cut(biz, ":")
	s.db.Exec(s.t, "INSERT INTO fulfil_order (biz_id, order_no, event_type, order_status, status, created_at, updated_at) VALUES (?, ?, ?, 'PAID', ?, ?, ?)",
		biz, order, event, status, at, at.Add(time.Second))
	s.wms.set(biz, locks)
	s.logistics.set(biz, waybills)
	if notice {
		s.db.Exec(s.t, "INSERT INTO outbox (biz_id, kind, payload, created_at) VALUES (?, 'notice', '{}', ?)", biz, at.Add(time.Second))
	}
	p, err := sources.PartitionFor("murmur2", []byte(biz), s.parts)
	if err != nil {
		s.t.Fatal(err)
	}
	off := s.k.Produce(s.t, "order-fulfilment", p, biz, fmt.Sprintf(`{"biz_id":%q}`, biz), nil, at)
	if committed {
		s.k.Commit(s.t, "fulfilment-consumer", "order-fulfilment", p, off+1)
	}
}

// Seed 001's incident on its own schema: the business row's PROCESSING →
// DONE is the only progress marker; WMS's own journal shows the double
// lock. A healthy operation is COMPLETE; one stopped after WMS with its
// message still to be redelivered says the redelivery will lock again.
func TestSeed001Where(t *testing.T) {
	s := newSeed001(t)
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	s.op("O-1001:FULFIL", "DONE", 2, 1, true, true, t0)         // the incident: WMS locked twice
	s.op("O-1002:FULFIL", "DONE", 1, 1, true, true, t0)         // healthy
	s.op("O-1003:FULFIL", "PROCESSING", 1, 0, false, false, t0) // stopped after WMS, not committed
	s.op("O-1004:FULFIL", "PROCESSING", 1, 0, false, true, t0)  // stopped after WMS, committed past

	for _, tc := range []struct {
		id   string
		want inspect.Code
		says string
	}{
		{"O-1001:FULFIL", inspect.DuplicateEffect, "wms_lock: the downstream reports 2 effects"},
		{"O-1002:FULFIL", inspect.Complete, "state DONE"},
		{"O-1003:FULFIL", inspect.WillRedeliver, "the redelivery will call wms_lock again (not idempotent)"},
		{"O-1004:FULFIL", inspect.Stranded, "committed offset"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			r := s.where("fulfilment", tc.id)
			if r.Verdict.Code != tc.want || !strings.Contains(r.Verdict.Summary, tc.says) {
				t.Fatalf("verdict %s (%s), want %s with %q\nsteps %+v", r.Verdict.Code, r.Verdict.Summary, tc.want, tc.says, r.Steps)
			}
		})
	}

	// reconcile finds the double lock though no step's effects are in a
	// table it can scan: every operation of the window is triaged through
	// the business table, WMS's journal counted for each.
	targets, sum := s.reconcile("fulfilment", reconcile.CheckDuplicates)
	if strings.Join(targets, ",") != "O-1001:FULFIL:DUPLICATE_EFFECT" {
		t.Fatalf("duplicates: targets %v (checks %+v)", targets, sum.Checks)
	}
	if ch := sum.Checks[0]; len(ch.Uncovered) > 0 || ch.CoverOnly != 3 {
		t.Errorf("duplicates: uncovered %q, cover-only %d (notes %q)", ch.Uncovered, ch.CoverOnly, ch.Notes)
	}
	// stuck: the one left PROCESSING with its message committed past.
	targets, _ = s.reconcile("fulfilment", reconcile.CheckStuck)
	if strings.Join(targets, ",") != "O-1003:FULFIL:WILL_REDELIVER,O-1004:FULFIL:STRANDED" {
		t.Fatalf("stuck: targets %v", targets)
	}
}

// Seed 000 on its own schema through its preset, unmodified: no state
// table, no idempotency table, no binlog.transaction (the consumer is
// autocommit), the risk RPC unverified, commitSync after the three steps.
// A committed operation reads COMPLETE (notify noted as not verified); one
// whose steps ran but whose message is not committed reads WILL_REDELIVER
// and says the redelivery will debit again; the incident (the redelivery
// debited again, the ledger's unique key held) reads DUPLICATE_EFFECT.
func TestSeed000PresetWhere(t *testing.T) {
	b, err := config.Preset("seed000")
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/seed000.yaml"
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	e := newTenvOn(t, binlogSrv.Get(t).MySQL(t), path, []string{td("schema", "seed000.sql")}, []string{"settlement-event"}, nil)
	e.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES (2001, 500.00), (2002, 500.00), (2003, 500.00)")
	// commit commits the group's offset past biz's message, or at it (the
	// consumer committed the message before it, not this one) when at.
	commit := func(biz string, at bool) {
		p, err := sources.PartitionFor("murmur2", []byte(biz), e.parts)
		testenv.Must(t, err, "partition")
		loc, err := e.cl.Kafka.Locate(context.Background(), sources.LocateRequest{Topic: "settlement-event", Partitioner: "murmur2",
			Key: []byte(biz), Partition: -1, Offset: -1, Around: time.Now(), Window: time.Minute, Limit: 1000})
		if err != nil || loc.Offset < 0 {
			t.Fatalf("locate %s: %v %+v", biz, err, loc)
		}
		next := loc.Offset + 1
		if at {
			next = loc.Offset
		}
		e.k.Commit(t, "settlement-consumer", "settlement-event", p, next)
	}
	// PAY-H: healthy, committed.
	e.seedMessage("PAY-H", 2001, "30.00")
	e.seedDebit("PAY-H", 2001, "30.00")
	commit("PAY-H", false)
	// PAY-D: the incident: re-read, debited again, ledger stopped; committed.
	e.seedMessage("PAY-D", 2003, "30.00")
	e.seedDebit("PAY-D", 2003, "30.00")
	e.seedDebit("PAY-D", 2003, "30.00")
	commit("PAY-D", false)
	// PAY-W: the broker blip before commitSync: every step ran, no commit
	// (last: a commit at its offset is past every earlier message).
	e.seedMessage("PAY-W", 2002, "30.00")
	e.seedDebit("PAY-W", 2002, "30.00")
	commit("PAY-W", true)

	for _, tc := range []struct {
		id   string
		want inspect.Code
		says []string
	}{
		{"PAY-H", inspect.Complete, []string{"the group committed past the message", "not verified (no intent, no probe): notify"}},
		{"PAY-W", inspect.WillRedeliver, []string{"the redelivery will run debit again (an UPDATE of account_balance", "call notify again if it ran"}},
		{"PAY-D", inspect.DuplicateEffect, []string{"debit: 2 changes of account_balance in the binlog"}},
	} {
		t.Run(tc.id, func(t *testing.T) {
			r := e.where("settlement", tc.id)
			if r.Verdict.Code != tc.want || r.Partial {
				t.Fatalf("verdict %s (%s) partial %v, want %s\nsources %v\nsteps %+v", r.Verdict.Code, r.Verdict.Summary, r.Partial, tc.want, r.Sources, r.Steps)
			}
			for _, s := range tc.says {
				if !strings.Contains(r.Verdict.Summary, s) {
					t.Errorf("summary %q lacks %q", r.Verdict.Summary, s)
				}
			}
			if ledger := r.Steps[1]; strings.Contains(r.Verdict.Summary, "ledger") {
				t.Errorf("the ledger (idempotent: its unique key) is named: %q (%+v)", r.Verdict.Summary, ledger)
			}
		})
	}

	// reconcile finds the double debit on this schema too: no change names
	// an operation (no binlog.transaction), so the binlog's rows changed
	// twice by one delta lead to the messages that name them, over the
	// default --since (7d: the last 24h of the binlog).
	var got []string
	sum, err := reconcile.Run(context.Background(), reconcile.Deps{DB: e.cl.Reader, Collector: e.svc.Collector},
		reconcile.Options{Pipelines: []*config.Pipeline{e.cfg.Pipeline("settlement")}, Checks: []string{reconcile.CheckDuplicates}},
		func(res reconcile.Result) error {
			if res.IsTarget() {
				got = append(got, res.BizID+":"+string(res.Verdict))
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "PAY-D:DUPLICATE_EFFECT" {
		t.Fatalf("reconcile targets %v, want PAY-D (checks %+v)", got, sum.Checks)
	}
	if sum.Partial || len(sum.Checks[0].Uncovered) > 0 {
		t.Errorf("partial %v %q, uncovered %q", sum.Partial, sum.PartialWhy, sum.Checks[0].Uncovered)
	}
}

// Seed 001's double WMS lock closed two ways: by the configured
// compensation (WMS's journal drops to 1), or, for a downstream that cannot
// undo it, by an attested manual action: the journal still says 2, opctl's
// audit says one was undone by hand, and where reads COMPLETE with no NEXT
// line asking for the same repair again.
func TestSeed001DuplicateClosed(t *testing.T) {
	s := newSeed001(t)
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	s.op("O-2001:FULFIL", "DONE", 2, 1, true, true, t0)
	s.op("O-2002:FULFIL", "DONE", 2, 1, true, true, t0)

	t.Run("compensate", func(t *testing.T) {
		p := s.mustPlan("fulfilment", "O-2001:FULFIL", plans.Options{})
		if len(p.Actions) != 1 || p.Actions[0].Type != plans.CompensateRemote {
			t.Fatalf("actions %+v", p.Actions)
		}
		s.mustApply(p)
		if n := s.wms.get("O-2001:FULFIL"); n != 1 {
			t.Fatalf("WMS holds %d locks, want 1", n)
		}
		if r := s.where("fulfilment", "O-2001:FULFIL"); r.Verdict.Code != inspect.Complete {
			t.Fatalf("after the compensation: %s (%s)", r.Verdict.Code, r.Verdict.Summary)
		}
	})
	t.Run("manual", func(t *testing.T) {
		p := s.mustPlan("fulfilment", "O-2002:FULFIL", plans.Options{Action: plans.Manual, Attest: "WMS-4411: lock released by the WMS team"})
		if len(p.Actions) != 1 || p.Actions[0].Type != plans.Manual || p.Actions[0].Attested[inspect.AttestUndonePrefix+"1"] != inspect.AttestCompensated {
			t.Fatalf("actions %+v", p.Actions)
		}
		s.mustApply(p)
		if n := s.wms.get("O-2002:FULFIL"); n != 2 {
			t.Fatalf("a manual action called WMS: %d locks", n)
		}
		r := s.where("fulfilment", "O-2002:FULFIL")
		if next := s.next("fulfilment", "O-2002:FULFIL"); r.Verdict.Code != inspect.Complete || len(next) != 0 {
			t.Fatalf("after the attested manual action: %s (%s), next %+v", r.Verdict.Code, r.Verdict.Summary, next)
		}
		if v := r.Steps[1]; v.EvidenceCount != 1 || v.Probe == nil || !strings.Contains(v.Probe.Detail, "1 effect(s) attested undone") {
			t.Fatalf("wms_lock %+v probe %+v", v, v.Probe)
		}
		// The manual plan again: nothing to repair.
		if _, _, err := s.plan("fulfilment", "O-2002:FULFIL", plans.Options{}); err == nil || !strings.Contains(err.Error(), "nothing to repair") {
			t.Fatalf("plan again: %v", err)
		}
	})
}

// Seed 003's ENUM('DONE','SKIPPED') cannot hold PENDING: for a consumer that
// honours opctl's headers (the team deployed the fix), flip_skipped reopens
// the record by deleting it, its whole row kept in the audit's
// before_image, then republishes with opctl-force-effect. Today's code
// wrote PENDING and failed with "Error 1265 Data truncated".
func TestSeed003ReopenByDelete(t *testing.T) {
	s, t0 := newSeed003Reopen(t)

	p := s.mustPlan("orders", "8821", plans.Options{})
	if len(p.Actions) != 2 || p.Actions[0].Type != plans.FlipSkipped || !p.Actions[0].Flip.Delete || p.Actions[1].Type != plans.Republish {
		t.Fatalf("actions %+v", p.Actions)
	}
	if p.Observed.ActionColumn != "enum('DONE','SKIPPED')" {
		t.Errorf("observed action column %q", p.Observed.ActionColumn)
	}
	if _, err := s.dryRun(p); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if n := s.str("SELECT COUNT(*) FROM idempotent WHERE msg_id = 'msg-7391'"); n != "1" {
		t.Fatalf("a dry run deleted the record (%s left)", n)
	}
	res := s.mustApply(p)
	if n := s.str("SELECT COUNT(*) FROM idempotent WHERE msg_id = 'msg-7391'"); n != "0" {
		t.Fatalf("the SKIPPED record is still there (%s)", n)
	}
	img := s.str("SELECT before_image FROM opctl_audit WHERE plan_id = '" + p.ID + "' AND action_index = 1")
	for _, want := range []string{`"msg_id":"msg-7391"`, `"action":"SKIPPED"`, `"created_at"`} {
		if !strings.Contains(img, want) {
			t.Errorf("before_image %s lacks %s", img, want)
		}
	}
	if m := s.published(res); m.Headers[plans.HeaderForceEffect] != "points" || string(m.Key) != "8821" {
		t.Errorf("republished %+v", m)
	}

	// The deleted record can be put back exactly as it was, from the audit.
	before := s.str("SELECT COUNT(*) FROM idempotent")
	rp := s.mustPlan("orders", "8821", plans.Options{Action: plans.RestoreRecord, Force: true})
	if len(rp.Actions) != 1 || rp.Actions[0].Type != plans.RestoreRecord || rp.Actions[0].Restore.Key != "msg-7391" {
		t.Fatalf("restore plan %+v", rp.Actions)
	}
	s.mustApply(rp)
	if got := s.str("SELECT CONCAT(msg_id, ' ', action, ' ', created_at) FROM idempotent WHERE msg_id = 'msg-7391'"); got != "msg-7391 SKIPPED "+t0.Add(time.Second+50*time.Millisecond).Format("2006-01-02 15:04:05.000") {
		t.Fatalf("restored record %q (%s rows before)", got, before)
	}
	if _, _, err := s.plan("orders", "8821", plans.Options{Action: plans.RestoreRecord, Force: true}); err == nil || !strings.Contains(err.Error(), "no deleted idempotency record") {
		t.Fatalf("a second restore: %v", err)
	}
}

// newSeed003Reopen is seed 003's incident (order 8821's PAID recorded
// SKIPPED, its points lost) under a consumer that honours opctl's headers
// and with the reopen left to the column's type: the plan deletes the
// record and republishes. t0 is when the order was created.
func newSeed003Reopen(t *testing.T) (*seed003, time.Time) {
	t.Helper()
	pts := newJournal(t, "grants", "grant", "revoke", "order_id")
	b, err := config.Preset("seed003")
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "honours_opctl_headers: false", "honours_opctl_headers: true", 1))
	b = []byte(strings.Replace(string(b), "      reopen: delete             # the ENUM has no PENDING\n", "", 1))
	path := t.TempDir() + "/seed003.yaml"
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &seed003{tenv: newTenv(t, path, []string{td("schema", "seed003.sql")}, []string{"order-event"}, map[string]string{"OPCTL_POINTS_URL": pts.server.URL}), points: pts}
	if s.cfg.Pipeline("orders").Idempotency.Reopen != "" {
		t.Fatal("the test config still sets reopen")
	}
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	s.order(8821, "SHIPPED", t0, t0.Add(2*time.Second))
	s.event(8821, "msg-7391", "PAID", "SKIPPED", t0.Add(time.Second), true)
	s.event(8821, "msg-7392", "SHIPPED", "DONE", t0.Add(2*time.Second), true)
	return s, t0
}

// newSeed003Skipped is seed 003 as shipped (its consumer ignores opctl's
// headers) with order 8821's incident.
func newSeed003Skipped(t *testing.T) *seed003 {
	t.Helper()
	s := newSeed003(t)
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	s.order(8821, "SHIPPED", t0, t0.Add(2*time.Second))
	s.event(8821, "msg-7391", "PAID", "SKIPPED", t0.Add(time.Second), true)
	s.event(8821, "msg-7392", "SHIPPED", "DONE", t0.Add(2*time.Second), true)
	return s
}

// Seed 003's incident repaired on its own schema: its consumer ignores
// opctl's headers (its skip is its own code), so the plan redrives the
// points grant at the points service (the step's redrive POST, with an
// Idempotency-Key), leaves the SKIPPED record, and never republishes.
// A dry run sends nothing; after apply, where reads COMPLETE; applying
// again sends nothing twice.
func TestSeed003Redrive(t *testing.T) {
	s := newSeed003Skipped(t)

	p := s.mustPlan("orders", "8821", plans.Options{})
	if len(p.Actions) != 1 || p.Actions[0].Type != plans.Redrive || p.Actions[0].Redrive.ProbeCount == nil || *p.Actions[0].Redrive.ProbeCount != 0 {
		t.Fatalf("actions %+v: want one redrive guarded by a count of 0", p.Actions)
	}
	if _, err := s.dryRun(p); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if n := s.points.get("8821"); n != 0 || s.points.posts != 0 {
		t.Fatalf("a dry run granted %d points (%d POSTs)", n, s.points.posts)
	}
	s.mustApply(p)
	if n := s.points.get("8821"); n != 1 {
		t.Fatalf("points granted %d times, want 1", n)
	}
	if r, next := s.where("orders", "8821"), s.next("orders", "8821"); r.Verdict.Code != inspect.Complete || len(next) != 0 {
		t.Fatalf("after the redrive: %s (%s) next %+v", r.Verdict.Code, r.Verdict.Summary, next)
	}
	if n := s.str("SELECT COUNT(*) FROM idempotent WHERE msg_id = 'msg-7391' AND action = 'SKIPPED'"); n != "1" {
		t.Errorf("the SKIPPED record was touched (%s left)", n)
	}
	res, err := s.apply(p)
	if err != nil {
		t.Fatalf("apply again: %v", err)
	}
	if n := s.points.get("8821"); n != 1 || s.points.posts != 1 {
		t.Fatalf("apply again: %d points, %d POSTs (%+v)", n, s.points.posts, res)
	}
}

// Two teams' pipelines in one file, on different databases
// (pipelines[].mysql): seed 003's orders on the top-level server, seed
// 001's fulfilment on its own. where reads each on its own database; a
// repair of the fulfilment operation writes its audit there, and where
// (and opctl audit) read it back from there.
func TestPipelineOnItsOwnMySQL(t *testing.T) {
	pts := newJournal(t, "grants", "grant", "revoke", "order_id")
	wms := newJournal(t, "locks", "locks/lock", "locks/release", "biz_id")
	lg := newJournal(t, "waybills", "waybills/new", "waybills/cancel", "biz_id")
	other := testenv.MySQL(t)
	other.ExecFile(t, td("schema", "seed001.sql"))
	for _, stmt := range schema.AuditDDL("") {
		other.Exec(t, stmt)
	}
	b3, err := config.Preset("seed003")
	if err != nil {
		t.Fatal(err)
	}
	b1, err := config.Preset("seed001")
	if err != nil {
		t.Fatal(err)
	}
	// seed001's pipeline, with its own server, appended under seed003's.
	p1 := string(b1)[strings.Index(string(b1), "  - name: fulfilment"):]
	p1 = strings.Replace(p1, "    commit: after_steps\n", "    commit: after_steps\n    mysql:\n      dsn: \"${OTHER_DSN}\"\n", 1)
	path := t.TempDir() + "/two.yaml"
	if err := os.WriteFile(path, []byte(string(b3)+p1), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newTenv(t, path, []string{td("schema", "seed003.sql")}, []string{"order-event", "order-fulfilment"},
		map[string]string{"OPCTL_POINTS_URL": pts.server.URL, "OPCTL_WMS_URL": wms.server.URL, "OPCTL_LOGISTICS_URL": lg.server.URL, "OTHER_DSN": other.DSN})
	s1 := &seed001{tenv: &tenv{t: t, db: other, k: e.k, cfg: e.cfg, cl: e.cl, svc: e.svc, parts: e.parts}, wms: wms, logistics: lg}
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	s1.op("O-3001:FULFIL", "DONE", 2, 1, true, true, t0)
	if n := e.str("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'fulfil_order'"); n != "0" {
		t.Fatal("the top-level database has fulfil_order: the test would not tell the servers apart")
	}
	r := e.where("fulfilment", "O-3001:FULFIL")
	if r.Verdict.Code != inspect.DuplicateEffect || r.Partial {
		t.Fatalf("fulfilment on its own database: %s (%s) partial %v %v", r.Verdict.Code, r.Verdict.Summary, r.Partial, r.Sources)
	}
	if r := e.where("orders", "8821"); r.Verdict.Code != inspect.NotFound || r.Partial {
		t.Fatalf("orders on the top-level database: %s %v", r.Verdict.Code, r.Sources)
	}
	p := e.mustPlan("fulfilment", "O-3001:FULFIL", plans.Options{})
	e.mustApply(p)
	var n int
	if err := other.SQL.QueryRow("SELECT COUNT(*) FROM opctl_audit WHERE plan_id = ?", p.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the audit row is not on the pipeline's own database (%d rows, %v)", n, err)
	}
	if n := e.str("SELECT COUNT(*) FROM opctl_audit"); n != "0" {
		t.Fatalf("the audit row went to the top-level database (%s rows)", n)
	}
	if r := e.where("fulfilment", "O-3001:FULFIL"); r.Verdict.Code != inspect.Complete {
		t.Fatalf("after the compensation: %s (%s)", r.Verdict.Code, r.Verdict.Summary)
	}
	log, err := e.svc.Audit(context.Background(), sources.AuditFilter{BizID: "O-3001:FULFIL"})
	if err != nil || len(log.Actions) != 1 {
		t.Fatalf("opctl audit: %v %+v", err, log)
	}
}

// schema check passes on each seed's own schema with its preset,
// unmodified (SPEC: the seeds as they are): every table, column and index
// the config and reconcile need is there.
func TestSeedPresetsSchemaCheck(t *testing.T) {
	for _, tc := range []struct{ preset, sql string }{
		{"seed000", "seed000.sql"}, {"seed001", "seed001.sql"}, {"seed003", "seed003.sql"},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			b, err := config.Preset(tc.preset)
			if err != nil {
				t.Fatal(err)
			}
			db := testenv.MySQL(t)
			db.ExecFile(t, td("schema", tc.sql))
			cfg, err := config.ParseWithEnv(tc.preset+".yaml", b, func(n string) (string, bool) {
				if n == "OPCTL_MYSQL_DSN" {
					return db.DSN, true
				}
				return "", false
			})
			if err != nil {
				t.Fatal(err)
			}
			cl, err := connect.Open(cfg, connect.Options{Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ps, _ := cfg.Select("")
			var needs []schema.Need
			for _, p := range ps {
				needs = append(needs, reconcile.IndexNeeds(p)...)
			}
			rep, err := schema.Check(context.Background(), cl.Reader, ps, needs, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range rep.Items {
				if it.Status != schema.StatusOK {
					t.Errorf("%s %s %s: %s (%s) %s", it.Kind, it.Table, it.What, it.Status, it.Why, it.DDL)
				}
			}
		})
	}
}
