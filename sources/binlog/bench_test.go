package binlog

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
)

// BenchmarkTriageWindow: 1 GB of other traffic in the binlog, rotated at
// max_binlog_size=100M, with one operation's double debit in the middle; a
// triage of its window (1 s either side) reads only the files that overlap
// it. Reported: bytes of events read per triage, the parse rate of the
// scan, and the time of each part (settings and SHOW BINARY LOGS, the
// binary search, the scan). With OPCTL_BENCH_BINARY=1 it also runs the
// whole `opctl where` process once against the same server (docs/performance.md).
//
//	go test -run '^$' -bench TriageWindow -benchtime 5x ./sources/binlog/
func BenchmarkTriageWindow(b *testing.B) {
	srv := testenv.BinlogServerFor(b, testenv.BinlogOptions{ServerID: 11, Args: []string{"--max-binlog-size=100M"}})
	db := srv.MySQL(b)
	db.Exec(b, seed000)
	db.Exec(b, "INSTALL SONAME 'ha_blackhole'")
	// Other traffic: rows events of a table the triage does not read
	// (BLACKHOLE: logged, not stored, so the server spends its time on the
	// binlog only).
	db.Exec(b, "CREATE TABLE noise (id BIGINT NOT NULL, payload LONGBLOB NOT NULL) ENGINE=BLACKHOLE")
	db.Exec(b, "INSERT INTO account_balance (account_id, balance) VALUES ('1001', 500)")
	binlogSize := func() (files int, total int64) {
		rows, err := db.SQL.Query("SHOW BINARY LOGS")
		testenv.Must(b, err, "show binary logs")
		defer rows.Close()
		for rows.Next() {
			var n string
			var size int64
			testenv.Must(b, rows.Scan(&n, &size), "scan")
			files++
			total += size
		}
		return files, total
	}
	// noise writes other traffic until the binlog has grown by mb MB.
	noise := func(mb int64) {
		payload := make([]byte, 64<<10)
		_, _ = rand.Read(payload)
		q := "INSERT INTO noise (id, payload) VALUES " + strings.TrimSuffix(strings.Repeat("(?, ?),", 16), ",")
		args := make([]any, 0, 32)
		for i := range 16 {
			args = append(args, i, payload)
		}
		_, from := binlogSize()
		for {
			for range 32 {
				if _, err := db.SQL.Exec(q, args...); err != nil {
					b.Fatal(err)
				}
			}
			if _, now := binlogSize(); now-from >= mb<<20 {
				return
			}
		}
	}
	start := time.Now()
	noise(512)
	time.Sleep(2 * time.Second)
	opAt := time.Now().Truncate(time.Second)
	f := &fixture{db: db}
	f.debit(b, "1001", "30.0000000000", "PAY-1", true)
	f.debit(b, "1001", "30.0000000000", "PAY-1", true)
	time.Sleep(2 * time.Second)
	noise(512)
	files, total := binlogSize()
	b.Logf("binlog: %d files, %d MB, written in %s", files, total>>20, time.Since(start).Round(time.Millisecond))

	r, err := New(db.DSN, 0, 30*time.Second)
	testenv.Must(b, err, "reader")
	req := sources.BinlogRequest{Schema: db.Name, Table: "account_balance", KeyColumn: "account_id", DeltaColumn: "balance", Key: "1001",
		From: opAt.Add(-time.Second), To: opAt.Add(time.Second), TxSchema: db.Name, TxTable: "ledger_entry", TxColumn: "biz_order_id"}
	ctx := context.Background()
	var tInspect, tSearch, tScan time.Duration
	var read sources.BinlogRead
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		s, err := r.inspect(ctx, req)
		testenv.Must(b, err, "inspect")
		t1 := time.Now()
		i, err := r.startFile(ctx, s, req.From.Unix())
		testenv.Must(b, err, "start file")
		t2 := time.Now()
		read, err = r.scan(ctx, s, i, req)
		testenv.Must(b, err, "scan")
		t3 := time.Now()
		tInspect, tSearch, tScan = tInspect+t1.Sub(t0), tSearch+t2.Sub(t1), tScan+t3.Sub(t2)
	}
	b.StopTimer()
	n := time.Duration(b.N)
	if len(read.Changes) != 2 {
		b.Fatalf("%d changes, want the 2 debits", len(read.Changes))
	}
	b.ReportMetric(float64(read.Bytes), "bytes/op")
	b.ReportMetric(float64(len(read.Files)), "files/op")
	b.ReportMetric(float64(read.Bytes)/(tScan/n).Seconds()/1e6, "MB/s")
	b.ReportMetric(float64((tInspect / n).Microseconds()), "inspect-µs/op")
	b.ReportMetric(float64((tSearch / n).Microseconds()), "search-µs/op")
	b.ReportMetric(float64((tScan / n).Microseconds()), "scan-µs/op")
	b.Logf("files read %v of %d; %d MB of events", read.Files, files, read.Bytes>>20)

	if os.Getenv("OPCTL_BENCH_BINARY") != "" {
		wholeProcess(b, db, opAt)
	}
}

// wholeProcess builds opctl and runs `opctl where PAY-1` once on the
// benchmark's server, with the operation's message on a kfake cluster.
func wholeProcess(b *testing.B, db *testenv.DB, opAt time.Time) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "opctl")
	if out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	k := testenv.NewKafka(b, map[string]int32{"settlement-event": 1})
	k.Produce(b, "settlement-event", 0, "PAY-1", `{"biz_id":"PAY-1","account_id":"1001","amount":"30.0000000000"}`, nil, opAt)
	cfg := fmt.Sprintf(`mysql:
  dsn: %q
kafka:
  brokers: [%q]
pipelines:
  - name: settlement
    topic: settlement-event
    group: settlement-consumer
    partitioner: murmur2
    steps:
      - name: debit
        kind: local
        binlog: {table: account_balance, key: account_id, delta: balance, message_key: "$.account_id", message_delta: "-$.amount", transaction: ledger_entry.biz_order_id, window: 1s}
      - name: ledger
        kind: local
        evidence: "SELECT id, direction, amount, created_at FROM ledger_entry WHERE biz_order_id = ?"
`, strings.Replace(db.DSN, "multiStatements=true", "", 1), k.Brokers[0])
	path := filepath.Join(dir, "opctl.yaml")
	testenv.Must(b, os.WriteFile(path, []byte(cfg), 0o600), "write config")
	t0 := time.Now()
	out, err := exec.Command(bin, "--config", path, "where", "PAY-1", "-o", "json").CombinedOutput()
	el := time.Since(t0)
	b.Logf("whole process: opctl where PAY-1 in %s (exit %v)", el.Round(time.Millisecond), err)
	if !strings.Contains(string(out), `"DUPLICATE_EFFECT"`) {
		b.Fatalf("where did not say DUPLICATE_EFFECT:\n%s", out)
	}
	b.ReportMetric(float64(el.Milliseconds()), "where-ms")
}
