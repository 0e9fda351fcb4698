package watch

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources"
)

// BenchmarkBinlogMapping maps a stream of 100,000 row changes (1,000
// transactions of 100 rows, over the state, idempotency, scan and entity
// tables of the mapping tests' pipelines) to operations through
// BinlogSource.Changes, as the watch takes them from the follower:
// go test -run '^$' -bench BinlogMapping -benchtime 3x ./reconcile/watch/
func BenchmarkBinlogMapping(b *testing.B) {
	tables := []struct{ schema, table, col string }{
		{"app", "op_state", "biz_id"}, {"app", "consumer_idempotency", "biz_id"}, {"app", "balance_journal", "biz_id"}, {"s3", "orders", "order_id"},
	}
	at := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	var txs []sources.BinlogTx
	for i := 0; i < 1000; i++ {
		tx := sources.BinlogTx{End: sources.BinlogPosition{File: "bin.000001", Pos: uint32(1000 + i)}, CommittedAt: at}
		for j := 0; j < 100; j++ {
			t := tables[j%len(tables)]
			tx.Changes = append(tx.Changes, sources.RowChange{Schema: t.schema, Table: t.table, Kind: sources.ChangeUpdate,
				Values: map[string]string{t.col: "B-" + strconv.Itoa(i*100+j)}})
		}
		txs = append(txs, tx)
	}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		s := &BinlogSource{Pipelines: mapPipelines(), Schema: "app"}
		s.txs, s.running = txs, true // as the follower left them
		out, _, err := s.Changes(ctx, `{"file":"bin.000001","pos":4}`)
		if err != nil || len(out) != 100000 {
			b.Fatalf("%d changes, %v", len(out), err)
		}
	}
	b.ReportMetric(float64(100000*b.N)/b.Elapsed().Seconds(), "rows/s")
}
