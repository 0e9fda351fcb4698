package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// want is one planted incident of the manifest: the operation and the
// verdict `opctl where` gives it.
type want struct {
	BizID   string `json:"biz_id"`
	Verdict string `json:"verdict"`
}

// naiveQuery is one statement a DBA of the seed's team would run, and the
// verdict its rows stand for.
type naiveQuery struct {
	Label   string
	Verdict string
	SQL     string
	// Check is the reconcile check that asks the same question (-per-check
	// runs it alone); empty when none does.
	Check string
}

// seedDef is one seed: its topic as the seed describes it, how to fill its
// own schema, and the naive statements for the same question.
type seedDef struct {
	ID         string
	Topic      string
	Group      string
	Partitions int32
	// Binlog: the seed's debit is read from the binlog (seed 000): its
	// server must keep a ROW binlog.
	Binlog bool
	// load fills e with n operations, rate of them (at least one) of each
	// planted class, and returns the manifest.
	load func(ctx context.Context, e *env, d *seedDef, n int, rate float64, rnd *rand.Rand) ([]want, error)
	// dump: the naive side needs the topic's messages in a table first
	// (the seed's tables do not say which operation a row belongs to):
	// the DBA dumps the topic (kcat) and loads it (LOAD DATA). dumpDDL
	// creates the temporary table, dumpLoad is the LOAD DATA statement
	// (its file is the dump); empty when the naive side needs no dump.
	dumpTable, dumpDDL, dumpLoad string
	naive                        []naiveQuery
}

var seedDefs = map[string]*seedDef{
	"000": {ID: "000", Topic: "settlement-event", Group: "settlement-consumer", Partitions: 32, Binlog: true, load: load000,
		dumpTable: "dba_events",
		dumpDDL: "CREATE TEMPORARY TABLE dba_events (biz_order_id VARCHAR(64) NOT NULL PRIMARY KEY," +
			" account_id BIGINT NOT NULL, amount DECIMAL(18,2) NOT NULL, KEY (account_id))",
		dumpLoad: "LOAD DATA LOCAL INFILE 'Reader::dump' INTO TABLE dba_events FIELDS TERMINATED BY '\\t' (biz_order_id, @v)" +
			" SET account_id = JSON_VALUE(@v, '$.account_id'), amount = JSON_VALUE(@v, '$.amount')",
		naive: []naiveQuery{
			{Label: "double debit: accounts that moved more than their messages say, and the message of that amount", Verdict: "DUPLICATE_EFFECT", Check: "duplicates",
				SQL: "SELECT e.biz_order_id FROM (SELECT s.account_id, (s.balance - a.balance) - m.booked AS extra" +
					" FROM (SELECT account_id, SUM(amount) AS booked FROM dba_events GROUP BY account_id) m" +
					" JOIN dba_balance_snapshot s ON s.account_id = m.account_id" +
					" JOIN account_balance a ON a.account_id = m.account_id" +
					" WHERE s.balance - a.balance <> m.booked) x" +
					" JOIN dba_events e ON e.account_id = x.account_id AND e.amount = x.extra"},
			{Label: "stranded: messages without a ledger row", Verdict: "STRANDED",
				SQL: "SELECT e.biz_order_id FROM dba_events e WHERE NOT EXISTS" +
					" (SELECT 1 FROM ledger_entry l WHERE l.biz_order_id = e.biz_order_id AND l.direction = 'DEBIT')"},
		}},
	"001": {ID: "001", Topic: "order-fulfilment", Group: "fulfilment-consumer", Partitions: 16, load: load001,
		naive: []naiveQuery{
			{Label: "stuck: PROCESSING for more than 5 minutes", Verdict: "STRANDED", Check: "stuck",
				SQL: "SELECT biz_id FROM fulfil_order WHERE status = 'PROCESSING' AND updated_at < NOW(3) - INTERVAL 5 MINUTE"},
			{Label: "double WMS lock: WMS's journal (their copy), keys locked twice", Verdict: "DUPLICATE_EFFECT", Check: "duplicates",
				SQL: "SELECT biz_id FROM dba_wms_journal GROUP BY biz_id HAVING COUNT(*) > 1"},
		}},
	"003": {ID: "003", Topic: "order-event", Group: "order-consumer", Partitions: 24, load: load003,
		dumpTable: "dba_msg",
		dumpDDL:   "CREATE TEMPORARY TABLE dba_msg (msg_id VARCHAR(64) NOT NULL PRIMARY KEY, order_id BIGINT NOT NULL)",
		dumpLoad: "LOAD DATA LOCAL INFILE 'Reader::dump' INTO TABLE dba_msg FIELDS TERMINATED BY '\\t' (order_id, @v)" +
			" SET msg_id = JSON_VALUE(@v, '$.msgId')",
		naive: []naiveQuery{
			{Label: "wrongly skipped: SKIPPED records whose order's status is now valid", Verdict: "WRONGLY_SKIPPED", Check: "skipped",
				SQL: "SELECT DISTINCT o.order_id FROM idempotent i JOIN dba_msg m ON m.msg_id = i.msg_id" +
					" JOIN orders o ON o.order_id = m.order_id" +
					" WHERE i.action = 'SKIPPED' AND o.status NOT IN ('REFUNDED', 'CANCELLED')"},
		}},
}

