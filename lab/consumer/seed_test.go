package consumer

import (
	"strings"
	"testing"
	"time"
)

// TestSeedFulfilment: seed 001's consumer on its own tables. The order row
// is written PROCESSING, WMS is called with a new request id on every
// attempt: a WMS answer later than the RPC timeout fails the attempt, the
// message runs again from the top (the unique key stops a second row) and
// WMS locks twice. The notice and DONE are written together; a record
// whose row is DONE is left alone.
func TestSeedFulfilment(t *testing.T) {
	t.Parallel()
	l := newLabOn(t, 1, "../schema_seed001.sql")
	l.start(Fulfilment, Seed, "c-1", nil, nil)
	l.wms.delayNext("SO-1:PAID", 1500*time.Millisecond) // RPCTimeout is 500ms
	m := fulfil("SO-1:PAID")
	l.produce(m)
	l.rec.wait(t, l.ctx, "SO-1:PAID committed", func(ev Event) bool { return ev.BizID == m.BizID && ev.What == "committed" })
	l.want("WMS locks", l.wms.count("SO-1:PAID"), 2)
	l.want("waybills", l.logi.count("SO-1:PAID"), 1)
	l.want("order row", l.str("SELECT CONCAT_WS('/', order_no, event_type, order_status, status) FROM fulfil_order WHERE biz_id = 'SO-1:PAID'"), "SO-1/PAID/PAID/DONE")
	l.want("order rows", l.count("SELECT COUNT(*) FROM fulfil_order"), 1)
	l.want("notices", l.count("SELECT COUNT(*) FROM outbox WHERE biz_id = 'SO-1:PAID' AND kind = 'notice'"), 1)
	if n := l.rec.count(func(ev Event) bool { return ev.What == "step_skipped" && ev.Step == stepOrderRow }); n != 1 {
		t.Errorf("%d order_row skips, want 1 (the retry met the unique key)", n)
	}

	// Redelivered once DONE: nothing is called again.
	l.produce(m)
	l.rec.wait(t, l.ctx, "already_done", func(ev Event) bool { return ev.BizID == m.BizID && ev.What == "already_done" })
	l.want("WMS locks after the redelivery", l.wms.count("SO-1:PAID"), 2)

	// Not <order number>:<event type>: poison, committed.
	l.produce(fulfil("SO-2"))
	l.rec.wait(t, l.ctx, "poison", func(ev Event) bool { return ev.BizID == "SO-2" && ev.What == "poison" })
	l.want("WMS calls for SO-2", l.wms.count("SO-2"), 0)
}

func fulfil(bizID string) Message {
	return Message{BizID: bizID, MsgID: "m-" + bizID, SKU: "SKU-42", Qty: 1}
}

