package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
)

// fixture is one seed incident on a real MariaDB database and a kfake
// cluster reached by sarama over TCP.
type fixture struct {
	t       testing.TB
	db      *testenv.DB
	k       *testenv.Kafka
	cfg     string
	topic   string
	parts   int32
	extraFn []string
}

// newFixture loads testdata/schema/<name>.sql and testdata/incidents/<name>.sql
// and writes a config from testdata/config/<name>.yaml with replacements.
func newFixture(t *testing.T, name, topic string, replace ...string) *fixture {
	t.Helper()
	return newFixtureTB(t, name, topic, replace...)
}

func newFixtureTB(t testing.TB, name, topic string, replace ...string) *fixture {
	t.Helper()
	db := testenv.MySQL(t)
	db.ExecFile(t, filepath.Join("..", "testdata", "schema", name+".sql"))
	db.ExecFile(t, filepath.Join("..", "testdata", "incidents", name+".sql"))
	k := testenv.NewKafka(t, map[string]int32{topic: 8})
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "config", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for i := 0; i+1 < len(replace); i += 2 {
		s = strings.ReplaceAll(s, replace[i], replace[i+1])
	}
	cfg := filepath.Join(t.TempDir(), "opctl.yaml")
	if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, db: db, k: k, cfg: cfg, topic: topic, parts: 8}
}

// produce sends the operation's message with the producer's key and a
// msg_id header, timestamped at the state row's (or record's) created_at,
// surrounded by other keys' messages; it returns partition and offset.
func (f *fixture) produce(key, msgID string, ts time.Time) (int32, int64) {
	f.t.Helper()
	p, err := sources.PartitionFor("murmur2", []byte(key), f.parts)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		f.k.Produce(f.t, f.topic, p, fmt.Sprintf("noise-%s-%d", key, i), "{}", nil, ts.Add(time.Duration(i-3)*time.Second))
	}
	off := f.k.Produce(f.t, f.topic, p, key, fmt.Sprintf(`{"biz_id":%q}`, key), map[string]string{"msg_id": msgID}, ts)
	f.k.Produce(f.t, f.topic, p, "noise-after-"+key, "{}", nil, ts.Add(time.Second))
	return p, off
}

func (f *fixture) createdAt(query string, args ...any) time.Time {
	f.t.Helper()
	var ts time.Time
	if err := f.db.SQL.QueryRow(query, args...).Scan(&ts); err != nil {
		f.t.Fatalf("created_at: %v", err)
	}
	return ts
}

// run runs opctl with the fixture's config, DSN and brokers.
func (f *fixture) run(args ...string) (int, string, string) {
	f.t.Helper()
	all := append([]string{"--config", f.cfg, "--mysql-dsn", f.db.DSN, "--brokers", strings.Join(f.k.Brokers, ","), "--timeout", "5s"}, args...)
	return runOpctl(f.t, all...)
}

func runOpctl(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	ios, _, out, errOut := iostreams.Test()
	code := Run(context.Background(), ios, args)
	return code, out.String(), errOut.String()
}

// report is the subset of docs/where.md's JSON the tests assert on.
type report struct {
	BizID    string `json:"biz_id"`
	Pipeline string `json:"pipeline"`
	Verdict  struct {
		Code     string   `json:"code"`
		Severity string   `json:"severity"`
		Next     []string `json:"next"`
	} `json:"verdict"`
	Findings []struct {
		Code   string `json:"code"`
		Step   string `json:"step"`
		Detail string `json:"detail"`
	} `json:"findings"`
	State struct {
		Found  bool   `json:"found"`
		Status string `json:"status"`
	} `json:"state"`
	Steps []struct {
		Name          string `json:"name"`
		Status        string `json:"status"`
		EvidenceCount int    `json:"evidence_count"`
	} `json:"steps"`
	Kafka struct {
		Partition  *int32 `json:"partition"`
		Offset     *int64 `json:"offset"`
		Committed  *int64 `json:"committed"`
		LogStart   *int64 `json:"log_start"`
		LogEnd     *int64 `json:"log_end"`
		Lag        *int64 `json:"lag"`
		GroupLag   *int64 `json:"group_lag"`
		Redelivery string `json:"redelivery"`
		Located    string `json:"located"`
		Detail     string `json:"detail"`
	} `json:"kafka"`
	Partial bool              `json:"partial"`
	Sources map[string]string `json:"sources"`
}