// planted is how many operations of each planted class n operations get.
func planted(n int, rate float64) int { return max(1, int(float64(n)*rate+0.5)) }

// dbNow is the server's clock (the session's time zone, read as UTC as the
// tool's connections read every DATETIME) and its offset from this
// machine's clock: a record's timestamp is a real instant, a row's time
// is what the server's NOW(3) would have written.
func dbNow(ctx context.Context, e *env) (time.Time, time.Duration, error) {
	var now time.Time
	if err := e.db.QueryRowContext(ctx, "SELECT NOW(3)").Scan(&now); err != nil {
		return time.Time{}, 0, err
	}
	return now, now.Sub(time.Now()), nil
}

func amount(cents int) string { return fmt.Sprintf("%d.%02d", cents/100, cents%100) }

// load000: seed 000's settlement on its own tables. Every operation is a
// message {biz_id, msg_id, account_id, amount}, one debit (the seed's
// plain guarded UPDATE, autocommit, on the binlog server) and one
// ledger_entry row; the group has committed past every message. Planted:
// DUPLICATE_EFFECT (the debit ran twice: redelivered after the commit was
// lost; its account has no other operation) and STRANDED (debited, no
// ledger row, committed past: the consumer died between the two and its
// offset was committed by the next batch). Look-alikes: pairs of
// operations debiting one account by the same amount, once each (where
// attributes one change to each: COMPLETE). Most accounts carry about four
// operations with random amounts.
func load000(ctx context.Context, e *env, d *seedDef, n int, rate float64, rnd *rand.Rand) ([]want, error) {
	k := planted(n, rate)
	type op struct {
		biz     string
		account int64
		cents   int
		class   byte // 'n' normal, 'D' double debit, 'S' stranded, 'L' look-alike
	}
	shared := int64(max(1, (n-4*k)/4))
	ops := make([]op, 0, n)
	next := shared + 1
	for i := range n {
		o := op{biz: fmt.Sprintf("PAY-%07d", i+1), class: 'n', account: 1 + rnd.Int64N(shared), cents: 100 + rnd.IntN(99900)}
		switch {
		case i < k:
			o.class, o.account = 'D', next
			next++
		case i < 2*k:
			o.class = 'S'
		case i < 4*k: // pairs: 2k..2k+1 share an account and an amount
			o.class = 'L'
			if (i-2*k)%2 == 0 {
				o.account = next
				next++
			} else {
				o.account, o.cents = ops[i-1].account, ops[i-1].cents
			}
		}
		ops = append(ops, o)
	}
	rnd.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
	accounts := make([][]any, 0, next)
	for a := int64(1); a < next; a++ {
		accounts = append(accounts, []any{a, "1000000000.00"})
	}
	if err := e.insertRows(ctx, "account_balance", []string{"account_id", "balance"}, accounts); err != nil {
		return nil, err
	}
	// Yesterday's closing balances: what a T+1 reconciliation compares
	// the day's messages against (the naive side's only way to see a
	// debit nothing records).
	if _, err := e.db.ExecContext(ctx, "CREATE TABLE dba_balance_snapshot LIKE account_balance;"+
		" INSERT INTO dba_balance_snapshot SELECT * FROM account_balance"); err != nil {
		return nil, err
	}
	// The messages first (the consumer reads them, then debits).
	recs := make([]record, len(ops))
	for i, o := range ops {
		recs[i] = record{key: o.biz, ts: time.Now(), value: map[string]any{"biz_id": o.biz, "msg_id": "m-" + o.biz,
			"account_id": o.account, "amount": amount(o.cents)}}
	}
	if err := e.produce(d.Topic, d.Group, d.Partitions, recs); err != nil {
		return nil, err
	}
	// Each debit in its own autocommit transaction, as the consumer's
	// statement runs (500 to a round trip; the values are the
	// generator's numbers).
	debit := func(batch []op) error {
		var sb strings.Builder
		for _, o := range batch {
			a, id := amount(o.cents), strconv.FormatInt(o.account, 10)
			sb.WriteString("UPDATE account_balance SET balance = balance - " + a + " WHERE account_id = " + id + " AND balance >= " + a + ";")
		}
		_, err := e.db.ExecContext(ctx, sb.String())
		return err
	}
	const per = 500
	if err := parallel(4, (len(ops)+per-1)/per, func(i int) error {
		return debit(ops[i*per : min((i+1)*per, len(ops))])
	}); err != nil {
		return nil, fmt.Errorf("debits: %v", err)
	}
	now, _, err := dbNow(ctx, e)
	if err != nil {
		return nil, err
	}
	var ledger [][]any
	var m []want
	var again []op
	for _, o := range ops {
		switch o.class {
		case 'S':
			m = append(m, want{o.biz, "STRANDED"})
			continue
		case 'D':
			m = append(m, want{o.biz, "DUPLICATE_EFFECT"})
			again = append(again, o)
		}
		ledger = append(ledger, []any{o.biz, "DEBIT", amount(o.cents), now})
	}
	if err := e.insertRows(ctx, "ledger_entry", []string{"biz_order_id", "direction", "amount", "created_at"}, ledger); err != nil {
		return nil, err
	}
	// The redelivery: the debit runs again, the ledger insert is stopped
	// by its unique key (nothing to write), the RPC is replayed.
	time.Sleep(time.Second)
	if err := debit(again); err != nil {
		return nil, fmt.Errorf("second debits: %v", err)
	}
	return m, nil
}

