package sources_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	kafkasrc "github.com/opctl-dev/opctl/sources/kafka"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
	"github.com/opctl-dev/opctl/sources/probe"
)

// triageEnv is the seed schemas on a fresh MariaDB database and a kfake
// cluster: what `opctl where` reads, through the Collector and Diagnose.
type triageEnv struct {
	db    *testenv.DB
	r     *mysqlsrc.Reader
	k     *testenv.Kafka
	kr    *kafkasrc.Reader
	tail  map[string]int64 // offset of the next record, per topic
	probe sources.Prober
}

func newTriageEnv(t *testing.T) *triageEnv {
	t.Helper()
	db := testenv.MySQL(t)
	for _, n := range []string{"settlement", "skip"} {
		db.ExecFile(t, filepath.Join("..", "testdata", "schema", n+".sql"))
	}
	db.ExecFile(t, filepath.Join("..", "testdata", "incidents", "skip.sql"))
	r, err := mysqlsrc.Open(db.DSN, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	k := testenv.NewKafka(t, map[string]int32{"settlement-event": 1, "order-event": 1})
	kr := kafkasrc.New(config.Kafka{Brokers: k.Brokers, Version: "3.5.0"}, 5*time.Second)
	t.Cleanup(func() { kr.Close() })
	return &triageEnv{db: db, r: r, k: k, kr: kr, tail: map[string]int64{}}
}

// settled inserts a settlement operation in status, with n debits, one
// ledger row and the given notify intents (acked when acked), its message
// at a stored position the group has committed past.
func (e *triageEnv) settled(t *testing.T, id, status string, debits int, intents []string, acked bool) {
	t.Helper()
	off := e.k.Produce(t, "settlement-event", 0, id, `{}`, map[string]string{"msg_id": "m-" + id}, time.Now())
	e.k.Commit(t, "settlement-consumer", "settlement-event", 0, off+1)
	e.db.Exec(t, `INSERT INTO biz_operation (biz_id, status, version, msg_id, src_partition, src_offset, created_at, updated_at)
		VALUES (?, ?, 4, ?, 0, ?, NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 9 MINUTE)`, id, status, "m-"+id, off)
	for range debits {
		e.db.Exec(t, `INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES (?, 1001, -30.00, 'DEBIT', NOW(3) - INTERVAL 10 MINUTE)`, id)
	}
	e.db.Exec(t, `INSERT INTO ledger_entry (biz_order_id, direction, amount, created_at) VALUES (?, 'OUT', 30.00, NOW(3) - INTERVAL 10 MINUTE)`, id)
	for _, rid := range intents {
		ack := "NULL"
		if acked {
			ack = "NOW(3) - INTERVAL 10 MINUTE"
		}
		e.db.Exec(t, `INSERT INTO step_intent (request_id, biz_id, step, attempt, sent_at, acked_at, result)
			VALUES (?, ?, 'notify', 1, NOW(3) - INTERVAL 10 MINUTE, `+ack+`, 'OK')`, rid, id)
	}
}

// pipeline loads testdata/config/<name>.yaml with the replacements (old,
// new, ...), each of which must apply, and returns its first pipeline.
func pipeline(t *testing.T, name string, replace ...string) (*config.Config, *config.Pipeline) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "config", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(s, replace[i]) {
			t.Fatalf("%s.yaml has no %q", name, replace[i])
		}
		s = strings.ReplaceAll(s, replace[i], replace[i+1])
	}
	cfg, err := config.ParseWithEnv(name+".yaml", []byte(s), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg, &cfg.Pipelines[0]
}

// where reads id as `opctl where --pipeline` does and diagnoses it.
func (e *triageEnv) where(t *testing.T, cfg *config.Config, p *config.Pipeline, id string) inspect.Report {
	t.Helper()
	c := &sources.Collector{DB: e.r, Kafka: e.kr, Prober: e.probe, AuditTable: cfg.Audit.AuditTable(), Timeout: 5 * time.Second}
	ev, err := c.Collect(context.Background(), p, id)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	return inspect.Diagnose(ev)
}

