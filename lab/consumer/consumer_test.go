package consumer

import (
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func settleMsg(biz string, account int64, amount string) Message {
	return Message{BizID: biz, MsgID: "m-" + biz, AccountID: account, Amount: amount}
}

func fulfilMsg(biz string) Message {
	return Message{BizID: biz, MsgID: "m-" + biz, SKU: "SKU-42", Qty: 2}
}

func orderMsg(order, event string) Message {
	return Message{BizID: order, MsgID: "m-" + order + "-" + event, Event: event, Points: 120}
}

// TestHealthy: for every kind × design, one record ends with its rows
// (state DONE / idempotency DONE), exactly one effect of each step, and the
// offset committed past it.
func TestHealthy(t *testing.T) {
	type check func(l *lab)
	cases := []struct {
		kind   Kind
		design Design
		msg    Message
		check  check
	}{
		{Settlement, Naive, settleMsg("PAY-1", 1001, "25.00"), func(l *lab) {
			l.want("biz_operation status", l.str("SELECT status FROM biz_operation WHERE biz_id = 'PAY-1'"), "DONE")
			l.want("biz_operation version", l.count("SELECT version FROM biz_operation WHERE biz_id = 'PAY-1'"), 3)
			l.want("debit_log rows", l.count("SELECT COUNT(*) FROM debit_log WHERE biz_id = 'PAY-1' AND kind = 'DEBIT' AND delta = -25.00"), 1)
			l.want("ledger rows", l.count("SELECT COUNT(*) FROM ledger_entry WHERE biz_order_id = 'PAY-1' AND direction = 'OUT'"), 1)
			l.want("balance", l.str("SELECT CAST(balance AS CHAR) FROM account_balance WHERE account_id = 1001"), "975.00")
			l.want("notify calls", l.notify.count("PAY-1"), 1)
		}},
		{Settlement, Anchored, settleMsg("PAY-2", 1001, "40.00"), func(l *lab) {
			l.want("pay_state", l.str("SELECT CONCAT_WS('/', status, version, IFNULL(owner, '-'), IFNULL(lease_until, '-'), attempts) FROM pay_state WHERE biz_id = 'PAY-2'"), "DONE/5/-/-/0")
			l.want("journal rows", l.count("SELECT COUNT(*) FROM balance_journal WHERE biz_id = 'PAY-2' AND kind = 'DEBIT' AND delta = -40.00"), 1)
			l.want("pay_ledger rows", l.count("SELECT COUNT(*) FROM pay_ledger WHERE biz_order_id = 'PAY-2'"), 1)
			l.want("acked intents", l.count("SELECT COUNT(*) FROM pay_intent WHERE request_id = 'PAY-2:notify' AND step = 'notify' AND acked_at IS NOT NULL AND result = 'APPLIED'"), 1)
			l.want("balance", l.str("SELECT CAST(balance AS CHAR) FROM account_balance WHERE account_id = 1001"), "960.00")
			l.want("notify calls", l.notify.count("PAY-2"), 1)
		}},
		{Fulfilment, Naive, fulfilMsg("F-1"), func(l *lab) {
			l.want("fulfil_state", l.str("SELECT status FROM fulfil_state WHERE biz_id = 'F-1'"), "DONE")
			l.want("fulfil_order rows", l.count("SELECT COUNT(*) FROM fulfil_order WHERE biz_id = 'F-1'"), 1)
			l.want("outbox rows", l.count("SELECT COUNT(*) FROM fulfil_outbox WHERE biz_id = 'F-1' AND kind = 'notice'"), 1)
			l.want("WMS locks", l.wms.count("F-1"), 1)
			l.want("waybills", l.logi.count("F-1"), 1)
		}},
		{Fulfilment, Anchored, fulfilMsg("F-2"), func(l *lab) {
			l.want("ful_state", l.str("SELECT CONCAT_WS('/', status, IFNULL(owner, '-'), IFNULL(lease_until, '-')) FROM ful_state WHERE biz_id = 'F-2'"), "DONE/-/-")
			l.want("ful_order rows", l.count("SELECT COUNT(*) FROM ful_order WHERE biz_id = 'F-2'"), 1)
			l.want("acked intents", l.count("SELECT COUNT(*) FROM ful_intent WHERE biz_id = 'F-2' AND acked_at IS NOT NULL AND request_id IN ('F-2:wms_lock', 'F-2:logistics')"), 2)
			l.want("outbox rows", l.count("SELECT COUNT(*) FROM ful_outbox WHERE biz_id = 'F-2' AND kind = 'notice'"), 1)
			l.want("WMS locks", l.wms.count("F-2"), 1)
			l.want("waybills", l.logi.count("F-2"), 1)
		}},
		{Orders, Naive, orderMsg("O-1", EventPaid), func(l *lab) {
			l.want("idempotent", l.str("SELECT action FROM idempotent WHERE msg_id = 'm-O-1-PAID' AND biz_id = 'O-1'"), "DONE")
			l.want("points grants", l.points.count("O-1"), 1)
		}},
		{Orders, Anchored, orderMsg("O-2", EventPaid), func(l *lab) {
			l.want("order_idem", l.str("SELECT CONCAT_WS('/', action, entity_status_seen, IFNULL(review_after, '-')) FROM order_idem WHERE msg_id = 'm-O-2-PAID'"), "DONE/PAID/-")
			l.want("acked intents", l.count("SELECT COUNT(*) FROM order_intent WHERE request_id = 'O-2:points:m-O-2-PAID' AND step = 'points' AND acked_at IS NOT NULL"), 1)
			l.want("points grants", l.points.count("O-2"), 1)
		}},
	}
	for _, tc := range cases {
		t.Run(string(tc.kind)+"_"+string(tc.design), func(t *testing.T) {
			t.Parallel()
			l := newLab(t, 4)
			l.exec("INSERT INTO account_balance (account_id, balance) VALUES (1001, 1000.00)")
			l.exec("INSERT INTO orders (order_id, status, updated_at) VALUES ('O-1', 'PAID', NOW(3)), ('O-2', 'PAID', NOW(3))")
			l.start(tc.kind, tc.design, "c-1", nil, nil)
			part, off := l.produce(tc.msg)
			ev := l.rec.waitFor(t, l.ctx, tc.msg.BizID, "committed")
			if ev.Partition != part || ev.Offset != off {
				t.Errorf("committed event for p%d@%d, produced p%d@%d", ev.Partition, ev.Offset, part, off)
			}
			l.want("committed offset", l.committed(part), off+1)
			tc.check(l)
		})
	}
}

// TestDieAfterStep: the consumer dies right after a step: exactly that
// step's rows exist (and, for naive, not its state update), and nothing is
// committed.
func TestDieAfterStep(t *testing.T) {
	t.Run("settlement_naive_debit", func(t *testing.T) {
		t.Parallel()
		l := newLab(t, 2)
		l.exec("INSERT INTO account_balance (account_id, balance) VALUES (7, 100.00)")
		f := NewFaults()
		f.DieAfterStep("PAY-D", stepDebit)
		c := l.start(Settlement, Naive, "c-1", f, nil)
		part, _ := l.produce(settleMsg("PAY-D", 7, "30.00"))
		l.rec.waitFor(t, l.ctx, "PAY-D", "died")
		<-c.Done()
		l.want("biz_operation status (behind the debit)", l.str("SELECT status FROM biz_operation WHERE biz_id = 'PAY-D'"), "INIT")
		l.want("debit_log rows", l.count("SELECT COUNT(*) FROM debit_log WHERE biz_id = 'PAY-D'"), 1)
		l.want("balance", l.str("SELECT CAST(balance AS CHAR) FROM account_balance WHERE account_id = 7"), "70.00")
		l.want("ledger rows", l.count("SELECT COUNT(*) FROM ledger_entry WHERE biz_order_id = 'PAY-D'"), 0)
		l.want("notify calls", l.notify.count("PAY-D"), 0)
		l.want("committed offset", l.committed(part), -1)
		if err := c.Stop(); err == nil {
			t.Errorf("Stop after a death returned nil")
		}
	})
	t.Run("settlement_anchored_debit", func(t *testing.T) {
		t.Parallel()
		l := newLab(t, 2)
		l.exec("INSERT INTO account_balance (account_id, balance) VALUES (7, 100.00)")
		f := NewFaults()
		f.DieAfterStep("PAY-D", stepDebit)
		c := l.start(Settlement, Anchored, "c-1", f, nil)
		part, off := l.produce(settleMsg("PAY-D", 7, "30.00"))
		l.rec.waitFor(t, l.ctx, "PAY-D", "died")
		<-c.Done()
		l.want("pay_state (advanced with the debit, lease still held)",
			l.str("SELECT CONCAT_WS('/', status, owner, lease_until > NOW(3), msg_id, src_partition, src_offset) FROM pay_state WHERE biz_id = 'PAY-D'"),
			"DEBIT_DONE/c-1/1/m-PAY-D/"+itoa(part)+"/"+itoa(off))
		l.want("journal rows", l.count("SELECT COUNT(*) FROM balance_journal WHERE biz_id = 'PAY-D'"), 1)
		l.want("balance", l.str("SELECT CAST(balance AS CHAR) FROM account_balance WHERE account_id = 7"), "70.00")
		l.want("pay_ledger rows", l.count("SELECT COUNT(*) FROM pay_ledger WHERE biz_order_id = 'PAY-D'"), 0)
		l.want("intents", l.count("SELECT COUNT(*) FROM pay_intent WHERE biz_id = 'PAY-D'"), 0)
		l.want("committed offset", l.committed(part), -1)
	})
	t.Run("fulfilment_anchored_wms_lock", func(t *testing.T) {
		t.Parallel()
		l := newLab(t, 2)
		f := NewFaults()
		f.DieAfterStep("F-D", stepWMSLock)
		c := l.start(Fulfilment, Anchored, "c-1", f, nil)
		part, _ := l.produce(fulfilMsg("F-D"))
		l.rec.waitFor(t, l.ctx, "F-D", "died")
		<-c.Done()
		l.want("ful_state", l.str("SELECT status FROM ful_state WHERE biz_id = 'F-D'"), "WMS_CONFIRMED")
		l.want("wms intent acked", l.count("SELECT COUNT(*) FROM ful_intent WHERE request_id = 'F-D:wms_lock' AND acked_at IS NOT NULL"), 1)
		l.want("logistics intents", l.count("SELECT COUNT(*) FROM ful_intent WHERE request_id = 'F-D:logistics'"), 0)
		l.want("WMS locks", l.wms.count("F-D"), 1)
		l.want("waybills", l.logi.count("F-D"), 0)
		l.want("outbox rows", l.count("SELECT COUNT(*) FROM ful_outbox WHERE biz_id = 'F-D'"), 0)
		l.want("committed offset", l.committed(part), -1)
	})
	t.Run("orders_naive_points", func(t *testing.T) {
		t.Parallel()
		l := newLab(t, 2)
		l.exec("INSERT INTO orders (order_id, status, updated_at) VALUES ('O-D', 'PAID', NOW(3))")
		f := NewFaults()
		f.DieAfterStep("O-D", stepPoints)
		c := l.start(Orders, Naive, "c-1", f, nil)
		part, _ := l.produce(orderMsg("O-D", EventPaid))
		l.rec.waitFor(t, l.ctx, "O-D", "died")
		<-c.Done()
		l.want("points grants", l.points.count("O-D"), 1)
		l.want("idempotent rows", l.count("SELECT COUNT(*) FROM idempotent WHERE biz_id = 'O-D'"), 0)
		l.want("committed offset", l.committed(part), -1)
	})
}

func itoa[T int32 | int64](v T) string { return strconv.FormatInt(int64(v), 10) }

// TestRereadAfterRestart: the operation completes but the consumer dies
// before committing; a restarted consumer re-reads the record. Naive debits
// (and notifies) twice, the ledger's unique key stops the second row;
// anchored finds the state DONE and only commits.
func TestRereadAfterRestart(t *testing.T) {
	for _, design := range []Design{Naive, Anchored} {
		t.Run(string(design), func(t *testing.T) {
			t.Parallel()
			l := newLab(t, 2)
			l.exec("INSERT INTO account_balance (account_id, balance) VALUES (9, 500.00)")
			f := NewFaults()
			f.DieBeforeCommit("PAY-R")
			c1 := l.start(Settlement, design, "c-1", f, nil)
			part, off := l.produce(settleMsg("PAY-R", 9, "30.00"))
			l.rec.waitFor(t, l.ctx, "PAY-R", "died")
			<-c1.Done()
			l.want("committed offset after the death", l.committed(part), -1)

			l.start(Settlement, design, "c-2", f, nil)
			l.rec.wait(t, l.ctx, "c-2 commits PAY-R", func(ev Event) bool {
				return ev.Consumer == "c-2" && ev.BizID == "PAY-R" && ev.What == "committed"
			})
			l.want("committed offset", l.committed(part), off+1)
			if design == Naive {
				l.want("debit_log rows", l.count("SELECT COUNT(*) FROM debit_log WHERE biz_id = 'PAY-R'"), 2)
				l.want("balance (double debit)", l.str("SELECT CAST(balance AS CHAR) FROM account_balance WHERE account_id = 9"), "440.00")
				l.want("ledger rows", l.count("SELECT COUNT(*) FROM ledger_entry WHERE biz_order_id = 'PAY-R'"), 1)
				l.want("notify calls", l.notify.count("PAY-R"), 2)
				l.want("ledger skipped by its unique key", l.rec.count(func(ev Event) bool {
					return ev.Consumer == "c-2" && ev.Step == stepLedger && ev.What == "step_skipped"
				}), 1)
			} else {
				l.want("journal rows", l.count("SELECT COUNT(*) FROM balance_journal WHERE biz_id = 'PAY-R'"), 1)
				l.want("balance", l.str("SELECT CAST(balance AS CHAR) FROM account_balance WHERE account_id = 9"), "470.00")
				l.want("notify calls", l.notify.count("PAY-R"), 1)
				l.want("c-2 saw it done", l.rec.count(func(ev Event) bool {
					return ev.Consumer == "c-2" && ev.BizID == "PAY-R" && ev.What == "already_done"
				}), 1)
			}
		})
	}
}

// TestCommitFailure is seed 000's broker blip: every OffsetCommit of the
// group fails; the consumer sees it (commit_failed), tears its client down,
// rejoins and re-reads the record once commits work again.
//
// sarama reports UNKNOWN_SERVER_ERROR on ConsumerGroup.Errors() but swallows
// COORDINATOR_NOT_AVAILABLE (it only looks for the coordinator again): the
// consumer must notice both. (kfake's REQUEST_TIMED_OUT fault commits and
// then answers the error, as a real broker may: the consumer's check then
// finds the offset committed, rightly.)
func TestCommitFailure(t *testing.T) {
	for _, tc := range []struct {
		design Design
		code   *kerr.Error
	}{{Naive, kerr.CoordinatorNotAvailable}, {Naive, kerr.UnknownServerError}, {Anchored, kerr.UnknownServerError}} {
		design := tc.design
		t.Run(string(design)+"_"+tc.code.Message, func(t *testing.T) {
			t.Parallel()
			l := newLab(t, 2)
			l.exec("INSERT INTO account_balance (account_id, balance) VALUES (3, 500.00)")
			l.start(Settlement, design, "c-1", nil, nil)
			blip := l.kafka.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: l.group,
				Err: tc.code, Count: -1})
			part, off := l.produce(settleMsg("PAY-B", 3, "30.00"))
			l.rec.waitFor(t, l.ctx, "PAY-B", "commit_failed")
			blip.Remove()
			l.rec.waitFor(t, l.ctx, "PAY-B", "committed")
			l.want("committed offset", l.committed(part), off+1)
			l.want("rejoined", l.rec.count(func(ev Event) bool { return ev.What == "rejoin" }) >= 1, true)
			if design == Naive {
				l.want("balance (debited twice)", l.str("SELECT CAST(balance AS CHAR) FROM account_balance WHERE account_id = 3"), "440.00")
				l.want("notify calls", l.notify.count("PAY-B"), 2)
			} else {
				l.want("balance", l.str("SELECT CAST(balance AS CHAR) FROM account_balance WHERE account_id = 3"), "470.00")
				l.want("notify calls", l.notify.count("PAY-B"), 1)
			}
		})
	}
}