// TestSeedOrders: seed 003's consumer on its own tables, its pseudo-code
// as written: SHIPPED before PAID records PAID SKIPPED and grants nothing;
// it reads no opctl header, so a republish with opctl-force-effect is
// skipped as a message already recorded, and once the SKIPPED record is
// deleted (opctl's reopen: delete) the republish is decided again by
// status, and skipped again.
func TestSeedOrders(t *testing.T) {
	t.Parallel()
	l := newLabOn(t, 1, "../schema_seed003.sql")
	l.exec("INSERT INTO orders (order_id, status, created_at, updated_at) VALUES (8821, 'PAID', NOW(3), NOW(3)), (8822, 'REFUNDED', NOW(3), NOW(3)), (8823, 'PAID', NOW(3), NOW(3))")
	l.start(Orders, Seed, "c-1", nil, nil)
	send := func(ev OrderEvent, headers map[string]string) {
		t.Helper()
		if headers == nil {
			if _, _, err := ProduceOrderEvent(l.prod, l.topic, ev); err != nil {
				t.Fatal(err)
			}
		} else {
			v := `{"msgId":"` + ev.MsgID + `","orderId":` + ev.Key() + `,"expectedStatus":"` + ev.ExpectedStatus + `","eventType":"` + ev.EventType + `"}`
			_ = l.kafka.Produce(t, l.topic, 0, ev.Key(), v, headers, time.Time{})
		}
	}
	// committed waits for the nth commit of msgID.
	committed := func(msgID string, n int) {
		t.Helper()
		for l.rec.count(func(ev Event) bool { return ev.MsgID == msgID && ev.What == "committed" }) < n {
			select {
			case <-l.ctx.Done():
				t.Fatalf("waiting for commit %d of %s: %v\nevents:\n%s", n, msgID, l.ctx.Err(), l.rec.dump())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	paid := OrderEvent{MsgID: "msg-7391", OrderID: 8821, ExpectedStatus: "PAID", EventType: EventPaid}
	send(OrderEvent{MsgID: "msg-7392", OrderID: 8821, ExpectedStatus: "PAID", EventType: EventShipped}, nil)
	send(paid, nil)
	send(OrderEvent{MsgID: "msg-8822", OrderID: 8822, ExpectedStatus: "PAID", EventType: EventPaid}, nil)
	send(OrderEvent{MsgID: "msg-8823", OrderID: 8823, ExpectedStatus: "PAID", EventType: EventPaid}, nil)
	for _, id := range []string{"msg-7391", "msg-8822", "msg-8823"} {
		committed(id, 1)
	}
	l.want("SHIPPED record", l.str("SELECT action FROM idempotent WHERE msg_id = 'msg-7392'"), "DONE")
	l.want("PAID record", l.str("SELECT action FROM idempotent WHERE msg_id = 'msg-7391'"), "SKIPPED")
	l.want("order 8821", l.str("SELECT status FROM orders WHERE order_id = 8821"), "SHIPPED")
	l.want("points for 8821", l.points.count("8821"), 0)
	l.want("refunded record", l.str("SELECT action FROM idempotent WHERE msg_id = 'msg-8822'"), "SKIPPED")
	l.want("points for 8822", l.points.count("8822"), 0)
	l.want("paid record", l.str("SELECT action FROM idempotent WHERE msg_id = 'msg-8823'"), "DONE")
	l.want("points for 8823", l.points.count("8823"), 1)

	// opctl's republish with its headers: the record is already there.
	hdr := map[string]string{HeaderPlan: "plan-1", HeaderForceEffect: stepPoints}
	send(paid, hdr)
	committed("msg-7391", 2)
	l.want("points for 8821 after the republish", l.points.count("8821"), 0)
	if n := l.rec.count(func(ev Event) bool { return ev.What == "replay" }); n != 0 {
		t.Errorf("the seed's consumer acted on opctl's headers (%d replay events)", n)
	}
	// The record deleted (reopen: delete), the republish is decided by
	// status again: SHIPPED ≠ PAID, SKIPPED again.
	l.exec("DELETE FROM idempotent WHERE msg_id = 'msg-7391' AND action = 'SKIPPED'")
	send(paid, hdr)
	committed("msg-7391", 3)
	l.want("PAID record after the delete and the republish", l.str("SELECT action FROM idempotent WHERE msg_id = 'msg-7391'"), "SKIPPED")
	l.want("points for 8821 at the end", l.points.count("8821"), 0)
}

func TestDecodeOrderEvent(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		want    Message
	}{
		{in: `{"msgId":"msg-7391","orderId":8821,"expectedStatus":"PAID","eventType":"PAID"}`,
			want: Message{BizID: "8821", MsgID: "msg-7391", Event: EventPaid, ExpectedStatus: "PAID"}},
		{in: `{"msgId":"m","orderId":9223372036854775807,"expectedStatus":"PAID","eventType":"SHIPPED"}`,
			want: Message{BizID: "9223372036854775807", MsgID: "m", Event: EventShipped, ExpectedStatus: "PAID"}},
		{in: `{"orderId":8821,"expectedStatus":"PAID","eventType":"PAID"}`, err: "required"},
		{in: `{"msgId":"m","orderId":0,"expectedStatus":"PAID","eventType":"PAID"}`, err: "required"},
		{in: `{"msgId":"m","orderId":-1,"expectedStatus":"PAID","eventType":"PAID"}`, err: "required"},
		{in: `{"msgId":"m","orderId":"8821","expectedStatus":"PAID","eventType":"PAID"}`, err: "decode order event"},
		{in: `{"biz_id":"8821","msg_id":"m","replay":true}`, err: "required"},
		{in: `not json`, err: "decode order event"},
	} {
		got, err := DecodeOrderEvent([]byte(tc.in))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("DecodeOrderEvent(%s) error %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("DecodeOrderEvent(%s): %v", tc.in, err)
		case tc.err == "" && got != tc.want:
			t.Errorf("DecodeOrderEvent(%s) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// FuzzDecodeOrderEvent: any record value decodes or is refused, never a
// panic; what decodes has every field, and its biz id is its order id.
func FuzzDecodeOrderEvent(f *testing.F) {
	f.Add([]byte(`{"msgId":"msg-7391","orderId":8821,"expectedStatus":"PAID","eventType":"PAID"}`))
	f.Add([]byte(`{"msgId":"m","orderId":1e3,"expectedStatus":"","eventType":"PAID"}`))
	f.Add([]byte(`{"biz_id":"8821","msg_id":"m","replay":true}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeOrderEvent(b)
		if err != nil {
			return
		}
		if m.MsgID == "" || m.Event == "" || m.ExpectedStatus == "" || m.BizID == "" || m.BizID[0] == '-' || m.BizID == "0" {
			t.Fatalf("DecodeOrderEvent(%q) = %+v", b, m)
		}
	})
}