func decode(t *testing.T, out string) report {
	t.Helper()
	var r report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	return r
}

func (r report) step(name string) string {
	for _, s := range r.Steps {
		if s.Name == name {
			return s.Status
		}
	}
	return "(no step " + name + ")"
}

func (r report) hasFinding(code, step string) bool {
	for _, f := range r.Findings {
		if f.Code == code && (step == "" || f.Step == step) {
			return true
		}
	}
	return false
}

func TestWhereSettlementSeed000(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "settlement", "settlement-event")
	ts1 := f.createdAt("SELECT created_at FROM biz_operation WHERE biz_id = 'PAY-1'")
	p1, off1 := f.produce("PAY-1", "m-1", ts1)
	p2, off2 := f.produce("PAY-2", "m-2", ts1)
	// The broker blip: PAY-1's offset was never committed past; PAY-2's was.
	if p2 == p1 {
		t.Fatalf("PAY-1 and PAY-2 share partition %d: the test needs them apart", p1)
	}
	f.k.Commit(t, "settlement-consumer", "settlement-event", p1, off1)
	f.k.Commit(t, "settlement-consumer", "settlement-event", p2, off2+1)

	code, out, errOut := f.run("where", "PAY-1", "-o", "json")
	if code != ExitAttention {
		t.Fatalf("exit %d, want 3; stderr %s\n%s", code, errOut, out)
	}
	r := decode(t, out)
	if r.Verdict.Code != "DUPLICATE_EFFECT" || r.Verdict.Severity != "action" {
		t.Fatalf("verdict %+v", r.Verdict)
	}
	if r.step("debit") != "duplicated" || r.step("ledger") != "applied" || r.step("notify") != "duplicated" {
		t.Errorf("steps %+v", r.Steps)
	}
	if !r.hasFinding("DUPLICATE_EFFECT", "debit") || !r.hasFinding("DUPLICATE_EFFECT", "notify") || !r.hasFinding("COMPLETE_UNCOMMITTED", "") {
		t.Errorf("findings %+v", r.Findings)
	}
	if r.Kafka.Located != "searched" || r.Kafka.Partition == nil || *r.Kafka.Partition != p1 || r.Kafka.Offset == nil || *r.Kafka.Offset != off1 {
		t.Errorf("kafka %+v, want searched p%d@%d", r.Kafka, p1, off1)
	}
	if r.Kafka.Redelivery != "yes" || r.Partial || r.Sources["kafka"] != "ok" || r.Sources["mysql"] != "ok" {
		t.Errorf("kafka %+v sources %v", r.Kafka, r.Sources)
	}
	// Lag: log end − committed on PAY-1's partition; the group's total
	// adds PAY-2's partition, committed past its one record (lag 0).
	if r.Kafka.LogEnd == nil || r.Kafka.Lag == nil || *r.Kafka.Lag != *r.Kafka.LogEnd-off1 || *r.Kafka.Lag < 1 ||
		r.Kafka.GroupLag == nil || *r.Kafka.GroupLag < *r.Kafka.Lag {
		t.Errorf("lag %v group_lag %v log_end %v, want log_end-%d", r.Kafka.Lag, r.Kafka.GroupLag, r.Kafka.LogEnd, off1)
	}
	// The next commands carry the global flags this run was given (the
	// DSN has no password), so that each runs as printed.
	if len(r.Verdict.Next) == 0 || !strings.Contains(r.Verdict.Next[0], " repair plan --pipeline settlement") || !strings.Contains(r.Verdict.Next[0], " -- PAY-1") ||
		!strings.HasPrefix(r.Verdict.Next[0], "opctl --config ") || !strings.Contains(r.Verdict.Next[0], " --mysql-dsn ") {
		t.Errorf("next %v", r.Verdict.Next)
	}

	code, out, _ = f.run("where", "PAY-2", "-o", "json")
	if r := decode(t, out); code != ExitOK || r.Verdict.Code != "COMPLETE" || r.Kafka.Redelivery != "no" {
		t.Errorf("PAY-2: exit %d verdict %s kafka %+v", code, r.Verdict.Code, r.Kafka)
	}
}

