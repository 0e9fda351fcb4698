package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// wait bounds every wait on the cluster or a client: a test that waits
// longer has failed (nothing here is a timing assertion).
const wait = 30 * time.Second

func startCluster(t *testing.T, topics map[string]int32) *Cluster {
	t.Helper()
	c, err := Start(topics)
	if err != nil {
		t.Fatalf("Start(%v): %v", topics, err)
	}
	t.Cleanup(c.Close)
	return c
}

// config is a sarama configuration as the lab's consumers use it: protocol
// 3.5, manual commits, short poll and backoffs (an outage is seen through
// every retry of every request, so they are short).
func config(clientID string) *sarama.Config {
	conf := sarama.NewConfig()
	conf.Version = sarama.V3_5_0_0
	conf.ClientID = clientID
	conf.Metadata.Retry.Backoff = 10 * time.Millisecond
	conf.Producer.Partitioner = sarama.NewManualPartitioner
	conf.Producer.RequiredAcks = sarama.WaitForAll
	conf.Producer.Return.Successes = true
	conf.Producer.Retry.Max = 1
	conf.Producer.Retry.Backoff = 10 * time.Millisecond
	conf.Consumer.Return.Errors = true
	conf.Consumer.Offsets.Initial = sarama.OffsetOldest
	conf.Consumer.Offsets.AutoCommit.Enable = false
	// Requests on one connection are answered in order, and sarama
	// shares one connection per broker: a commit (and a heartbeat) waits
	// behind the partition's long-poll fetch, so the poll is short. A
	// heartbeat every 100ms notices a rebalance or an outage at once.
	conf.Consumer.MaxWaitTime = 20 * time.Millisecond
	conf.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	conf.Consumer.Group.Session.Timeout = 6 * time.Second // kfake's minimum
	return conf
}

func producer(t *testing.T, c *Cluster) sarama.SyncProducer {
	t.Helper()
	p, err := sarama.NewSyncProducer(c.Brokers, config("test-producer"))
	if err != nil {
		t.Fatalf("sarama producer on %v: %v", c.Brokers, err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func produce(t *testing.T, p sarama.SyncProducer, topic string, partition int32, value string) int64 {
	t.Helper()
	_, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: partition, Key: sarama.StringEncoder(value), Value: sarama.StringEncoder(value)})
	if err != nil {
		t.Fatalf("produce %q to %s/%d: %v", value, topic, partition, err)
	}
	return off
}

// member is one sarama consumer group member that consumes in a loop (as
// the lab's consumers do): each message is marked and, when commit is set,
// committed with session.Commit() before it is reported on processed.
type member struct {
	cg        sarama.ConsumerGroup
	processed chan *sarama.ConsumerMessage
	setups    chan int32 // generation of each session
	ended     chan error // cause of each session's end
	errs      chan error // ConsumerGroup.Errors()
	consume   chan error // non-nil errors returned by Consume
	stop      func()
}

type handler struct {
	m      *member
	commit bool
}

func (h handler) Setup(s sarama.ConsumerGroupSession) error {
	h.m.setups <- s.GenerationID()
	return nil
}

func (h handler) Cleanup(s sarama.ConsumerGroupSession) error {
	h.m.ended <- context.Cause(s.Context())
	return nil
}

func (h handler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		s.MarkMessage(msg, "")
		if h.commit {
			s.Commit()
		}
		h.m.processed <- msg
	}
	return nil
}

func startMember(t *testing.T, c *Cluster, group, topic string, conf *sarama.Config, commit bool) *member {
	t.Helper()
	cg, err := sarama.NewConsumerGroup(c.Brokers, group, conf)
	if err != nil {
		t.Fatalf("consumer group %s on %v: %v", group, c.Brokers, err)
	}
	m := &member{
		cg:        cg,
		processed: make(chan *sarama.ConsumerMessage, 100),
		setups:    make(chan int32, 100),
		ended:     make(chan error, 100),
		errs:      make(chan error, 1000),
		consume:   make(chan error, 1000),
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, handler{m, commit}); err != nil {
				select {
				case m.consume <- err:
				default:
				}
				select { // back off before rejoining
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
	})
	var errsDone sync.WaitGroup
	errsDone.Go(func() {
		for err := range cg.Errors() {
			select {
			case m.errs <- err:
			default:
			}
		}
	})
	var once sync.Once
	m.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			_ = cg.Close()
			errsDone.Wait()
		})
	}
	t.Cleanup(m.stop)
	return m
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		var zero T
		t.Fatalf("no %s within %s", what, wait)
		return zero
	}
}