// TestFailedQueryIsNeverOK: with a query of the configuration broken on
// the server (a column that does not exist), `where` never says COMPLETE,
// SKIPPED_OK or NOT_FOUND from what the query would have shown: the verdict
// is READ_ERROR (action), the report partial (exit 6), sources.mysql and
// the summary name the failed query, the failed step is unknown; a double
// debit a broken evidence query hides is READ_ERROR too
// (docs/verdicts.md#partial).
func TestFailedQueryIsNeverOK(t *testing.T) {
	e := newTriageEnv(t)
	e.settled(t, "PAY-1", "DONE", 1, []string{"PAY-1:notify:1"}, true)
	e.settled(t, "PAY-2", "DONE", 2, []string{"PAY-2:notify:1"}, true) // a double debit

	const (
		debitTypo  = "j.delta, j.created_at FROM" // the debit evidence query's columns (not those its reverse binds)
		notifyTypo = "acked_at, result FROM step_intent"
		stateTypo  = "      status: status\n"
		actionTypo = "      action: action\n"
		entityTypo = "SELECT status FROM orders"
	)
	cases := []struct {
		name    string
		config  string
		replace []string
		id      string
		want    inspect.Code
		// names is what sources.mysql and the summary must name ("": the
		// report is not partial); step is the step left unknown.
		names, step string
	}{
		{"sound queries: complete", "settlement", nil, "PAY-1", inspect.Complete, "", ""},
		{"sound queries: the double debit", "settlement", nil, "PAY-2", inspect.DuplicateEffect, "", ""},
		{"a typo in the debit evidence query", "settlement", []string{debitTypo, "j.delta, j.create_at FROM"}, "PAY-1", inspect.ReadError, "debit: evidence query: Error 1054", "debit"},
		{"a typo in the debit evidence query hides no double debit", "settlement", []string{debitTypo, "j.delta, j.create_at FROM"}, "PAY-2", inspect.ReadError, "debit: evidence query: Error 1054", "debit"},
		{"a typo in the notify intent query", "settlement", []string{notifyTypo, "acked_att, result FROM step_intent"}, "PAY-1", inspect.ReadError, "notify: intent query: Error 1054", "notify"},
		{"a state column that does not exist", "settlement", []string{stateTypo, "      status: stauts\n"}, "PAY-1", inspect.ReadError, "state query: Error 1054", ""},
		{"sound queries: a correct skip", "skip", nil, "8822", inspect.SkippedOK, "", ""},
		{"an idempotency column that does not exist", "skip", []string{actionTypo, "      action: acton\n"}, "8823", inspect.ReadError, "idempotency query: Error 1054", ""},
		{"an idempotency column that does not exist, nothing else found", "skip", []string{actionTypo, "      action: acton\n"}, "8822", inspect.ReadError, "idempotency query: Error 1054", ""},
		{"a broken entity query on a skip", "skip", []string{entityTypo, "SELECT stauts FROM orders"}, "8822", inspect.ReadError, "entity query: Error 1054", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, p := pipeline(t, c.config, c.replace...)
			r := e.where(t, cfg, p, c.id)
			if r.Verdict.Code != c.want {
				t.Fatalf("verdict %s, want %s; findings %v; sources %v", r.Verdict.Code, c.want, r.Findings, r.Sources)
			}
			wantExit := map[inspect.Severity]int{inspect.SeverityOK: 0, inspect.SeverityAction: 3}[r.Verdict.Severity]
			if c.names != "" {
				wantExit = sources.ExitPartial
			}
			if got := inspect.ExitCode([]inspect.Report{r}); got != wantExit {
				t.Errorf("exit %d, want %d", got, wantExit)
			}
			if c.names == "" {
				if r.Partial || r.Sources["mysql"] != sources.StatusOK || r.Sources["kafka"] != sources.StatusOK {
					t.Errorf("partial %v, sources %v: want every source read", r.Partial, r.Sources)
				}
				return
			}
			if !r.Partial || !strings.Contains(r.Sources["mysql"], c.names) {
				t.Errorf("partial %v, sources.mysql %q: want partial, naming %q", r.Partial, r.Sources["mysql"], c.names)
			}
			if !strings.Contains(r.Verdict.Summary, c.names) || r.Verdict.Severity != inspect.SeverityAction {
				t.Errorf("verdict %s (%s) %q: want action, naming %q", r.Verdict.Code, r.Verdict.Severity, r.Verdict.Summary, c.names)
			}
			for _, s := range r.Steps {
				if s.Name == c.step && s.Status != inspect.StepUnknown {
					t.Errorf("step %s is %s, want unknown", s.Name, s.Status)
				}
			}
		})
	}
}