// load001: seed 001's fulfilment on its own tables (attempt 3's
// processing mark). Every operation (biz_id order number + ":PAID") has
// its fulfil_order row DONE, one WMS lock and one waybill in those
// services' journals (the probes), an outbox notice, and its message,
// committed past. Planted: STRANDED (PROCESSING, locked at WMS, no
// waybill, no notice, committed past: the consumer was kicked out after
// WMS and its offset committed by the new owner's later commit) and
// DUPLICATE_EFFECT on wms_lock (WMS's journal holds two locks: the seed's
// incident). Times are spread over span, ending 10 minutes ago (past
// reconcile's --older-than 5m).
func load001(ctx context.Context, e *env, d *seedDef, n int, rate float64, rnd *rand.Rand) ([]want, error) {
	k := planted(n, rate)
	now, off, err := dbNow(ctx, e)
	if err != nil {
		return nil, err
	}
	end := now.Add(-10 * time.Minute)
	var rows, outbox, journal [][]any
	var m []want
	recs := make([]record, 0, n)
	for i := range n {
		biz := fmt.Sprintf("SO-%07d:PAID", i+1)
		t := end.Add(-time.Duration(rnd.Int64N(int64(span)))).Truncate(time.Millisecond)
		status, wms, waybills := "DONE", 1, 1
		switch {
		case i < k:
			status, waybills = "PROCESSING", 0
			m = append(m, want{biz, "STRANDED"})
		case i < 2*k:
			wms = 2
			m = append(m, want{biz, "DUPLICATE_EFFECT"})
		}
		upd := t.Add(800 * time.Millisecond)
		if status == "PROCESSING" {
			upd = t.Add(50 * time.Millisecond)
		} else {
			outbox = append(outbox, []any{biz, "notice", `{"text":"your order ships soon"}`, upd})
		}
		rows = append(rows, []any{biz, strings.TrimSuffix(biz, ":PAID"), "PAID", "PAID", status, t, upd})
		e.probes.set("/locks", biz, wms)
		e.probes.set("/waybills", biz, waybills)
		for range wms {
			journal = append(journal, []any{biz})
		}
		recs = append(recs, record{key: biz, ts: t.Add(-off), value: map[string]any{"biz_id": biz, "msg_id": "m-" + biz, "event": "PAID"}})
	}
	if err := e.insertRows(ctx, "fulfil_order", []string{"biz_id", "order_no", "event_type", "order_status", "status", "created_at", "updated_at"}, rows); err != nil {
		return nil, err
	}
	if err := e.insertRows(ctx, "outbox", []string{"biz_id", "kind", "payload", "created_at"}, outbox); err != nil {
		return nil, err
	}
	// WMS's journal as its team would export it (the naive side's only way
	// to see a double lock): one row per lock.
	if _, err := e.db.ExecContext(ctx, "CREATE TABLE dba_wms_journal (id BIGINT AUTO_INCREMENT PRIMARY KEY, biz_id VARCHAR(96) NOT NULL, KEY ix_biz (biz_id))"); err != nil {
		return nil, err
	}
	if err := e.insertRows(ctx, "dba_wms_journal", []string{"biz_id"}, journal); err != nil {
		return nil, err
	}
	sortByTime(recs)
	return m, e.produce(d.Topic, d.Group, d.Partitions, recs)
}