func TestWhereFulfilmentSeed001(t *testing.T) {
	t.Parallel()
	// WMS's lock journal, keyed by biz_id: F-1 was locked twice.
	wms := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := map[string]int{"F-1": 2, "F-2": 1}[r.URL.Query().Get("biz_id")]
		fmt.Fprintf(w, `{"count": %d}`, n)
	}))
	defer wms.Close()
	f := newFixture(t, "fulfilment", "order-fulfilment", "${OPCTL_WMS_URL:-http://127.0.0.1:8082}", wms.URL)
	ts := f.createdAt("SELECT created_at FROM fulfil_state WHERE biz_id = 'F-1'")
	p, off := f.produce("F-1", "fm-1", ts)
	f.k.Commit(t, "fulfilment-consumer", "order-fulfilment", p, off+1)

	code, out, errOut := f.run("where", "F-1", "--pipeline", "fulfilment", "-o", "json")
	r := decode(t, out)
	if code != ExitAttention || r.Verdict.Code != "DUPLICATE_EFFECT" || !r.hasFinding("DUPLICATE_EFFECT", "wms_lock") {
		t.Fatalf("exit %d verdict %s findings %+v stderr %s", code, r.Verdict.Code, r.Findings, errOut)
	}
	if r.step("order_row") != "applied" || r.step("logistics") != "applied" || r.step("notice") != "applied" {
		t.Errorf("steps %+v", r.Steps)
	}
	if r.Kafka.Redelivery != "no" {
		t.Errorf("kafka %+v", r.Kafka)
	}

	// Without WMS's journal the outcome is unknown, not "fine": probe first.
	// A probe is not a source: the report is not partial for it.
	wms.Close()
	code, out, _ = f.run("where", "F-2", "-o", "json")
	r = decode(t, out)
	if _, probe := r.Sources["probe"]; r.Verdict.Code != "UNKNOWN_OUTCOME" || r.step("wms_lock") != "unknown" || code != ExitAttention || r.Partial || probe {
		t.Errorf("WMS down: exit %d verdict %s steps %+v partial %v sources %v", code, r.Verdict.Code, r.Steps, r.Partial, r.Sources)
	}
}

func TestWhereSkipSeed003(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "skip", "order-event")
	ts := f.createdAt("SELECT created_at FROM consumer_idempotency WHERE msg_id = 'm-7391'")
	// Two messages of order 8821, same key: only the msg_id header tells them apart.
	// SHIPPED (m-7392) was produced after PAID in real life, but it is the
	// first record with the key here: a search by key alone would stop on it.
	p0, _ := sources.PartitionFor("murmur2", []byte("8821"), 8)
	f.k.Produce(t, "order-event", p0, "8821", `{"event":"SHIPPED"}`, map[string]string{"msg_id": "m-7392"}, ts.Add(-time.Second))
	p, offSkipped := f.produce("8821", "m-7391", ts)
	f.k.Commit(t, "order-consumer", "order-event", p, offSkipped+2)

	cases := []struct {
		id, verdict string
		code        int
	}{
		{"8821", "WRONGLY_SKIPPED", ExitAttention},
		{"8822", "SKIPPED_OK", ExitOK},
		{"8823", "COMPLETE", ExitOK},
	}
	for _, c := range cases {
		code, out, errOut := f.run("where", c.id, "-o", "json")
		r := decode(t, out)
		if code != c.code || r.Verdict.Code != c.verdict {
			t.Errorf("%s: exit %d verdict %s, want %d %s; findings %+v; stderr %s", c.id, code, r.Verdict.Code, c.code, c.verdict, r.Findings, errOut)
		}
		if c.id == "8821" {
			if r.State.Found || r.step("points") != "absent" {
				t.Errorf("8821: state %+v steps %+v", r.State, r.Steps)
			}
			if r.Kafka.Located != "searched" || r.Kafka.Offset == nil || *r.Kafka.Offset != offSkipped {
				t.Errorf("8821: the SKIPPED message m-7391 should be located at %d: %+v", offSkipped, r.Kafka)
			}
		}
	}
}

