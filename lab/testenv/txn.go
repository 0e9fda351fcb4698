package testenv

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Txn is a transactional producer that is not opctl's: franz-go's kgo with
// a transactional id, writing records in transactions it commits or aborts
// (the cluster writes the control records that end them).
type Txn struct {
	t  testing.TB
	cl *kgo.Client
}

// Transactional starts a transactional producer with the given
// transactional id; it is closed when the test ends (a transaction left
// open is then aborted by the cluster after its timeout).
func (k *Kafka) Transactional(t testing.TB, id string) *Txn {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(k.Brokers...),
		kgo.TransactionalID(id),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)
	if err != nil {
		t.Fatalf("testenv: transactional producer %s: %v", id, err)
	}
	t.Cleanup(cl.Close)
	return &Txn{t: t, cl: cl}
}

// Begin starts a transaction.
func (x *Txn) Begin() {
	x.t.Helper()
	if err := x.cl.BeginTransaction(); err != nil {
		x.t.Fatalf("testenv: begin transaction: %v", err)
	}
}

// Produce writes one record in the current transaction to topic/partition
// with the given key, value, headers and record timestamp (now when ts is
// zero), waits for it to be written, and returns its offset. Each call
// writes its own record batch, uncompressed.
func (x *Txn) Produce(topic string, partition int32, key, value string, headers map[string]string, ts time.Time) int64 {
	x.t.Helper()
	if ts.IsZero() {
		ts = time.Now()
	}
	r := &kgo.Record{Topic: topic, Partition: partition, Key: []byte(key), Value: []byte(value), Timestamp: ts}
	names := make([]string, 0, len(headers))
	for h := range headers {
		names = append(names, h)
	}
	sort.Strings(names)
	for _, h := range names {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h, Value: []byte(headers[h])})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := x.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		x.t.Fatalf("testenv: transactional produce to %s/%d: %v", topic, partition, err)
	}
	return r.Offset
}

// End commits the current transaction (commit true) or aborts it.
func (x *Txn) End(commit bool) {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := x.cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		x.t.Fatalf("testenv: end transaction (commit %v): %v", commit, err)
	}
}
