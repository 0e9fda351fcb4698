package sources

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources/config"
)

// fakeBinlog answers every read with the same changes or error, and keeps
// the request.
type fakeBinlog struct {
	read BinlogRead
	err  error
	req  *BinlogRequest
}

func (f *fakeBinlog) Changes(_ context.Context, req BinlogRequest) (BinlogRead, error) {
	*f.req = req
	return f.read, f.err
}

func TestReadBinlog(t *testing.T) {
	p := &config.Pipeline{Name: "settlement", Steps: []config.Step{{Name: "debit", Kind: config.KindLocal, Binlog: &config.Binlog{
		Table: "account_balance", Key: "account_id", Delta: "balance", MessageKey: "$.account_id", MessageDelta: "-$.amount",
		Transaction: "ledger_entry.biz_order_id", Window: "2m"}}}}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	msg := &Message{Timestamp: at, Value: []byte(`{"account_id": 1001, "amount": "30.00"}`)}
	in := at.Add(time.Second)
	two := BinlogRead{Changes: []BinlogChange{{GTID: "0-1-5", Key: int64(1001), At: in, Before: "100.00", After: "70.00"}, {GTID: "0-1-9", Key: int64(1001), At: in, Before: "70.00", After: "40.00"}}}
	ledger := StepEvidence{Name: "ledger", Rows: []Row{{Columns: []string{"id", "created_at"}, Values: []Value{int64(1), at}}}}
	tied := BinlogRead{Changes: []BinlogChange{{GTID: "0-1-4", Key: int64(1001), At: in, Before: "130.00", After: "100.00", TxKeys: []string{"PAY-0"}},
		{GTID: "0-1-5", Key: int64(1001), At: in, Before: "100.00", After: "70.00", TxKeys: []string{"PAY-1"}},
		{GTID: "0-1-6", Key: int64(1002), At: in, Before: "70.00", After: "40.00"},
		{GTID: "0-1-9", Key: int64(1001), At: in, Before: "70.00", After: "40.00"}}}
	cases := []struct {
		name    string
		msg     *Message
		kafka   string
		read    BinlogRead
		err     error
		rows    int
		status  string // Sources["binlog"] contains
		stepErr string
		known   bool // the ledger step has a row
	}{
		{"two debits", msg, StatusOK, two, nil, 2, StatusOK, "", false},
		{"the window purged", msg, StatusOK, BinlogRead{}, errors.New("binlog of db:3306: the changes of the window were purged"), 0, "purged", "debit: binlog: binlog of db:3306: the changes", false},
		{"no message, nothing else of the operation: another pipeline's id", nil, StatusOK, two, nil, 0, StatusSkipped, "", false},
		{"no message for a known operation, no change tied to it", nil, StatusOK, two, nil, 0, "could not be read", "Kafka message", true},
		{"no message, a change tied by the transaction gives the row and the delta", nil, StatusOK, tied, nil, 2, StatusOK, "", true},
		{"Kafka down", nil, "dial tcp: refused", two, nil, 0, "kafka: dial tcp: refused", "kafka: dial tcp", false},
		{"a message without the key", &Message{Timestamp: at, Value: []byte(`{"amount":"1"}`)}, StatusOK, two, nil, 0, "no $.account_id", "binlog.message_key", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var req BinlogRequest
			col := &Collector{Binlog: &fakeBinlog{read: c.read, err: c.err, req: &req}, BinlogSchema: "pay"}
			steps := []StepEvidence{{Name: "debit"}}
			if c.known {
				steps = append(steps, ledger)
			}
			ev := &Evidence{BizID: "PAY-1", Pipeline: p, DB: DBEvidence{Steps: steps},
				Kafka: KafkaEvidence{Message: c.msg}, Sources: map[string]string{"kafka": c.kafka}}
			col.readBinlog(context.Background(), ev)
			se := ev.DB.Steps[0]
			if c.status == StatusSkipped && ev.Sources["binlog"] != StatusSkipped {
				t.Fatalf("sources %q, want skipped", ev.Sources["binlog"])
			}
			if len(se.Rows) != c.rows || !strings.Contains(ev.Sources["binlog"], c.status) || !strings.Contains(se.BinlogErr, c.stepErr) || (c.stepErr == "") != (se.BinlogErr == "") {
				t.Fatalf("rows %d, sources %q, step error %q", len(se.Rows), ev.Sources["binlog"], se.BinlogErr)
			}
			if c.rows > 0 && c.msg != nil {
				want := BinlogRequest{Schema: "pay", Table: "account_balance", KeyColumn: "account_id", DeltaColumn: "balance", Key: "1001",
					From: at.Add(-time.Second), To: at.Add(2 * time.Minute), TxSchema: "pay", TxTable: "ledger_entry", TxColumn: "biz_order_id"}
				if req != want {
					t.Fatalf("request %+v\nwant %+v", req, want)
				}
			}
		})
	}
}

func TestEvidenceTime(t *testing.T) {
	t1 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	db := DBEvidence{Steps: []StepEvidence{{Rows: []Row{{Columns: []string{"id", "created_at"}, Values: []Value{int64(1), t1.Add(time.Minute)}}}},
		{Rows: []Row{{Columns: []string{"id", "created_at"}, Values: []Value{int64(2), t1}}}}}}
	if got := EvidenceTime(db); got == nil || !got.Equal(t1) {
		t.Fatalf("EvidenceTime = %v", got)
	}
	if EvidenceTime(DBEvidence{}) != nil {
		t.Fatal("no rows: nil")
	}
	// A pipeline without state or idempotency rows locates its message from
	// the evidence's time (seed 000).
	c := &Collector{}
	req, ok := c.locateRequest(&config.Pipeline{Topic: "t", MessageKey: "{biz_id}"}, "PAY-1", db)
	if !ok || !req.Around.Equal(t1) || string(req.Key) != "PAY-1" {
		t.Fatalf("locateRequest = %+v, %v", req, ok)
	}
}
