package sources

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources/config"
)

// rangeKafka is a topic's records, read by time range (RecordReader).
type rangeKafka struct {
	recs     []Message
	complete bool
	err      error
	asked    [2]time.Time
}

func (k *rangeKafka) Group(context.Context, string, string) (GroupView, error) {
	return GroupView{}, nil
}

func (k *rangeKafka) Locate(context.Context, LocateRequest) (Location, error) {
	return Location{}, nil
}

func (k *rangeKafka) Records(_ context.Context, _ string, from, to time.Time, _ int, each func(*Message)) (RecordsRead, error) {
	k.asked = [2]time.Time{from, to}
	if k.err != nil {
		return RecordsRead{}, k.err
	}
	for i := range k.recs {
		each(&k.recs[i])
	}
	out := RecordsRead{Records: len(k.recs)}
	if !k.complete {
		out.Cut = []int32{0}
	}
	return out, nil
}

// opsDB answers ReadOperation from a map of operations.
type opsDB map[string]DBEvidence

func (d opsDB) ReadOperation(_ context.Context, _ *config.Pipeline, _ string, biz string) (DBEvidence, error) {
	db, ok := d[biz]
	if !ok {
		return DBEvidence{Steps: []StepEvidence{{Name: "debit"}, {Name: "ledger"}}}, nil
	}
	return db, nil
}

// windowBinlog answers with the changes stamped in the request's window.
type windowBinlog struct {
	changes []BinlogChange
	reqs    []BinlogRequest
}

func (b *windowBinlog) Changes(_ context.Context, req BinlogRequest) (BinlogRead, error) {
	b.reqs = append(b.reqs, req)
	var out BinlogRead
	for _, c := range b.changes {
		if !c.At.Before(req.From) && !c.At.After(req.To) {
			out.Changes = append(out.Changes, c)
		}
	}
	return out, nil
}