// A non-terminal operation with a stored position: never committed (latest:
// stranded), then deleted by retention.
func TestWhereStrandedNeverCommittedAndRetention(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "settlement", "settlement-event")
	ts := time.Now().UTC().Add(-time.Minute)
	p, off := f.produce("PAY-9", "m-9", ts)
	f.db.Exec(t, `INSERT INTO biz_operation (biz_id, status, version, msg_id, src_partition, src_offset, created_at, updated_at)
		VALUES ('PAY-9', 'DEBIT_DONE', 2, 'm-9', ?, ?, NOW(3), NOW(3))`, p, off)
	f.db.Exec(t, `INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES ('PAY-9', 1001, -5.00, 'DEBIT', NOW(3))`)

	code, out, _ := f.run("where", "PAY-9", "-o", "json")
	r := decode(t, out)
	if code != ExitAttention || r.Verdict.Code != "STRANDED" || r.Kafka.Located != "stored" || r.Kafka.Committed != nil {
		t.Fatalf("never committed: exit %d verdict %s kafka %+v", code, r.Verdict.Code, r.Kafka)
	}

	// A live group that has not passed it: will redeliver.
	f.k.Commit(t, "settlement-consumer", "settlement-event", p, off)
	_, out, _ = f.run("where", "PAY-9", "-o", "json")
	if r := decode(t, out); r.Verdict.Code != "WILL_REDELIVER" || r.Kafka.Redelivery != "yes" {
		t.Fatalf("committed at offset: verdict %s kafka %+v", r.Verdict.Code, r.Kafka)
	}

	// Retention deletes it: never redelivered.
	f.k.DeleteRecords(t, "settlement-event", p, off+1)
	_, out, _ = f.run("where", "PAY-9", "-o", "json")
	r = decode(t, out)
	if r.Verdict.Code != "STRANDED" || r.Kafka.Redelivery != "no" || r.Kafka.LogStart == nil || *r.Kafka.LogStart != off+1 {
		t.Fatalf("deleted: verdict %s kafka %+v", r.Verdict.Code, r.Kafka)
	}
}

func TestWhereNotFoundAndHostileIDs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "settlement", "settlement-event")
	for _, id := range []string{"NOPE-1", "x' OR '1'='1", "1; DROP TABLE biz_operation; --", `PAY-1"`, "PAY-1%", "😀-多字节"} {
		code, out, errOut := f.run("where", id, "-o", "json")
		r := decode(t, out)
		if code != ExitNotFound || r.Verdict.Code != "NOT_FOUND" || r.BizID != id {
			t.Errorf("%q: exit %d verdict %s biz_id %q stderr %s", id, code, r.Verdict.Code, r.BizID, errOut)
		}
	}
	var n int
	if err := f.db.SQL.QueryRow("SELECT COUNT(*) FROM biz_operation").Scan(&n); err != nil || n != 2 {
		t.Fatalf("biz_operation after hostile ids: %d rows, %v", n, err)
	}
	// Ids docs/where.md rejects as usage errors, before any query.
	for _, id := range []string{"", strings.Repeat("x", 10*1024), "a\nb", "a\x00b"} {
		code, out, errOut := f.run("where", id)
		if code != ExitUsage || out != "" || strings.Contains(errOut, "goroutine") || !strings.Contains(errOut, "biz_id") {
			t.Errorf("id of %d bytes: exit %d stdout %q stderr %q", len(id), code, out, errOut)
		}
	}
	// Human output of NOT_FOUND says so and suggests the next command.
	code, out, _ := f.run("where", "NOPE-1")
	if code != ExitNotFound || !strings.Contains(out, "NOT_FOUND") || !strings.Contains(out, " where -- NOPE-1") {
		t.Errorf("human not found: exit %d\n%s", code, out)
	}
}

