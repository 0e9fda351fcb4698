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
// transaction wrote. It holds no connection: events are fed to it. Every
// event of the window is accounted for (docs/where.md#binlog-evidence):
// one it cannot read as rows — a statement-format change of the table, a
// row image without the key or delta column, a gap in the binlog's
// coverage — sets problem, and the window then yields no count.
type window struct {
	req                     sources.BinlogRequest
	keyPos, deltaPos, txPos int
	// cols and txCols are the tables' column counts now (0: not known):
	// a rows event with another count was written before an ALTER TABLE,
	// and the positions do not apply to it.
	cols, txCols int
	// fold: names compare case-insensitively (lower_case_table_names 1
	// or 2); with 0 the server compares them byte for byte.
	fold bool
	// crc: the server writes CRC32 checksums (binlog_checksum=CRC32), so
	// a file without them cannot be verified.
	crc      bool
	from, to int64

	changes []sources.BinlogChange
	// problem is the first reason an event of the window cannot be
	// accounted for; "" while every one is.
	problem string

	// the open transaction
	inTx    bool
	gtid    string
	pending []sources.BinlogChange
	txKeys  []string
	// txStmt is a statement of the open transaction that wrote the
	// transaction table in statement format ("" if none).
	txStmt string

	// coverage: the current file, the time of its last event, how it
	// ended ("rotate", "stop" or ""), and the file before it.
	file     string
	lastTS   int64
	ended    string
	prev     string
	prevEnd  string
	prevLast int64
	boundary bool
	// evType is the type of the event being decoded (the stream's), read
	// by decode; nil when not known.
	evType *replication.EventType
	// gtids is the MariaDB GTID state of the stream: the last sequence
	// number of each (domain, server id), from the first file's GTID
	// list on.
	gtids map[[2]uint32]uint64
}

func newWindow(req sources.BinlogRequest, keyPos, deltaPos, txPos int) *window {
	to := req.To.Unix()
	if req.To.Nanosecond() > 0 {
		to++
	}
	return &window{req: req, keyPos: keyPos, deltaPos: deltaPos, txPos: txPos, from: req.From.Unix(), to: to, fold: true}
}

// sameName compares a schema or table name as the server does.
func (w *window) sameName(b []byte, name string) bool {
	if w.fold {
		return strings.EqualFold(string(b), name)
	}
	return string(b) == name
}

func (w *window) isTarget(t *replication.TableMapEvent) bool {
	return t != nil && w.sameName(t.Schema, w.req.Schema) && w.sameName(t.Table, w.req.Table)
}

func (w *window) isTx(t *replication.TableMapEvent) bool {
	return t != nil && w.req.TxTable != "" && w.sameName(t.Schema, w.req.TxSchema) && w.sameName(t.Table, w.req.TxTable)
}

// inWindow reports whether a timestamp is in [from, to].
func (w *window) inWindow(ts int64) bool { return ts >= w.from && ts <= w.to }

// fail records the first problem.
func (w *window) fail(format string, args ...any) {
	if w.problem == "" {
		w.problem = fmt.Sprintf(format, args...)
	}
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
	return decodeRows(e, data, pos, w.evType)
}

// decodeRows decodes a rows event's rows (its header decoded up to pos),
// refusing the counts of a damaged event before go-mysql allocates by them.
// evType, when set, is the type of the event (a compressed one is checked).
func decodeRows(e *replication.RowsEvent, data []byte, pos int, evType *replication.EventType) error {
	// go-mysql sizes a row by the event's column count: one that is not
	// its table map's (a damaged event) is refused before it allocates.
	if e.ColumnCount != e.Table.ColumnCount || e.ColumnCount > maxColumns {
		return fmt.Errorf("the rows event has %d columns, its table map %d: the event is damaged", e.ColumnCount, e.Table.ColumnCount)
	}
	// A row image of no column takes no bytes: go-mysql would decode rows
	// of it forever.
	n := int(e.ColumnCount)
	if !anyBit(e.ColumnBitmap1, n) || (e.ColumnBitmap2 != nil && !anyBit(e.ColumnBitmap2, n)) {
		return fmt.Errorf("the rows event's image has no column: the event is damaged")
	}
	if evType != nil && compressedRows(*evType) && !compressedOK(data[pos:]) {
		return fmt.Errorf("the compressed rows event declares more data than its compressed bytes can hold: the event is damaged")
	}
	return e.DecodeData(pos, data)
}

