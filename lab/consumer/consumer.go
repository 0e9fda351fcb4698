// Package consumer holds the incident lab's reference consumers: one per
// pipeline (settlement, fulfilment, orders) and design (naive, anchored,
// seed: the seed's own consumer on the seed's own tables).
//
// Naive consumers reproduce the seeds' original designs, bugs included:
// effects with no anchor, a state row written after each effect in its own
// statement and never read back, remote calls with a fresh request id on
// every attempt, skips decided by status equality and recorded forever.
// Anchored consumers implement docs/design.md: a state row claimed with
// a lease and advanced by a version CAS in the same transaction as each
// effect, intents written before each remote call and probed after an
// unknown outcome, skips decided against the entity's lifecycle.
//
// Both run on real sarama consumer groups over TCP, commit explicitly after
// a message is done, and can be made to fail at chosen points (Faults) so
// that the lab can leave operations half-completed for opctl to triage.
package consumer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
)

// Kind names a pipeline.
type Kind string

// The lab's pipelines.
const (
	// Settlement is seed 000: debit → ledger → risk/clearing notify.
	Settlement Kind = "settlement"
	// Fulfilment is seed 001: order row → WMS lock → logistics → outbox notice.
	Fulfilment Kind = "fulfilment"
	// Orders is seed 003: order events whose PAID effect is a points grant.
	Orders Kind = "orders"
)

// Design names how a consumer anchors its work.
type Design string

// The two designs of every pipeline.
const (
	// Naive is the seed's original design, bugs included.
	Naive Design = "naive"
	// Anchored is docs/design.md's design: state row, lease, CAS, intents.
	Anchored Design = "anchored"
	// Seed is the seed's consumer exactly as its author describes it, on
	// the seed's own tables in Config.DB (testdata/schema/seed000.sql,
	// seed001.sql, seed003.sql): seed 000's plain guarded UPDATE and ledger
	// insert stopped by its unique key, no state; seed 001's order row
	// marked PROCESSING then DONE around two RPCs with a new request id
	// each time; seed 003's skip by status equality, recorded in an
	// idempotency table without a biz_id. They ignore opctl's replay
	// headers, as the seeds' consumers do.
	Seed Design = "seed"
)

// URLs are the base URLs (http://host:port, no trailing slash) of the
// downstream services a consumer calls.
type URLs struct {
	Notify, WMS, Logistics, Points string
}

// Defaults of the optional Config fields.
const (
	DefaultRPCTimeout = time.Second
	DefaultLeaseTTL   = 60 * time.Second
)

// joinTimeout bounds Start when its context has no earlier deadline.
const joinTimeout = 30 * time.Second

// Timings are the consumer's own waits and the timings of its sarama
// consumer group. A zero field takes its default (DefaultTimings, what the
// demo runs with); tests on one machine shorten them (FastTimings). They
// set how soon the consumer acts, not what it does: the lab's scenarios and
// tests wait for the events they need and set their windows with Faults,
// RPCTimeout and LeaseTTL.
type Timings struct {
	// RetryBackoff separates the first two attempts at a record that
	// failed (an RPC timeout, a lost CAS, a database error); it doubles
	// with each further failure, up to MaxRetryBackoff. It also separates
	// two attempts at a failing Consume.
	RetryBackoff, MaxRetryBackoff time.Duration
	// LeaseRecheck separates two looks at a lease held by someone else.
	LeaseRecheck time.Duration
	// RejoinBackoff separates a torn-down client (failed commit) from the
	// new one.
	RejoinBackoff time.Duration
	// KillGrace is how long Kill lets the group leave before it closes the
	// client under it.
	KillGrace time.Duration
	// FetchMaxWait is how long the broker may hold a fetch that finds no
	// new record (sarama's Consumer.MaxWaitTime). The member sends every
	// request (heartbeats, commits, the check after a commit) on its one
	// connection to the broker, which answers them in order: each may wait
	// this long behind a parked fetch.
	FetchMaxWait time.Duration
	// HeartbeatInterval is how often the member heartbeats, and so how
	// soon it notices a rebalance (a member joining or leaving).
	HeartbeatInterval time.Duration
	// SessionTimeout is how long the broker keeps a member it does not
	// hear from. It must be more than HeartbeatInterval and at least the
	// broker's group.min.session.timeout.ms (6s on Kafka and kfake).
	SessionTimeout time.Duration
	// RebalanceTimeout is how long the coordinator waits for every member
	// to rejoin in a rebalance.
	RebalanceTimeout time.Duration
	// RebalanceRetryBackoff separates two attempts at a failed join or
	// sync of the group.
	RebalanceRetryBackoff time.Duration
	// FetchRetryBackoff separates two attempts at a partition whose fetch
	// failed (sarama's Consumer.Retry.Backoff).
	FetchRetryBackoff time.Duration
}