func wantCommitted(t *testing.T, c *Cluster, group, topic string, partition int32, want int64) {
	t.Helper()
	got, ok := c.CommittedOffset(group, topic, partition)
	if !ok || got != want {
		t.Fatalf("committed offset of %s on %s/%d = %d (found %v), want %d", group, topic, partition, got, ok, want)
	}
}

func TestStartRejectsBadTopics(t *testing.T) {
	for _, topics := range []map[string]int32{{"": 1}, {"t": 0}, {"t": -3}} {
		if c, err := Start(topics); err == nil {
			c.Close()
			t.Errorf("Start(%v) succeeded, want an error", topics)
		}
	}
}

func TestProduceConsumeWithSarama(t *testing.T) {
	t.Parallel()
	c := startCluster(t, map[string]int32{"settlement-event": 8, "order-event": 2})
	if len(c.Brokers) != 1 {
		t.Fatalf("Brokers = %v, want one", c.Brokers)
	}

	client, err := sarama.NewClient(c.Brokers, config("test-meta"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for topic, want := range map[string]int{"settlement-event": 8, "order-event": 2} {
		parts, err := client.Partitions(topic)
		if err != nil || len(parts) != want {
			t.Errorf("partitions of %s = %v (%v), want %d", topic, parts, err, want)
		}
	}

	p := producer(t, c)
	for i := range 3 {
		if off := produce(t, p, "settlement-event", 5, fmt.Sprint("PAY-", i)); off != int64(i) {
			t.Errorf("message %d got offset %d", i, off)
		}
	}
	if start, end, ok := c.LogBounds("settlement-event", 5); !ok || start != 0 || end != 3 {
		t.Errorf("LogBounds = %d, %d, %v; want 0, 3", start, end, ok)
	}
	if _, _, ok := c.LogBounds("settlement-event", 99); ok {
		t.Error("LogBounds of a missing partition reported ok")
	}

	if _, ok := c.CommittedOffset("settlement-consumer", "settlement-event", 5); ok {
		t.Error("CommittedOffset of a group that does not exist reported ok")
	}
	m := startMember(t, c, "settlement-consumer", "settlement-event", config("test-consumer"), true)
	for i := range 3 {
		msg := recv(t, m.processed, "message")
		if msg.Partition != 5 || msg.Offset != int64(i) || string(msg.Value) != fmt.Sprint("PAY-", i) {
			t.Errorf("message %d: %s/%d@%d %q", i, msg.Topic, msg.Partition, msg.Offset, msg.Value)
		}
	}
	wantCommitted(t, c, "settlement-consumer", "settlement-event", 5, 3)
	if _, ok := c.CommittedOffset("settlement-consumer", "settlement-event", 4); ok {
		t.Error("CommittedOffset of an uncommitted partition reported ok")
	}

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	gs, err := c.WaitGroupStable(ctx, "settlement-consumer", 1)
	if err != nil {
		t.Fatal(err)
	}
	for id, clientID := range gs.Members {
		if clientID != "test-consumer" || len(gs.Assignment[id]["settlement-event"]) != 8 {
			t.Errorf("member %s (%s) assignment %v", id, clientID, gs.Assignment[id])
		}
	}
	select {
	case err := <-m.errs:
		t.Errorf("consumer error without a fault: %v", err)
	default:
	}
}

func TestCreateTopicAndNoAutoCreate(t *testing.T) {
	t.Parallel()
	c := startCluster(t, map[string]int32{"a": 1})
	p := producer(t, c)

	_, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "late", Partition: 0, Value: sarama.StringEncoder("x")})
	if !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		t.Fatalf("produce to a topic never created: %v, want UNKNOWN_TOPIC_OR_PARTITION (auto-create off)", err)
	}
	if err := c.CreateTopic("late", 3); err != nil {
		t.Fatal(err)
	}
	if off := produce(t, p, "late", 2, "x"); off != 0 {
		t.Errorf("offset %d", off)
	}
	if err := c.CreateTopic("late", 3); err == nil {
		t.Error("creating an existing topic succeeded")
	}
	if err := c.CreateTopic("zero", 0); err == nil {
		t.Error("a topic with 0 partitions was created")
	}
}

func TestDeleteRecords(t *testing.T) {
	t.Parallel()
	c := startCluster(t, map[string]int32{"t": 1})
	p := producer(t, c)
	for i := range 4 {
		produce(t, p, "t", 0, fmt.Sprint(i))
	}
	if err := c.DeleteRecords("t", 0, 2); err != nil {
		t.Fatal(err)
	}
	if start, end, _ := c.LogBounds("t", 0); start != 2 || end != 4 {
		t.Errorf("after DeleteRecords: log %d..%d, want 2..4", start, end)
	}
	m := startMember(t, c, "g", "t", config("test-consumer"), true)
	if msg := recv(t, m.processed, "message"); msg.Offset != 2 {
		t.Errorf("first message read at %d, want 2 (the new log start)", msg.Offset)
	}
	if err := c.DeleteRecords("nope", 0, 1); err == nil {
		t.Error("DeleteRecords on a missing topic succeeded")
	}
}