// load003: seed 003's order events on its own tables. Every order (its id
// the message key) has a PAID event, processed DONE with its points grant
// (the points service's journal: the probe); half also a SHIPPED event,
// DONE. Look-alikes: 2% of the orders were refunded before their PAID
// event was consumed: SKIPPED, no points, SKIPPED_OK. Planted:
// WRONGLY_SKIPPED, the seed's incident: PAID and SHIPPED in order in the
// partition, SHIPPED processed first (a rebalance), so PAID found the
// order SHIPPED and was recorded SKIPPED; no points. Times are spread over
// span, ending 10 minutes ago.
func load003(ctx context.Context, e *env, d *seedDef, n int, rate float64, rnd *rand.Rand) ([]want, error) {
	k := planted(n, rate)
	refunds := max(1, n/50)
	now, off, err := dbNow(ctx, e)
	if err != nil {
		return nil, err
	}
	end := now.Add(-10 * time.Minute)
	var orders, idem [][]any
	var m []want
	recs := make([]record, 0, n*3/2)
	ms := func(d int) time.Duration { return time.Duration(d) * time.Millisecond }
	for i := range n {
		id := int64(1_000_001 + i)
		key := strconv.FormatInt(id, 10)
		t := end.Add(-time.Duration(rnd.Int64N(int64(span)))).Truncate(time.Millisecond)
		paid := map[string]any{"msgId": fmt.Sprintf("m-%d-P", id), "orderId": id, "expectedStatus": "PAID", "eventType": "PAID"}
		shipped := map[string]any{"msgId": fmt.Sprintf("m-%d-S", id), "orderId": id, "expectedStatus": "SHIPPED", "eventType": "SHIPPED"}
		recs = append(recs, record{key: key, ts: t.Add(ms(1000) - off), value: paid})
		var status string
		var upd time.Time
		points := 1
		switch {
		case i < k: // SHIPPED consumed first, then PAID skipped
			recs = append(recs, record{key: key, ts: t.Add(ms(2000) - off), value: shipped})
			idem = append(idem, []any{shipped["msgId"], "DONE", t.Add(ms(2100))}, []any{paid["msgId"], "SKIPPED", t.Add(ms(2200))})
			status, upd, points = "SHIPPED", t.Add(ms(2100)), 0
			m = append(m, want{key, "WRONGLY_SKIPPED"})
		case i < k+refunds: // refunded before PAID was consumed
			idem = append(idem, []any{paid["msgId"], "SKIPPED", t.Add(ms(1100))})
			status, upd, points = "REFUNDED", t.Add(ms(500)), 0
		case i%2 == 0:
			recs = append(recs, record{key: key, ts: t.Add(ms(2000) - off), value: shipped})
			idem = append(idem, []any{paid["msgId"], "DONE", t.Add(ms(1100))}, []any{shipped["msgId"], "DONE", t.Add(ms(2100))})
			status, upd = "SHIPPED", t.Add(ms(2100))
		default:
			idem = append(idem, []any{paid["msgId"], "DONE", t.Add(ms(1100))})
			status, upd = "PAID", t.Add(ms(1100))
		}
		orders = append(orders, []any{id, status, t, upd})
		e.probes.set("/grants", key, points)
	}
	if err := e.insertRows(ctx, "orders", []string{"order_id", "status", "created_at", "updated_at"}, orders); err != nil {
		return nil, err
	}
	if err := e.insertRows(ctx, "idempotent", []string{"msg_id", "action", "created_at"}, idem); err != nil {
		return nil, err
	}
	sortByTime(recs)
	return m, e.produce(d.Topic, d.Group, d.Partitions, recs)
}

// span is how far back the generated operations of seeds 001 and 003 go
// (seed 000's are real time: its debits are in the binlog as they run).
var span = 6 * time.Hour

func sortByTime(recs []record) {
	slices.SortFunc(recs, func(a, b record) int { return a.ts.Compare(b.ts) })
}
