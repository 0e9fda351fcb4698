package binlog

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/opctl-dev/opctl/sources"
)

// window follows the transactions of a binlog stream and keeps the UPDATEs
// of one row in a time window, each with the transaction-table keys its
// transaction wrote. It holds no connection: events are fed to it.
type window struct {
	req                     sources.BinlogRequest
	keyPos, deltaPos, txPos int
	from, to                int64

	changes []sources.BinlogChange

	// the open transaction
	inTx    bool
	gtid    string
	pending []sources.BinlogChange
	txKeys  []string
}

func newWindow(req sources.BinlogRequest, keyPos, deltaPos, txPos int) *window {
	to := req.To.Unix()
	if req.To.Nanosecond() > 0 {
		to++
	}
	return &window{req: req, keyPos: keyPos, deltaPos: deltaPos, txPos: txPos, from: req.From.Unix(), to: to}
}

// idle reports that no transaction is open.
func (w *window) idle() bool { return !w.inTx }

func sameName(b []byte, name string) bool { return strings.EqualFold(string(b), name) }

func (w *window) isTarget(t *replication.TableMapEvent) bool {
	return t != nil && sameName(t.Schema, w.req.Schema) && sameName(t.Table, w.req.Table)
}

func (w *window) isTx(t *replication.TableMapEvent) bool {
	return t != nil && w.req.TxTable != "" && sameName(t.Schema, w.req.TxSchema) && sameName(t.Table, w.req.TxTable)
}

// decode is the rows-event decoder of the stream: it decodes the rows of
// the window's tables only, and skips the others' (most of the traffic).
func (w *window) decode(e *replication.RowsEvent, data []byte) error {
	pos, err := e.DecodeHeader(data)
	if err != nil {
		return err
	}
	if !w.isTarget(e.Table) && !w.isTx(e.Table) {
		return nil
	}
	return e.DecodeData(pos, data)
}

// event feeds one event read from file; done is true once a transaction
// begins after the window's end (nothing later can be in the window).
func (w *window) event(ev *replication.BinlogEvent, file string) (done bool) {
	h := ev.Header
	switch e := ev.Event.(type) {
	case *replication.MariadbGTIDEvent:
		return w.begin(int64(h.Timestamp), fmt.Sprintf("%d-%d-%d", e.GTID.DomainID, e.GTID.ServerID, e.GTID.SequenceNumber))
	case *replication.GTIDEvent:
		return w.begin(int64(h.Timestamp), mysqlGTID(e.SID, e.GNO))
	case *replication.QueryEvent:
		q := strings.TrimSpace(string(e.Query))
		switch {
		case strings.EqualFold(q, "BEGIN"):
			if !w.inTx {
				return w.begin(int64(h.Timestamp), "")
			}
		case strings.EqualFold(q, "COMMIT"):
			w.commit(0)
		case strings.EqualFold(q, "ROLLBACK"):
			w.reset()
		}
	case *replication.XIDEvent:
		w.commit(e.XID)
	case *replication.TransactionPayloadEvent:
		// MySQL 8's binlog_transaction_compression: the transaction's
		// events, compressed in one.
		for _, inner := range e.Events {
			if w.event(inner, file) {
				return true
			}
		}
	case *replication.RowsEvent:
		w.rows(e, rowsKind(h.EventType), h, file)
	}
	return false
}

// mysqlGTID is "uuid:gno", "" for an anonymous transaction (gtid_mode OFF).
func mysqlGTID(sid []byte, gno int64) string {
	zero := true
	for _, b := range sid {
		zero = zero && b == 0
	}
	if zero || len(sid) != 16 {
		return ""
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x:%d", sid[0:4], sid[4:6], sid[6:8], sid[8:10], sid[10:16], gno)
}

func (w *window) begin(ts int64, gtid string) bool {
	w.reset()
	if ts > w.to {
		return true
	}
	w.inTx, w.gtid = true, gtid
	return false
}

func (w *window) reset() {
	w.inTx, w.gtid, w.pending, w.txKeys = false, "", nil, nil
}

func (w *window) commit(xid uint64) {
	for _, c := range w.pending {
		c.GTID, c.XID = w.gtid, xid
		c.TxKeys = append([]string(nil), w.txKeys...)
		w.changes = append(w.changes, c)
	}
	w.reset()
}

// rows keeps the UPDATEs of the requested row in the window, and the
// transaction table's keys.
func (w *window) rows(e *replication.RowsEvent, kind replication.EnumRowsEventType, h *replication.EventHeader, file string) {
	if e.Rows == nil {
		return
	}
	switch {
	case w.isTx(e.Table) && (kind == replication.EnumRowsEventTypeInsert || kind == replication.EnumRowsEventTypeUpdate):
		step := 1
		if kind == replication.EnumRowsEventTypeUpdate {
			step = 2 // before, after: the after image names the operation
		}
		for i := step - 1; i < len(e.Rows); i += step {
			if w.txPos < len(e.Rows[i]) {
				w.txKeys = append(w.txKeys, text(e.Rows[i][w.txPos]))
			}
		}
	case w.isTarget(e.Table) && kind == replication.EnumRowsEventTypeUpdate:
		ts := int64(h.Timestamp)
		if ts < w.from || ts > w.to {
			return
		}
		for i := 0; i+1 < len(e.Rows); i += 2 {
			before, after := e.Rows[i], e.Rows[i+1]
			if w.keyPos >= len(after) || w.deltaPos >= len(after) || w.deltaPos >= len(before) {
				continue
			}
			if w.req.Key != "" && text(after[w.keyPos]) != w.req.Key && text(before[w.keyPos]) != w.req.Key {
				continue
			}
			w.pending = append(w.pending, sources.BinlogChange{
				File: file, Pos: h.LogPos - h.EventSize, Row: i / 2,
				At:  time.Unix(ts, 0).UTC(),
				Key: value(after[w.keyPos]), Before: text(before[w.deltaPos]), After: text(after[w.deltaPos]),
			})
		}
	}
}

// rowsKind is what a rows event of type t does, MySQL's and MariaDB's
// variants alike (compressed, partial JSON updates).
func rowsKind(t replication.EventType) replication.EnumRowsEventType {
	switch t {
	case replication.WRITE_ROWS_EVENTv0, replication.WRITE_ROWS_EVENTv1, replication.WRITE_ROWS_EVENTv2, replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1:
		return replication.EnumRowsEventTypeInsert
	case replication.UPDATE_ROWS_EVENTv0, replication.UPDATE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv2,
		replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1, replication.PARTIAL_UPDATE_ROWS_EVENT:
		return replication.EnumRowsEventTypeUpdate
	}
	return replication.EnumRowsEventTypeUnknown
}

// value is a key as evidence holds it: an integer as int64 (an unsigned one
// past int64 as text), anything else as text.
func value(v any) sources.Value {
	switch x := v.(type) {
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return x
	case int:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		if x <= 1<<63-1 {
			return int64(x)
		}
	}
	return text(v)
}

// text renders a decoded value as its SQL text: DECIMALs are already exact
// strings, integers in base 10.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return string(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32)
	}
	return fmt.Sprint(v)
}