// TestInconclusiveProbeIsNotPartial: a probe that answers HTTP 500, a body
// that is not JSON, a value that is not configured, or nothing in time,
// leaves its step unknown: UNKNOWN_OUTCOME, exit 3. The report is not
// partial (a probe is not a source) and its answer is on the step.
func TestInconclusiveProbeIsNotPartial(t *testing.T) {
	e := newTriageEnv(t)
	e.probe = probe.New(300 * time.Millisecond)
	e.settled(t, "PAY-3", "LEDGER_DONE", 1, []string{"PAY-3:notify:1"}, false)
	e.settled(t, "PAY-4", "LEDGER_DONE", 1, nil, false)

	mode := map[string]func(w http.ResponseWriter, r *http.Request){
		"500":     func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) },
		"garbage": func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "<html>upstream error</html>") },
		"unknown": func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"status": "MAYBE"}`) },
		"timeout": func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mode[strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")[0]](w, r)
	}))
	defer srv.Close()

	intent := `intent: "SELECT request_id, sent_at, acked_at, result FROM step_intent WHERE biz_id = ? AND step = 'notify'"`
	for _, c := range []struct{ mode, detail string }{
		{"500", "HTTP 500"},
		{"garbage", "not a JSON object"},
		{"unknown", `status "MAYBE" is neither applied`},
		{"timeout", "timeout"},
	} {
		for _, key := range []struct{ name, template, id string }{
			{"request_id", "request_id={request_id}", "PAY-3"},
			{"biz_id", "biz_id={biz_id}", "PAY-4"},
		} {
			t.Run(c.mode+"/"+key.name, func(t *testing.T) {
				probeURL := fmt.Sprintf(`%s/%s/notify?%s`, srv.URL, c.mode, key.template)
				cfg, p := pipeline(t, "settlement", intent, intent+"\n        probe: \""+probeURL+"\"\n        probe_applied: [APPLIED]\n        probe_absent: [NOT_FOUND]")
				r := e.where(t, cfg, p, key.id)
				if r.Verdict.Code != inspect.UnknownOutcome {
					t.Fatalf("verdict %s, want UNKNOWN_OUTCOME; findings %v", r.Verdict.Code, r.Findings)
				}
				if got := inspect.ExitCode([]inspect.Report{r}); got != sources.ExitAttention {
					t.Errorf("exit %d, want %d", got, sources.ExitAttention)
				}
				if r.Partial || len(r.Unread()) != 0 {
					t.Errorf("partial %v, unread %v: a probe is not a source", r.Partial, r.Unread())
				}
				if _, ok := r.Sources["probe"]; ok || r.Sources["mysql"] != sources.StatusOK || r.Sources["kafka"] != sources.StatusOK {
					t.Errorf("sources %v, want mysql and kafka ok, no probe", r.Sources)
				}
				notify := r.Steps[2]
				answer := ""
				if notify.Probe != nil {
					answer = notify.Probe.Detail
				}
				for _, in := range notify.Intents {
					answer += in.Probe
				}
				if notify.Status != inspect.StepUnknown || !strings.Contains(answer, c.detail) {
					t.Errorf("notify %s, probe answer %q: want unknown, saying %q", notify.Status, answer, c.detail)
				}
				if !strings.Contains(r.Verdict.Summary, c.detail) {
					t.Errorf("summary %q does not say %q", r.Verdict.Summary, c.detail)
				}
			})
		}
	}
}
