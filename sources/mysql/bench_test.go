package mysql

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/opctl-dev/opctl/lab/testenv"
)

// benchReader loads the settlement incident (with an audit table, as in
// production) for the benchmarks.
// With rtt > 0 the Reader reaches the server through a proxy that delays
// every client packet by rtt, as a server across a network would.
func benchReader(b *testing.B, rtt time.Duration) *Reader {
	r, err := Open(benchDSN(b, rtt), 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	return r
}

// benchDSN is a database with seed 000, reached through a proxy adding rtt
// when rtt > 0.
func benchDSN(b *testing.B, rtt time.Duration) string {
	db := testenv.MySQL(b)
	db.ExecFile(b, "../../testdata/schema/settlement.sql")
	db.ExecFile(b, "../../testdata/incidents/settlement.sql")
	db.Exec(b, auditDDL)
	dsn := db.DSN
	if rtt > 0 {
		cfg, err := gomysql.ParseDSN(dsn)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Addr = delayProxy(b, cfg.Addr, rtt)
		dsn = cfg.FormatDSN()
	}
	return dsn
}

func BenchmarkReadOperation(b *testing.B) {
	b.Run("local", func(b *testing.B) { benchRead(b, 0) })
	b.Run("rtt=1ms", func(b *testing.B) { benchRead(b, time.Millisecond) })
}

func benchRead(b *testing.B, rtt time.Duration) {
	r := benchReader(b, rtt)
	p := settlementPipeline()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ev, err := r.ReadOperation(ctx, p, "opctl_audit", "PAY-1")
		if err != nil || len(ev.Steps[0].Rows) != 2 {
			b.Fatalf("read: %v", err)
		}
	}
	s := r.Stats()
	b.ReportMetric(float64(s.Statements), "stmts/op")
	b.ReportMetric(float64(s.CriticalPath), "critical-path")
}

// BenchmarkSequentialBaseline runs the same statements as
// BenchmarkReadOperation one after another, on the same cached prepared
// statements: the cost ReadOperation avoids by issuing them at once.
func BenchmarkSequentialBaseline(b *testing.B) {
	b.Run("local", func(b *testing.B) { benchSequential(b, 0) })
	b.Run("rtt=1ms", func(b *testing.B) { benchSequential(b, time.Millisecond) })
}

func benchSequential(b *testing.B, rtt time.Duration) {
	r := benchReader(b, rtt)
	qs, err := buildQueries(settlementPipeline(), "opctl_audit", "PAY-1")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for _, q := range qs {
			if res := r.fetch(ctx, q.text, MaxRows, q.args...); res.err != nil {
				b.Fatal(res.err)
			}
		}
	}
	b.ReportMetric(float64(len(qs)), "stmts/op")
	b.ReportMetric(float64(len(qs)), "critical-path")
}

// delayProxy forwards TCP connections to target, holding each chunk the
// client sends for rtt before passing it on. It stops with the benchmark.
func delayProxy(b *testing.B, target string, rtt time.Duration) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	b.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			wg.Go(func() {
				defer s.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						time.Sleep(rtt)
						if _, werr := s.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
			wg.Go(func() {
				defer c.Close()
				_, _ = io.Copy(c, s)
			})
		}
	})
	return l.Addr().String()
}

// BenchmarkReadOperations reads batches of 256 settlement operations (of
// 20,000 in the tables: a state row, a debit, a ledger row and an acked
// intent each, and an audit table) with one ReadOperations call: keyed, each
// query joined with the batch's keys; union, each query a UNION ALL of a
// branch per operation (docs/reconcile.md#how-the-work-is-bounded).
func BenchmarkReadOperations(b *testing.B) {
	db := testenv.MySQL(b)
	db.ExecFile(b, "../../testdata/schema/settlement.sql")
	db.Exec(b, auditDDL)
	const ops = 20000
	db.Exec(b, `INSERT INTO biz_operation (biz_id, status, version, msg_id, created_at, updated_at)
		SELECT CONCAT('PAY-', LPAD(seq, 6, '0')), 'LEDGER_DONE', 2, CONCAT('m-', seq), NOW(3), NOW(3) FROM seq_1_to_20000`)
	db.Exec(b, `INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at)
		SELECT CONCAT('PAY-', LPAD(seq, 6, '0')), seq, -1.00, 'DEBIT', NOW(3) FROM seq_1_to_20000`)
	db.Exec(b, `INSERT INTO ledger_entry (biz_order_id, direction, amount, created_at)
		SELECT CONCAT('PAY-', LPAD(seq, 6, '0')), 'OUT', 1.00, NOW(3) FROM seq_1_to_20000`)
	db.Exec(b, `INSERT INTO step_intent (request_id, biz_id, step, attempt, sent_at, acked_at, result)
		SELECT CONCAT('r-', seq), CONCAT('PAY-', LPAD(seq, 6, '0')), 'notify', 1, NOW(3), NOW(3), 'OK' FROM seq_1_to_20000`)
	db.Exec(b, "ANALYZE TABLE biz_operation, balance_journal, ledger_entry, step_intent, opctl_audit")
	p := settlementPipeline()
	for _, form := range []string{"keyed", "union"} {
		b.Run(form, func(b *testing.B) {
			r, err := Open(db.DSN, 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			r.unionOnly = form == "union"
			ctx := context.Background()
			batch := 0
			for b.Loop() {
				ids := make([]string, 256)
				for i := range ids {
					ids[i] = fmt.Sprintf("PAY-%06d", (batch*256+i)%ops+1)
				}
				batch++
				evs, errs, err := r.ReadOperations(ctx, p, "opctl_audit", ids)
				if err != nil || errs[0] != nil || !evs[0].State.Found || len(evs[255].Steps[0].Rows) != 1 {
					b.Fatalf("read: %v %v", err, errs[0])
				}
			}
			st := r.BatchStats()
			b.ReportMetric(float64(st.Statements)/float64(st.Batches), "stmts/batch")
			b.ReportMetric(float64(st.Keyed)/float64(st.Batches), "keyed/batch")
		})
	}
}
