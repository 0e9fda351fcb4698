package repair

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/probe"
)

// fulfilmentEnv is F-1 (a WMS lock taken twice, compensate by {biz_id}
// guarded by the count) against w; honour adds honours_idempotency_key to
// the step.
func fulfilmentEnv(t *testing.T, w *testenv.WMS, honour bool) *tenv {
	cfg := td("repair", "fulfilment.yaml")
	if honour {
		raw, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Replace(string(raw), "/wms/compensate?biz_id={biz_id}\"", "/wms/compensate?biz_id={biz_id}\"\n        honours_idempotency_key: true", 1)
		cfg = filepath.Join(t.TempDir(), "fulfilment.yaml")
		if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e := newTenv(t, cfg, []string{td("schema", "fulfilment.sql"), td("incidents", "fulfilment.sql")},
		[]string{"order-fulfilment"}, map[string]string{"OPCTL_WMS_URL": w.URL})
	e.svc.Poster = probe.New(5 * time.Second)
	return e
}

// resetAudit empties the audit between rounds.
func (e *tenv) resetAudit() {
	e.db.Exec(e.t, "DELETE FROM opctl_audit")
	e.db.Exec(e.t, "DELETE FROM opctl_audit_attempt")
}

// Two applies of one plan, the second started while the first waits on a
// downstream that takes 0.3 s or 2 s: the compensation takes effect once,
// one audit row says applied, the first apply says applied and the second
// "already applied" naming the apply it waited for (exit 0). Before the
// plan's lock, the second took the first's 'compensating' row for a
// crashed apply's, probed (the count had not dropped yet) and POSTed
// again: 2 → 0, one legitimate lock undone.
func TestConcurrentAppliesSlowDownstream(t *testing.T) {
	for _, delay := range []time.Duration{300 * time.Millisecond, 2 * time.Second} {
		t.Run(delay.String(), func(t *testing.T) {
			w := testenv.NewWMS(t, delay)
			e := fulfilmentEnv(t, w, false)
			rounds := 4
			if delay > time.Second {
				rounds = 2
			}
			for round := range rounds {
				e.resetAudit()
				w.Reset()
				p := e.mustPlan("fulfilment", "F-1", plans.Options{})
				type out struct {
					res *Result
					err error
				}
				first, second := make(chan out, 1), make(chan out, 1)
				go func() {
					r, err := e.apply(p)
					first <- out{r, err}
				}()
				<-w.Entered // the first waits on the downstream
				go func() {
					r, err := e.apply(p)
					second <- out{r, err}
				}()
				a, b := <-first, <-second
				locks, posts, effects := w.Counts()
				if effects != 1 || locks != 1 || posts != 1 {
					t.Fatalf("round %d: %d effect(s), %d POST(s), %d lock(s) left; want 1, 1, 1\nfirst %+v %v\nsecond %+v %v", round, effects, posts, locks, a.res, a.err, b.res, b.err)
				}
				if a.err != nil || a.res.Outcome != OutcomeApplied {
					t.Fatalf("round %d: first apply %v %+v", round, a.err, a.res)
				}
				if b.err != nil || b.res.Outcome != OutcomeAlreadyApplied || b.res.Concurrent == "" {
					t.Fatalf("round %d: second apply %v %+v: want already_applied by the other", round, b.err, b.res)
				}
				if n := e.count("SELECT COUNT(*) FROM opctl_audit WHERE outcome = 'applied'"); n != 1 {
					t.Fatalf("round %d: %d applied audit rows", round, n)
				}
			}
		})
	}
}

// lockless is the write path without the plan's lock (a lock that was
// lost, an opctl that took none): only the in-flight row's lease keeps a
// second apply off a live one's action.
type lockless struct{ sources.Store }

func (lockless) Lock(_ context.Context, name string, _ time.Duration) (sources.Lock, error) {
	return &fakeLock{name: name, lost: make(chan struct{})}, nil
}

// Without the plan's lock, an apply that finds another's 'compensating'
// row with a live lease never takes it for a crashed one: it waits for the
// lease (the other apply renews it while it waits on the downstream) and
// finds the action done; an apply that may not wait that long refuses
// (in flight) and sends nothing.
func TestInFlightLeaseIsNotTakenOver(t *testing.T) {
	w := testenv.NewWMS(t, 2*time.Second)
	e := fulfilmentEnv(t, w, false)
	st, err := e.svc.Store()
	if err != nil {
		t.Fatal(err)
	}
	p := e.mustPlan("fulfilment", "F-1", plans.Options{})
	second := func(timeout time.Duration) (*Result, error) {
		a := &Applier{Config: e.cfg, Store: lockless{st}, Collector: e.svc.Collector, Prober: e.svc.Prober, Poster: e.svc.Poster, Operator: "second", Timeout: timeout}
		return a.Apply(context.Background(), p)
	}
	done := make(chan error, 1)
	go func() { _, err := e.apply(p); done <- err }()
	<-w.Entered
	entered := time.Now()
	time.Sleep(200 * time.Millisecond)

	// May wait 1 s at most: the row stays in flight for up to 5.5 s.
	res, err := second(time.Second)
	var rf *plans.RefusedError
	if !errors.As(err, &rf) || rf.Code != plans.CodeInFlight || res.Actions[0].Outcome != OutcomeRefused {
		t.Fatalf("impatient second apply: %v %+v", err, res)
	}
	if _, posts, _ := w.Counts(); posts != 1 {
		t.Fatalf("%d POSTs: the second apply sent one", posts)
	}
	// The first renews its lease while it waits on the downstream.
	time.Sleep(time.Until(entered.Add(1500 * time.Millisecond)))
	if ms := e.count("SELECT TIMESTAMPDIFF(MICROSECOND, created_at, updated_at) DIV 1000 FROM opctl_audit"); ms < 900 {
		t.Fatalf("the in-flight row was renewed %d ms after it was written: no lease renewal", ms)
	}
	// May wait as long as it takes: the first finishes meanwhile.
	res, err = second(10 * time.Second)
	if err != nil || res.Outcome != OutcomeAlreadyApplied && res.Actions[0].Outcome != OutcomeAlready {
		t.Fatalf("patient second apply: %v %+v", err, res)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if locks, posts, effects := w.Counts(); effects != 1 || posts != 1 || locks != 1 {
		t.Fatalf("%d effects, %d POSTs, %d locks", effects, posts, locks)
	}
	var attempts []string
	rows, err := e.db.SQL.Query("SELECT outcome FROM opctl_audit_attempt ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		attempts = append(attempts, s)
	}
	rows.Close()
	if len(attempts) != 1 || attempts[0] != AttemptInFlight {
		t.Fatalf("attempts %v: want the refused one, in_flight", attempts)
	}
}

// An apply interrupted during its POST (the operator's Ctrl-C) records the
// outcome as unknown, not failed, and keeps the 'compensating' row. An
// apply of the plan right after waits until that POST can no longer take
// effect and settles it: by the probe (the downstream went on and took
// effect: recorded, not sent again; it gave up: sent again), or, for a
// downstream that honours the Idempotency-Key, by sending it again with
// the same key. Never two effects.
func TestInterruptedPOSTIsSettled(t *testing.T) {
	for _, c := range []struct {
		name            string
		abandon, honour bool
		posts           int
	}{
		{"downstream goes on: probe says it took effect", false, false, 1},
		{"downstream gives up: probe says it did not", true, false, 2},
		{"downstream dedupes by the key: sent again", false, true, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := testenv.NewWMS(t, 800*time.Millisecond)
			w.SetAbandon(c.abandon)
			w.SetHonour(c.honour)
			e := fulfilmentEnv(t, w, c.honour)
			e.svc.Timeout = 2 * time.Second
			p := e.mustPlan("fulfilment", "F-1", plans.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			go func() { <-w.Entered; time.Sleep(200 * time.Millisecond); cancel() }()
			res, err := e.svc.Apply(ctx, p, ApplyOptions{Operator: "tester"})
			if err == nil || res.Outcome != OutcomeUnknown || res.Actions[0].Outcome != OutcomeUnknown || !strings.Contains(err.Error(), "outcome is unknown") {
				t.Fatalf("interrupted apply: %v %+v", err, res)
			}
			if got := e.str("SELECT GROUP_CONCAT(outcome) FROM opctl_audit"); got != "compensating" {
				t.Fatalf("audit %q", got)
			}
			if got := e.str("SELECT GROUP_CONCAT(outcome) FROM opctl_audit_attempt"); got != AttemptUnknown {
				t.Fatalf("attempts %q", got)
			}
			res, err = e.apply(p)
			if err != nil || res.Outcome != OutcomeApplied {
				t.Fatalf("re-apply: %v %+v", err, res)
			}
			time.Sleep(w.Delay()) // anything still running at the downstream ends
			locks, posts, effects := w.Counts()
			if effects != 1 || locks != 1 || posts != c.posts {
				t.Fatalf("%d effects, %d POSTs, %d locks; want 1, %d, 1 (%s)", effects, posts, locks, c.posts, res.Actions[0].Detail)
			}
			if got := e.str("SELECT GROUP_CONCAT(outcome) FROM opctl_audit"); got != "applied" {
				t.Fatalf("audit %q", got)
			}
			t.Logf("%s: %s", c.name, res.Actions[0].Detail)
		})
	}
}

// answerLost is a Kafka whose answer to a send is lost: the record is
// written (write) or not, and Publish says the outcome is unknown.
type answerLost struct {
	Kafka
	write bool
}

func (k answerLost) Publish(ctx context.Context, topic string, partition int32, key, value []byte, headers map[string]string) (int32, int64, error) {
	if k.write {
		if _, _, err := k.Kafka.Publish(ctx, topic, partition, key, value, headers); err != nil {
			return -1, -1, err
		}
	}
	return -1, -1, &sources.SendError{Source: "Kafka", MayHaveSent: true, Unreachable: true, Err: errors.New("no answer within 1s")}
}

// A republish whose send got no answer is recorded unknown ('publishing'
// stays); the next apply looks the record up in the partition (by its
// opctl-plan and msg_id headers, from the end it read before the send):
// found, it is recorded published where it is and not sent again; not
// found, it is sent. The record exists once either way (before, it was
// re-sent blindly: twice when the first had been written).
func TestUnknownRepublishIsLookedUp(t *testing.T) {
	for _, written := range []bool{true, false} {
		t.Run(fmt.Sprintf("written=%v", written), func(t *testing.T) {
			e := settlementEnv(t)
			p0, _ := e.anchor("PAY-4", true)
			p := e.mustPlan("settlement", "PAY-4", plans.Options{})
			if len(p.Actions) != 2 || p.Actions[1].Type != plans.Republish {
				t.Fatalf("plan %+v", p.Actions)
			}
			part := p.Actions[1].Publish.Partition
			end := func() int64 {
				g, err := e.cl.Kafka.Group(context.Background(), "settlement-event", "nobody")
				if err != nil {
					t.Fatal(err)
				}
				return g.Partitions[part].LogEnd
			}
			before := end()
			real := e.svc.Kafka
			e.svc.Kafka = answerLost{Kafka: real, write: written}
			e.svc.Timeout = time.Second
			res, err := e.apply(p)
			var se *sources.SendError
			if !errors.As(err, &se) || se.ExitCode() != sources.ExitPartial || res.Actions[1].Outcome != OutcomeUnknown || !strings.Contains(err.Error(), "Kafka unreachable") {
				t.Fatalf("apply with a lost answer: %v %+v", err, res)
			}
			if got := e.str("SELECT outcome FROM opctl_audit WHERE action_index = 2"); got != "publishing" {
				t.Fatalf("audit %q", got)
			}
			var img map[string]any
			if err := json.Unmarshal([]byte(e.str("SELECT after_image FROM opctl_audit WHERE action_index = 2")), &img); err != nil {
				t.Fatal(err)
			}
			if img[factSearch] != float64(before) || img[factOwner] == "" || img[factUnknown] == nil {
				t.Fatalf("in-flight row %v", img)
			}
			e.svc.Kafka = real
			res, err = e.apply(p)
			if err != nil || res.Outcome != OutcomeApplied || res.Actions[1].Outcome != OutcomePublished {
				t.Fatalf("re-apply: %v %+v", err, res)
			}
			if n := end() - before; n != 1 {
				t.Fatalf("%d records written for one republish (partition %d, the message's %d)", n, part, p0)
			}
			m := e.published(res)
			if m.Headers[plans.HeaderPlan] != p.ID {
				t.Fatalf("published %v", m.Headers)
			}
			t.Logf("%s", res.Actions[1].Detail)
		})
	}
}

// Kafka that does not answer when the plan is applied is "Kafka
// unreachable" (exit 6; nothing applied, attempt recorded), not a stale
// plan: nothing says the operation changed.
func TestKafkaDownIsNotStale(t *testing.T) {
	e := settlementEnv(t)
	e.anchor("PAY-4", true)
	p := e.mustPlan("settlement", "PAY-4", plans.Options{})
	e.k.Cluster.Close()
	e.svc.Timeout = time.Second
	res, err := e.apply(p)
	var se *sources.SendError
	var rf *plans.RefusedError
	if errors.As(err, &rf) || !errors.As(err, &se) || se.ExitCode() != sources.ExitPartial || !strings.HasPrefix(err.Error(), "Kafka unreachable") {
		t.Fatalf("apply with Kafka down: %v %+v", err, res)
	}
	if res.Applied != 0 || e.count("SELECT COUNT(*) FROM opctl_audit") != 0 {
		t.Fatalf("something was applied: %+v", res)
	}
	if got := e.str("SELECT JSON_UNQUOTE(JSON_EXTRACT(detail, '$.code')) FROM opctl_audit_attempt"); got != "kafka_unreachable" {
		t.Fatalf("attempt code %q", got)
	}
}

// An interrupted POST whose downstream has no conclusive probe (and does
// not honour the key) is never sent again: the next apply, once the POST
// can no longer take effect, refuses and asks for an attestation (exit 5),
// and the one after refuses at once, without waiting again.
func TestUnknownPOSTWithoutProbeAsksForAttestation(t *testing.T) {
	w := testenv.NewWMS(t, 500*time.Millisecond)
	e := fulfilmentEnv(t, w, false)
	e.svc.Timeout = 2 * time.Second
	p := e.mustPlan("fulfilment", "F-1", plans.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-w.Entered; cancel() }()
	if res, err := e.svc.Apply(ctx, p, ApplyOptions{Operator: "tester"}); res.Outcome != OutcomeUnknown {
		t.Fatalf("interrupted apply: %v %+v", err, res)
	}
	w.SetBlind(true)
	for i := range 2 {
		start := time.Now()
		res, err := e.apply(p)
		var rf *plans.RefusedError
		if !errors.As(err, &rf) || rf.Code != plans.CodeUnknownOutcome || !strings.Contains(err.Error(), "--action manual --attest") {
			t.Fatalf("apply %d: %v %+v", i, err, res)
		}
		if took := time.Since(start); i == 1 && took > time.Second {
			t.Errorf("the second refusal waited %s for a send nobody made", took)
		}
	}
	time.Sleep(w.Delay())
	if _, posts, effects := w.Counts(); posts != 1 || effects != 1 {
		t.Fatalf("%d POSTs, %d effects: want the interrupted one only", posts, effects)
	}
}