// TestAnchoredLease: while a consumer holds an operation's lease (sleeping
// before its notify), a second member joins; whoever gets the partition
// re-reads the record and finds the lease busy: the other member by the
// lease row, the holder itself (a new session while its old one's work goes
// on) by its in-process guard. The holder is killed; its lease runs out; the
// operation finishes exactly once. Range assignment gives the single
// partition to the member whose id (client id + uuid) sorts first.
//
// The lease is long (30s), so that it outlives the second member's join and
// first look however loaded the machine; after the kill it is still live
// (a killed holder gives nothing back), and the test makes it run out in
// the database instead of waiting for it. The waiting member notices at its
// next recheck (FastTimings: 50ms).
func TestAnchoredLease(t *testing.T) {
	const leaseTTL = 30 * time.Second
	for _, tc := range []struct{ holder, other, busy string }{
		{"c-z", "c-b", "lease held by c-z"},
		{"c-a", "c-b", "in flight in this process (c-a)"},
	} {
		t.Run(tc.holder+"_then_"+tc.other, func(t *testing.T) {
			t.Parallel()
			l := newLab(t, 1)
			l.exec("INSERT INTO account_balance (account_id, balance) VALUES (5, 500.00)")
			ttl := func(c *Config) { c.LeaseTTL = leaseTTL }
			f := NewFaults()
			f.StepDelay("PAY-L", stepNotify, time.Minute)
			holder := l.start(Settlement, Anchored, tc.holder, f, ttl)
			part, off := l.produce(settleMsg("PAY-L", 5, "20.00"))
			l.rec.wait(t, l.ctx, "holder sleeping before notify", func(ev Event) bool {
				return ev.BizID == "PAY-L" && ev.What == "delay" && ev.Step == stepNotify
			})
			l.start(Settlement, Anchored, tc.other, nil, ttl)
			busy := l.rec.waitFor(t, l.ctx, "PAY-L", "lease_busy")
			leased := l.rec.wait(t, l.ctx, "ledger done (the lease's last renewal)", func(ev Event) bool {
				return ev.BizID == "PAY-L" && ev.What == "step_done" && ev.Step == stepLedger
			})
			t.Logf("lease_busy %s after the lease's last renewal (lease %s)", busy.At.Sub(leased.At).Round(time.Millisecond), leaseTTL)
			l.want("lease_busy detail", busy.Detail, tc.busy)
			l.want("pay_state while held", l.str("SELECT CONCAT_WS('/', status, owner) FROM pay_state WHERE biz_id = 'PAY-L'"), "LEDGER_DONE/"+tc.holder)
			l.want("notify calls while held", l.notify.count("PAY-L"), 0)
			l.want("committed offset while held", l.committed(part), -1)

			holder.Kill()
			l.want("lease live after the kill", l.str("SELECT CONCAT_WS('/', status, owner, lease_until > NOW(3)) FROM pay_state WHERE biz_id = 'PAY-L'"), "LEDGER_DONE/"+tc.holder+"/1")
			l.want("notify calls after the kill", l.notify.count("PAY-L"), 0)
			// The lease runs out (as it would 30s later).
			l.exec("UPDATE pay_state SET lease_until = NOW(3) - INTERVAL 1 SECOND WHERE biz_id = 'PAY-L'")
			l.rec.wait(t, l.ctx, tc.other+" commits PAY-L", func(ev Event) bool {
				return ev.Consumer == tc.other && ev.BizID == "PAY-L" && ev.What == "committed"
			})
			l.want("pay_state", l.str("SELECT CONCAT_WS('/', status, IFNULL(owner, '-')) FROM pay_state WHERE biz_id = 'PAY-L'"), "DONE/-")
			l.want("journal rows", l.count("SELECT COUNT(*) FROM balance_journal WHERE biz_id = 'PAY-L'"), 1)
			l.want("balance", l.str("SELECT CAST(balance AS CHAR) FROM account_balance WHERE account_id = 5"), "480.00")
			l.want("notify calls", l.notify.count("PAY-L"), 1)
			l.want("committed offset", l.committed(part), off+1)
		})
	}
}

