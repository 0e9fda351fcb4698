package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Kafka is an in-process kfake cluster reached over TCP on 127.0.0.1. The
// helpers drive it with sarama exactly as a real cluster would be driven:
// no mocks, no kfake back doors.
type Kafka struct {
	// Brokers are the cluster's listen addresses ("127.0.0.1:port").
	Brokers []string
	// Cluster is the kfake cluster, for tests that need to stop it early.
	Cluster *kfake.Cluster

	mu       sync.Mutex
	client   sarama.Client
	producer sarama.SyncProducer
}

// NewKafka starts a one-broker kfake cluster on a random loopback port with
// the given topics (name → partition count) and closes it when the test
// ends.
func NewKafka(t testing.TB, topics map[string]int32) *Kafka {
	t.Helper()
	return NewKafkaWith(t, topics)
}

// NewKafkaWith is NewKafka with more kfake options (a listener that can
// freeze: NewFreezableKafka).
func NewKafkaWith(t testing.TB, topics map[string]int32, extra ...kfake.Opt) *Kafka {
	t.Helper()
	opts := append([]kfake.Opt{kfake.NumBrokers(1), kfake.Ports(0)}, extra...)
	names := make([]string, 0, len(topics))
	for name := range topics {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		opts = append(opts, kfake.SeedTopics(topics[name], name))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("testenv: start kfake: %v", err)
	}
	k := &Kafka{Brokers: c.ListenAddrs(), Cluster: c}
	t.Cleanup(k.close)
	return k
}

func (k *Kafka) close() {
	k.mu.Lock()
	if k.producer != nil {
		_ = k.producer.Close()
		k.producer = nil
	}
	if k.client != nil {
		_ = k.client.Close()
		k.client = nil
	}
	k.mu.Unlock()
	k.Cluster.Close()
}

// Config is a sarama configuration for the helpers: protocol 3.5, short
// timeouts, manual partitioning, acks=all.
func (k *Kafka) Config(clientID string) *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V3_5_0_0
	c.ClientID = clientID
	c.Net.DialTimeout = 5 * time.Second
	c.Net.ReadTimeout = 10 * time.Second
	c.Net.WriteTimeout = 5 * time.Second
	c.Metadata.AllowAutoTopicCreation = false
	c.Metadata.Retry.Backoff = 50 * time.Millisecond
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Retry.Backoff = 50 * time.Millisecond
	return c
}

func (k *Kafka) sarama(t testing.TB) (sarama.Client, sarama.SyncProducer) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.client == nil {
		c, err := sarama.NewClient(k.Brokers, k.Config("testenv"))
		if err != nil {
			t.Fatalf("testenv: sarama client: %v", err)
		}
		p, err := sarama.NewSyncProducerFromClient(c)
		if err != nil {
			_ = c.Close()
			t.Fatalf("testenv: sarama producer: %v", err)
		}
		k.client, k.producer = c, p
	}
	return k.client, k.producer
}

// Produce writes one record to topic/partition with the given key, value,
// headers and record timestamp (CreateTime; now when ts is zero) and
// returns its offset. An empty key is sent as a null key.
func (k *Kafka) Produce(t testing.TB, topic string, partition int32, key, value string, headers map[string]string, ts time.Time) int64 {
	t.Helper()
	_, p := k.sarama(t)
	if ts.IsZero() {
		ts = time.Now()
	}
	msg := &sarama.ProducerMessage{
		Topic:     topic,
		Partition: partition,
		Value:     sarama.StringEncoder(value),
		Timestamp: ts,
	}
	if key != "" {
		msg.Key = sarama.StringEncoder(key)
	}
	names := make([]string, 0, len(headers))
	for h := range headers {
		names = append(names, h)
	}
	sort.Strings(names)
	for _, h := range names {
		msg.Headers = append(msg.Headers, sarama.RecordHeader{Key: []byte(h), Value: []byte(headers[h])})
	}
	gotPart, off, err := p.SendMessage(msg)
	if err != nil {
		t.Fatalf("testenv: produce to %s/%d: %v", topic, partition, err)
	}
	if gotPart != partition {
		t.Fatalf("testenv: produced to partition %d, asked for %d", gotPart, partition)
	}
	return off
}