// TestFailCommits reproduces seed 000: the consumer processes a message and
// its commit is refused; it dies before the broker is back; the next member
// gets the message again. Then a commit after restore succeeds.
func TestFailCommits(t *testing.T) {
	t.Parallel()
	const group, topic = "settlement-consumer", "settlement-event"
	c := startCluster(t, map[string]int32{topic: 1})
	p := producer(t, c)

	produce(t, p, topic, 0, "PAY-0")
	a := startMember(t, c, group, topic, config("consumer-a"), true)
	recv(t, a.processed, "PAY-0")
	wantCommitted(t, c, group, topic, 0, 1)

	restore := c.FailCommits(group)

	produce(t, p, topic, 0, "PAY-1")
	if msg := recv(t, a.processed, "PAY-1"); msg.Offset != 1 {
		t.Fatalf("PAY-1 at offset %d", msg.Offset)
	}
	// session.Commit() returned (it returns nothing); the refusal is
	// reported on ConsumerGroup.Errors().
	err := recv(t, a.errs, "commit error")
	var cerr *sarama.ConsumerError
	if !errors.As(err, &cerr) || cerr.Topic != topic || cerr.Partition != 0 || !errors.Is(cerr.Err, sarama.ErrRequestTimedOut) {
		t.Fatalf("consumer error %#v (%v), want a ConsumerError for %s/0 with ErrRequestTimedOut", err, err, topic)
	}
	wantCommitted(t, c, group, topic, 0, 1)

	// Other groups commit as usual.
	other, err := sarama.NewClient(c.Brokers, config("other"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	coord, err := other.Coordinator("other-group")
	if err != nil {
		t.Fatal(err)
	}
	req := sarama.NewOffsetCommitRequest(other.Config(), "other-group")
	req.ConsumerGroupGeneration = sarama.GroupGenerationUndefined
	req.AddBlockWithLeaderEpoch(topic, 0, 2, -1, 0, "")
	resp, err := coord.CommitOffset(req)
	if err != nil || !errors.Is(resp.Errors[topic][0], sarama.ErrNoError) {
		t.Fatalf("commit of another group during FailCommits(%s): %v, %v", group, resp, err)
	}
	wantCommitted(t, c, "other-group", topic, 0, 2)

	// The member goes away while commits still fail (seed 000's consumer
	// restarting during the blip): its mark of offset 2 is lost.
	a.stop()
	wantCommitted(t, c, group, topic, 0, 1)

	restore()
	restore() // safe twice

	b := startMember(t, c, group, topic, config("consumer-b"), true)
	msg := recv(t, b.processed, "redelivered PAY-1")
	if msg.Offset != 1 || string(msg.Value) != "PAY-1" {
		t.Fatalf("member b first read %s@%d, want PAY-1@1 again", msg.Value, msg.Offset)
	}
	wantCommitted(t, c, group, topic, 0, 2)
	select {
	case err := <-b.errs:
		t.Errorf("consumer error after restore: %v", err)
	default:
	}
}

// TestFailCommitsAutoCommitRetries shows that sarama keeps a refused mark
// and commits it by itself once the broker accepts commits again.
func TestFailCommitsAutoCommitRetries(t *testing.T) {
	t.Parallel()
	const group, topic = "order-consumer", "order-event"
	c := startCluster(t, map[string]int32{topic: 1})
	p := producer(t, c)

	restore := c.FailCommits(group)
	defer restore()
	conf := config("consumer")
	conf.Consumer.Offsets.AutoCommit.Enable = true
	conf.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	m := startMember(t, c, group, topic, conf, false)
	produce(t, p, topic, 0, "8821")
	recv(t, m.processed, "message")

	// Two refused flushes: sarama retries on its own.
	for i := range 2 {
		err := recv(t, m.errs, "commit error")
		if !errors.Is(err, sarama.ErrRequestTimedOut) {
			t.Fatalf("error %d: %v, want ErrRequestTimedOut", i, err)
		}
	}
	if off, ok := c.CommittedOffset(group, topic, 0); ok {
		t.Fatalf("offset %d committed while commits fail", off)
	}
	restore()
	for range int(wait / (20 * time.Millisecond)) {
		if off, ok := c.CommittedOffset(group, topic, 0); ok {
			if off != 1 {
				t.Fatalf("committed %d, want 1", off)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the refused mark was not committed within %s after restore", wait)
}

func TestOutage(t *testing.T) {
	t.Parallel()
	const group, topic = "fulfilment-consumer", "order-fulfilment"
	c := startCluster(t, map[string]int32{topic: 1})
	p := producer(t, c)

	produce(t, p, topic, 0, "F-0")
	m := startMember(t, c, group, topic, config("consumer"), true)
	gen1 := recv(t, m.setups, "first session")
	recv(t, m.processed, "F-0")
	wantCommitted(t, c, group, topic, 0, 1)

	restore := c.Outage()

	// The member's session ends: heartbeat and fetch hit dropped
	// connections; the errors are on ConsumerGroup.Errors().
	cause := recv(t, m.ended, "end of the session")
	if cause == nil {
		t.Error("session ended without a cause")
	}
	t.Logf("session ended: %v", cause)
	t.Logf("first error: %v", recv(t, m.errs, "consumer error"))
	// Rejoining fails until restore.
	err := recv(t, m.consume, "Consume error")
	if !errors.Is(err, sarama.ErrOutOfBrokers) {
		t.Errorf("Consume during the outage: %v, want ErrOutOfBrokers", err)
	}
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder("lost")}); err == nil {
		t.Error("produce succeeded during the outage")
	} else {
		t.Logf("produce during the outage: %v", err)
	}
	if _, err := sarama.NewClient(c.Brokers, config("fresh")); err == nil {
		t.Error("a new client connected during the outage")
	}
	// Assertions read the broker state directly and still work.
	wantCommitted(t, c, group, topic, 0, 1)

	restore()
	restore()

	// Everything recovers without being restarted.
	off := produce(t, p, topic, 0, "F-1")
	gen2 := recv(t, m.setups, "new session")
	if gen2 <= gen1 {
		t.Errorf("generation after rejoin %d, want > %d", gen2, gen1)
	}
	msg := recv(t, m.processed, "F-1")
	if msg.Offset != off || string(msg.Value) != "F-1" {
		t.Errorf("after restore read %s@%d, want F-1@%d", msg.Value, msg.Offset, off)
	}
	wantCommitted(t, c, group, topic, 0, off+1)
	fresh, err := sarama.NewClient(c.Brokers, config("fresh"))
	if err != nil {
		t.Fatalf("new client after restore: %v", err)
	}
	fresh.Close()
}

// TestOutageWinsOverFailCommits: during an outage a refused-commit fault
// does not answer; the connection is dropped like every other request.
func TestOutageWinsOverFailCommits(t *testing.T) {
	t.Parallel()
	const group, topic = "g", "t"
	c := startCluster(t, map[string]int32{topic: 1})
	client, err := sarama.NewClient(c.Brokers, config("admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	coord, err := client.Coordinator(group)
	if err != nil {
		t.Fatal(err)
	}
	commit := func() (*sarama.OffsetCommitResponse, error) {
		req := sarama.NewOffsetCommitRequest(client.Config(), group)
		req.ConsumerGroupGeneration = sarama.GroupGenerationUndefined
		req.AddBlockWithLeaderEpoch(topic, 0, 7, -1, 0, "")
		return coord.CommitOffset(req)
	}
	defer c.FailCommits(group)()
	resp, err := commit()
	if err != nil || !errors.Is(resp.Errors[topic][0], sarama.ErrRequestTimedOut) {
		t.Fatalf("commit under FailCommits: %v, %v; want ErrRequestTimedOut", resp, err)
	}
	restore := c.Outage()
	if _, err := commit(); err == nil {
		t.Error("commit answered during an outage")
	}
	restore()
	_ = coord.Close()
	_ = coord.Open(client.Config())
	resp, err = commit()
	if err != nil || !errors.Is(resp.Errors[topic][0], sarama.ErrRequestTimedOut) {
		t.Fatalf("commit after the outage, FailCommits still on: %v, %v; want ErrRequestTimedOut", resp, err)
	}
	if _, ok := c.CommittedOffset(group, topic, 0); ok {
		t.Error("a refused commit was applied")
	}
}

func TestClose(t *testing.T) {
	c, err := Start(map[string]int32{"t": 1})
	if err != nil {
		t.Fatal(err)
	}
	restore := c.FailCommits("g")
	c.Close()
	c.Close()
	restore()
	if _, ok := c.CommittedOffset("g", "t", 0); ok {
		t.Error("CommittedOffset after Close reported ok")
	}
	if err := c.CreateTopic("x", 1); err == nil {
		t.Error("CreateTopic after Close succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.WaitGroupStable(ctx, "g", 1); err == nil {
		t.Error("WaitGroupStable after Close succeeded")
	}
	if _, err := sarama.NewClient(c.Brokers, config("late")); err == nil {
		t.Error("a client connected to a closed cluster")
	}
}
