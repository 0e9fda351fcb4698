package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// MsgIDHeader is the record header that carries a message id.
const MsgIDHeader = "msg_id"

const (
	// fetchPartitionBytes is the per-partition byte budget of one fetch
	// round trip in a search; the broker returns at least one whole batch
	// even when it is larger (KIP-74).
	fetchPartitionBytes = 2 << 20
	// fetchResponseBytes is the response budget of a fetch (the Java
	// consumer's fetch.max.bytes); the partition's budget is the smaller.
	fetchResponseBytes = 50 << 20
	// fetchMaxWaitMs bounds how long a broker may hold a fetch with no data.
	fetchMaxWaitMs = 100
)

// Reader reads group positions and messages from Kafka and publishes replay
// records. It connects lazily on first use, is safe for concurrent use, and
// bounds every call by the timeout given to New as well as by the caller's
// context: an unreachable cluster is reported as an error naming the
// brokers tried, never as a hang.
//
// Reader implements sources.Kafka.
type Reader struct {
	cfg     config.Kafka
	timeout time.Duration

	mu       sync.Mutex
	closed   bool
	conf     *sarama.Config
	client   sarama.Client
	producer sarama.SyncProducer

	// cache keeps what the searches read, nil unless CacheSearches
	// turned it on.
	cache atomic.Pointer[searchCache]
}

var _ sources.Kafka = (*Reader)(nil)

// New returns a Reader for the brokers in cfg. Nothing is dialled until the
// first call. timeout (the global --timeout, default 10s) bounds each call,
// and is also the dial, read and write timeout of every connection.
func New(cfg config.Kafka, timeout time.Duration) *Reader {
	if timeout <= 0 {
		timeout = sources.DefaultTimeout
	}
	return &Reader{cfg: cfg, timeout: timeout}
}

// Close releases the producer (if one was created) and every broker
// connection. Calls made after Close fail.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	var errs []error
	if r.producer != nil {
		errs = append(errs, r.producer.Close())
		r.producer = nil
	}
	if r.client != nil {
		errs = append(errs, r.client.Close())
		r.client = nil
	}
	return errors.Join(errs...)
}

// getClient creates the sarama client on first use. Creating it does no I/O
// (Metadata.Full is off): brokers are dialled by the first request.
func (r *Reader) getClient() (sarama.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("kafka: reader is closed")
	}
	if r.client != nil {
		return r.client, nil
	}
	if len(r.cfg.Brokers) == 0 {
		return nil, errors.New("kafka: no brokers configured")
	}
	if r.conf == nil {
		conf, err := saramaConfig(r.cfg, r.timeout)
		if err != nil {
			return nil, err
		}
		r.conf = conf
	}
	c, err := sarama.NewClient(r.cfg.Brokers, r.conf)
	if err != nil {
		return nil, err
	}
	r.client = c
	return c, nil
}

// op bounds one call by the reader's timeout.
func (r *Reader) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.timeout)
}

// fail wraps err with what was being done and the brokers tried. A context
// error caused by the reader's own timeout says so in words.
func (r *Reader) fail(ctx, opCtx context.Context, what string, err error) error {
	if !errors.Is(ctx.Err(), context.Canceled) && errors.Is(err, context.DeadlineExceeded) {
		// The reader's timeout, or the caller's of the same --timeout.
		err = fmt.Errorf("no answer within %s: %w", r.timeout, err)
	}
	var nk *NotKafkaError
	if !errors.As(err, &nk) && isConnErr(err) {
		nk = r.notKafka()
	}
	if nk != nil {
		// Another service answered: name it, not sarama's chain (which
		// may only say "broker not connected": the answer is kept in
		// the chain for errors.As either way).
		var in *NotKafkaError
		if !errors.As(err, &in) {
			err = errors.Join(nk, err)
		}
		return &dialError{msg: fmt.Sprintf("kafka (brokers %s): %s", strings.Join(r.cfg.Brokers, ","), nk), err: err}
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		// Nothing was reached: say so plainly instead of sarama's chain.
		return &dialError{msg: fmt.Sprintf("kafka (brokers %s): cannot connect (%v); check kafka.brokers / --brokers",
			strings.Join(r.cfg.Brokers, ","), op.Err), err: err}
	}
	return fmt.Errorf("kafka (brokers %s): %s: %w", strings.Join(r.cfg.Brokers, ","), what, err)
}