func TestWhereMySQLDown(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "opctl.yaml")
	raw, _ := os.ReadFile(filepath.Join("..", "testdata", "config", "settlement.yaml"))
	if err := os.WriteFile(cfg, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runOpctl(t, "--config", cfg, "--mysql-dsn", "opctl:s3cretPW@tcp(127.0.0.1:1)/x", "--brokers", "127.0.0.1:1", "--timeout", "2s", "where", "PAY-1")
	if code != ExitError || out != "" {
		t.Fatalf("exit %d stdout %q", code, out)
	}
	if !strings.Contains(errOut, "127.0.0.1:1") || strings.Contains(errOut, "s3cretPW") || strings.Contains(errOut, "goroutine") {
		t.Fatalf("stderr %q", errOut)
	}
}

func TestWhereKafkaDownIsPartial(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "settlement", "settlement-event")
	all := []string{"--config", f.cfg, "--mysql-dsn", f.db.DSN, "--brokers", "127.0.0.1:1", "--timeout", "2s", "where", "PAY-1", "-o", "json"}
	code, out, errOut := runOpctl(t, all...)
	r := decode(t, out)
	if code != ExitPartial || !r.Partial || r.Sources["kafka"] == "ok" || r.Sources["mysql"] != "ok" {
		t.Fatalf("exit %d partial %v sources %v stderr %s", code, r.Partial, r.Sources, errOut)
	}
	// What MySQL says still stands: the double debit is found without Kafka.
	if r.Verdict.Code != "DUPLICATE_EFFECT" || r.Kafka.Redelivery != "unknown" {
		t.Fatalf("verdict %s kafka %+v", r.Verdict.Code, r.Kafka)
	}
}

func TestWhereProbeTimeoutIsUnknownNotAHang(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	f := newFixture(t, "fulfilment", "order-fulfilment", "${OPCTL_WMS_URL:-http://127.0.0.1:8082}", slow.URL)
	all := []string{"--config", f.cfg, "--mysql-dsn", f.db.DSN, "--brokers", strings.Join(f.k.Brokers, ","), "--timeout", "1s", "where", "F-1", "-o", "json"}
	code, out, _ := runOpctl(t, all...)
	r := decode(t, out)
	if r.step("wms_lock") != "unknown" || r.Verdict.Code != "UNKNOWN_OUTCOME" || code != ExitAttention || r.Partial {
		t.Fatalf("exit %d verdict %s steps %+v partial %v sources %v", code, r.Verdict.Code, r.Steps, r.Partial, r.Sources)
	}
}

// A typo in an evidence query (a column that does not exist) never reads
// COMPLETE: READ_ERROR, exit 6, the PARTIAL line and sources.mysql name the
// query, and no plan is made from it (docs/verdicts.md#partial).
func TestWhereBrokenEvidenceQuery(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "settlement", "settlement-event", "j.delta, j.created_at FROM", "j.delta, j.create_at FROM")
	code, out, errOut := f.run("where", "PAY-2", "--pipeline", "settlement", "-o", "json")
	r := decode(t, out)
	if code != ExitPartial || r.Verdict.Code != "READ_ERROR" || r.Verdict.Severity != "action" || !r.Partial || r.step("debit") != "unknown" {
		t.Fatalf("exit %d verdict %+v partial %v steps %+v stderr %s", code, r.Verdict, r.Partial, r.Steps, errOut)
	}
	if m := r.Sources["mysql"]; !strings.Contains(m, "debit: evidence query") || !strings.Contains(m, "create_at") || !r.hasFinding("READ_ERROR", "debit") {
		t.Errorf("sources %v findings %+v: want the debit evidence query named", r.Sources, r.Findings)
	}
	code, out, _ = f.run("where", "PAY-2", "--pipeline", "settlement")
	if code != ExitPartial || !strings.Contains(out, "READ_ERROR (action)") || !strings.Contains(out, "PARTIAL: mysql: partial read: debit: evidence query: ") {
		t.Errorf("exit %d, table:\n%s", code, out)
	}
	code, _, errOut = f.run("repair", "plan", "PAY-2", "--pipeline", "settlement", "--reason", "r")
	if code != ExitRefused || !strings.Contains(errOut, "debit: evidence query") {
		t.Errorf("repair plan: exit %d stderr %s", code, errOut)
	}
}