// DefaultTimings are the timings a zero Timings field takes.
//
// 6s is the broker's smallest allowed session timeout (Kafka's and kfake's
// group.min.session.timeout.ms); heartbeats every second, so a rebalance is
// noticed within a second; members rejoin at once (a revoked claim returns
// without waiting for the record in flight), so 3s of rebalance timeout is
// plenty and keeps a stuck member from holding a rebalance for sarama's
// default minute.
func DefaultTimings() Timings {
	return Timings{
		RetryBackoff:          250 * time.Millisecond,
		MaxRetryBackoff:       5 * time.Second,
		LeaseRecheck:          500 * time.Millisecond,
		RejoinBackoff:         500 * time.Millisecond,
		KillGrace:             2 * time.Second,
		FetchMaxWait:          100 * time.Millisecond,
		HeartbeatInterval:     time.Second,
		SessionTimeout:        6 * time.Second,
		RebalanceTimeout:      3 * time.Second,
		RebalanceRetryBackoff: 250 * time.Millisecond,
		FetchRetryBackoff:     250 * time.Millisecond,
	}
}

// FastTimings are for tests, where the broker, the database and the
// downstreams run on this machine: short waits between attempts, between
// looks at a busy lease and before a rejoin, a short fetch wait (so that a
// commit is not held behind a parked fetch) and a heartbeat every 100ms (so
// that a rebalance is noticed within 100ms). The session and rebalance
// timeouts and the kill grace, which only bound failures, keep their
// defaults, and so do RPCTimeout and LeaseTTL, which decide outcomes: a
// test sets those itself.
func FastTimings() Timings {
	t := DefaultTimings()
	t.RetryBackoff = 50 * time.Millisecond
	t.MaxRetryBackoff = time.Second
	t.LeaseRecheck = 50 * time.Millisecond
	t.RejoinBackoff = 50 * time.Millisecond
	t.FetchMaxWait = 20 * time.Millisecond
	t.HeartbeatInterval = 100 * time.Millisecond
	t.RebalanceRetryBackoff = 50 * time.Millisecond
	t.FetchRetryBackoff = 50 * time.Millisecond
	return t
}

// withDefaults fills the zero fields of t from DefaultTimings.
func (t Timings) withDefaults() Timings {
	d := DefaultTimings()
	for _, f := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&t.RetryBackoff, d.RetryBackoff}, {&t.MaxRetryBackoff, d.MaxRetryBackoff},
		{&t.LeaseRecheck, d.LeaseRecheck}, {&t.RejoinBackoff, d.RejoinBackoff},
		{&t.KillGrace, d.KillGrace}, {&t.FetchMaxWait, d.FetchMaxWait},
		{&t.HeartbeatInterval, d.HeartbeatInterval}, {&t.SessionTimeout, d.SessionTimeout},
		{&t.RebalanceTimeout, d.RebalanceTimeout}, {&t.RebalanceRetryBackoff, d.RebalanceRetryBackoff},
		{&t.FetchRetryBackoff, d.FetchRetryBackoff},
	} {
		if *f.v <= 0 {
			*f.v = f.def
		}
	}
	return t
}