// anyBit reports whether a column bitmap names one of the first n
// columns (its last byte's other bits are padding).
func anyBit(b []byte, n int) bool {
	for i := 0; i < n && i>>3 < len(b); i++ {
		if b[i>>3]&(1<<(uint(i)&7)) != 0 {
			return true
		}
	}
	return false
}

// compressedRows reports whether t is a MariaDB compressed rows event.
func compressedRows(t replication.EventType) bool {
	return t == replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1 || t == replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1 ||
		t == replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1
}

// compressedOK checks MariaDB's compressed data (a header byte whose low
// bits count the bytes of the uncompressed size, the size, then zlib data)
// before go-mysql allocates the size it declares: zlib never expands more
// than about 1032 times, so a larger size is a damaged event, never an
// allocation.
func compressedOK(blob []byte) bool {
	if len(blob) == 0 {
		return false
	}
	n := int(blob[0] & 0x07)
	if n == 0 || n > 4 || len(blob) < 1+n {
		return false
	}
	size := uint64(0)
	for _, b := range blob[1 : 1+n] {
		size = size<<8 | uint64(b)
	}
	return size <= 1100*uint64(len(blob)-1-n)+1024
}

// maxColumns is the most columns a MySQL or MariaDB table has.
const maxColumns = 4096

// event feeds one event, which starts at pos of file; done is true once a
// transaction begins after the window's end (nothing later can be in the
// window).
func (w *window) event(ev *replication.BinlogEvent, file string, pos uint32) (done bool) {
	h := ev.Header
	artificial := h.Flags&replication.LOG_EVENT_ARTIFICIAL_F != 0 || h.Timestamp == 0
	if file != w.file && !artificial {
		w.newFile(file)
	}
	ts := int64(h.Timestamp)
	if !artificial {
		w.lastTS = ts
	}
	switch e := ev.Event.(type) {
	case *replication.FormatDescriptionEvent:
		w.fileStart(file, ts, e.ChecksumAlgorithm)
	case *replication.RotateEvent:
		if !artificial {
			w.ended = "rotate"
		}
	case *replication.GenericEvent:
		if h.EventType == replication.STOP_EVENT {
			w.ended = "stop"
		}
	case *replication.MariadbGTIDListEvent:
		w.gtidList(file, ts, e)
	case *replication.MariadbGTIDEvent:
		if w.gtids != nil {
			w.gtids[[2]uint32{e.GTID.DomainID, e.GTID.ServerID}] = e.GTID.SequenceNumber
		}
		return w.begin(ts, fmt.Sprintf("%d-%d-%d", e.GTID.DomainID, e.GTID.ServerID, e.GTID.SequenceNumber))
	case *replication.GTIDEvent:
		return w.begin(ts, mysqlGTID(e.SID, e.GNO))
	case *replication.QueryEvent:
		q := strings.TrimSpace(string(e.Query))
		switch {
		case strings.EqualFold(q, "BEGIN"):
			if !w.inTx {
				return w.begin(ts, "")
			}
		case strings.EqualFold(q, "COMMIT"):
			w.commit(0)
		case strings.EqualFold(q, "ROLLBACK"):
			w.reset()
		default:
			w.statement(file, pos, ts, string(e.Schema), q)
		}
	case *replication.ExecuteLoadQueryEvent:
		// LOAD DATA in statement format: go-mysql does not decode which
		// table it loads.
		if w.inWindow(ts) {
			w.fail("a statement-format LOAD DATA at %s:%d (%s) may have changed %s: the binlog holds the statement, not its rows", file, pos, stamp(ts), w.req.Table)
		}
	case *replication.XIDEvent:
		w.commit(e.XID)
	case *replication.TransactionPayloadEvent:
		// MySQL 8's binlog_transaction_compression: the transaction's
		// events, compressed in one.
		for _, inner := range e.Events {
			if w.event(inner, file, pos) {
				return true
			}
		}
	case *replication.RowsEvent:
		w.rows(e, rowsKind(h.EventType), h, file, pos)
	}
	return false
}

// newFile notes that the stream moved on to file.
func (w *window) newFile(file string) {
	if w.file != "" {
		w.prev, w.prevEnd, w.prevLast, w.boundary = w.file, w.ended, w.lastTS, true
	}
	w.file, w.ended = file, ""
}