// ProduceBatch writes one zstd-compressed record batch to topic/partition:
// one record per key (value "v-"+key, record timestamp ts, now when zero),
// as a batching producer (the Java client, librdkafka) does. It returns the
// records' offsets, in key order.
func (k *Kafka) ProduceBatch(t testing.TB, topic string, partition int32, keys []string, ts time.Time) []int64 {
	t.Helper()
	if ts.IsZero() {
		ts = time.Now()
	}
	conf := k.Config("testenv-batch")
	conf.Producer.Compression = sarama.CompressionZSTD
	conf.Producer.Flush.Messages = len(keys)
	conf.Producer.Flush.Frequency = 5 * time.Second
	p, err := sarama.NewAsyncProducer(k.Brokers, conf)
	if err != nil {
		t.Fatalf("testenv: batch producer: %v", err)
	}
	defer p.Close()
	for i, key := range keys {
		p.Input() <- &sarama.ProducerMessage{
			Topic: topic, Partition: partition, Timestamp: ts, Metadata: i,
			Key: sarama.StringEncoder(key), Value: sarama.StringEncoder("v-" + key),
		}
	}
	offs := make([]int64, len(keys))
	for range keys {
		select {
		case m := <-p.Successes():
			offs[m.Metadata.(int)] = m.Offset
		case perr := <-p.Errors():
			t.Fatalf("testenv: batch produce to %s/%d: %v", topic, partition, perr.Err)
		case <-time.After(20 * time.Second):
			t.Fatalf("testenv: batch produce to %s/%d timed out", topic, partition)
		}
	}
	return offs
}

// Commit commits offset for group on topic/partition as a group with no
// active member does (an admin-style OffsetCommit with generation -1 and no
// member id, sent to the group's coordinator).
func (k *Kafka) Commit(t testing.TB, group, topic string, partition int32, offset int64) {
	t.Helper()
	c, _ := k.sarama(t)
	coord, err := c.Coordinator(group)
	if err != nil {
		t.Fatalf("testenv: coordinator of %s: %v", group, err)
	}
	req := sarama.NewOffsetCommitRequest(c.Config(), group)
	req.ConsumerGroupGeneration = sarama.GroupGenerationUndefined
	req.ConsumerID = ""
	req.AddBlockWithLeaderEpoch(topic, partition, offset, -1, 0, "")
	resp, err := coord.CommitOffset(req)
	if err != nil {
		t.Fatalf("testenv: commit %s %s/%d@%d: %v", group, topic, partition, offset, err)
	}
	if kerr := resp.Errors[topic][partition]; !errors.Is(kerr, sarama.ErrNoError) {
		t.Fatalf("testenv: commit %s %s/%d@%d: %v", group, topic, partition, offset, kerr)
	}
}

// DeleteRecords advances the log start of topic/partition to before, as
// retention would (a DeleteRecords request through sarama's ClusterAdmin;
// kfake implements it).
func (k *Kafka) DeleteRecords(t testing.TB, topic string, partition int32, before int64) {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(k.Brokers, k.Config("testenv-admin"))
	if err != nil {
		t.Fatalf("testenv: cluster admin: %v", err)
	}
	defer admin.Close()
	if err := admin.DeleteRecords(topic, map[int32]int64{partition: before}); err != nil {
		t.Fatalf("testenv: delete records %s/%d before %d: %v", topic, partition, before, err)
	}
}

// JoinGroup starts a real sarama consumer group member with the given client
// id, subscribed to topics, and returns once it holds an assignment (the
// group is then Stable). The member consumes nothing on purpose: it holds
// its partitions, heartbeating, without committing, until stop is called.
func (k *Kafka) JoinGroup(t testing.TB, group string, topics []string, clientID string) (stop func()) {
	t.Helper()
	conf := k.Config(clientID)
	conf.Consumer.Return.Errors = false
	conf.Consumer.Offsets.Initial = sarama.OffsetOldest
	conf.Consumer.Offsets.AutoCommit.Enable = false
	conf.Consumer.Group.Session.Timeout = 10 * time.Second
	conf.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	conf.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	cg, err := sarama.NewConsumerGroup(k.Brokers, group, conf)
	if err != nil {
		t.Fatalf("testenv: consumer group %s: %v", group, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &holdHandler{ready: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		var err error
		for ctx.Err() == nil {
			if err = cg.Consume(ctx, topics, h); err != nil && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
			}
		}
		done <- err
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			_ = cg.Close()
		})
	}
	t.Cleanup(stop)
	select {
	case <-h.ready:
	case <-time.After(20 * time.Second):
		stop()
		t.Fatalf("testenv: %s did not join group %s within 20s", clientID, group)
	}
	return stop
}

