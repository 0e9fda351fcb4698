package binlog

import (
	"fmt"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/opctl-dev/opctl/sources"
)

// Events as the parser hands them to the window, without a server.
var (
	balanceMap = &replication.TableMapEvent{Schema: []byte("pay"), Table: []byte("account_balance")}
	ledgerMap  = &replication.TableMapEvent{Schema: []byte("pay"), Table: []byte("ledger_entry")}
	otherMap   = &replication.TableMapEvent{Schema: []byte("pay"), Table: []byte("orders")}
)

func ev(ts uint32, typ replication.EventType, pos uint32, e replication.Event) *replication.BinlogEvent {
	return &replication.BinlogEvent{Header: &replication.EventHeader{Timestamp: ts, EventType: typ, LogPos: pos + 100, EventSize: 100}, Event: e}
}

func gtid(ts uint32, seq uint64) *replication.BinlogEvent {
	return ev(ts, replication.MARIADB_GTID_EVENT, 0, &replication.MariadbGTIDEvent{GTID: gomysql.MariadbGTID{DomainID: 0, ServerID: 1, SequenceNumber: seq}})
}

func update(ts uint32, pos uint32, table *replication.TableMapEvent, rows ...[]any) *replication.BinlogEvent {
	return ev(ts, replication.UPDATE_ROWS_EVENTv1, pos, &replication.RowsEvent{Table: table, Rows: rows, ColumnCount: uint64(len(rows[0]))})
}

func insert(ts uint32, table *replication.TableMapEvent, rows ...[]any) *replication.BinlogEvent {
	return ev(ts, replication.WRITE_ROWS_EVENTv1, 0, &replication.RowsEvent{Table: table, Rows: rows})
}

func xid(ts uint32, x uint64) *replication.BinlogEvent {
	return ev(ts, replication.XID_EVENT, 0, &replication.XIDEvent{XID: x})
}

func query(ts uint32, q string) *replication.BinlogEvent {
	return ev(ts, replication.QUERY_EVENT, 0, &replication.QueryEvent{Query: []byte(q)})
}

// The window's columns: account_balance(account_id, balance),
// ledger_entry(id, biz_order_id).
func TestWindow(t *testing.T) {
	const t0 = 1_800_000_000
	req := sources.BinlogRequest{Schema: "pay", Table: "account_balance", KeyColumn: "account_id", DeltaColumn: "balance", Key: "1001",
		From: time.Unix(t0, 0), To: time.Unix(t0+60, 0), TxSchema: "pay", TxTable: "ledger_entry", TxColumn: "biz_order_id"}
	cases := []struct {
		name   string
		events []*replication.BinlogEvent
		want   []string // id txkeys before->after
		done   bool
	}{
		{"a debit and its ledger row in one transaction", []*replication.BinlogEvent{
			gtid(t0+1, 5), update(t0+1, 400, balanceMap, []any{int64(1001), "100.00"}, []any{int64(1001), "70.00"}),
			insert(t0+1, ledgerMap, []any{int64(1), "PAY-1"}), xid(t0+1, 77)},
			[]string{"0-1-5#0 [PAY-1] 100.00->70.00"}, false},
		{"other rows and tables are not kept", []*replication.BinlogEvent{
			gtid(t0+1, 5), update(t0+1, 400, balanceMap, []any{int64(1002), "100.00"}, []any{int64(1002), "70.00"},
				[]any{int64(1001), "50.00"}, []any{int64(1001), "20.00"}),
			update(t0+1, 600, otherMap, []any{int64(1001), "x"}, []any{int64(1001), "y"}), xid(t0+1, 78)},
			[]string{"0-1-5#1 [] 50.00->20.00"}, false},
		{"before the window", []*replication.BinlogEvent{
			gtid(t0-5, 4), update(t0-5, 400, balanceMap, []any{int64(1001), "100.00"}, []any{int64(1001), "70.00"}), xid(t0-5, 1)},
			nil, false},
		{"a transaction after the window ends the read", []*replication.BinlogEvent{
			gtid(t0+61, 9)}, nil, true},
		{"a rolled back statement group leaves nothing", []*replication.BinlogEvent{
			query(t0+1, "BEGIN"), update(t0+1, 400, balanceMap, []any{int64(1001), "100.00"}, []any{int64(1001), "70.00"}), query(t0+1, "ROLLBACK")},
			nil, false},
		{"BEGIN ... COMMIT without GTID: file:pos", []*replication.BinlogEvent{
			query(t0+2, "BEGIN"), update(t0+2, 900, balanceMap, []any{int64(1001), "100.00"}, []any{int64(1001), "70.00"}), query(t0+2, "COMMIT")},
			[]string{"bin.000003:900#0 [] 100.00->70.00"}, false},
		{"uncommitted at the end: not a change", []*replication.BinlogEvent{
			gtid(t0+1, 5), update(t0+1, 400, balanceMap, []any{int64(1001), "100.00"}, []any{int64(1001), "70.00"})},
			nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWindow(req, 0, 1, 1)
			done := false
			for _, e := range c.events {
				done = done || w.event(e, "bin.000003", e.Header.LogPos-e.Header.EventSize)
			}
			var got []string
			for _, ch := range w.changes {
				got = append(got, fmt.Sprintf("%s %v %s->%s", ch.ID(), ch.TxKeys, ch.Before, ch.After))
			}
			if strings.Join(got, ";") != strings.Join(c.want, ";") || done != c.done {
				t.Fatalf("changes %v done %v; want %v done %v", got, done, c.want, c.done)
			}
		})
	}
}