// Seed 000's debit without a transaction: two operations that each debited
// account 1001 by 30 in each other's windows are found by their messages
// and own one change each (it read DUPLICATE_EFFECT for both before).
func TestAttributeCompetitors(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	sec := func(s int) time.Time { return at.Add(time.Duration(s) * time.Second) }
	p := &config.Pipeline{Name: "settlement", Topic: "settlement-event", MessageKey: "{biz_id}", Steps: []config.Step{
		{Name: "debit", Kind: config.KindLocal, Binlog: &config.Binlog{Table: "account_balance", Key: "account_id", Delta: "balance",
			MessageKey: "$.account_id", MessageDelta: "-$.amount", Window: "10m"}},
		{Name: "ledger", Kind: config.KindLocal, Evidence: "SELECT id, created_at FROM ledger_entry WHERE biz_order_id = ?"}}}
	msg := func(biz string, s int, account int, amount string, off int64) Message {
		return Message{Partition: 0, Offset: off, Timestamp: sec(s), Key: []byte(biz),
			Value: fmt.Appendf(nil, `{"biz_id":%q,"account_id":%d,"amount":%q}`, biz, account, amount)}
	}
	debit := func(seq, s int, before, after string, tx ...string) BinlogChange {
		return BinlogChange{GTID: fmt.Sprintf("0-1-%d", seq), At: sec(s), Key: int64(1001), Before: before, After: after, TxKeys: tx}
	}
	ledgerRow := func(s int) DBEvidence {
		return DBEvidence{Steps: []StepEvidence{{Name: "debit"}, {Name: "ledger", Rows: []Row{{Columns: []string{"id", "created_at"}, Values: []Value{int64(1), sec(s)}}}}}}
	}
	reversedBy := func(db DBEvidence, id string) DBEvidence {
		db.Audit = []AuditAction{{Action: AuditReverse, Outcome: AuditApplied, Step: "debit", ReversedID: id}}
		return db
	}
	mine := msg("PAY-1", 0, 1001, "30.00", 10)
	other := msg("PAY-2", 1, 1001, "30.00", 11)
	cases := []struct {
		name    string
		changes []BinlogChange
		recs    []Message
		whole   bool
		db      opsDB
		count   string   // min-max
		rows    []string // id:attribution
		with    string   // competitors
		note    string
	}{
		{"two operations, once each: one change each", []BinlogChange{debit(5, 1, "100.00", "70.00"), debit(6, 2, "70.00", "40.00")},
			[]Message{mine, other}, true, opsDB{"PAY-1": ledgerRow(1), "PAY-2": ledgerRow(2)},
			"1-1", []string{"0-1-5#0:shared"}, "PAY-2 message (step ledger has an evidence row)", ""},
		{"one operation debited twice, no other message names the row", []BinlogChange{debit(5, 1, "100.00", "70.00"), debit(6, 40, "70.00", "40.00")},
			[]Message{mine, msg("PAY-3", 1, 1002, "30.00", 12), msg("PAY-4", 1, 1001, "31.00", 13)}, true, opsDB{"PAY-1": ledgerRow(1)},
			"2-2", []string{"0-1-5#0:message", "0-1-6#0:message"}, "", ""},
		{"two operations, three changes: ambiguous", []BinlogChange{debit(5, 1, "100.00", "70.00"), debit(6, 2, "70.00", "40.00"), debit(7, 3, "40.00", "10.00")},
			[]Message{mine, other}, true, opsDB{"PAY-1": ledgerRow(1), "PAY-2": ledgerRow(2)},
			"1-2", []string{"0-1-5#0:shared", "0-1-6#0:shared", "0-1-7#0:shared"}, "PAY-2 message (step ledger has an evidence row)", ""},
		{"the other operation's extra change reversed by opctl: one change each", []BinlogChange{debit(5, 1, "100.00", "70.00"), debit(6, 2, "70.00", "40.00"), debit(7, 3, "40.00", "10.00")},
			[]Message{mine, other}, true, opsDB{"PAY-1": ledgerRow(1), "PAY-2": reversedBy(ledgerRow(2), "0-1-7#0")},
			"1-1", []string{"0-1-5#0:shared"}, "PAY-2 message (step ledger has an evidence row)", ""},
		{"tied to this one; the other's untied debit is the other's", []BinlogChange{debit(5, 1, "100.00", "70.00", "PAY-1"), debit(6, 2, "70.00", "40.00")},
			[]Message{mine, other}, true, opsDB{"PAY-1": ledgerRow(1), "PAY-2": ledgerRow(2)},
			"1-1", []string{"0-1-5#0:transaction"}, "PAY-2 message (step ledger has an evidence row)", ""},
		{"the topic too large to search: two changes are 1 or 2", []BinlogChange{debit(5, 1, "100.00", "70.00"), debit(6, 2, "70.00", "40.00")},
			nil, false, opsDB{"PAY-1": ledgerRow(1)},
			"1-2", []string{"0-1-5#0:shared", "0-1-6#0:shared"}, "", "--search-limit"},
		{"the topic too large, one change: this one's, which ran", []BinlogChange{debit(5, 1, "100.00", "70.00")},
			nil, false, opsDB{"PAY-1": ledgerRow(1)},
			"1-1", []string{"0-1-5#0:shared"}, "", "--search-limit"},
		{"the other's window reaches past this one's, where it has a change of its own", []BinlogChange{debit(5, 1, "100.00", "70.00"), debit(6, 601, "70.00", "40.00")},
			[]Message{mine, other}, true, opsDB{"PAY-1": ledgerRow(1), "PAY-2": ledgerRow(2)},
			"1-1", []string{"0-1-5#0:shared"}, "PAY-2 message (step ledger has an evidence row)", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := &windowBinlog{changes: c.changes}
			k := &rangeKafka{recs: c.recs, complete: c.whole}
			col := &Collector{Binlog: b, Kafka: k, DB: c.db, BinlogSchema: "pay"}
			ev := &Evidence{BizID: "PAY-1", Pipeline: p, DB: c.db["PAY-1"], Kafka: KafkaEvidence{Message: &mine}, Sources: map[string]string{"kafka": StatusOK}}
			col.readBinlog(context.Background(), ev)
			se := ev.DB.Steps[0]
			if se.BinlogErr != "" || se.Binlog == nil {
				t.Fatalf("binlog error %q", se.BinlogErr)
			}
			var rows []string
			for _, r := range se.Rows {
				id, _ := r.Get("id")
				how, _ := r.Get("attribution")
				rows = append(rows, fmt.Sprintf("%v:%v", id, how))
			}
			var with []string
			for _, x := range se.Binlog.Competitors {
				with = append(with, fmt.Sprintf("%s %s (%s)", x.BizID, x.Found, x.Processed))
			}
			cr := se.Binlog.Count
			if got := fmt.Sprintf("%d-%d", cr.Min, cr.Max); got != c.count || strings.Join(rows, ",") != strings.Join(c.rows, ",") || strings.Join(with, "; ") != c.with {
				t.Fatalf("count %s rows %v competitors %q; want %s %v %q (notes %v)", got, rows, with, c.count, c.rows, c.with, se.Binlog.Notes)
			}
			if !strings.Contains(strings.Join(se.Binlog.Notes, "; "), c.note) || (c.note == "") != (len(se.Binlog.Notes) == 0) {
				t.Errorf("notes %v, want %q", se.Binlog.Notes, c.note)
			}
		})
	}
}

