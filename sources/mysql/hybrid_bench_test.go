package mysql

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources/config"
)

// benchOps is the number of operations in the tables of BenchmarkWatchRead.
const benchOps = 20000

// watchReadMode is one way a watch batch's MySQL rows are read.
type watchReadMode struct {
	name string
	read func(ctx context.Context, r *Reader, p *config.Pipeline, ids []string) error
}

var watchReadModes = []watchReadMode{
	{"per-operation", readEach},
	{"hybrid", func(ctx context.Context, r *Reader, p *config.Pipeline, ids []string) error {
		_, _, err := r.ReadOperationsHybrid(ctx, p, "opctl_audit", ids)
		return err
	}},
	{"batched", func(ctx context.Context, r *Reader, p *config.Pipeline, ids []string) error {
		_, _, err := r.ReadOperations(ctx, p, "opctl_audit", ids)
		return err
	}},
}

// readEach reads ids as sources.Collector.CollectMany did before the
// hybrid read: each with ReadOperation, 8 operations at a time
// (sources' manyReading).
func readEach(ctx context.Context, r *Reader, p *config.Pipeline, ids []string) error {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := r.ReadOperation(ctx, p, "opctl_audit", id); err != nil && !isPartial(err) {
				mu.Lock()
				first = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

func isPartial(err error) bool {
	pe, ok := err.(interface{ Partial() bool })
	return ok && pe.Partial()
}

// BenchmarkWatchRead reads watch batches of 64 and 512 consecutive
// operations of 20,000 (the lab's settlement pipeline, and each seed's
// preset on its own schema, with hybridCases' data) per operation (as
// the watch did: ReadOperation, 8 at a time), hybrid (ReadOperationsHybrid:
// what the watch does, docs/watch.md#how-it-works) and fully batched
// (ReadOperations: reconcile's). It reports the statements and the rows
// the server read (Handler_read_*, counted on a Reader of one connection
// over four batches) per operation; ns/op is per batch.
func BenchmarkWatchRead(b *testing.B) {
	for _, c := range hybridCases() {
		b.Run(c.name, func(b *testing.B) {
			db, r := loadCase(b, c, benchOps)
			db.Exec(b, "ANALYZE TABLE "+analyzeTables(b, db))
			p := c.p(b)
			one, err := Open(db.DSN, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer one.Close()
			one.db.SetMaxOpenConns(1)
			one.db.SetMaxIdleConns(1)
			for _, size := range []int{64, 512} {
				for _, m := range watchReadModes {
					b.Run(fmt.Sprintf("batch=%d/%s", size, m.name), func(b *testing.B) {
						stmts, h := measureRead(b, one, p, c, size, m)
						ctx := context.Background()
						batch := 0
						for b.Loop() {
							if err := m.read(ctx, r, p, batchIDs(c, size, batch)); err != nil {
								b.Fatal(err)
							}
							batch++
						}
						b.ReportMetric(stmts, "stmts/operation")
						b.ReportMetric(h.sum(), "rows/operation")
						b.ReportMetric(h["key"], "key/operation")
						b.ReportMetric(h["rnd_next"], "rnd_next/operation")
					})
				}
			}
		})
	}
}

// batchIDs is the k-th batch of size consecutive operations, wrapping
// around the table.
func batchIDs(c hybridCase, size, k int) []string {
	ids := make([]string, size)
	for i := range ids {
		ids[i] = c.id((k*size+i)%benchOps + 1)
	}
	return ids
}

// measureRead reads four batches (after one that warms the statements
// and the Reader's checks) on r, a Reader of one connection, and returns
// per operation the statements and the server's Handler_read_* counters
// of that connection's session (less what SHOW STATUS itself adds): their
// sum, the rows read as the benchmarks count them (docs/performance.md),
// and apart the index lookups (Handler_read_key) and the rows read in
// sequence (Handler_read_rnd_next: a scan's rows, and each key of a keyed
// batch's JSON_TABLE, which holds no table's row).
func measureRead(b *testing.B, r *Reader, p *config.Pipeline, c hybridCase, size int, m watchReadMode) (stmts float64, h handlerCounts) {
	b.Helper()
	ctx := context.Background()
	if err := m.read(ctx, r, p, batchIDs(c, size, 7)); err != nil {
		b.Fatal(err)
	}
	qs, err := buildQueries(p, "opctl_audit", "x")
	if err != nil {
		b.Fatal(err)
	}
	h0 := sessionReads(b, r)
	h1 := sessionReads(b, r)
	before := r.BatchStats()
	const batches = 4
	for k := range batches {
		if err := m.read(ctx, r, p, batchIDs(c, size, 11+k*3)); err != nil {
			b.Fatal(err)
		}
	}
	h2 := sessionReads(b, r)
	ops := float64(batches * size)
	n := float64(r.BatchStats().Statements - before.Statements)
	if m.name == "per-operation" {
		n = ops * float64(len(qs))
	}
	for k := range h2 {
		h2[k] = (h2[k] - h1[k] - (h1[k] - h0[k])) / ops
	}
	return n / ops, h2
}

// handlerCounts are Handler_read_* counters by name (Handler_read_ cut).
type handlerCounts map[string]float64

func (h handlerCounts) sum() float64 {
	s := 0.0
	for _, v := range h {
		s += v
	}
	return s
}

// sessionReads reads the Handler_read_* counters of r's one connection;
// testenv.HandlerReads is their sum.
func sessionReads(b *testing.B, r *Reader) handlerCounts {
	b.Helper()
	rows, err := r.db.Query("SHOW SESSION STATUS LIKE 'Handler_read%'")
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	h := handlerCounts{}
	for rows.Next() {
		var name string
		var v float64
		if err := rows.Scan(&name, &v); err != nil {
			b.Fatal(err)
		}
		h[strings.TrimPrefix(name, "Handler_read_")] = v
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return h
}

// analyzeTables lists the database's tables, for ANALYZE TABLE.
func analyzeTables(b *testing.B, db *testenv.DB) string {
	b.Helper()
	rows, err := db.SQL.Query("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	list := ""
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			b.Fatal(err)
		}
		if list != "" {
			list += ", "
		}
		list += config.QuoteIdent(name)
	}
	return list
}