// Config configures one consumer (one group member).
type Config struct {
	Kind   Kind
	Design Design
	// Topic and Group are the pipeline's; ClientID names the member and is
	// the owner an anchored consumer writes into its leases.
	Topic, Group, ClientID string
	Brokers                []string
	// DB is the lab database (the tables of lab/schema.sql).
	DB *sql.DB
	// Services are the downstream base URLs; a pipeline uses its own.
	Services URLs
	// RPCTimeout bounds every downstream call and probe (default 1s).
	RPCTimeout time.Duration
	// LeaseTTL is the anchored lease's length (default 60s); every state
	// CAS renews it.
	LeaseTTL time.Duration
	// Timings are the consumer's waits and group timings; zero fields
	// take DefaultTimings.
	Timings Timings
	// Faults may be nil.
	Faults *Faults
	// ResumeFromState turns a naive consumer into its post-incident fix:
	// before each step it reads its state row (settlement, fulfilment) and
	// skips the steps the status already claims, and it honours opctl's
	// replay headers (opctl-from-step, opctl-force-effect; a PENDING
	// idempotency record is processed again). The demo runs it after the
	// repairs, as a team would deploy the fix before redriving. Anchored
	// consumers always behave this way.
	ResumeFromState bool
	// Events, when set, receives what the consumer does. Sends never block:
	// an event that does not fit is dropped. Do not close it while the
	// consumer runs.
	Events chan<- Event
}

// Event is one thing a consumer did. What is one of:
//
//	joined          a group session started (Detail: member, generation, claims)
//	received        a record was handed to the consumer
//	step_done       a step's effect is in MySQL (naive: before its state update)
//	                or the remote call answered / the probe confirmed it
//	step_skipped    a step was not run: the state says it is done, a unique key
//	                says the effect exists, or an acked intent confirms it
//	probe           a downstream was asked about an unknown outcome (Detail: answer)
//	skipped         orders: the message was recorded SKIPPED or SKIPPED_PENDING_REVIEW
//	already_done    a redelivered record whose operation is terminal; nothing touched
//	done            every step of the operation is done
//	parked          anchored: an unknown outcome left for an operator (Detail: last_error)
//	lease_busy      anchored: someone else holds the operation (Detail: who)
//	lease_released  anchored: a stopping or revoked consumer gave its lease back
//	fenced          anchored: a CAS lost; the transaction was rolled back
//	retry           the attempt failed (Detail: why) and will be retried
//	revoked         the partition was revoked while the record was in flight;
//	                the work goes on in the background and will not commit
//	committed       the offset after the record is committed (Detail "early"
//	                for CommitEarly)
//	commit_failed   the commit did not reach the broker; the client is torn
//	                down and the group rejoined
//	commit_skipped  finished work of a revoked partition: nothing to commit to
//	died            a fault killed the consumer (Step: after which step, or
//	                "commit" for DieBeforeCommit)
//	delay           a StepDelay fault started sleeping
//	replay          a record republished by opctl (Detail: plan id)
//	replay_duplicate a replay already handled by this consumer; committed
//	replay_invalid  an opctl header that names no step of the pipeline; ignored
//	poison          a record that cannot be decoded or lacks its fields; committed
//	error           an error reported by sarama (Detail)
//	rejoin          the consumer builds a new client and joins again
//	stopped         the consumer left the group (Stop, Kill or a death)
type Event struct {
	Consumer string
	BizID    string
	MsgID    string
	Step     string
	What     string
	Detail   string
	// Partition and Offset locate the record (-1 for events of no record).
	Partition int32
	Offset    int64
	At        time.Time
}

// Consumer is one running group member. It is safe for concurrent use.
type Consumer struct {
	cfg  Config
	pipe pipeline
	http *http.Client

	// life ends on Kill or a death: every database call and RPC uses it.
	life       context.Context
	cancelLife context.CancelFunc
	killed     atomic.Bool
	killOnce   sync.Once

	stopping chan struct{}
	stopOnce sync.Once

	done chan struct{}
	work tracker // message goroutines, zombies included

	mu   sync.Mutex
	conn *conn  // the current client and group, nil between sessions
	dead string // why the consumer died, for Stop

	busy    keySet // biz ids this process is working on (anchored)
	replays lruSet // opctl-plan + msg_id of replays handled
}