func TestValueText(t *testing.T) {
	cases := []struct {
		in   any
		val  any
		text string
	}{
		{int32(-5), int64(-5), "-5"},
		{uint64(1 << 63), "9223372036854775808", "9223372036854775808"},
		{"账户", "账户", "账户"},
		{[]byte("ab"), "ab", "ab"},
		{"12345678901234567890.1234567891", "12345678901234567890.1234567891", "12345678901234567890.1234567891"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.in), func(t *testing.T) {
			if v := value(c.in); v != c.val {
				t.Errorf("value = %#v, want %#v", v, c.val)
			}
			if s := text(c.in); s != c.text {
				t.Errorf("text = %q, want %q", s, c.text)
			}
		})
	}
}

func TestMySQLGTID(t *testing.T) {
	sid := []byte{0x3e, 0x11, 0xfa, 0x47, 0x71, 0xca, 0x11, 0xe1, 0x9e, 0x33, 0xc8, 0x0a, 0xa9, 0x42, 0x95, 0x62}
	if g := mysqlGTID(sid, 23); g != "3e11fa47-71ca-11e1-9e33-c80aa9429562:23" {
		t.Fatalf("gtid %s", g)
	}
	if g := mysqlGTID(make([]byte, 16), 1); g != "" {
		t.Fatalf("anonymous gtid %q", g)
	}
}

// MySQL 8 with binlog_transaction_compression: the rows and the XID are
// inside one payload event.
func TestWindowCompressedTransaction(t *testing.T) {
	const t0 = 1_800_000_000
	req := sources.BinlogRequest{Schema: "pay", Table: "account_balance", KeyColumn: "account_id", DeltaColumn: "balance", Key: "1001",
		From: time.Unix(t0, 0), To: time.Unix(t0+60, 0)}
	w := newWindow(req, 0, 1, -1)
	sid := []byte{0x3e, 0x11, 0xfa, 0x47, 0x71, 0xca, 0x11, 0xe1, 0x9e, 0x33, 0xc8, 0x0a, 0xa9, 0x42, 0x95, 0x62}
	w.event(ev(t0+1, replication.GTID_EVENT, 0, &replication.GTIDEvent{SID: sid, GNO: 7}), "binlog.000001", 0)
	w.event(ev(t0+1, replication.TRANSACTION_PAYLOAD_EVENT, 0, &replication.TransactionPayloadEvent{Events: []*replication.BinlogEvent{
		query(t0+1, "BEGIN"), update(t0+1, 300, balanceMap, []any{int64(1001), "100.00"}, []any{int64(1001), "70.00"}), xid(t0+1, 9)}}), "binlog.000001", 0)
	if len(w.changes) != 1 || w.changes[0].ID() != "3e11fa47-71ca-11e1-9e33-c80aa9429562:7#0" || w.changes[0].XID != 9 {
		t.Fatalf("changes %+v", w.changes)
	}
}