func TestWhereAllPipelines(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	for _, n := range []string{"settlement", "skip"} {
		db.ExecFile(t, filepath.Join("..", "testdata", "schema", n+".sql"))
		db.ExecFile(t, filepath.Join("..", "testdata", "incidents", n+".sql"))
	}
	k := testenv.NewKafka(t, map[string]int32{"settlement-event": 8, "order-event": 8})
	a, _ := os.ReadFile(filepath.Join("..", "testdata", "config", "settlement.yaml"))
	b, _ := os.ReadFile(filepath.Join("..", "testdata", "config", "skip.yaml"))
	_, pl, _ := strings.Cut(string(b), "pipelines:\n")
	cfg := filepath.Join(t.TempDir(), "opctl.yaml")
	if err := os.WriteFile(cfg, []byte(string(a)+pl), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--config", cfg, "--mysql-dsn", db.DSN, "--brokers", strings.Join(k.Brokers, ","), "--timeout", "5s"}
	code, out, errOut := runOpctl(t, append(base, "where", "8821", "-o", "json")...)
	r := decode(t, out)
	if r.Pipeline != "orders" || r.Verdict.Code != "WRONGLY_SKIPPED" || code != ExitAttention {
		t.Fatalf("exit %d pipeline %q verdict %s stderr %s", code, r.Pipeline, r.Verdict.Code, errOut)
	}
	code, out, _ = runOpctl(t, append(base, "where", "NOPE", "-o", "json")...)
	if r := decode(t, out); code != ExitNotFound || r.Verdict.Code != "NOT_FOUND" || r.Pipeline != "" {
		t.Fatalf("not found everywhere: exit %d %+v", code, r)
	}
	code, _, errOut = runOpctl(t, append(base, "where", "PAY-1", "--pipeline", "setlement")...)
	if code != ExitUsage || !strings.Contains(errOut, "settlement") {
		t.Fatalf("unknown pipeline: exit %d stderr %s", code, errOut)
	}
}

// A live lease (by the database clock) makes the operation IN_FLIGHT, and a
// real group member holding the partition is reported as its owner.
func TestWhereInFlightWithLiveOwner(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "settlement", "settlement-event")
	ts := time.Now().UTC()
	p, off := f.produce("PAY-7", "m-7", ts)
	f.db.Exec(t, `INSERT INTO biz_operation (biz_id, status, version, owner, lease_until, msg_id, src_partition, src_offset, created_at, updated_at)
		VALUES ('PAY-7', 'DEBIT_DONE', 3, 'settlement-c-2', NOW(3) + INTERVAL 5 MINUTE, 'm-7', ?, ?, NOW(3), NOW(3))`, p, off)
	f.db.Exec(t, `INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES ('PAY-7', 1001, -5.00, 'DEBIT', NOW(3))`)
	stop := f.k.JoinGroup(t, "settlement-consumer", []string{"settlement-event"}, "settlement-c-2")
	defer stop()

	code, out, _ := f.run("where", "PAY-7", "-o", "json")
	r := decode(t, out)
	if code != ExitOK || r.Verdict.Code != "IN_FLIGHT" || r.Verdict.Severity != "watch" {
		t.Fatalf("exit %d verdict %+v findings %+v", code, r.Verdict, r.Findings)
	}
	var raw struct {
		Kafka struct {
			GroupState     string `json:"group_state"`
			PartitionOwner string `json:"partition_owner"`
		} `json:"kafka"`
		State struct {
			LeaseActive bool   `json:"lease_active"`
			Owner       string `json:"owner"`
		} `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatal(err)
	}
	if raw.Kafka.GroupState != "Stable" || raw.Kafka.PartitionOwner != "settlement-c-2" || !raw.State.LeaseActive {
		t.Fatalf("kafka %+v state %+v", raw.Kafka, raw.State)
	}

	// The lease expires (database clock): no longer in flight.
	f.db.Exec(t, `UPDATE biz_operation SET lease_until = NOW(3) - INTERVAL 1 SECOND WHERE biz_id = 'PAY-7'`)
	_, out, _ = f.run("where", "PAY-7", "-o", "json")
	if r := decode(t, out); r.Verdict.Code == "IN_FLIGHT" {
		t.Fatalf("expired lease still in flight: %+v", r.Verdict)
	}
}