// Start validates cfg, joins the group and consumes in background
// goroutines. It returns once the first group session is set up (the member
// holds an assignment, possibly empty), or an error. ctx bounds joining only
// (at most 30s when it has no deadline): the consumer then runs until Stop or
// Kill.
func Start(ctx context.Context, cfg Config) (*Consumer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	life, cancel := context.WithCancel(context.Background())
	c := &Consumer{
		cfg:        cfg,
		life:       life,
		cancelLife: cancel,
		stopping:   make(chan struct{}),
		done:       make(chan struct{}),
		http:       &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		busy:       keySet{m: map[string]bool{}},
		replays:    lruSet{max: 4096, m: map[string]bool{}},
	}
	c.pipe = newPipeline(c)

	joined := make(chan struct{})
	failed := make(chan error, 1)
	go c.run(joined, failed)

	jctx, jcancel := context.WithTimeout(ctx, joinTimeout)
	defer jcancel()
	select {
	case <-joined:
		return c, nil
	case err := <-failed:
		<-c.done
		return nil, err
	case <-jctx.Done():
		c.Kill()
		return nil, fmt.Errorf("consumer %s: joining group %s: %w", cfg.ClientID, cfg.Group, jctx.Err())
	}
}

func (cfg *Config) validate() error {
	switch cfg.Kind {
	case Settlement, Fulfilment, Orders:
	default:
		return fmt.Errorf("consumer: unknown kind %q (want settlement, fulfilment or orders)", cfg.Kind)
	}
	switch cfg.Design {
	case Naive, Anchored:
	case Seed:
		if cfg.ResumeFromState {
			return errors.New("consumer: the seeds' consumers are as their teams wrote them: no post-incident fix (ResumeFromState)")
		}
	default:
		return fmt.Errorf("consumer: unknown design %q (want naive, anchored or seed)", cfg.Design)
	}
	switch {
	case cfg.Topic == "" || cfg.Group == "" || cfg.ClientID == "":
		return errors.New("consumer: Topic, Group and ClientID are required")
	case len(cfg.Brokers) == 0:
		return errors.New("consumer: no brokers")
	case cfg.DB == nil:
		return errors.New("consumer: no database")
	}
	need := map[Kind][]string{
		Settlement: {cfg.Services.Notify},
		Fulfilment: {cfg.Services.WMS, cfg.Services.Logistics},
		Orders:     {cfg.Services.Points},
	}
	for _, u := range need[cfg.Kind] {
		if u == "" {
			return fmt.Errorf("consumer: the %s pipeline needs its service URLs (have %+v)", cfg.Kind, cfg.Services)
		}
	}
	if cfg.RPCTimeout <= 0 {
		cfg.RPCTimeout = DefaultRPCTimeout
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	cfg.Timings = cfg.Timings.withDefaults()
	if cfg.Timings.HeartbeatInterval >= cfg.Timings.SessionTimeout {
		return fmt.Errorf("consumer: heartbeat interval %s must be shorter than the session timeout %s",
			cfg.Timings.HeartbeatInterval, cfg.Timings.SessionTimeout)
	}
	if cfg.Timings.RetryBackoff > cfg.Timings.MaxRetryBackoff {
		cfg.Timings.MaxRetryBackoff = cfg.Timings.RetryBackoff
	}
	return nil
}

// Stop stops gracefully: no new record is taken, the records in flight finish
// and commit (injected delays and retry waits are cut short: such a record is
// left uncommitted and an anchored lease on it is released), then the member
// leaves the group and the client is closed. It returns an error when the
// consumer had died of a fault.
func (c *Consumer) Stop() error {
	c.stopOnce.Do(func() { close(c.stopping) })
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead != "" {
		return fmt.Errorf("consumer %s had died: %s", c.cfg.ClientID, c.dead)
	}
	return nil
}

// Kill stops abruptly, as a crashed process: in-flight database calls and
// RPCs are cancelled, nothing more is committed, an anchored lease stays
// where it is until it expires, and the group and client are closed. (The
// member leaves the group so that the lab need not wait a session timeout
// for its partitions; a crashed JVM would hold them for session.timeout.)
func (c *Consumer) Kill() {
	c.kill("killed")
	<-c.done
}

// Done is closed once the consumer has stopped, by Stop, Kill or a death.
func (c *Consumer) Done() <-chan struct{} { return c.done }

func (c *Consumer) kill(why string) {
	c.killOnce.Do(func() {
		c.mu.Lock()
		if c.dead == "" && why != "killed" {
			c.dead = why
		}
		// Under mu: session either sees killed or has published its conn.
		c.killed.Store(true)
		k := c.conn
		c.mu.Unlock()
		c.cancelLife()
		if k != nil {
			go k.abort(c.cfg.Timings.KillGrace)
		}
	})
}

func (c *Consumer) isStopping() bool {
	select {
	case <-c.stopping:
		return true
	default:
		return false
	}
}

// ending reports whether the consumer must not take new work.
func (c *Consumer) ending() bool { return c.killed.Load() || c.isStopping() }

// sleep waits d, or less when the consumer stops or dies; it reports whether
// the full time passed.
func (c *Consumer) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.life.Done():
		return false
	case <-c.stopping:
		return false
	}
}

