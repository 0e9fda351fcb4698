// Package cluster runs the incident lab's Kafka: an in-process
// Kafka-protocol cluster (franz-go's kfake) on loopback ports, which the lab's
// consumers and opctl reach over TCP with sarama exactly as they would reach a
// real broker, plus protocol-level fault injection for the incidents:
//
//   - FailCommits: the group's OffsetCommit requests are answered
//     REQUEST_TIMED_OUT on every partition and nothing is committed (seed
//     000's "broker blip after the RPC, before commitSync");
//   - Outage: every request from every client has its connection dropped
//     until restore (a broker outage window).
//
// What a sarama consumer group member sees under each is written on the
// methods. Faults are kfake control functions (Cluster.ControlKey with
// KeepControl / DropControl): they act on the wire, the clients are not
// told anything else.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitFailure is the error code FailCommits answers on every partition
// of a refused OffsetCommit: REQUEST_TIMED_OUT (7), retriable (see
// FailCommits for why this one).
const commitFailure = 7

// errOutage is the error a control returns to make kfake close the
// connection the request came on.
var errOutage = errors.New("lab cluster: broker outage (connection dropped)")

// Cluster is a running in-process Kafka-protocol cluster of one broker on
// 127.0.0.1. Topics are never auto-created: seed them with Start or create
// them with CreateTopic.
type Cluster struct {
	// Brokers are the bootstrap addresses, "127.0.0.1:PORT".
	Brokers []string

	kf *kfake.Cluster

	// outages counts active Outage windows; FailCommits steps aside while
	// one is active so the connection is dropped rather than answered.
	outages atomic.Int32

	// mu guards closed: kfake's admin calls (GroupInfo, CreateTopic, ...)
	// block forever on a closed cluster, so they hold mu.RLock and Close
	// takes mu.Lock.
	mu     sync.RWMutex
	closed bool
}

// Start starts a one-broker cluster on a free loopback port with the given
// topics (name → partition count, each ≥ 1).
func Start(topics map[string]int32) (*Cluster, error) {
	names := make([]string, 0, len(topics))
	for name, parts := range topics {
		if name == "" {
			return nil, errors.New("lab cluster: start: empty topic name")
		}
		if parts < 1 {
			return nil, fmt.Errorf("lab cluster: start: topic %q: %d partitions, want at least 1", name, parts)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(0)}
	for _, name := range names {
		opts = append(opts, kfake.SeedTopics(topics[name], name))
	}
	kf, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("lab cluster: start kfake with topics %v: %w", names, err)
	}
	return &Cluster{Brokers: kf.ListenAddrs(), kf: kf}, nil
}

// Close shuts the cluster down: its listeners close and every client
// connection is dropped. It is safe to call more than once. After Close,
// CommittedOffset reports false and the other methods return errors.
func (c *Cluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	c.kf.Close()
}

// admin runs fn (which calls into kfake's admin API) unless the cluster is
// closed, in which case it reports false.
func (c *Cluster) admin(fn func()) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return false
	}
	fn()
	return true
}

// CreateTopic creates a topic with the given number of partitions (≥ 1).
func (c *Cluster) CreateTopic(name string, partitions int32) error {
	if name == "" {
		return errors.New("lab cluster: create topic: empty name")
	}
	if partitions < 1 {
		return fmt.Errorf("lab cluster: create topic %q: %d partitions, want at least 1", name, partitions)
	}
	var err error
	if !c.admin(func() { err = c.kf.CreateTopic(name, partitions, nil) }) {
		return fmt.Errorf("lab cluster: create topic %q: cluster is closed", name)
	}
	if err != nil {
		return fmt.Errorf("lab cluster: create topic %q with %d partitions: %w", name, partitions, err)
	}
	return nil
}

// CommittedOffset returns the offset group has committed on
// topic/partition, read from the broker's group state directly (not over
// the wire, so it works during an Outage). It reports false when the group
// does not exist or has no commit for that partition, or the cluster is
// closed.
func (c *Cluster) CommittedOffset(group, topic string, partition int32) (int64, bool) {
	var (
		off int64
		ok  bool
	)
	c.admin(func() {
		gi := c.kf.GroupInfo(group)
		if gi == nil {
			return
		}
		var gc kfake.GroupCommit
		gc, ok = gi.Commits[topic][partition]
		off = gc.Offset
	})
	return off, ok
}