// TestRemoteTimeouts: a downstream applies the effect and answers after the
// caller's timeout. Naive fulfilment retries with a new request id (WMS locks
// twice, seed 001); anchored probes the unacked intent and acks it (one
// lock); anchored logistics, which cannot be probed, is parked and committed.
func TestRemoteTimeouts(t *testing.T) {
	t.Run("naive_wms_double_lock", func(t *testing.T) {
		t.Parallel()
		l := newLab(t, 2)
		l.wms.delayNext("F-T", 2*time.Second)
		l.start(Fulfilment, Naive, "c-1", nil, nil)
		part, off := l.produce(fulfilMsg("F-T"))
		l.rec.waitFor(t, l.ctx, "F-T", "committed")
		l.want("WMS locks", l.wms.count("F-T"), 2)
		l.want("fulfil_order rows", l.count("SELECT COUNT(*) FROM fulfil_order WHERE biz_id = 'F-T'"), 1)
		l.want("fulfil_state", l.str("SELECT status FROM fulfil_state WHERE biz_id = 'F-T'"), "DONE")
		l.want("committed offset", l.committed(part), off+1)
	})
	t.Run("anchored_wms_probe", func(t *testing.T) {
		t.Parallel()
		l := newLab(t, 2)
		l.wms.delayNext("F-T", 2*time.Second)
		l.start(Fulfilment, Anchored, "c-1", nil, nil)
		part, off := l.produce(fulfilMsg("F-T"))
		l.rec.waitFor(t, l.ctx, "F-T", "committed")
		probe := l.rec.waitFor(t, l.ctx, "F-T", "probe")
		l.want("probe answer", probe.Detail, "APPLIED")
		l.want("WMS locks", l.wms.count("F-T"), 1)
		l.want("wms intent", l.str("SELECT CONCAT_WS('/', attempt, result) FROM ful_intent WHERE request_id = 'F-T:wms_lock' AND acked_at IS NOT NULL"), "1/APPLIED (probe)")
		l.want("ful_state", l.str("SELECT status FROM ful_state WHERE biz_id = 'F-T'"), "DONE")
		l.want("committed offset", l.committed(part), off+1)
	})
	t.Run("anchored_logistics_parked", func(t *testing.T) {
		t.Parallel()
		l := newLab(t, 2)
		l.logi.delayNext("F-U", 2*time.Second)
		l.start(Fulfilment, Anchored, "c-1", nil, nil)
		part, off := l.produce(fulfilMsg("F-U"))
		l.rec.waitFor(t, l.ctx, "F-U", "parked")
		l.rec.waitFor(t, l.ctx, "F-U", "committed")
		l.want("ful_state", l.str("SELECT CONCAT_WS('/', status, IFNULL(owner, '-'), IFNULL(lease_until, '-'), attempts, last_error) FROM ful_state WHERE biz_id = 'F-U'"),
			"WMS_CONFIRMED/-/-/1/unknown outcome: logistics F-U:logistics")
		l.want("logistics intent unacked", l.count("SELECT COUNT(*) FROM ful_intent WHERE request_id = 'F-U:logistics' AND acked_at IS NULL"), 1)
		l.want("waybills", l.logi.count("F-U"), 1)
		l.want("outbox rows", l.count("SELECT COUNT(*) FROM ful_outbox WHERE biz_id = 'F-U'"), 0)
		l.want("committed offset", l.committed(part), off+1)
	})
}