// note emits an event of the consumer itself (no record).
func (c *Consumer) note(what, detail string) {
	c.emit(Event{What: what, Detail: detail, Partition: -1, Offset: -1})
}

func (c *Consumer) emit(ev Event) {
	if c.cfg.Events == nil {
		return
	}
	ev.Consumer = c.cfg.ClientID
	ev.At = time.Now()
	select {
	case c.cfg.Events <- ev:
	default:
	}
}

// run owns the consumer's life: one session (client + group) after another,
// until Stop, Kill or a death.
func (c *Consumer) run(joined chan<- struct{}, failed chan<- error) {
	defer func() {
		<-c.work.idle()
		c.http.CloseIdleConnections()
		c.note("stopped", "")
		close(c.done)
	}()
	var once sync.Once
	var ok atomic.Bool
	onJoin := func() {
		once.Do(func() {
			ok.Store(true)
			close(joined)
		})
	}
	for !c.ending() {
		err := c.session(onJoin)
		if err != nil && !ok.Load() {
			failed <- fmt.Errorf("consumer %s: %w", c.cfg.ClientID, err)
			return
		}
		if err != nil {
			c.note("error", err.Error())
		}
		if c.ending() || !c.sleep(c.cfg.Timings.RejoinBackoff) {
			return
		}
		c.note("rejoin", "")
	}
}

// conn is one sarama client and the consumer group built on it.
type conn struct {
	client     sarama.Client
	group      sarama.ConsumerGroup
	groupOnce  sync.Once
	clientOnce sync.Once
}

// close leaves the group (committing nothing: auto-commit is off) and closes
// the client.
func (k *conn) close() {
	k.groupOnce.Do(func() { _ = k.group.Close() })
	k.clientOnce.Do(func() { _ = k.client.Close() })
}

// abort closes the group, and the client under it if leaving takes longer
// than grace.
func (k *conn) abort(grace time.Duration) {
	left := make(chan struct{})
	go func() {
		k.groupOnce.Do(func() { _ = k.group.Close() })
		close(left)
	}()
	select {
	case <-left:
	case <-time.After(grace):
	}
	k.clientOnce.Do(func() { _ = k.client.Close() })
}

// session runs one client: it consumes, generation after generation, until
// the consumer ends or a commit fails (then the client is torn down and run
// builds a new one, which re-reads from the committed offset).
func (c *Consumer) session(onJoin func()) error {
	client, err := sarama.NewClient(c.cfg.Brokers, c.saramaConfig())
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	group, err := sarama.NewConsumerGroupFromClient(c.cfg.Group, client)
	if err != nil {
		_ = client.Close()
		return fmt.Errorf("consumer group %s: %w", c.cfg.Group, err)
	}
	k := &conn{client: client, group: group}
	c.mu.Lock()
	if c.killed.Load() {
		c.mu.Unlock()
		k.close()
		return nil
	}
	c.conn = k
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.conn = nil
		c.mu.Unlock()
		k.close()
	}()

	go func() {
		for err := range group.Errors() {
			c.note("error", err.Error())
		}
	}()

	// Consume's context ends on Kill, or on Stop once the records in flight
	// are done (a member with no partition would otherwise wait for the
	// next rebalance).
	cctx, cancel := context.WithCancel(c.life)
	defer cancel()
	go func() {
		select {
		case <-c.stopping:
			<-c.work.idle()
			cancel()
		case <-cctx.Done():
		}
	}()

	h := &handler{c: c, k: k, onJoin: onJoin}
	failures := 0
	for !c.ending() && !h.reconnect.Load() {
		err := group.Consume(cctx, []string{c.cfg.Topic}, h)
		switch {
		case c.ending() || h.reconnect.Load():
		case errors.Is(err, sarama.ErrClosedConsumerGroup), errors.Is(err, sarama.ErrClosedClient):
			return err
		case err != nil:
			failures++
			c.note("error", "consume: "+err.Error())
			if failures >= 5 {
				return err // a fresh client
			}
			c.sleep(c.cfg.Timings.RetryBackoff)
		default:
			failures = 0 // a rebalance: join the next generation
		}
	}
	return nil
}