// LogBounds returns the log start offset and the high watermark (the
// offset the next record will get) of topic/partition; ok is false when the
// partition does not exist or the cluster is closed.
func (c *Cluster) LogBounds(topic string, partition int32) (start, end int64, ok bool) {
	c.admin(func() {
		pi := c.kf.PartitionInfo(topic, partition)
		if pi == nil {
			return
		}
		start, end, ok = pi.LogStartOffset, pi.HighWatermark, true
	})
	return start, end, ok
}

// DeleteRecords advances the log start of topic/partition to before, as
// retention would: records below it are gone (a message that is "no longer
// retained"). before = -1 deletes up to the high watermark.
func (c *Cluster) DeleteRecords(topic string, partition int32, before int64) error {
	var err error
	if !c.admin(func() { err = c.kf.DeleteRecords(topic, partition, before) }) {
		return fmt.Errorf("lab cluster: delete records of %s/%d before %d: cluster is closed", topic, partition, before)
	}
	if err != nil {
		return fmt.Errorf("lab cluster: delete records of %s/%d before %d: %w", topic, partition, before, err)
	}
	return nil
}

// GroupState is a snapshot of a consumer group as the broker sees it.
type GroupState struct {
	// State is the group's state: "Empty", "PreparingRebalance",
	// "CompletingRebalance", "Stable", "Dead".
	State string
	// Generation is the group's generation.
	Generation int32
	// Members maps member ids to their client ids.
	Members map[string]string
	// Assignment maps member ids to their assigned partitions by topic.
	Assignment map[string]map[string][]int32
}

// Group returns the broker's view of group; ok is false when the group
// does not exist or the cluster is closed.
func (c *Cluster) Group(group string) (GroupState, bool) {
	var (
		gs GroupState
		ok bool
	)
	c.admin(func() {
		gi := c.kf.GroupInfo(group)
		if gi == nil {
			return
		}
		ok = true
		gs = toGroupState(gi)
	})
	return gs, ok
}

func toGroupState(gi *kfake.GroupInfo) GroupState {
	gs := GroupState{
		State:      gi.State,
		Generation: gi.Epoch,
		Members:    make(map[string]string, len(gi.Members)),
		Assignment: make(map[string]map[string][]int32, len(gi.Members)),
	}
	for _, m := range gi.Members {
		gs.Members[m.MemberID] = m.ClientID
		a := make(map[string][]int32, len(m.Assignment))
		for t, ps := range m.Assignment {
			a[t] = slices.Sorted(slices.Values(ps))
		}
		gs.Assignment[m.MemberID] = a
	}
	return gs
}

// WaitGroupStable waits until group is Stable with members members (-1:
// any number) or ctx ends, and returns the group as last seen. It polls the
// broker's group state every 20ms.
func (c *Cluster) WaitGroupStable(ctx context.Context, group string, members int) (GroupState, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		gs, ok := c.Group(group)
		if ok && gs.State == "Stable" && (members < 0 || len(gs.Members) == members) {
			return gs, nil
		}
		if c.isClosed() {
			return gs, fmt.Errorf("lab cluster: wait for group %q to be stable: cluster is closed", group)
		}
		select {
		case <-ctx.Done():
			return gs, fmt.Errorf("lab cluster: group %q not stable with %d members (state %q, %d members): %w", group, members, gs.State, len(gs.Members), ctx.Err())
		case <-tick.C:
		}
	}
}

func (c *Cluster) isClosed() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.closed
}