// TestOrderSkips: seed 003 (SHIPPED handled before PAID) and the lifecycle
// rules of the anchored consumer.
func TestOrderSkips(t *testing.T) {
	t.Run("naive_wrongly_skipped", func(t *testing.T) {
		t.Parallel()
		l := newLab(t, 1)
		l.exec("INSERT INTO orders (order_id, status, updated_at) VALUES ('O-S', 'PAID', NOW(3))")
		l.start(Orders, Naive, "c-1", nil, nil)
		l.produce(orderMsg("O-S", EventShipped))
		l.produce(orderMsg("O-S", EventPaid))
		l.rec.wait(t, l.ctx, "PAID committed", func(ev Event) bool { return ev.MsgID == "m-O-S-PAID" && ev.What == "committed" })
		l.want("SHIPPED record", l.str("SELECT action FROM idempotent WHERE msg_id = 'm-O-S-SHIPPED'"), "DONE")
		l.want("PAID record", l.str("SELECT action FROM idempotent WHERE msg_id = 'm-O-S-PAID'"), "SKIPPED")
		l.want("order", l.str("SELECT status FROM orders WHERE order_id = 'O-S'"), "SHIPPED")
		l.want("points grants", l.points.count("O-S"), 0)
	})
	t.Run("anchored_lifecycle", func(t *testing.T) {
		t.Parallel()
		l := newLab(t, 2)
		l.exec("INSERT INTO orders (order_id, status, updated_at) VALUES ('O-S', 'PAID', NOW(3)), ('O-R', 'REFUNDED', NOW(3)), ('O-C', 'CREATED', NOW(3))")
		l.start(Orders, Anchored, "c-1", nil, nil)
		for _, m := range []Message{orderMsg("O-S", EventShipped), orderMsg("O-S", EventPaid), orderMsg("O-R", EventPaid), orderMsg("O-C", EventPaid)} {
			l.produce(m)
		}
		for _, id := range []string{"m-O-S-PAID", "m-O-R-PAID", "m-O-C-PAID"} {
			l.rec.wait(t, l.ctx, id+" committed", func(ev Event) bool { return ev.MsgID == id && ev.What == "committed" })
		}
		l.want("SHIPPED record", l.str("SELECT CONCAT_WS('/', action, entity_status_seen) FROM order_idem WHERE msg_id = 'm-O-S-SHIPPED'"), "DONE/PAID")
		l.want("late PAID record", l.str("SELECT CONCAT_WS('/', action, entity_status_seen) FROM order_idem WHERE msg_id = 'm-O-S-PAID'"), "DONE/SHIPPED")
		l.want("points for O-S", l.points.count("O-S"), 1)
		l.want("refunded record", l.str("SELECT CONCAT_WS('/', action, entity_status_seen, reason IS NOT NULL) FROM order_idem WHERE msg_id = 'm-O-R-PAID'"), "SKIPPED/REFUNDED/1")
		l.want("points for O-R", l.points.count("O-R"), 0)
		l.want("early record", l.str("SELECT CONCAT_WS('/', action, entity_status_seen, review_after > NOW(3)) FROM order_idem WHERE msg_id = 'm-O-C-PAID'"), "SKIPPED_PENDING_REVIEW/CREATED/1")
		l.want("points for O-C", l.points.count("O-C"), 0)
	})
	t.Run("anchored_force_effect_replay", func(t *testing.T) {
		t.Parallel()
		l := newLab(t, 1)
		l.exec("INSERT INTO orders (order_id, status, updated_at) VALUES ('O-F', 'REFUNDED', NOW(3))")
		l.start(Orders, Anchored, "c-1", nil, nil)
		m := orderMsg("O-F", EventPaid)
		l.produce(m)
		l.rec.wait(t, l.ctx, "first committed", func(ev Event) bool { return ev.MsgID == m.MsgID && ev.What == "committed" })
		l.want("record", l.str("SELECT action FROM order_idem WHERE msg_id = ?", m.MsgID), "SKIPPED")
		// opctl: flip_skipped, then republish with opctl-force-effect.
		l.exec("UPDATE order_idem SET action = 'PENDING', updated_at = NOW(3) WHERE msg_id = ? AND action = 'SKIPPED'", m.MsgID)
		v, _ := Encode(m)
		headers := map[string]string{HeaderMsgID: m.MsgID, HeaderPlan: "plan-1", HeaderForceEffect: stepPoints}
		_ = l.kafka.Produce(t, l.topic, 0, m.BizID, string(v), headers, time.Time{})
		_ = l.kafka.Produce(t, l.topic, 0, m.BizID, string(v), headers, time.Time{}) // a re-sent replay
		l.rec.waitFor(t, l.ctx, "O-F", "replay_duplicate")
		l.want("record", l.str("SELECT action FROM order_idem WHERE msg_id = ?", m.MsgID), "DONE")
		l.want("points grants", l.points.count("O-F"), 1)
	})
}

