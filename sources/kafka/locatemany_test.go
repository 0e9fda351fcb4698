package kafka_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
)

// produceLoad writes n records to each of the topic's first parts
// partitions as a lingering producer does (batches of 8 records, no
// compression): key "PAY-<p>-<i>", a 300-byte value, a msg_id header
// "m-<p>-<i>", stamped from at on, one a second. It returns the records'
// offsets by partition, in order.
func produceLoad(tb testing.TB, k *testenv.Kafka, topic string, parts int32, n int, at time.Time) map[int32][]int64 {
	tb.Helper()
	conf := k.Config("load")
	conf.Producer.Flush.Messages = 8
	conf.Producer.Flush.MaxMessages = 8
	conf.Producer.Flush.Frequency = 50 * time.Millisecond
	prod, err := sarama.NewAsyncProducer(k.Brokers, conf)
	if err != nil {
		tb.Fatal(err)
	}
	defer prod.Close()
	value := `{"amount":30,"pad":"` + strings.Repeat("x", 280) + `"}`
	type meta struct {
		p int32
		i int
	}
	offs := map[int32][]int64{}
	for p := range parts {
		offs[p] = make([]int64, n)
	}
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	wg.Go(func() {
		for range int(parts) * n {
			select {
			case m := <-prod.Successes():
				mt := m.Metadata.(meta)
				offs[mt.p][mt.i] = m.Offset
			case perr := <-prod.Errors():
				select {
				case errc <- perr.Err:
				default:
				}
				return
			}
		}
	})
	for i := range n {
		for p := range parts {
			prod.Input() <- &sarama.ProducerMessage{
				Topic: topic, Partition: p, Timestamp: at.Add(time.Duration(i) * time.Second), Metadata: meta{p, i},
				Key:     sarama.StringEncoder(fmt.Sprintf("PAY-%d-%d", p, i)),
				Value:   sarama.StringEncoder(value),
				Headers: []sarama.RecordHeader{{Key: []byte("msg_id"), Value: []byte(fmt.Sprintf("m-%d-%d", p, i))}},
			}
		}
	}
	wg.Wait()
	select {
	case err := <-errc:
		tb.Fatal(err)
	default:
	}
	return offs
}

// storedLoad is 512 requests at stored positions spread over the last
// quarter of each partition of a 4-partition topic of 4000 records each
// (a watch's batch: recent operations of a busy topic).
func storedLoad(b *testing.B) (*testenv.Kafka, []sources.LocateRequest) {
	const parts, n = 4, 4000
	k := childKafka(b, topic, parts)
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	offs := produceLoad(b, k, topic, parts, n, at)
	rng := rand.New(rand.NewPCG(1, 2))
	reqs := make([]sources.LocateRequest, 512)
	for j := range reqs {
		p := int32(j % parts)
		i := n*3/4 + rng.IntN(n/4)
		reqs[j] = sources.LocateRequest{Topic: topic, Partitioner: "murmur2", Key: []byte(fmt.Sprintf("PAY-%d-%d", p, i)),
			MsgID: fmt.Sprintf("m-%d-%d", p, i), Partition: p, Offset: offs[p][i]}
	}
	return k, reqs
}

// BenchmarkLocateStored512: 512 operations at stored positions, located
// one at a time (Locate) as a CollectMany did, 16 at a time.
func BenchmarkLocateStored512(b *testing.B) {
	k, reqs := storedLoad(b)
	r := newReader(b, k.Brokers, 10*time.Second)
	ctx := context.Background()
	check := func(i int, loc sources.Location, err error) {
		if err != nil || loc.Message == nil {
			b.Fatalf("request %d: %+v, %v", i, loc, err)
		}
	}
	b.Run("Locate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sem := make(chan struct{}, 16)
			var wg sync.WaitGroup
			for i, req := range reqs {
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					loc, err := r.Locate(ctx, req)
					check(i, loc, err)
				})
			}
			wg.Wait()
		}
	})
}
