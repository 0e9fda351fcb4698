package lab

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/lab/consumer"
	"github.com/opctl-dev/opctl/lab/downstream"
)

// Expectation is what `opctl where` must say about one operation after a
// scenario ran: the incident's affected ids and the untouched ones.
type Expectation struct {
	BizID    string       `json:"biz_id"`
	Pipeline string       `json:"pipeline"`
	Verdict  inspect.Code `json:"expected"`
	// Affected is false for an untouched operation of the same run.
	Affected bool `json:"affected"`
}

// Invariant is a business fact that must hold after a correct repair.
type Invariant struct {
	Name string `json:"name"`
	// Check reports whether it holds now and what it saw.
	Check func(ctx context.Context, e *Env) (ok bool, detail string, err error) `json:"-"`
}

// Scenario is one named incident reproduction.
type Scenario struct {
	Name  string `json:"name"`
	Seed  string `json:"seed,omitempty"`
	Title string `json:"title"`
	run   func(ctx context.Context, r *run) error
}

// Result is what a scenario produced.
type Result struct {
	Scenario   Scenario      `json:"scenario"`
	Expect     []Expectation `json:"expect"`
	Invariants []Invariant   `json:"-"`
	// Story is the consumers' events of the affected operations.
	Story   []string      `json:"story"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Err     error         `json:"-"`
}

// Scenarios lists the lab's scenarios in the order they must run: scenarios
// that share a consumer group run so that one that leaves an offset
// uncommitted is the last on its group (a later consumer would re-read it),
// and in-flight-lease, whose consumer keeps its lease, runs last.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "healthy", Title: "every pipeline, no fault: all COMPLETE", run: healthy},
		{Name: "settlement-double-debit", Seed: "000", Title: "broker blip after the RPC, before the commit: debit and notify run twice", run: doubleDebit},
		{Name: "fulfilment-wms-timeout", Seed: "001", Title: "WMS times out at the caller but locks; retried with a new request id during a rebalance", run: wmsTimeout},
		{Name: "order-wrongly-skipped", Seed: "003", Title: "SHIPPED handled before PAID: PAID is SKIPPED forever, the points grant is lost", run: wronglySkipped},
		{Name: "stranded-early-commit", Title: "offset committed on receipt, consumer dies after the debit: Kafka will not redeliver", run: strandedEarlyCommit},
		{Name: "unknown-outcome", Title: "logistics call times out, no probe exists: the anchored consumer parks it", run: unknownOutcome},
		{Name: "complete-uncommitted", Title: "all steps done, consumer dies before the commit", run: completeUncommitted},
		{Name: "state-behind", Title: "naive consumer dies between the debit and the state update", run: stateBehind},
		{Name: "in-flight-lease", Title: "a live consumer holds the lease while a second member joins (seed 001's rebalance window, fenced)", run: inFlightLease},
	}
}

// BinlogScenarios are the scenarios that need a server with a ROW binlog
// (Env.Binlog): seed 000's incident on the seed's own schema, where only
// the binlog shows the second debit. They are not in Scenarios(); Select
// knows their names.
func BinlogScenarios() []Scenario {
	return []Scenario{
		{Name: "settlement-double-debit-seed", Seed: "000", Title: "settlement-double-debit on seed 000's own tables (no journal, no state, autocommit): only the binlog shows the second debit", run: doubleDebitSeed},
	}
}

// StrandedSeedScenarios are seed 000's half-done operations on the seed's
// own schema (a ROW binlog, like BinlogScenarios): one debited with no
// ledger row and its offset committed past (STRANDED), one debited and not
// committed (WILL_REDELIVER). They are not in Scenarios() nor in
// BinlogScenarios() (no repair is run on them: a republish would debit
// again); Select knows their names.
func StrandedSeedScenarios() []Scenario {
	return []Scenario{
		{Name: "settlement-stranded-seed", Seed: "000", Title: "seed 000's own tables: offset committed on receipt, the consumer dies after the debit (no ledger row, committed past: STRANDED); another dies after the debit before any commit (WILL_REDELIVER)", run: strandedSeed},
	}
}

// SeedScenarios are seeds 001's and 003's incidents on the seeds' own
// schemas (Env.Seed001, Env.Seed003), with consumers written as those
// teams wrote theirs. They run on every server, the embedded one too.
// They are not in Scenarios(); Select knows their names.
func SeedScenarios() []Scenario {
	return []Scenario{
		{Name: "fulfilment-wms-timeout-seed", Seed: "001", Title: "fulfilment-wms-timeout on seed 001's own tables (the order row's PROCESSING/DONE mark, no intents): WMS locks twice; only its journal shows it", run: wmsTimeoutSeed},
		{Name: "order-wrongly-skipped-seed", Seed: "003", Title: "order-wrongly-skipped on seed 003's own tables (idempotent without biz_id, ENUM actions): PAID recorded SKIPPED, points never granted", run: wronglySkippedSeed},
	}
}

// run is one scenario's context: its consumers, producer and expectations.
type run struct {
	e        *Env
	rec      *recorder
	producer sarama.SyncProducer
	live     []*consumer.Consumer
	res      *Result
	keepLive bool
}

func (r *run) expect(pipeline, bizID string, verdict inspect.Code, affected bool) {
	r.res.Expect = append(r.res.Expect, Expectation{BizID: bizID, Pipeline: pipeline, Verdict: verdict, Affected: affected})
}

func (r *run) invariant(name string, check func(ctx context.Context, e *Env) (bool, string, error)) {
	r.res.Invariants = append(r.res.Invariants, Invariant{Name: name, Check: check})
}

// consumerFor starts a consumer of a pipeline of the lab config.
func (r *run) consumerFor(ctx context.Context, pipeline, clientID string, faults *consumer.Faults, tune func(*consumer.Config)) (*consumer.Consumer, error) {
	cfg, err := r.e.consumerConfig(pipeline, clientID)
	if err != nil {
		return nil, err
	}
	events := make(chan consumer.Event, 4096)
	cfg.LeaseTTL, cfg.Faults, cfg.Events = 2*time.Minute, faults, events
	cfg.Timings = r.e.timings
	if tune != nil {
		tune(&cfg)
	}
	go r.rec.feed(context.Background(), events)
	c, err := consumer.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("lab: start %s consumer %s: %v", pipeline, clientID, err)
	}
	r.live = append(r.live, c)
	return c, nil
}

// consumerConfig is the consumer of a lab pipeline: its kind and design,
// topic, group, the lab's brokers and database, and the downstream set of
// its design family.
func (e *Env) consumerConfig(pipeline, clientID string) (consumer.Config, error) {
	p := e.Config.Pipeline(pipeline)
	if p == nil {
		return consumer.Config{}, fmt.Errorf("lab: no pipeline %s in the lab config", pipeline)
	}
	kind, design := kindOf(pipeline)
	services := URLs(e.Naive)
	if design == consumer.Anchored {
		services = URLs(e.Anchored)
	}
	db := e.DB
	if design == consumer.Seed {
		// The seed's own tables and the seeds' downstreams.
		services = URLs(e.Seeds)
		db = map[consumer.Kind]*sql.DB{consumer.Settlement: e.Seed000.DB, consumer.Fulfilment: e.Seed001.DB, consumer.Orders: e.Seed003.DB}[kind]
		if db == nil {
			return consumer.Config{}, fmt.Errorf("lab: pipeline %s: the lab has no database with the seed's own schema", pipeline)
		}
	}
	return consumer.Config{Kind: kind, Design: design, Topic: p.Topic, Group: p.Group, ClientID: clientID,
		Brokers: e.Cluster.Brokers, DB: db, Services: services, RPCTimeout: time.Second}, nil
}

func kindOf(pipeline string) (consumer.Kind, consumer.Design) {
	switch pipeline {
	case "settlement":
		return consumer.Settlement, consumer.Naive
	case "settlement_anchored":
		return consumer.Settlement, consumer.Anchored
	case "settlement_seed":
		return consumer.Settlement, consumer.Seed
	case "fulfilment":
		return consumer.Fulfilment, consumer.Naive
	case "fulfilment_anchored":
		return consumer.Fulfilment, consumer.Anchored
	case "fulfilment_seed":
		return consumer.Fulfilment, consumer.Seed
	case "orders":
		return consumer.Orders, consumer.Naive
	case "orders_seed":
		return consumer.Orders, consumer.Seed
	}
	return consumer.Orders, consumer.Anchored
}

func (r *run) produce(pipeline string, m consumer.Message) error {
	p := r.e.Config.Pipeline(pipeline)
	_, _, err := consumer.ProduceMessage(r.producer, p.Topic, m)
	if err != nil {
		return fmt.Errorf("lab: produce %s to %s: %v", m.BizID, p.Topic, err)
	}
	return nil
}

func (r *run) exec(ctx context.Context, q string, args ...any) error {
	_, err := r.e.DB.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("lab: %s: %v", q, err)
	}
	return nil
}

// account opens an account with a balance.
func (r *run) account(ctx context.Context, id int64, balance string) error {
	return r.exec(ctx, "INSERT INTO account_balance (account_id, balance) VALUES (?, ?)", id, balance)
}

func (r *run) order(ctx context.Context, id, status string) error {
	return r.exec(ctx, "INSERT INTO orders (order_id, status, updated_at) VALUES (?, ?, NOW(3))", id, status)
}

// balanceIs is the settlement invariant: balance = opening − net debits.
func balanceIs(account int64, want string) func(ctx context.Context, e *Env) (bool, string, error) {
	return func(ctx context.Context, e *Env) (bool, string, error) {
		var got string
		if err := e.DB.QueryRowContext(ctx, "SELECT CAST(balance AS CHAR) FROM account_balance WHERE account_id = ?", account).Scan(&got); err != nil {
			return false, "", err
		}
		return got == want, fmt.Sprintf("account %d balance %s, want %s", account, got, want), nil
	}
}

// netEffects is the downstream invariant: exactly want live effects.
func netEffects(svc func(e *Env) interface{ Net(string) int }, what, bizID string, want int) func(ctx context.Context, e *Env) (bool, string, error) {
	return func(ctx context.Context, e *Env) (bool, string, error) {
		got := svc(e).Net(bizID)
		return got == want, fmt.Sprintf("%s %s: %d, want %d", what, bizID, got, want), nil
	}
}

func settle(bizID string, account int64, amount string) consumer.Message {
	return consumer.Message{BizID: bizID, MsgID: "m-" + bizID, AccountID: account, Amount: amount}
}

func fulfil(bizID string) consumer.Message {
	return consumer.Message{BizID: bizID, MsgID: "m-" + bizID, SKU: "SKU-42", Qty: 1}
}

func orderEvent(orderID, event string) consumer.Message {
	return consumer.Message{BizID: orderID, MsgID: "m-" + orderID + "-" + event, Event: event, Points: 120}
}

// ---- scenarios ----

func healthy(ctx context.Context, r *run) error {
	for _, p := range []struct{ pipeline, client string }{
		{"settlement", "settlement-c-1"}, {"settlement_anchored", "pay-a-1"},
		{"fulfilment_anchored", "ful-a-1"}, {"orders_anchored", "ord-a-1"},
	} {
		if _, err := r.consumerFor(ctx, p.pipeline, p.client, nil, nil); err != nil {
			return err
		}
	}
	if err := r.account(ctx, 1001, "1000.00"); err != nil {
		return err
	}
	if err := r.account(ctx, 1002, "1000.00"); err != nil {
		return err
	}
	if err := r.order(ctx, "O-H-1", "PAID"); err != nil {
		return err
	}
	msgs := []struct {
		pipeline string
		m        consumer.Message
	}{
		{"settlement", settle("PAY-H-1", 1001, "25.00")},
		{"settlement_anchored", settle("PAY-H-2", 1002, "40.00")},
		{"fulfilment_anchored", fulfil("F-H-1")},
		{"orders_anchored", orderEvent("O-H-1", "PAID")},
	}
	for _, x := range msgs {
		if err := r.produce(x.pipeline, x.m); err != nil {
			return err
		}
		r.expect(x.pipeline, x.m.BizID, "COMPLETE", false)
	}
	for _, x := range msgs {
		if err := r.rec.waitFor(ctx, x.m.BizID, "committed"); err != nil {
			return err
		}
	}
	r.invariant("balance 1001 = 1000.00 − 25.00", balanceIs(1001, "975.00"))
	r.invariant("balance 1002 = 1000.00 − 40.00", balanceIs(1002, "960.00"))
	return nil
}

func doubleDebit(ctx context.Context, r *run) error {
	if err := r.account(ctx, 2001, "500.00"); err != nil {
		return err
	}
	if err := r.account(ctx, 2002, "500.00"); err != nil {
		return err
	}
	if err := r.brokerBlip(ctx, "settlement", settle("PAY-D-2", 2002, "10.00"), settle("PAY-D-1", 2001, "30.00")); err != nil {
		return err
	}
	r.expect("settlement", "PAY-D-1", "DUPLICATE_EFFECT", true)
	r.expect("settlement", "PAY-D-2", "COMPLETE", false)
	r.invariant("balance 2001 = 500.00 − 30.00 (one debit)", balanceIs(2001, "470.00"))
	r.invariant("one risk notification for PAY-D-1", netEffects(func(e *Env) interface{ Net(string) int } { return e.Naive.Notify }, "notify", "PAY-D-1", 1))
	return nil
}

// brokerBlip is seed 000's incident on a settlement pipeline: one consumer
// handles healthy, then the broker refuses every commit of the group while
// it handles affected (after the RPC, before the commit); it reconnects and
// re-reads affected from the committed offset.
func (r *run) brokerBlip(ctx context.Context, pipeline string, healthy, affected consumer.Message) error {
	p := r.e.Config.Pipeline(pipeline)
	if _, err := r.consumerFor(ctx, pipeline, pipeline+"-c-1", nil, nil); err != nil {
		return err
	}
	if err := r.produce(pipeline, healthy); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, healthy.BizID, "committed"); err != nil {
		return err
	}
	restore := r.e.Cluster.FailCommits(p.Group)
	defer restore()
	if err := r.produce(pipeline, affected); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, affected.BizID, "commit_failed"); err != nil {
		return err
	}
	restore()
	return r.rec.waitFor(ctx, affected.BizID, "committed")
}

// doubleDebitSeed is doubleDebit on seed 000's own tables: the broker blip
// after the RPC, the re-read, the second debit that no table records; then
// a look-alike, PAY-BL-3, that debits the same account by the same amount
// once, inside PAY-BL-1's window: the binlog holds three changes of account
// 3001 by −30.00, two of them PAY-BL-1's.
func doubleDebitSeed(ctx context.Context, r *run) error {
	if !r.e.Binlog {
		return fmt.Errorf("lab: %s needs a server with log_bin ON and binlog_format=ROW (the embedded server of lab/demo has no binlog): run the demo with --mysql-dsn on such a server", "settlement-double-debit-seed")
	}
	for _, a := range []struct {
		id      int64
		balance string
	}{{3001, "500.00"}, {3002, "500.00"}} {
		if _, err := r.e.Seed000.DB.ExecContext(ctx, "INSERT INTO account_balance (account_id, balance) VALUES (?, ?)", a.id, a.balance); err != nil {
			return fmt.Errorf("lab: seed account: %v", err)
		}
	}
	if err := r.brokerBlip(ctx, "settlement_seed", settle("PAY-BL-2", 3002, "30.00"), settle("PAY-BL-1", 3001, "30.00")); err != nil {
		return err
	}
	// The look-alike's message comes after PAY-BL-1's second debit by more
	// than the 1 s a binlog step's window opens before an operation's
	// message, plus the binlog's 1 s resolution: its window holds its own
	// change only, PAY-BL-1's holds all three.
	select {
	case <-time.After(2500 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := r.produce("settlement_seed", settle("PAY-BL-3", 3001, "30.00")); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "PAY-BL-3", "committed"); err != nil {
		return err
	}
	r.expect("settlement_seed", "PAY-BL-1", "DUPLICATE_EFFECT", true)
	r.expect("settlement_seed", "PAY-BL-2", "COMPLETE", false)
	r.expect("settlement_seed", "PAY-BL-3", "COMPLETE", false)
	r.invariant("seed account 3001 = 500.00 − 30.00 (PAY-BL-1) − 30.00 (PAY-BL-3)", seedBalanceIs(3001, "440.00"))
	r.invariant("seed account 3002 = 500.00 − 30.00 (PAY-BL-2)", seedBalanceIs(3002, "470.00"))
	return nil
}

// strandedSeed: seed 000's consumer on its own tables, on one consumer,
// in order:
//   - PAY-ST-2, healthy: debit, ledger, notify, commit (COMPLETE);
//   - PAY-ST-3, the look-alike: its offset committed on receipt (the
//     position of a stranded one) and its ledger written 1.5 s later: the
//     group passed it before its ledger row existed, but it finished
//     (COMPLETE; reconcile's lookup finds its ledger row);
//   - PAY-ST-1, the incident: committed on receipt, debited, and the
//     consumer dies before the ledger insert: no ledger row, no table
//     that names it, the group past it (STRANDED; only the binlog and the
//     topic know it);
//
// then a second consumer dies right after PAY-ST-4's debit, before any
// commit: WILL_REDELIVER, and the redelivery will debit again.
func strandedSeed(ctx context.Context, r *run) error {
	if !r.e.Binlog {
		return fmt.Errorf("lab: %s needs a server with log_bin ON and binlog_format=ROW (the embedded server of lab/demo has no binlog): run the demo with --mysql-dsn on such a server", "settlement-stranded-seed")
	}
	for _, id := range []int64{3101, 3102, 3103, 3104} {
		if _, err := r.e.Seed000.DB.ExecContext(ctx, "INSERT INTO account_balance (account_id, balance) VALUES (?, ?)", id, "500.00"); err != nil {
			return fmt.Errorf("lab: seed account: %v", err)
		}
	}
	f := consumer.NewFaults()
	f.CommitEarly("PAY-ST-3")
	f.StepDelay("PAY-ST-3", "ledger", 1500*time.Millisecond)
	f.CommitEarly("PAY-ST-1")
	f.StepDelay("PAY-ST-1", "ledger", 10*time.Minute)
	c, err := r.consumerFor(ctx, "settlement_seed", "settlement-seed-st-1", f, nil)
	if err != nil {
		return err
	}
	if err := r.produce("settlement_seed", settle("PAY-ST-2", 3102, "30.00")); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "PAY-ST-2", "committed"); err != nil {
		return err
	}
	if err := r.produce("settlement_seed", settle("PAY-ST-3", 3103, "30.00")); err != nil {
		return err
	}
	if _, err := r.rec.wait(ctx, func(ev consumer.Event) bool {
		return ev.BizID == "PAY-ST-3" && ev.What == "step_done" && ev.Step == "notify"
	}, "PAY-ST-3 notify done"); err != nil {
		return err
	}
	if err := r.produce("settlement_seed", settle("PAY-ST-1", 3101, "30.00")); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "PAY-ST-1", "committed"); err != nil {
		return err
	}
	if _, err := r.rec.wait(ctx, func(ev consumer.Event) bool {
		return ev.BizID == "PAY-ST-1" && ev.What == "step_done" && ev.Step == "debit"
	}, "PAY-ST-1 debit done"); err != nil {
		return err
	}
	c.Kill() // the process dies while "working" on the ledger insert
	f2 := consumer.NewFaults()
	f2.DieAfterStep("PAY-ST-4", "debit")
	if _, err := r.consumerFor(ctx, "settlement_seed", "settlement-seed-st-2", f2, nil); err != nil {
		return err
	}
	if err := r.produce("settlement_seed", settle("PAY-ST-4", 3104, "30.00")); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "PAY-ST-4", "died"); err != nil {
		return err
	}
	r.expect("settlement_seed", "PAY-ST-1", "STRANDED", true)
	r.expect("settlement_seed", "PAY-ST-2", "COMPLETE", false)
	r.expect("settlement_seed", "PAY-ST-3", "COMPLETE", false)
	r.expect("settlement_seed", "PAY-ST-4", "WILL_REDELIVER", false)
	r.invariant("seed account 3101 = 500.00 − 30.00 (PAY-ST-1's one debit)", seedBalanceIs(3101, "470.00"))
	return nil
}

// seedBalanceIs is balanceIs on seed 000's own account_balance.
func seedBalanceIs(account int64, want string) func(ctx context.Context, e *Env) (bool, string, error) {
	return func(ctx context.Context, e *Env) (bool, string, error) {
		var got string
		if err := e.Seed000.DB.QueryRowContext(ctx, "SELECT CAST(balance AS CHAR) FROM account_balance WHERE account_id = ?", account).Scan(&got); err != nil {
			return false, "", err
		}
		return got == want, fmt.Sprintf("seed account %d balance %s, want %s", account, got, want), nil
	}
}

// wmsTimeoutSeed is seed 001's incident on its own tables: WMS locks
// SO-7001:PAID but answers after the consumer's 1 s timeout while a second
// member joins; the message is run again from the top (its row is still
// PROCESSING) with a new request id, and WMS locks again. SO-7002:PAID is
// a healthy operation; SO-7001:SPLIT, the same order's next event, locks
// stock once: WMS holds two locks for order SO-7001, one per operation.
func wmsTimeoutSeed(ctx context.Context, r *run) error {
	if _, err := r.consumerFor(ctx, "fulfilment_seed", "fulfilment-seed-c-1", nil, nil); err != nil {
		return err
	}
	if err := r.produce("fulfilment_seed", fulfil("SO-7002:PAID")); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "SO-7002:PAID", "committed"); err != nil {
		return err
	}
	locked := make(chan struct{}, 1)
	wms := r.e.Seeds.WMS
	wms.OnCall(func(c downstream.Call) {
		if c.BizID == "SO-7001:PAID" {
			select {
			case locked <- struct{}{}:
			default:
			}
		}
	})
	wms.SetFault("SO-7001:PAID", downstream.Fault{Delay: 2500 * time.Millisecond, Times: 1})
	if err := r.produce("fulfilment_seed", fulfil("SO-7001:PAID")); err != nil {
		return err
	}
	select {
	case <-locked:
	case <-ctx.Done():
		return fmt.Errorf("waiting for WMS to lock SO-7001:PAID: %v (events: %s)", ctx.Err(), r.rec.summary())
	}
	if _, err := r.consumerFor(ctx, "fulfilment_seed", "fulfilment-seed-c-2", nil, nil); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "SO-7001:PAID", "committed"); err != nil {
		return err
	}
	if err := r.produce("fulfilment_seed", fulfil("SO-7001:SPLIT")); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "SO-7001:SPLIT", "committed"); err != nil {
		return err
	}
	r.expect("fulfilment_seed", "SO-7001:PAID", "DUPLICATE_EFFECT", true)
	r.expect("fulfilment_seed", "SO-7002:PAID", "COMPLETE", false)
	r.expect("fulfilment_seed", "SO-7001:SPLIT", "COMPLETE", false)
	locks := func(e *Env) interface{ Net(string) int } { return e.Seeds.WMS }
	r.invariant("one WMS lock for SO-7001:PAID", netEffects(locks, "WMS locks", "SO-7001:PAID", 1))
	r.invariant("one WMS lock for SO-7001:SPLIT", netEffects(locks, "WMS locks", "SO-7001:SPLIT", 1))
	r.invariant("one waybill for SO-7001:PAID", netEffects(func(e *Env) interface{ Net(string) int } { return e.Seeds.Logistics }, "waybills", "SO-7001:PAID", 1))
	return nil
}

// seedOrderEvent is a seed 003 order event: expectedStatus is PAID for
// both events (PAID grants points; SHIPPED moves a PAID order to SHIPPED).
func seedOrderEvent(msgID string, orderID int64, event string) consumer.OrderEvent {
	return consumer.OrderEvent{MsgID: msgID, OrderID: orderID, ExpectedStatus: "PAID", EventType: event}
}

// wronglySkippedSeed is seed 003's incident on its own tables, with its
// ids: order 8821's SHIPPED event msg-7392 reaches the log before its PAID
// event msg-7391 (the PAID producer retried through the brokers' rolling
// restart) while the consumers roll too (a rebalance hands the partition to
// a new member); the new member ships 8821, then finds it SHIPPED ≠ PAID
// and records msg-7391 SKIPPED: the points are never granted. Order 8822
// was refunded: its PAID is rightly SKIPPED. Order 8823 is paid and
// granted. Order 8824 is the look-alike: granted and shipped in order,
// then its PAID re-sent by the upstream under a new msg id and SKIPPED
// (the order is SHIPPED), its points granted once: a SKIPPED record on
// a shipped order that is not wrong.
func wronglySkippedSeed(ctx context.Context, r *run) error {
	db := r.e.Seed003.DB
	for id, st := range map[int64]string{8821: "PAID", 8822: "REFUNDED", 8823: "PAID", 8824: "PAID"} {
		if _, err := db.ExecContext(ctx, "INSERT INTO orders (order_id, status, created_at, updated_at) VALUES (?, ?, NOW(3), NOW(3))", id, st); err != nil {
			return fmt.Errorf("lab: seed 003 order %d: %v", id, err)
		}
	}
	c1, err := r.consumerFor(ctx, "orders_seed", "order-seed-c-1", nil, nil)
	if err != nil {
		return err
	}
	send := func(evs ...consumer.OrderEvent) error {
		for _, ev := range evs {
			if _, _, err := consumer.ProduceOrderEvent(r.producer, r.e.Config.Pipeline("orders_seed").Topic, ev); err != nil {
				return err
			}
		}
		for _, ev := range evs {
			if _, err := r.rec.wait(ctx, func(x consumer.Event) bool { return x.MsgID == ev.MsgID && x.What == "committed" }, ev.MsgID+" committed"); err != nil {
				return err
			}
		}
		return nil
	}
	if err := send(seedOrderEvent("msg-8824-paid", 8824, consumer.EventPaid), seedOrderEvent("msg-8824-shipped", 8824, consumer.EventShipped),
		seedOrderEvent("msg-8823-paid", 8823, consumer.EventPaid), seedOrderEvent("msg-8822-paid", 8822, consumer.EventPaid)); err != nil {
		return err
	}
	// The rolling restart: a new member joins, the old one leaves.
	if _, err := r.consumerFor(ctx, "orders_seed", "order-seed-c-2", nil, nil); err != nil {
		return err
	}
	if err := c1.Stop(); err != nil {
		return err
	}
	if err := send(seedOrderEvent("msg-7392", 8821, consumer.EventShipped), seedOrderEvent("msg-7391", 8821, consumer.EventPaid),
		seedOrderEvent("msg-8824-paid-resent", 8824, consumer.EventPaid)); err != nil {
		return err
	}
	r.expect("orders_seed", "8821", "WRONGLY_SKIPPED", true)
	r.expect("orders_seed", "8822", "SKIPPED_OK", false)
	r.expect("orders_seed", "8823", "COMPLETE", false)
	r.expect("orders_seed", "8824", "COMPLETE", false)
	points := func(e *Env) interface{ Net(string) int } { return e.Seeds.Points }
	r.invariant("one points grant for paid order 8821", netEffects(points, "points grants", "8821", 1))
	r.invariant("no points for refunded order 8822", netEffects(points, "points grants", "8822", 0))
	r.invariant("one points grant for order 8823", netEffects(points, "points grants", "8823", 1))
	r.invariant("one points grant for order 8824 (its re-sent PAID skipped)", netEffects(points, "points grants", "8824", 1))
	return nil
}

func wmsTimeout(ctx context.Context, r *run) error {
	if _, err := r.consumerFor(ctx, "fulfilment", "fulfilment-c-1", nil, nil); err != nil {
		return err
	}
	if err := r.produce("fulfilment", fulfil("F-W-2")); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "F-W-2", "committed"); err != nil {
		return err
	}
	// WMS locks, then answers after the consumer's 1 s timeout.
	locked := make(chan struct{}, 1)
	wms := r.e.Naive.WMS
	wms.OnCall(func(c downstream.Call) {
		if c.BizID == "F-W-1" {
			select {
			case locked <- struct{}{}:
			default:
			}
		}
	})
	wms.SetFault("F-W-1", downstream.Fault{Delay: 2500 * time.Millisecond, Times: 1})
	if err := r.produce("fulfilment", fulfil("F-W-1")); err != nil {
		return err
	}
	select {
	case <-locked:
	case <-ctx.Done():
		return fmt.Errorf("waiting for WMS to lock F-W-1: %v (events: %s)", ctx.Err(), r.rec.summary())
	}
	// The rebalance of seed 001: a second member joins while the call hangs.
	if _, err := r.consumerFor(ctx, "fulfilment", "fulfilment-c-2", nil, nil); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "F-W-1", "committed"); err != nil {
		return err
	}
	r.expect("fulfilment", "F-W-1", "DUPLICATE_EFFECT", true)
	r.expect("fulfilment", "F-W-2", "COMPLETE", false)
	r.invariant("one WMS lock for F-W-1", netEffects(func(e *Env) interface{ Net(string) int } { return e.Naive.WMS }, "WMS locks", "F-W-1", 1))
	return nil
}

func wronglySkipped(ctx context.Context, r *run) error {
	for id, st := range map[string]string{"O-S-1": "PAID", "O-S-2": "REFUNDED", "O-S-3": "PAID"} {
		if err := r.order(ctx, id, st); err != nil {
			return err
		}
	}
	if _, err := r.consumerFor(ctx, "orders", "order-c-1", nil, nil); err != nil {
		return err
	}
	// Out of order: O-S-1's SHIPPED reaches the log before its PAID.
	for _, m := range []consumer.Message{
		orderEvent("O-S-1", "SHIPPED"), orderEvent("O-S-1", "PAID"),
		orderEvent("O-S-2", "PAID"), orderEvent("O-S-3", "PAID"),
	} {
		if err := r.produce("orders", m); err != nil {
			return err
		}
	}
	skip, err := r.rec.wait(ctx, func(ev consumer.Event) bool { return ev.BizID == "O-S-1" && ev.What == "skipped" }, "O-S-1 skipped")
	if err != nil {
		return err
	}
	// The skip committed too, as in seed 003 ("SKIPPED forever"): killed
	// before its commit, the consumer would leave the PAID record to be
	// delivered again, and the fixed consumer, deciding again by status,
	// would skip it again before opctl's republished copy arrives.
	if _, err := r.rec.wait(ctx, func(ev consumer.Event) bool { return ev.MsgID == skip.MsgID && ev.What == "committed" }, "O-S-1's skipped PAID committed"); err != nil {
		return err
	}
	for _, id := range []string{"O-S-2", "O-S-3"} {
		if err := r.rec.waitFor(ctx, id, "committed"); err != nil {
			return err
		}
	}
	r.expect("orders", "O-S-1", "WRONGLY_SKIPPED", true)
	r.expect("orders", "O-S-2", "SKIPPED_OK", false)
	r.expect("orders", "O-S-3", "COMPLETE", false)
	points := func(e *Env) interface{ Net(string) int } { return e.Naive.Points }
	r.invariant("one points grant for PAID order O-S-1", netEffects(points, "points grants", "O-S-1", 1))
	r.invariant("no points for refunded order O-S-2", netEffects(points, "points grants", "O-S-2", 0))
	return nil
}

func strandedEarlyCommit(ctx context.Context, r *run) error {
	if err := r.account(ctx, 3001, "300.00"); err != nil {
		return err
	}
	f := consumer.NewFaults()
	f.CommitEarly("PAY-E-1")
	f.StepDelay("PAY-E-1", "ledger", 10*time.Minute)
	c, err := r.consumerFor(ctx, "settlement", "settlement-c-1", f, nil)
	if err != nil {
		return err
	}
	if err := r.produce("settlement", settle("PAY-E-2", 3001, "5.00")); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "PAY-E-2", "committed"); err != nil {
		return err
	}
	if err := r.produce("settlement", settle("PAY-E-1", 3001, "50.00")); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "PAY-E-1", "committed"); err != nil {
		return err
	}
	if _, err := r.rec.wait(ctx, func(ev consumer.Event) bool {
		return ev.BizID == "PAY-E-1" && ev.What == "step_done" && ev.Step == "debit"
	}, "PAY-E-1 debit done"); err != nil {
		return err
	}
	c.Kill() // the process dies while "working" on the ledger step
	r.expect("settlement", "PAY-E-1", "STRANDED", true)
	r.expect("settlement", "PAY-E-2", "COMPLETE", false)
	r.invariant("balance 3001 = 300.00 − 5.00 − 50.00", balanceIs(3001, "245.00"))
	return nil
}

func unknownOutcome(ctx context.Context, r *run) error {
	if _, err := r.consumerFor(ctx, "fulfilment_anchored", "ful-a-1", nil, nil); err != nil {
		return err
	}
	if err := r.produce("fulfilment_anchored", fulfil("F-U-2")); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "F-U-2", "committed"); err != nil {
		return err
	}
	r.e.Anchored.Logistics.SetFault("F-U-1", downstream.Fault{Delay: 2500 * time.Millisecond, Times: 1})
	if err := r.produce("fulfilment_anchored", fulfil("F-U-1")); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "F-U-1", "parked"); err != nil {
		return err
	}
	r.expect("fulfilment_anchored", "F-U-1", "UNKNOWN_OUTCOME", true)
	r.expect("fulfilment_anchored", "F-U-2", "COMPLETE", false)
	r.invariant("one waybill for F-U-1", netEffects(func(e *Env) interface{ Net(string) int } { return e.Anchored.Logistics }, "waybills", "F-U-1", 1))
	return nil
}

func completeUncommitted(ctx context.Context, r *run) error {
	if err := r.account(ctx, 4001, "400.00"); err != nil {
		return err
	}
	f := consumer.NewFaults()
	f.DieBeforeCommit("PAY-C-1")
	if _, err := r.consumerFor(ctx, "settlement_anchored", "pay-a-1", f, nil); err != nil {
		return err
	}
	if err := r.produce("settlement_anchored", settle("PAY-C-2", 4001, "1.00")); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "PAY-C-2", "committed"); err != nil {
		return err
	}
	if err := r.produce("settlement_anchored", settle("PAY-C-1", 4001, "15.00")); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "PAY-C-1", "died"); err != nil {
		return err
	}
	r.expect("settlement_anchored", "PAY-C-1", "COMPLETE_UNCOMMITTED", true)
	r.expect("settlement_anchored", "PAY-C-2", "COMPLETE", false)
	r.invariant("balance 4001 = 400.00 − 1.00 − 15.00", balanceIs(4001, "384.00"))
	return nil
}

func stateBehind(ctx context.Context, r *run) error {
	if err := r.account(ctx, 5001, "600.00"); err != nil {
		return err
	}
	f := consumer.NewFaults()
	f.DieAfterStep("PAY-B-1", "debit")
	if _, err := r.consumerFor(ctx, "settlement", "settlement-c-1", f, nil); err != nil {
		return err
	}
	if err := r.produce("settlement", settle("PAY-B-2", 5001, "2.00")); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "PAY-B-2", "committed"); err != nil {
		return err
	}
	if err := r.produce("settlement", settle("PAY-B-1", 5001, "60.00")); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "PAY-B-1", "died"); err != nil {
		return err
	}
	r.expect("settlement", "PAY-B-1", "STATE_BEHIND", true)
	r.expect("settlement", "PAY-B-2", "COMPLETE", false)
	r.invariant("balance 5001 = 600.00 − 2.00 − 60.00", balanceIs(5001, "538.00"))
	return nil
}

func inFlightLease(ctx context.Context, r *run) error {
	f := consumer.NewFaults()
	f.StepDelay("F-L-1", "logistics", 10*time.Minute)
	if _, err := r.consumerFor(ctx, "fulfilment_anchored", "ful-a-1", f, nil); err != nil {
		return err
	}
	if err := r.produce("fulfilment_anchored", fulfil("F-L-2")); err != nil {
		return err
	}
	if err := r.rec.waitFor(ctx, "F-L-2", "committed"); err != nil {
		return err
	}
	if err := r.produce("fulfilment_anchored", fulfil("F-L-1")); err != nil {
		return err
	}
	if _, err := r.rec.wait(ctx, func(ev consumer.Event) bool {
		return ev.BizID == "F-L-1" && ev.What == "step_done" && ev.Step == "wms_lock"
	}, "F-L-1 WMS lock done"); err != nil {
		return err
	}
	// A second member joins: the partition may move, the lease fences it.
	if _, err := r.consumerFor(ctx, "fulfilment_anchored", "ful-a-2", nil, nil); err != nil {
		return err
	}
	r.keepLive = true
	r.expect("fulfilment_anchored", "F-L-1", "IN_FLIGHT", true)
	r.expect("fulfilment_anchored", "F-L-2", "COMPLETE", false)
	r.invariant("one WMS lock for F-L-1", netEffects(func(e *Env) interface{ Net(string) int } { return e.Anchored.WMS }, "WMS locks", "F-L-1", 1))
	return nil
}