// TestStop: Stop is graceful and returns nil; Done is closed.
func TestStop(t *testing.T) {
	t.Parallel()
	l := newLab(t, 2)
	c := l.start(Orders, Anchored, "c-1", nil, nil)
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	l.rec.wait(t, l.ctx, "stopped", func(ev Event) bool { return ev.What == "stopped" })
}

func TestConfigErrors(t *testing.T) {
	_, err := Start(t.Context(), Config{Kind: "payments", Design: Naive})
	if err == nil {
		t.Fatal("unknown kind accepted")
	}
	_, err = Start(t.Context(), Config{Kind: Orders, Design: Anchored, Topic: "t", Group: "g", ClientID: "c", Brokers: []string{"x"}})
	if err == nil {
		t.Fatal("missing DB accepted")
	}
}

// TestTimings: zero fields take the defaults (the demo's), set ones are
// kept, and a heartbeat that is not shorter than the session is refused.
func TestTimings(t *testing.T) {
	cfg := Config{Kind: Orders, Design: Anchored, Topic: "t", Group: "g", ClientID: "c", Brokers: []string{"x"},
		DB: &sql.DB{}, Services: URLs{Points: "http://127.0.0.1:1"}, Timings: Timings{LeaseRecheck: time.Millisecond}}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	want := DefaultTimings()
	want.LeaseRecheck = time.Millisecond
	if cfg.Timings != want {
		t.Errorf("Timings = %+v, want %+v", cfg.Timings, want)
	}
	cfg.Timings = Timings{HeartbeatInterval: 6 * time.Second}
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "heartbeat interval") {
		t.Errorf("heartbeat = session timeout: %v, want an error", err)
	}
}