// saramaConfig is the member's configuration: a fresh one per client (a
// sarama.Config carries the client's metric registry). Offsets are never
// committed behind the consumer's back: auto-commit is off, and with it off
// sarama commits nothing when a session or the group is closed.
func (c *Consumer) saramaConfig() *sarama.Config {
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_5_0_0
	sc.ClientID = c.cfg.ClientID
	sc.ChannelBufferSize = 16
	tm := c.cfg.Timings
	sc.Net.DialTimeout = 3 * time.Second
	sc.Net.WriteTimeout = 3 * time.Second
	// A JoinGroup answer may wait up to the rebalance timeout on the
	// coordinator: the read timeout must be longer.
	sc.Net.ReadTimeout = max(10*time.Second, tm.RebalanceTimeout+5*time.Second)
	sc.Metadata.AllowAutoTopicCreation = false
	sc.Metadata.Retry.Max = 3
	sc.Metadata.Retry.Backoff = 100 * time.Millisecond

	sc.Consumer.Return.Errors = true
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	sc.Consumer.Offsets.AutoCommit.Enable = false
	sc.Consumer.MaxWaitTime = tm.FetchMaxWait
	sc.Consumer.Retry.Backoff = tm.FetchRetryBackoff

	// See DefaultTimings for the defaults.
	sc.Consumer.Group.Session.Timeout = tm.SessionTimeout
	sc.Consumer.Group.Heartbeat.Interval = tm.HeartbeatInterval
	sc.Consumer.Group.Rebalance.Timeout = tm.RebalanceTimeout
	sc.Consumer.Group.Rebalance.Retry.Max = 4
	sc.Consumer.Group.Rebalance.Retry.Backoff = tm.RebalanceRetryBackoff
	// Eager range assignment (sarama's default): a rebalance revokes every
	// claim, as in the seeds' clients.
	sc.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	return sc
}

// handler is the sarama.ConsumerGroupHandler of one client.
type handler struct {
	c      *Consumer
	k      *conn
	onJoin func()
	// reconnect is set when a commit failed: the client must be replaced.
	reconnect atomic.Bool
}

func (h *handler) Setup(s sarama.ConsumerGroupSession) error {
	h.c.note("joined", fmt.Sprintf("member %s generation %d claims %v", s.MemberID(), s.GenerationID(), s.Claims()))
	h.onJoin()
	return nil
}

func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim handles a partition's records one at a time, in order. It
// returns as soon as the session ends (a rebalance), even with a record in
// flight: that record's goroutine goes on as a zombie (seed 001).
func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	c := h.c
	for {
		if c.ending() || h.reconnect.Load() {
			return nil
		}
		select {
		case <-s.Context().Done():
			return nil
		case <-c.life.Done():
			return nil
		case <-c.stopping:
			return nil
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			if !h.dispatch(s, msg) {
				return nil
			}
		}
	}
}