// Every event of the window is accounted for: what makes a window unknown,
// and what does not (the same outside the window, or of another table).
func TestWindowAccounting(t *testing.T) {
	const t0 = 1_800_000_000
	req := sources.BinlogRequest{Schema: "pay", Table: "account_balance", KeyColumn: "account_id", DeltaColumn: "balance", Key: "1001",
		From: time.Unix(t0, 0), To: time.Unix(t0+60, 0), TxSchema: "pay", TxTable: "ledger_entry", TxColumn: "biz_order_id"}
	fde := func(ts uint32, alg byte) *replication.BinlogEvent {
		return ev(ts, replication.FORMAT_DESCRIPTION_EVENT, 4, &replication.FormatDescriptionEvent{ChecksumAlgorithm: alg})
	}
	rotate := func(ts uint32, next string) *replication.BinlogEvent {
		return ev(ts, replication.ROTATE_EVENT, 900, &replication.RotateEvent{NextLogName: []byte(next), Position: 4})
	}
	stop := func(ts uint32) *replication.BinlogEvent {
		return ev(ts, replication.STOP_EVENT, 950, &replication.GenericEvent{})
	}
	list := func(ts uint32, seq uint64) *replication.BinlogEvent {
		var g []gomysql.MariadbGTID
		if seq > 0 {
			g = []gomysql.MariadbGTID{{DomainID: 0, ServerID: 1, SequenceNumber: seq}}
		}
		return ev(ts, replication.MARIADB_GTID_LIST_EVENT, 256, &replication.MariadbGTIDListEvent{GTIDs: g})
	}
	debit := func(ts uint32, seq uint64) []*replication.BinlogEvent {
		return []*replication.BinlogEvent{gtid(ts, seq), update(ts, 400, balanceMap, []any{int64(1001), "100.00"}, []any{int64(1001), "70.00"}), xid(ts, seq)}
	}
	minimal := &replication.RowsEvent{Table: balanceMap, ColumnCount: 2, ColumnBitmap1: []byte{0x01}, ColumnBitmap2: []byte{0x02},
		Rows: [][]any{{int64(1001), nil}, {nil, "70.00"}}}
	type step struct {
		file string
		ev   *replication.BinlogEvent
	}
	in := func(file string, evs ...*replication.BinlogEvent) []step {
		var out []step
		for _, e := range evs {
			out = append(out, step{file, e})
		}
		return out
	}
	cat := func(parts ...[]step) []step {
		var out []step
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	cases := []struct {
		name    string
		steps   []step
		problem string // "" for a window read whole
	}{
		{"a rotation in the window", cat(in("b.1", fde(t0-100, 1), list(t0-100, 4)), in("b.1", debit(t0+1, 5)...), in("b.1", rotate(t0+2, "b.2")),
			in("b.2", fde(t0+2, 1), list(t0+2, 5)), in("b.2", debit(t0+3, 6)...)), ""},
		{"a stop event, then a restart, in the window", cat(in("b.1", fde(t0-100, 1), list(t0-100, 4)), in("b.1", debit(t0+1, 5)...), in("b.1", stop(t0+2)),
			in("b.2", fde(t0+30, 1), list(t0+30, 5)), in("b.2", debit(t0+31, 6)...)), "ends with a stop event"},
		{"a stop event and a restart before the window", cat(in("b.1", fde(t0-100, 1), list(t0-100, 4), stop(t0-50)),
			in("b.2", fde(t0-40, 1), list(t0-40, 4)), in("b.2", debit(t0+1, 5)...)), ""},
		{"a file that ends without a rotate event", cat(in("b.1", fde(t0-100, 1), list(t0-100, 4)), in("b.1", debit(t0+1, 5)...),
			in("b.2", fde(t0+3, 1), list(t0+3, 5)), in("b.2", debit(t0+4, 6)...)), "ends without a rotate event"},
		{"a GTID list that does not continue the file before", cat(in("b.1", fde(t0-100, 1), list(t0-100, 4)), in("b.1", debit(t0+1, 5)...), in("b.1", rotate(t0+2, "b.2")),
			in("b.2", fde(t0+2, 1), list(t0+2, 9))), "does not continue b.1"},
		{"a restarted GTID list", cat(in("b.1", fde(t0-100, 1), list(t0-100, 4)), in("b.1", debit(t0+1, 5)...), in("b.1", rotate(t0+2, "b.2")),
			in("b.2", fde(t0+2, 1), list(t0+2, 0))), "(empty) does not continue"},
		{"a file without checksums on a CRC32 server", cat(in("b.1", fde(t0-100, 0), list(t0-100, 4)), in("b.1", debit(t0+1, 5)...)), "without event checksums"},
		{"a statement-format debit in the window", cat(in("b.1", fde(t0-100, 1), list(t0-100, 4)),
			in("b.1", query(t0+5, "BEGIN"), ev(t0+5, replication.QUERY_EVENT, 700, &replication.QueryEvent{Schema: []byte("pay"), Query: []byte("UPDATE account_balance SET balance = balance - 30 WHERE account_id = '1001'")}), query(t0+5, "COMMIT"))),
			"statement-format event at b.1:700"},
		{"... of another schema's table of that name", cat(in("b.1", fde(t0-100, 1), list(t0-100, 4)),
			in("b.1", ev(t0+5, replication.QUERY_EVENT, 700, &replication.QueryEvent{Schema: []byte("other"), Query: []byte("UPDATE account_balance SET balance = 0")}))), ""},
		{"... before the window", cat(in("b.1", fde(t0-100, 1), list(t0-100, 4)),
			in("b.1", ev(t0-5, replication.QUERY_EVENT, 700, &replication.QueryEvent{Schema: []byte("pay"), Query: []byte("UPDATE account_balance SET balance = 0")}))), ""},
		{"a ledger row written in statement format in a debit's transaction", cat(in("b.1", fde(t0-100, 1), list(t0-100, 4)),
			in("b.1", gtid(t0+5, 5), update(t0+5, 400, balanceMap, []any{int64(1001), "100.00"}, []any{int64(1001), "70.00"}),
				ev(t0+5, replication.QUERY_EVENT, 700, &replication.QueryEvent{Schema: []byte("pay"), Query: []byte("INSERT INTO ledger_entry (biz_order_id) VALUES ('PAY-1')")}), xid(t0+5, 9))),
			"wrote ledger_entry in statement format"},
		{"a MINIMAL image of the row", cat(in("b.1", fde(t0-100, 1), list(t0-100, 4)),
			in("b.1", gtid(t0+5, 5), ev(t0+5, replication.UPDATE_ROWS_EVENTv1, 400, minimal), xid(t0+5, 9))), "binlog_row_image=MINIMAL"},
		{"a rows event from before an ALTER TABLE", cat(in("b.1", fde(t0-100, 1), list(t0-100, 4)),
			in("b.1", gtid(t0+5, 5), ev(t0+5, replication.UPDATE_ROWS_EVENTv1, 400, &replication.RowsEvent{Table: balanceMap, ColumnCount: 5, Rows: [][]any{{int64(1001), "1"}, {int64(1001), "0"}}}), xid(t0+5, 9))),
			"an ALTER TABLE since"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWindow(req, 0, 1, 1)
			w.crc, w.cols, w.fold = true, 2, false
			for _, s := range c.steps {
				if w.event(s.ev, s.file, s.ev.Header.LogPos-s.ev.Header.EventSize) {
					break
				}
			}
			if (c.problem == "") != (w.problem == "") || !strings.Contains(w.problem, c.problem) {
				t.Fatalf("problem %q, want %q", w.problem, c.problem)
			}
		})
	}
}
