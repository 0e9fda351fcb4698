package mysql

import (
	"context"
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