// fileStart checks a file's format description: its checksums, and the
// coverage between the file before it in the stream and this one. A file
// that follows one ended by a stop event (the server stopped: it may have
// run without log_bin before this file) or by nothing at all (a crash, or a
// file cut short) leaves the time between them uncovered.
func (w *window) fileStart(file string, ts int64, alg byte) {
	if w.crc && alg != replication.BINLOG_CHECKSUM_ALG_CRC32 {
		w.fail("%s was written without event checksums although the server's binlog_checksum is CRC32 (written before it was set, or its format description is damaged): its events cannot be verified", file)
	}
	if !w.boundary {
		return
	}
	w.boundary = false
	if w.prevEnd == "rotate" {
		return
	}
	how := "ends without a rotate event (the server crashed, or the file was cut short)"
	if w.prevEnd == "stop" {
		how = "ends with a stop event (the server stopped; it may have run with log_bin off before " + file + " began)"
	}
	if w.prevLast <= w.to && ts >= w.from {
		w.fail("the binlog does not cover the window contiguously: %s %s at %s, and %s begins at %s: changes between them are not in the binlog",
			w.prev, how, stamp(w.prevLast), file, stamp(ts))
	}
}

// gtidList checks that a file's GTID list (MariaDB) continues the stream:
// each (domain, server id) at the sequence number the files before it
// ended at. Another list means the binlog restarted (RESET MASTER, a
// restored server) or lost transactions between the files.
func (w *window) gtidList(file string, ts int64, e *replication.MariadbGTIDListEvent) {
	list := map[[2]uint32]uint64{}
	for _, g := range e.GTIDs {
		list[[2]uint32{g.DomainID, g.ServerID}] = g.SequenceNumber
	}
	if w.gtids == nil {
		w.gtids = list
		return
	}
	same := len(list) == len(w.gtids)
	for k, v := range w.gtids {
		same = same && list[k] == v
	}
	if !same && w.prevLast <= w.to && ts >= w.from {
		w.fail("the binlog does not cover the window contiguously: the GTID list of %s (%s) does not continue %s (%s): transactions between them are not in the binlog",
			file, gtidText(list), w.prev, gtidText(w.gtids))
	}
	w.gtids = list
}

func gtidText(m map[[2]uint32]uint64) string {
	if len(m) == 0 {
		return "empty"
	}
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%d-%d-%d", k[0], k[1], v))
	}
	sortStrings(parts)
	return strings.Join(parts, ",")
}

// statement checks a statement-format event: one in the window that
// changes the table (or, inside a transaction, the transaction table)
// leaves its rows unknown.
func (w *window) statement(file string, pos uint32, ts int64, schema, q string) {
	if !w.inWindow(ts) || !isDML(q) {
		return
	}
	switch {
	case namesTable(q, schema, w.req.Schema, w.req.Table, w.fold):
		w.fail("a statement-format event at %s:%d (%s) changes %s: the binlog holds the statement %q, not its rows (binlog_format was STATEMENT or MIXED for it)",
			file, pos, stamp(ts), w.req.Table, clip(q, 120))
	case w.req.TxTable != "" && namesTable(q, schema, w.req.TxSchema, w.req.TxTable, w.fold):
		w.txStmt = fmt.Sprintf("%s:%d %q", file, pos, clip(q, 120))
	}
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
	w.inTx, w.gtid, w.pending, w.txKeys, w.txStmt = false, "", nil, nil, ""
}

func (w *window) commit(xid uint64) {
	if len(w.pending) > 0 && w.txStmt != "" {
		w.fail("the transaction of change %s wrote %s in statement format (%s): which operation it names cannot be read", w.pending[0].ID(), w.req.TxTable, w.txStmt)
	}
	for _, c := range w.pending {
		c.GTID, c.XID = w.gtid, xid
		c.TxKeys = append([]string(nil), w.txKeys...)
		w.changes = append(w.changes, c)
	}
	w.reset()
}