// FailCommits makes the broker refuse every OffsetCommit of group until
// restore is called: each partition of the request is answered
// REQUEST_TIMED_OUT and nothing is committed, so the group's committed
// offsets stay where they were (CommittedOffset). Other groups and every
// other request (fetches, heartbeats, joins, produce) work as usual. During
// an Outage the connection is dropped instead. restore is safe to call more
// than once.
//
// What a sarama consumer group member observes (sarama v1.61,
// offset_manager.go; checked by TestFailCommits and
// TestFailCommitsAutoCommitRetries):
//
//   - session.Commit() returns after the refused round trip: it returns
//     nothing, so its caller is not told. MarkOffset / MarkMessage are
//     unaffected (they only mark).
//   - Each refused flush reports a *sarama.ConsumerError{Topic, Partition,
//     Err: sarama.ErrRequestTimedOut} per partition on
//     ConsumerGroup.Errors() when Consumer.Return.Errors is true (sarama
//     drops it when that channel's buffer is full), else prints it with
//     sarama.Logger. It arrives asynchronously, shortly after Commit()
//     returns.
//   - sarama releases the coordinator (a FindCoordinator follows) and keeps
//     the partition's mark pending: the next flush (the next Commit(), or
//     the next AutoCommit tick, Consumer.Offsets.AutoCommit.Interval,
//     default 1s) sends it again, reporting one error per refused attempt.
//     So sarama retries on its own, forever, and the first flush after
//     restore commits the mark, as long as the session lives.
//   - When the session ends while the fault is active (Close, a
//     rebalance, a cancelled context), the final flush is tried
//     Consumer.Offsets.Retry.Max+1 times back to back (AutoCommit on; not
//     at all with AutoCommit off) and the mark is then dropped (a process
//     that dies flushes nothing): the group keeps its old committed offset
//     and the partition's next owner reads the message again. That is
//     seed 000.
//   - The session itself goes on: heartbeats, fetches and rebalances are
//     not affected.
//
// Why REQUEST_TIMED_OUT: COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR and
// COORDINATOR_LOAD_IN_PROGRESS are retried by sarama silently (nothing on
// Errors(), nothing logged), so the consumer would never see the blip.
// kfake's own Fault API answers REQUEST_TIMED_OUT on OffsetCommit after
// applying the commit (as a real broker may); FailCommits answers from a
// control function instead, so nothing is committed.
func (c *Cluster) FailCommits(group string) (restore func()) {
	var active atomic.Bool
	active.Store(true)
	c.kf.ControlKey(int16(kmsg.OffsetCommit), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if !active.Load() {
			c.kf.DropControl()
			return nil, nil, false
		}
		req, ok := kreq.(*kmsg.OffsetCommitRequest)
		if !ok || req.Group != group || c.outages.Load() > 0 {
			// Not ours, or an Outage drops the connection instead.
			return nil, nil, false
		}
		c.kf.KeepControl()
		return failedCommit(req, commitFailure), nil, true
	})
	var once sync.Once
	return func() { once.Do(func() { active.Store(false) }) }
}

// failedCommit answers every partition of req with code, committing
// nothing.
func failedCommit(req *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// Outage takes the broker "down" until restore is called: every request
// from every client (ApiVersions, Metadata, Fetch, Heartbeat, OffsetCommit,
// Produce, ...) has its connection closed without an answer, so clients read
// EOF, and every reconnect is dropped at its first request. A request
// already being answered (a long-poll fetch parked before the outage)
// completes; a connection that sends nothing is not touched until it does.
// After restore, clients reconnect and work again without being restarted.
// Outages nest; restore is safe to call more than once. Cluster-side
// readers (CommittedOffset, LogBounds, Group) keep working during an
// outage.
//
// What a sarama consumer group member observes (sarama v1.61; checked by
// TestOutage):
//
//   - Its next heartbeat (Consumer.Group.Heartbeat.Interval) or fetch gets
//     EOF. The heartbeat loop retries Metadata.Retry.Max times without
//     waiting, then ends the session: session.Context() is cancelled with
//     cause io.EOF, the claims' Messages() channels close, ConsumeClaim
//     and Cleanup run, and Consume returns nil.
//   - ConsumerGroup.Errors() (Consumer.Return.Errors) carries a plain EOF
//     from the heartbeat loop and a *sarama.ConsumerError{Topic, Partition,
//     Err: io.EOF} per claimed partition from the fetcher. A session.Commit()
//     in the window fails the same way (a ConsumerError with the connection
//     error; the mark stays pending and is lost when the session ends).
//   - Each further Consume call fails after Metadata.Retry.Max attempts
//     (Metadata.Retry.Backoff apart) with "kafka: client has run out of
//     available brokers to talk to: EOF" (errors.Is sarama.ErrOutOfBrokers);
//     the caller must loop on Consume, as consumers do.
//   - After restore, the next Consume rejoins (a new generation), is
//     assigned its partitions again and resumes from the group's committed
//     offsets: whatever was processed but not committed is read again.
//
// A SyncProducer's SendMessage fails with EOF (after Producer.Retry.Max),
// sarama.NewClient with ErrOutOfBrokers; both work again after restore. The
// broker keeps the group's session timer running: an outage longer than
// the member's session timeout also evicts it, as a real one would.
func (c *Cluster) Outage() (restore func()) {
	var active atomic.Bool
	active.Store(true)
	c.outages.Add(1)
	c.kf.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		if !active.Load() {
			c.kf.DropControl()
			return nil, nil, false
		}
		c.kf.KeepControl()
		return nil, errOutage, true
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			active.Store(false)
			c.outages.Add(-1)
		})
	}
}