// holdHandler is a sarama.ConsumerGroupHandler that signals once it has an
// assignment and then holds its claims without marking anything.
type holdHandler struct {
	once  sync.Once
	ready chan struct{}
}

func (h *holdHandler) Setup(sarama.ConsumerGroupSession) error {
	h.once.Do(func() { close(h.ready) })
	return nil
}

func (h *holdHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *holdHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for {
		select {
		case _, ok := <-c.Messages():
			if !ok {
				return nil
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

// String names the cluster for test logs.
func (k *Kafka) String() string { return fmt.Sprintf("kfake%v", k.Brokers) }

// MockCluster is librdkafka's mock cluster (a Kafka implementation nobody
// here wrote: it answers ApiVersions, but not DescribeGroups, and its
// ListOffsets answers from version 4 on do not decode), run by Debian's
// kcat with -X test.mock.num.brokers=N. It lives as long as the kcat
// process, which is held by an open stdin; producing and committing go
// through franz-go's kgo, a client that is not opctl's either.
type MockCluster struct {
	// Brokers are the mock's listeners, read from kcat's log line "Mock
	// cluster enabled: original bootstrap.servers and security.protocol
	// ignored and replaced with A,B,C".
	Brokers []string

	cl *kgo.Client
}

// mockListeners is the log line that names the mock cluster's listeners.
const mockListeners = "replaced with "

// NewMockCluster starts kcat's mock cluster with brokers brokers, and
// stops it when the test ends. Without kcat the test is skipped, except
// in CI (.ci/run installs it).
func NewMockCluster(t testing.TB, brokers int) *MockCluster {
	t.Helper()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if InCI() {
			t.Fatal("testenv: kcat is not installed; .ci/run should have installed it (apt-get install kcat)")
		}
		t.Skip("SKIPPING: kcat is not installed (apt-get install kcat)")
	}
	// A producer that never produces (stdin stays open) keeps the mock up;
	// its topic is never created by it.
	cmd := exec.Command(kcat, "-X", fmt.Sprintf("test.mock.num.brokers=%d", brokers), "-b", "127.0.0.1:1", "-P", "-t", "opctl-testenv-idle")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start kcat: %v", err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, mockListeners); i >= 0 && !sent {
				found <- strings.Split(strings.TrimSpace(line[i+len(mockListeners):]), ",")
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	m := &MockCluster{}
	select {
	case addrs, ok := <-found:
		if !ok || len(addrs) != brokers {
			t.Fatalf("testenv: kcat's mock cluster did not name %d listeners (%v)", brokers, addrs)
		}
		m.Brokers = addrs
	case <-time.After(20 * time.Second):
		t.Fatal("testenv: kcat's mock cluster did not start within 20 s")
	}
	m.cl, err = kgo.NewClient(kgo.SeedBrokers(m.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.AllowAutoTopicCreation(), kgo.DisableIdempotentWrite(),
		// The mock (librdkafka 2.0) answers ApiVersions up to version 2
		// (Kafka 2.3); kgo does not retry a newer one lower.
		kgo.MaxVersions(kversion.V2_3_0()))
	if err != nil {
		t.Fatalf("testenv: kgo client of the mock cluster: %v", err)
	}
	t.Cleanup(m.cl.Close)
	return m
}

// Produce writes one record with kgo and returns its offset.
func (m *MockCluster) Produce(t testing.TB, topic string, partition int32, key, value string, headers map[string]string, ts time.Time) int64 {
	t.Helper()
	rec := &kgo.Record{Topic: topic, Partition: partition, Key: []byte(key), Value: []byte(value), Timestamp: ts}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(headers[k])})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := m.cl.ProduceSync(ctx, rec).First()
	if err != nil {
		t.Fatalf("testenv: produce to the mock cluster: %v", err)
	}
	return r.Offset
}

// Commit commits offset for group on topic/partition with kgo, as a
// consumer outside a group generation does (simple commit).
func (m *MockCluster) Commit(t testing.TB, group, topic string, partition int32, offset int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		t.Fatalf("testenv: commit to the mock cluster: %v", err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("testenv: commit %s/%d to the mock cluster: %v", topic, partition, err)
			}
		}
	}
}