// rows keeps the UPDATEs of the requested row in the window, and the
// transaction table's keys.
func (w *window) rows(e *replication.RowsEvent, kind replication.EnumRowsEventType, h *replication.EventHeader, file string, pos uint32) {
	ts := int64(h.Timestamp)
	switch {
	case w.isTx(e.Table) && (kind == replication.EnumRowsEventTypeInsert || kind == replication.EnumRowsEventTypeUpdate):
		if !w.inWindow(ts) && !w.inTx {
			return
		}
		image := e.ColumnBitmap1
		step := 1
		if kind == replication.EnumRowsEventTypeUpdate {
			step, image = 2, e.ColumnBitmap2 // before, after: the after image names the operation
		}
		if w.txCols > 0 && int(e.ColumnCount) != w.txCols {
			w.fail("the rows event at %s:%d has %d columns of %s, which has %d now (an ALTER TABLE since): its rows cannot be read", file, pos, e.ColumnCount, w.req.TxTable, w.txCols)
			return
		}
		if !hasColumn(image, w.txPos) {
			w.fail("the rows event at %s:%d (%s) lacks %s.%s (binlog_row_image=MINIMAL or NOBLOB): which operation its transaction names cannot be read", file, pos, stamp(ts), w.req.TxTable, w.req.TxColumn)
			return
		}
		for i := step - 1; i < len(e.Rows); i += step {
			if w.txPos < len(e.Rows[i]) {
				w.txKeys = append(w.txKeys, text(e.Rows[i][w.txPos]))
			}
		}
	case w.isTarget(e.Table) && kind == replication.EnumRowsEventTypeUpdate:
		if !w.inWindow(ts) {
			return
		}
		if w.cols > 0 && int(e.ColumnCount) != w.cols {
			w.fail("the rows event at %s:%d has %d columns of %s, which has %d now (an ALTER TABLE since): its rows cannot be read", file, pos, e.ColumnCount, w.req.Table, w.cols)
			return
		}
		beforeKey, afterKey := hasColumn(e.ColumnBitmap1, w.keyPos), hasColumn(e.ColumnBitmap2, w.keyPos)
		full := beforeKey && afterKey && hasColumn(e.ColumnBitmap1, w.deltaPos) && hasColumn(e.ColumnBitmap2, w.deltaPos)
		for i := 0; i+1 < len(e.Rows); i += 2 {
			before, after := e.Rows[i], e.Rows[i+1]
			if w.keyPos >= len(after) || w.deltaPos >= len(after) || w.deltaPos >= len(before) || w.keyPos >= len(before) {
				w.fail("the UPDATE of %s at %s:%d (%s) has rows shorter than the table: its rows cannot be read", w.req.Table, file, pos, stamp(ts))
				return
			}
			if w.req.Key != "" {
				// A row known to be another one is not this window's,
				// whatever its image lacks.
				other := (beforeKey || afterKey) &&
					(!beforeKey || text(before[w.keyPos]) != w.req.Key) && (!afterKey || text(after[w.keyPos]) != w.req.Key)
				if other {
					continue
				}
			}
			if !full {
				w.fail("the UPDATE of %s at %s:%d (%s) was written with binlog_row_image=MINIMAL (or NOBLOB): its row images lack %s or %s, so which row it changed and by how much cannot be read",
					w.req.Table, file, pos, stamp(ts), w.req.KeyColumn, w.req.DeltaColumn)
				return
			}
			w.pending = append(w.pending, sources.BinlogChange{
				File: file, Pos: pos, Row: i / 2,
				At:  time.Unix(ts, 0).UTC(),
				Key: value(after[w.keyPos]), Before: text(before[w.deltaPos]), After: text(after[w.deltaPos]),
			})
		}
	}
}

// hasColumn reports whether a rows event's column bitmap includes column
// i. A nil bitmap (an event decoded without one) includes every column.
func hasColumn(bitmap []byte, i int) bool {
	if bitmap == nil {
		return true
	}
	return i >= 0 && i>>3 < len(bitmap) && bitmap[i>>3]&(1<<(uint(i)&7)) != 0
}

// stamp renders a binlog timestamp (seconds, UTC).
func stamp(ts int64) string { return time.Unix(ts, 0).UTC().Format("2006-01-02 15:04:05Z") }

// clip shortens s to n bytes (at a rune boundary) for a message.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

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

// rowsKind is what a rows event of type t does, MySQL's and MariaDB's
// variants alike (compressed, partial JSON updates).
func rowsKind(t replication.EventType) replication.EnumRowsEventType {
	switch t {
	case replication.WRITE_ROWS_EVENTv0, replication.WRITE_ROWS_EVENTv1, replication.WRITE_ROWS_EVENTv2, replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1:
		return replication.EnumRowsEventTypeInsert
	case replication.UPDATE_ROWS_EVENTv0, replication.UPDATE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv2,
		replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1, replication.PARTIAL_UPDATE_ROWS_EVENT:
		return replication.EnumRowsEventTypeUpdate
	case replication.DELETE_ROWS_EVENTv0, replication.DELETE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv2, replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1:
		return replication.EnumRowsEventTypeDelete
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