// The search for competitors reads the topic over every window that can
// hold one of the changes: [first − window, last + 1 s].
func TestAttributeSearchRange(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	p := &config.Pipeline{Name: "settlement", Topic: "settlement-event", MessageKey: "{biz_id}", Steps: []config.Step{
		{Name: "debit", Kind: config.KindLocal, Binlog: &config.Binlog{Table: "account_balance", Key: "account_id", Delta: "balance",
			MessageKey: "$.account_id", MessageDelta: "-$.amount", Window: "2m"}}}}
	mine := Message{Timestamp: at, Key: []byte("PAY-1"), Value: []byte(`{"account_id":1001,"amount":"30"}`)}
	b := &windowBinlog{changes: []BinlogChange{{GTID: "0-1-5", At: at.Add(3 * time.Second), Key: int64(1001), Before: "100", After: "70"}}}
	k := &rangeKafka{complete: true}
	col := &Collector{Binlog: b, Kafka: k, DB: opsDB{}}
	ev := &Evidence{BizID: "PAY-1", Pipeline: p, DB: DBEvidence{Steps: []StepEvidence{{Name: "debit"}}}, Kafka: KafkaEvidence{Message: &mine}, Sources: map[string]string{"kafka": StatusOK}}
	col.readBinlog(context.Background(), ev)
	if want := [2]time.Time{at.Add(3*time.Second - 2*time.Minute), at.Add(4 * time.Second)}; k.asked != want {
		t.Fatalf("asked %v, want %v", k.asked, want)
	}
	if ev.DB.Steps[0].Binlog.Count != (CountRange{1, 1}) {
		t.Fatalf("count %+v", ev.DB.Steps[0].Binlog.Count)
	}
	k.err = errors.New("kafka: no answer")
	ev.DB.Steps[0] = StepEvidence{Name: "debit"}
	col.readBinlog(context.Background(), ev)
	if n := ev.DB.Steps[0].Binlog.Notes; len(n) != 1 || !strings.Contains(n[0], "kafka: no answer") {
		t.Fatalf("notes %v", n)
	}
}

func TestBizIDOfKey(t *testing.T) {
	cases := []struct {
		tmpl, key, want string
		ok              bool
	}{
		{"{biz_id}", "PAY-1", "PAY-1", true},
		{"order-{biz_id}", "order-7", "7", true},
		{"order-{biz_id}", "refund-7", "", false},
		{"{biz_id}-{msg_id}", "7-m", "", false},
		{"static", "static", "", false},
		{"a{biz_id}a", "a", "", false},
	}
	for _, c := range cases {
		if got, ok := BizIDOfKey(c.tmpl, []byte(c.key)); got != c.want || ok != c.ok {
			t.Errorf("BizIDOfKey(%q, %q) = %q, %v", c.tmpl, c.key, got, ok)
		}
	}
}