// notKafka returns a broker of the configuration that answered with bytes
// that are not Kafka, nil when none did.
func (r *Reader) notKafka() *NotKafkaError {
	r.mu.Lock()
	conf := r.conf
	r.mu.Unlock()
	if conf == nil {
		return nil
	}
	d, ok := conf.Net.Proxy.Dialer.(*dialer)
	if !ok {
		return nil
	}
	return d.notKafkaErr(r.cfg.Brokers)
}

// dialError is a reader that reached no broker: a short message instead of
// sarama's chain, which stays available to errors.Is and errors.As.
type dialError struct {
	msg string
	err error
}

func (e *dialError) Error() string { return e.msg }
func (e *dialError) Unwrap() error { return e.err }

// call runs fn on its own goroutine and waits for it or for ctx. sarama's
// calls take no context; an abandoned call ends on its own within the
// connection timeouts.
func call[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn()
		ch <- result{v, err}
	}()
	select {
	case res := <-ch:
		return res.v, res.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// parallel runs every fn concurrently and returns the first error, or ctx's
// error as soon as ctx ends. After an error the callers must not read what
// the functions write.
func parallel(ctx context.Context, fns ...func() error) error {
	errs := make(chan error, len(fns))
	for _, fn := range fns {
		go func() { errs <- fn() }()
	}
	var first error
	for range fns {
		select {
		case err := <-errs:
			if err != nil && first == nil {
				first = err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return first
}

// Topics lists the cluster's topics, sorted.
func (r *Reader) Topics(ctx context.Context) ([]string, error) {
	opCtx, cancel := r.op(ctx)
	defer cancel()
	c, err := r.getClient()
	if err != nil {
		return nil, r.fail(ctx, opCtx, "list topics", err)
	}
	topics, err := call(opCtx, func() ([]string, error) {
		if err := c.RefreshMetadata(); err != nil {
			return nil, err
		}
		return c.Topics()
	})
	if err != nil {
		return nil, r.fail(ctx, opCtx, "list topics", err)
	}
	sort.Strings(topics)
	return topics, nil
}

// PartitionCount returns how many partitions topic has.
func (r *Reader) PartitionCount(ctx context.Context, topic string) (int32, error) {
	opCtx, cancel := r.op(ctx)
	defer cancel()
	c, err := r.getClient()
	if err != nil {
		return 0, r.fail(ctx, opCtx, "topic "+topic, err)
	}
	parts, err := call(opCtx, func() ([]int32, error) { return c.Partitions(topic) })
	if err != nil {
		return 0, r.fail(ctx, opCtx, "topic "+topic, err)
	}
	return int32(len(parts)), nil
}

// Group implements sources.Kafka. Cost: the topic's metadata and the group's
// coordinator are looked up concurrently (both cached by the client after
// the first call), then one concurrent round: OffsetFetch and DescribeGroups
// to the coordinator, and ListOffsets earliest and latest to every leader,
// each request batching all of that leader's partitions.
//
// Each request of that round answers its own fields: when some fail (a
// broker that does not support DescribeGroups, a coordinator that does not
// answer in time), the view holds what the others read, names the rest in
// its Unknown, and the error is a *sources.PartialKafkaError (wrapped).
// Without the topic's metadata nothing is known: the error is the
// metadata's.
func (r *Reader) Group(ctx context.Context, topic, group string) (sources.GroupView, error) {
	opCtx, cancel := r.op(ctx)
	defer cancel()
	what := fmt.Sprintf("group %s on topic %s", group, topic)
	view, err := r.group(opCtx, topic, group)
	var pe *sources.PartialKafkaError
	switch {
	case err == nil:
		return view, nil
	case ctx.Err() != nil:
		return sources.GroupView{}, r.fail(ctx, opCtx, what, ctx.Err())
	case errors.As(err, &pe):
		return view, fmt.Errorf("kafka (brokers %s): %s: %w", strings.Join(r.cfg.Brokers, ","), what, err)
	}
	return sources.GroupView{}, r.fail(ctx, opCtx, what, err)
}

// answer is what one request of a concurrent round answered.
type answer[T any] struct {
	v   T
	err error
}

// ask runs fn on its own goroutine; its answer arrives on the channel.
func ask[T any](fn func() (T, error)) <-chan answer[T] {
	ch := make(chan answer[T], 1)
	go func() {
		v, err := fn()
		ch <- answer[T]{v, err}
	}()
	return ch
}

// await waits for ch's answer or for ctx to end: then the request's answer
// is ctx's error (the request goes on, abandoned, within the connection
// timeouts).
func await[T any](ctx context.Context, ch <-chan answer[T]) (T, error) {
	select {
	case a := <-ch:
		return a.v, a.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

func (r *Reader) group(ctx context.Context, topic, group string) (sources.GroupView, error) {
	if topic == "" || group == "" {
		return sources.GroupView{}, errors.New("topic and group are required")
	}
	c, err := r.getClient()
	if err != nil {
		return sources.GroupView{}, err
	}

	// Round 1: topic metadata and the coordinator.
	var parts []int32
	err = parallel(ctx,
		func() error {
			p, err := c.Partitions(topic)
			if err != nil {
				return fmt.Errorf("topic metadata: %w", err)
			}
			parts = p
			return nil
		},
		func() error {
			// Warms the client's coordinator cache; a failure here is
			// looked up again (and reported) by round 2.
			_, _ = c.Coordinator(group)
			return nil
		},
	)
	if err != nil {
		return sources.GroupView{}, err
	}

	// Round 2: everything else, concurrently; each request answers its
	// own fields.
	committedCh := ask(func() (map[int32]int64, error) { return r.fetchCommitted(c, group, topic, parts) })
	descCh := ask(func() (*sarama.GroupDescription, error) { return r.describeGroup(c, group) })
	startsCh := ask(func() (map[int32]int64, error) {
		return r.listOffsets(ctx, c, topic, parts, sarama.OffsetOldest, sarama.ReadUncommitted)
	})
	endsCh := ask(func() (map[int32]int64, error) {
		return r.listOffsets(ctx, c, topic, parts, sarama.OffsetNewest, sarama.ReadUncommitted)
	})
	committed, committedErr := await(ctx, committedCh)
	desc, descErr := await(ctx, descCh)
	starts, startsErr := await(ctx, startsCh)
	ends, endsErr := await(ctx, endsCh)

	var unknown []sources.UnknownField
	for _, u := range []struct {
		field string
		err   error
	}{
		{sources.FieldCommitted, committedErr},
		{sources.FieldLogStart, startsErr},
		{sources.FieldLogEnd, endsErr},
		{sources.FieldGroup, descErr},
	} {
		if u.err == nil {
			continue
		}
		why := u.err.Error()
		if errors.Is(u.err, ctx.Err()) {
			why = fmt.Sprintf("no answer within %s", r.timeout)
		}
		unknown = append(unknown, sources.UnknownField{Field: u.field, Why: why})
	}
	if desc == nil {
		desc = &sarama.GroupDescription{}
	}

	view := sources.GroupView{
		Topic:      topic,
		Group:      group,
		Partitions: make(map[int32]sources.PartitionView, len(parts)),
		GroupState: desc.State,
	}
	owners := map[int32]string{}
	members := make([]*sarama.GroupMemberDescription, 0, len(desc.Members))
	for _, m := range desc.Members {
		members = append(members, m)
	}
	sort.Slice(members, func(i, j int) bool { return members[i].MemberId < members[j].MemberId })
	for _, m := range members {
		gm := sources.GroupMember{MemberID: m.MemberId, ClientID: m.ClientId, ClientHost: m.ClientHost}
		if desc.ProtocolType == "consumer" || desc.ProtocolType == "" {
			if a, err := m.GetMemberAssignment(); err == nil && a != nil {
				gm.Partitions = slices.Clone(a.Topics[topic])
				slices.Sort(gm.Partitions)
			}
		}
		owner := m.ClientId
		if owner == "" {
			owner = m.MemberId
		}
		for _, p := range gm.Partitions {
			if _, taken := owners[p]; !taken {
				owners[p] = owner
			}
		}
		view.Members = append(view.Members, gm)
	}
	anyCommitted := false
	for _, p := range parts {
		off, ok := committed[p]
		if !ok {
			off = -1 // none, or (committedErr) unknown
		}
		if off >= 0 {
			anyCommitted = true
		}
		view.Partitions[p] = sources.PartitionView{
			Partition: p,
			Committed: off,
			LogStart:  starts[p],
			LogEnd:    ends[p],
			Owner:     owners[p],
		}
	}
	// A group with members or committed offsets (on any topic) is at least
	// Empty; brokers describe a group id they hold nothing for as Dead (or,
	// from DescribeGroups v6, GROUP_ID_NOT_FOUND). Committed offsets on this
	// topic are a second witness.
	missing := desc.State == "" || strings.EqualFold(desc.State, "Dead") ||
		errors.Is(desc.Err, sarama.ErrGroupIDNotFound)
	view.GroupExists = !(missing && len(desc.Members) == 0 && !anyCommitted)
	if descErr != nil {
		// Unknown, not "Dead": only committed offsets may say it exists.
		view.GroupExists = anyCommitted
	} else if view.GroupState == "" && !view.GroupExists {
		view.GroupState = "Dead"
	}
	if len(unknown) > 0 {
		view.Unknown = unknown
		return view, &sources.PartialKafkaError{Unknown: unknown}
	}
	return view, nil
}

// isCoordinatorErr reports errors after which the coordinator must be
// looked up again.
func isCoordinatorErr(err error) bool {
	if errors.Is(err, sarama.ErrClosedClient) {
		return false
	}
	return errors.Is(err, sarama.ErrNotCoordinatorForConsumer) ||
		errors.Is(err, sarama.ErrConsumerCoordinatorNotAvailable) ||
		errors.Is(err, sarama.ErrOffsetsLoadInProgress) ||
		errors.Is(err, sarama.ErrNotConnected) ||
		isConnErr(err)
}

// isConnErr reports network-level failures (as opposed to Kafka error codes).
func isConnErr(err error) bool {
	if err == nil {
		return false
	}
	var kerr sarama.KError
	return !errors.As(err, &kerr)
}

// withCoordinator runs fn against the group's coordinator, looking the
// coordinator up again and retrying once when it moved or was unreachable.
func withCoordinator[T any](c sarama.Client, group string, fn func(*sarama.Broker) (T, error)) (T, error) {
	var zero T
	for attempt := 0; ; attempt++ {
		b, err := c.Coordinator(group)
		if err == nil {
			var v T
			v, err = fn(b)
			if err == nil {
				return v, nil
			}
		}
		if attempt > 0 || !isCoordinatorErr(err) {
			return zero, fmt.Errorf("group coordinator: %w", err)
		}
		if rerr := c.RefreshCoordinator(group); rerr != nil {
			return zero, fmt.Errorf("group coordinator: %w", errors.Join(err, rerr))
		}
	}
}

// fetchCommitted reads the group's committed offsets for the topic's
// partitions: -1 where none, including for a group the broker does not know
// (classic coordinators answer -1 offsets, kfake and KIP-848 coordinators
// GROUP_ID_NOT_FOUND).
func (r *Reader) fetchCommitted(c sarama.Client, group, topic string, parts []int32) (map[int32]int64, error) {
	offs, err := withCoordinator(c, group, func(b *sarama.Broker) (map[int32]int64, error) {
		req := sarama.NewOffsetFetchRequest(c.Config().Version, group, map[string][]int32{topic: parts})
		resp, err := b.FetchOffset(req)
		if err != nil {
			return nil, err
		}
		out := make(map[int32]int64, len(parts))
		for _, p := range parts {
			out[p] = -1
		}
		switch gerr := resp.GroupError(); {
		case errors.Is(gerr, sarama.ErrNoError):
		case errors.Is(gerr, sarama.ErrGroupIDNotFound):
			return out, nil
		default:
			return nil, gerr
		}
		for _, p := range parts {
			blk := resp.GetBlock(topic, p)
			if blk == nil {
				continue
			}
			if !errors.Is(blk.Err, sarama.ErrNoError) {
				if errors.Is(blk.Err, sarama.ErrUnknownTopicOrPartition) {
					continue
				}
				return nil, fmt.Errorf("committed offset of partition %d: %w", p, blk.Err)
			}
			out[p] = blk.Offset
		}
		return out, nil
	})
	if err != nil {
		return nil, fmt.Errorf("committed offsets: %w", err)
	}
	return offs, nil
}

func (r *Reader) describeGroup(c sarama.Client, group string) (*sarama.GroupDescription, error) {
	v := c.Config().Version
	req := &sarama.DescribeGroupsRequest{Groups: []string{group}}
	switch {
	case v.IsAtLeast(sarama.V2_4_0_0):
		req.Version = 5
	case v.IsAtLeast(sarama.V2_3_0_0):
		req.Version = 3
	case v.IsAtLeast(sarama.V2_0_0_0):
		req.Version = 2
	case v.IsAtLeast(sarama.V0_11_0_0):
		req.Version = 1
	}
	d, err := withCoordinator(c, group, func(b *sarama.Broker) (*sarama.GroupDescription, error) {
		resp, err := b.DescribeGroups(req)
		if err != nil {
			return nil, err
		}
		for _, g := range resp.Groups {
			if g.GroupId != group {
				continue
			}
			switch {
			case errors.Is(g.Err, sarama.ErrNoError), errors.Is(g.Err, sarama.ErrGroupIDNotFound):
				return g, nil
			default:
				return nil, g.Err
			}
		}
		return nil, fmt.Errorf("the coordinator did not describe group %s", group)
	})
	if err != nil {
		return nil, fmt.Errorf("describe group: %w", err)
	}
	return d, nil
}

// isLeaderErr reports partition errors after which metadata must be
// refreshed before asking again.
func isLeaderErr(err error) bool {
	if errors.Is(err, sarama.ErrClosedClient) {
		return false
	}
	return errors.Is(err, sarama.ErrNotLeaderForPartition) ||
		errors.Is(err, sarama.ErrLeaderNotAvailable) ||
		errors.Is(err, sarama.ErrUnknownLeaderEpoch) ||
		errors.Is(err, sarama.ErrFencedLeaderEpoch) ||
		errors.Is(err, sarama.ErrNotConnected) ||
		errors.Is(err, sarama.ErrOffsetNotAvailable) ||
		isConnErr(err)
}

// listOffsets asks every leader, in one request per leader, for the offset
// of ts (sarama.OffsetOldest, sarama.OffsetNewest or a timestamp in
// milliseconds) in each partition; -1 where the broker has no answer (a
// timestamp after the last record). With sarama.ReadCommitted the log ends
// at the last stable offset (the first offset of a transaction that has not
// ended), as a read_committed consumer sees it. Partitions whose leader
// moved are retried once after a metadata refresh.
func (r *Reader) listOffsets(ctx context.Context, c sarama.Client, topic string, parts []int32, ts int64, iso sarama.IsolationLevel) (map[int32]int64, error) {
	out := make(map[int32]int64, len(parts))
	var mu sync.Mutex
	todo := parts
	for attempt := 0; ; attempt++ {
		byLeader := map[int32][]int32{}
		brokers := map[int32]*sarama.Broker{}
		var failed []int32
		var lastErr error
		for _, p := range todo {
			b, err := c.Leader(topic, p)
			if err != nil {
				failed, lastErr = append(failed, p), fmt.Errorf("leader of partition %d: %w", p, err)
				continue
			}
			brokers[b.ID()] = b
			byLeader[b.ID()] = append(byLeader[b.ID()], p)
		}
		var fns []func() error
		for id, ps := range byLeader {
			b := brokers[id]
			fns = append(fns, func() error {
				req := sarama.NewOffsetRequest(c.Config().Version)
				req.IsolationLevel = iso
				for _, p := range ps {
					req.AddBlock(topic, p, ts, 1)
				}
				resp, err := getOffsets(b, req)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed, lastErr = append(failed, ps...), fmt.Errorf("list offsets from broker %s: %w", b.Addr(), err)
					return nil
				}
				for _, p := range ps {
					blk := resp.GetBlock(topic, p)
					switch {
					case blk == nil:
						failed, lastErr = append(failed, p), fmt.Errorf("list offsets: no answer for partition %d", p)
					case !errors.Is(blk.Err, sarama.ErrNoError):
						failed, lastErr = append(failed, p), fmt.Errorf("list offsets of partition %d: %w", p, blk.Err)
					case resp.Version == 0 && len(blk.Offsets) == 0:
						out[p] = -1
					case resp.Version == 0:
						out[p] = blk.Offsets[0]
					default:
						out[p] = blk.Offset
					}
				}
				return nil
			})
		}
		if err := parallel(ctx, fns...); err != nil {
			return nil, err
		}
		if len(failed) == 0 {
			return out, nil
		}
		if attempt > 0 || !isLeaderErr(lastErr) {
			return nil, lastErr
		}
		if err := c.RefreshMetadata(topic); err != nil {
			return nil, errors.Join(lastErr, err)
		}
		todo = failed
	}
}

// listOffsetsFallback is the ListOffsets version asked again when a
// broker's answer to a newer one cannot be decoded: the oldest with the
// isolation level (version 2), which every broker since 0.11 answers.
const listOffsetsFallback = 2

// getOffsets sends req to b. A broker that advertises a ListOffsets
// version whose answer then does not decode (librdkafka's mock cluster
// from version 4 on) is asked again with version 2: the offsets are the
// same, only the leader epoch (fencing, unused here) is left out.
func getOffsets(b *sarama.Broker, req *sarama.OffsetRequest) (*sarama.OffsetResponse, error) {
	resp, err := b.GetAvailableOffsets(req)
	var perr sarama.PacketDecodingError
	if err == nil || !errors.As(err, &perr) || req.Version <= listOffsetsFallback {
		return resp, err
	}
	old := *req
	old.Version = listOffsetsFallback
	if resp, err2 := b.GetAvailableOffsets(&old); err2 == nil {
		return resp, nil
	}
	return nil, err
}