// TestRebalanceZombie is seed 001's rebalance: the WMS call of the member
// holding the record hangs (the lock is applied, the answer is late) while a
// second member joins and takes the partition. The first member's work goes
// on as a zombie and cannot commit. Naive: the new owner calls WMS again
// (two locks, two waybills, two notices). Anchored: the new owner finds the
// zombie's lease busy; the zombie finishes under its lease; the new owner
// then finds the operation DONE and only commits.
//
// WMS holds its answer until the new owner has taken over (naive: it has
// committed; anchored: it has found the lease busy), so that the late answer
// comes after the rebalance however long the rebalance takes.
func TestRebalanceZombie(t *testing.T) {
	for _, design := range []Design{Naive, Anchored} {
		t.Run(string(design), func(t *testing.T) {
			t.Parallel()
			l := newLab(t, 1)
			slowRPC := func(c *Config) { c.RPCTimeout = 10 * time.Second }
			answer := l.wms.holdNext(t, "F-Z")
			l.start(Fulfilment, design, "c-z", nil, slowRPC)
			part, off := l.produce(fulfilMsg("F-Z"))
			select {
			case <-l.wms.applied:
			case <-l.ctx.Done():
				t.Fatalf("WMS never called\n%s", l.rec.dump())
			}
			l.start(Fulfilment, design, "c-b", nil, slowRPC)
			l.rec.wait(t, l.ctx, "c-z revoked", func(ev Event) bool {
				return ev.Consumer == "c-z" && ev.BizID == "F-Z" && ev.What == "revoked"
			})
			if design == Naive {
				l.rec.wait(t, l.ctx, "c-b commits", func(ev Event) bool {
					return ev.Consumer == "c-b" && ev.BizID == "F-Z" && ev.What == "committed"
				})
			} else {
				l.rec.wait(t, l.ctx, "c-b finds the lease busy", func(ev Event) bool {
					return ev.Consumer == "c-b" && ev.BizID == "F-Z" && ev.What == "lease_busy"
				})
			}
			answer() // the zombie's WMS call returns, late
			l.rec.wait(t, l.ctx, "c-z's zombie finishes without a commit", func(ev Event) bool {
				return ev.Consumer == "c-z" && ev.BizID == "F-Z" && ev.What == "commit_skipped"
			})
			l.rec.wait(t, l.ctx, "c-b commits", func(ev Event) bool {
				return ev.Consumer == "c-b" && ev.BizID == "F-Z" && ev.What == "committed"
			})
			l.want("committed offset", l.committed(part), off+1)
			if design == Naive {
				l.want("WMS locks", l.wms.count("F-Z"), 2)
				l.want("waybills", l.logi.count("F-Z"), 2)
				l.want("outbox rows", l.count("SELECT COUNT(*) FROM fulfil_outbox WHERE biz_id = 'F-Z'"), 2)
				l.want("order rows", l.count("SELECT COUNT(*) FROM fulfil_order WHERE biz_id = 'F-Z'"), 1)
				return
			}
			busy := l.rec.waitFor(t, l.ctx, "F-Z", "lease_busy")
			l.want("lease_busy", busy.Consumer+": "+busy.Detail, "c-b: lease held by c-z")
			l.want("WMS locks", l.wms.count("F-Z"), 1)
			l.want("waybills", l.logi.count("F-Z"), 1)
			l.want("outbox rows", l.count("SELECT COUNT(*) FROM ful_outbox WHERE biz_id = 'F-Z'"), 1)
			l.want("ful_state", l.str("SELECT CONCAT_WS('/', status, IFNULL(owner, '-')) FROM ful_state WHERE biz_id = 'F-Z'"), "DONE/-")
		})
	}
}