// dispatch runs one record in its own goroutine and waits for it, the end of
// the session or the consumer's death. It reports whether the claim goes on.
func (h *handler) dispatch(s sarama.ConsumerGroupSession, msg *sarama.ConsumerMessage) bool {
	c := h.c
	c.work.add()
	if c.ending() {
		c.work.done()
		return false
	}
	d := &delivery{msg: msg, sess: s, h: h}
	fin := make(chan bool, 1)
	go func() {
		defer c.work.done()
		fin <- c.handle(d)
	}()
	sessDone := s.Context().Done()
	for {
		select {
		case keep := <-fin:
			return keep
		case <-c.life.Done():
			d.abandoned.Store(true)
			return false
		case <-sessDone:
			if c.isStopping() {
				// Our own graceful stop ended the session: the session
				// is not released before this claim returns, so the
				// record can still finish and commit.
				sessDone = nil
				continue
			}
			d.abandoned.Store(true)
			c.emitD(d, "revoked", "", "partition revoked while in flight; the work goes on and will not commit")
			return false
		}
	}
}

// commit marks the record and commits synchronously, then checks with the
// group coordinator that the commit took: sarama's Commit returns nothing,
// and a coordinator error (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) is not
// even reported on Errors(). A failed commit is treated as a lost
// connection: the client is torn down and the group rejoined.
func (c *Consumer) commit(d *delivery, how string) bool {
	if c.killed.Load() {
		return false
	}
	if d.abandoned.Load() {
		c.emitD(d, "commit_skipped", "", "the session that delivered the record has ended")
		return false
	}
	d.sess.MarkMessage(d.msg, "")
	d.sess.Commit()
	got, err := d.h.committed(d.msg.Topic, d.msg.Partition)
	if err == nil && got < d.msg.Offset+1 {
		err = fmt.Errorf("committed offset is %d, want %d", got, d.msg.Offset+1)
	}
	if err != nil {
		if c.killed.Load() {
			return false
		}
		c.emitD(d, "commit_failed", "", err.Error())
		d.h.reconnect.Store(true)
		return false
	}
	c.emitD(d, "committed", "", how)
	return true
}

// committed asks the group coordinator for the group's committed offset.
func (h *handler) committed(topic string, partition int32) (int64, error) {
	coord, err := h.k.client.Coordinator(h.c.cfg.Group)
	if err != nil {
		return -1, fmt.Errorf("coordinator: %w", err)
	}
	req := sarama.NewOffsetFetchRequest(h.k.client.Config().Version, h.c.cfg.Group, map[string][]int32{topic: {partition}})
	resp, err := coord.FetchOffset(req)
	if err != nil {
		return -1, fmt.Errorf("offset fetch: %w", err)
	}
	if len(resp.Groups) > 0 && !errors.Is(resp.Groups[0].Err, sarama.ErrNoError) {
		return -1, fmt.Errorf("offset fetch: %w", resp.Groups[0].Err)
	}
	if !errors.Is(resp.Err, sarama.ErrNoError) {
		return -1, fmt.Errorf("offset fetch: %w", resp.Err)
	}
	b := resp.GetBlock(topic, partition)
	if b == nil {
		return -1, errors.New("offset fetch: no block in the answer")
	}
	if !errors.Is(b.Err, sarama.ErrNoError) {
		return -1, fmt.Errorf("offset fetch: %w", b.Err)
	}
	return b.Offset, nil
}

// tracker counts running goroutines and says when none is left. Unlike a
// WaitGroup it may be waited on while goroutines are still being added.
type tracker struct {
	mu   sync.Mutex
	n    int
	zero chan struct{}
}

func (t *tracker) add() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		t.zero = make(chan struct{})
	}
	t.n++
}

func (t *tracker) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.n == 0 {
		close(t.zero)
	}
}

// idle is closed when no goroutine runs (now, or when the last one ends).
func (t *tracker) idle() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return t.zero
}

// keySet is a set of keys held by this process.
type keySet struct {
	mu sync.Mutex
	m  map[string]bool
}

func (s *keySet) acquire(k string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[k] {
		return false
	}
	s.m[k] = true
	return true
}

func (s *keySet) release(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
}

// lruSet remembers the last max keys added.
type lruSet struct {
	mu    sync.Mutex
	max   int
	m     map[string]bool
	order []string
}

func (s *lruSet) has(k string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k]
}

func (s *lruSet) add(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[k] {
		return
	}
	s.m[k] = true
	s.order = append(s.order, k)
	if len(s.order) > s.max {
		delete(s.m, s.order[0])
		s.order = s.order[1:]
	}
}