// TestAnchoredResume: records republished by opctl after a repair resume from
// the state row. An unacked notify intent the service never saw (the process
// died between transaction A and the call) is probed NOT_FOUND and called
// again with the same request id; a second copy of the replay is
// deduplicated. A debit that opctl reversed is not silently skipped after a
// rewind: the unique journal key allows no second DEBIT row, so it is parked.
func TestAnchoredResume(t *testing.T) {
	t.Run("probe_not_found_then_call", func(t *testing.T) {
		t.Parallel()
		l := newLab(t, 1)
		l.exec("INSERT INTO account_balance (account_id, balance) VALUES (4, 470.00)")
		l.exec("INSERT INTO pay_state (biz_id, status, version, msg_id, src_partition, src_offset, created_at, updated_at) VALUES ('PAY-N', 'LEDGER_DONE', 4, 'm-PAY-N', 0, 0, NOW(3), NOW(3))")
		l.exec("INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES ('PAY-N', 4, -30.00, 'DEBIT', NOW(3))")
		l.exec("INSERT INTO pay_ledger (biz_order_id, direction, amount, created_at) VALUES ('PAY-N', 'OUT', 30.00, NOW(3))")
		l.exec("INSERT INTO pay_intent (request_id, biz_id, step, attempt, sent_at) VALUES ('PAY-N:notify', 'PAY-N', 'notify', 1, NOW(3))")
		l.start(Settlement, Anchored, "c-1", nil, nil)
		m := settleMsg("PAY-N", 4, "30.00")
		v, _ := Encode(m)
		headers := map[string]string{HeaderMsgID: m.MsgID, HeaderPlan: "plan-9", HeaderFromStep: stepNotify}
		l.kafka.Produce(t, l.topic, 0, m.BizID, string(v), headers, time.Time{})
		off := l.kafka.Produce(t, l.topic, 0, m.BizID, string(v), headers, time.Time{})
		l.rec.waitFor(t, l.ctx, "PAY-N", "replay_duplicate")
		l.rec.wait(t, l.ctx, "second copy committed", func(ev Event) bool {
			return ev.BizID == "PAY-N" && ev.What == "committed" && ev.Offset == off
		})
		l.want("probe", l.rec.waitFor(t, l.ctx, "PAY-N", "probe").Detail, "NOT_FOUND")
		l.want("intent", l.str("SELECT CONCAT_WS('/', attempt, result) FROM pay_intent WHERE request_id = 'PAY-N:notify' AND acked_at IS NOT NULL"), "2/APPLIED")
		l.want("notify calls", l.notify.count("PAY-N"), 1)
		l.want("pay_state", l.str("SELECT CONCAT_WS('/', status, IFNULL(owner, '-')) FROM pay_state WHERE biz_id = 'PAY-N'"), "DONE/-")
		l.want("balance untouched", l.str("SELECT CAST(balance AS CHAR) FROM account_balance WHERE account_id = 4"), "470.00")
		l.want("committed offset", l.committed(0), off+1)
	})
	t.Run("reversed_debit_parked", func(t *testing.T) {
		t.Parallel()
		l := newLab(t, 1)
		l.exec("INSERT INTO account_balance (account_id, balance) VALUES (4, 500.00)")
		l.exec("INSERT INTO pay_state (biz_id, status, version, msg_id, src_partition, src_offset, created_at, updated_at) VALUES ('PAY-V', 'INIT', 7, 'm-PAY-V', 0, 0, NOW(3), NOW(3))")
		l.exec("INSERT INTO balance_journal (id, biz_id, account_id, delta, kind, created_at) VALUES (50, 'PAY-V', 4, -30.00, 'DEBIT', NOW(3))")
		l.exec("INSERT INTO balance_journal (biz_id, account_id, delta, kind, reverses_id, created_at) VALUES ('PAY-V', 4, 30.00, 'REVERSAL', 50, NOW(3))")
		l.start(Settlement, Anchored, "c-1", nil, nil)
		l.produce(settleMsg("PAY-V", 4, "30.00"))
		l.rec.waitFor(t, l.ctx, "PAY-V", "parked")
		l.rec.waitFor(t, l.ctx, "PAY-V", "committed")
		l.want("pay_state", l.str("SELECT CONCAT_WS('/', status, IFNULL(owner, '-'), attempts, last_error) FROM pay_state WHERE biz_id = 'PAY-V'"),
			"INIT/-/1/debit of PAY-V was reversed; the journal holds one DEBIT row per operation")
		l.want("balance untouched", l.str("SELECT CAST(balance AS CHAR) FROM account_balance WHERE account_id = 4"), "500.00")
	})
}
