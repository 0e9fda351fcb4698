package binlog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/opctl-dev/opctl/sources"
)

// The follower: `opctl watch`'s change capture (docs/watch.md#what-the-binlog-follower-needs).
// It streams the server's binlog as a replica from a saved position, on the
// evidence reader's connection (conn.go: checksums verified, every read
// bound to the context), without BINLOG_DUMP_NON_BLOCK: the dump waits for
// new events, with the server's heartbeats while it has none.

const (
	// followTick is the heartbeat period asked of the server, and how
	// often a follow emits a progress mark while nothing it follows
	// changes.
	followTick = time.Second
	// FollowMaxChanges bounds the changes a follow buffers for one
	// transaction: a larger transaction is emitted in chunks of this many
	// (and the rest of the rows event that reached it; sources.BinlogTx.More),
	// never held whole in memory. The last chunk, empty when the rows
	// ended at a chunk, carries the transaction's End.
	FollowMaxChanges = 10000
)

// Head returns the server's current binlog position (SHOW MASTER STATUS, or
// SHOW BINARY LOG STATUS on a server that dropped it), with its GTID
// position, within the reader's timeout. A server without a binlog is an
// *UnavailableError.
func (r *Reader) Head(ctx context.Context) (sources.BinlogPosition, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	conn, err := r.connect(ctx, "SQL connection")
	if err != nil {
		return sources.BinlogPosition{}, err
	}
	defer conn.Close()
	res, err := conn.Execute("SHOW MASTER STATUS")
	if err != nil {
		var me *gomysql.MyError
		if ctx.Err() != nil || !errors.As(err, &me) {
			return sources.BinlogPosition{}, r.failed(ctx, "SHOW MASTER STATUS (the binlog user needs REPLICATION CLIENT)", err)
		}
		// MySQL 8.4 knows only the new name.
		if res, err = r.query(ctx, conn, "SHOW BINARY LOG STATUS (the binlog user needs REPLICATION CLIENT)", "SHOW BINARY LOG STATUS"); err != nil {
			return sources.BinlogPosition{}, err
		}
	}
	if res.RowNumber() == 0 {
		return sources.BinlogPosition{}, &UnavailableError{Addr: r.addr, Reason: "log_bin is OFF: the server keeps no binlog (start it with --log-bin and --binlog-format=ROW)"}
	}
	var head sources.BinlogPosition
	head.File, _ = res.GetString(0, 0)
	pos, _ := res.GetUint(0, 1)
	head.Pos = uint32(pos)
	if len(res.Fields) > 4 {
		head.GTID, _ = res.GetString(0, 4) // MySQL's Executed_Gtid_Set
	}
	if head.GTID == "" {
		// MariaDB's GTID position is a variable; MySQL has none by that name.
		if g, err := conn.Execute("SELECT @@gtid_binlog_pos"); err == nil && g.RowNumber() > 0 {
			head.GTID, _ = g.GetString(0, 0)
		} else if ctx.Err() != nil {
			return sources.BinlogPosition{}, r.failed(ctx, "read the GTID position", ctx.Err())
		}
	}
	return head, nil
}

// Follow streams the committed transactions that change the tables, from
// from (its File and Pos; an empty File: the server's head) until ctx ends
// or emit returns an error, which Follow returns. Each transaction that
// changes a followed table is one emit, in commit order, with the position
// after its commit (a follow from that End neither repeats nor skips a
// change, across rotations); about every second without one, a progress
// mark (no changes) carries the position reached. A transaction of more
// than FollowMaxChanges changes is emitted in chunks (sources.BinlogTx.More).
//
// It returns a *sources.PurgedError when the server no longer holds from's
// file, an error within the reader's timeout when the server stops sending
// (not even a heartbeat), ctx's error (errors.Is context.Canceled) at once
// when ctx ends, and an *UnavailableError when an event fails its checksum:
// no change is ever read from a damaged event. Columns are named from
// information_schema, read again when a table map's column count is not the
// table's or after a DDL statement; rows whose count still differs, rows
// written before the table's last ALTER that the follow started after
// (rows of that very second are held until the stream shows which side
// of the DDL they are on), and statement-format changes of a followed
// table, are changes with Statement set (their rows are unknown).
func (r *Reader) Follow(ctx context.Context, from sources.BinlogPosition, tables []sources.FollowTable, emit func(sources.BinlogTx) error) error {
	f := &follower{r: r, ctx: ctx, emit: emit, byName: map[string]*followed{}}
	srv, start, err := f.prepare(from, tables)
	if err != nil {
		return err
	}
	f.safe = start
	hb := followTick
	if r.Timeout < 3*hb {
		hb = r.Timeout / 3
	}
	var stalled, streaming atomic.Bool
	st, err := r.openAt(ctx, srv, dump{file: start.File, pos: start.Pos, heartbeat: hb, dial: idleDial(r.Timeout, &stalled, &streaming)}, f.decode)
	if err != nil {
		return f.streamErr(err, &stalled, start)
	}
	streaming.Store(true)
	defer st.Close()
	f.st = st
	f.lastEmit = time.Now()
	for {
		ev, err := st.next()
		if err != nil {
			return f.streamErr(err, &stalled, start)
		}
		if err := f.event(ev, st.start(ev)); err != nil {
			return err
		}
		if !f.inTx && len(f.held) == 0 && time.Since(f.lastEmit) >= followTick {
			if err := f.send(sources.BinlogTx{End: f.safe, CommittedAt: f.lastAt}); err != nil {
				return err
			}
		}
	}
}

// streamErr is the error that ended a follow's stream.
func (f *follower) streamErr(err error, stalled *atomic.Bool, from sources.BinlogPosition) error {
	r := f.r
	switch {
	case f.ctx.Err() != nil:
		return fmt.Errorf("binlog of %s: follow: %w", r.addr, f.ctx.Err())
	case stalled.Load():
		return fmt.Errorf("binlog of %s: follow at %s: no event and no heartbeat within the %s timeout (--timeout): the server or the network stalled", r.addr, f.pos(), r.Timeout)
	case strings.Contains(strings.ToLower(err.Error()), "could not find first log file"):
		// PURGE BINARY LOGS between the check and the dump.
		return &sources.PurgedError{Addr: r.addr, From: from, Reason: "the server could not find it"}
	}
	return err
}

// pos is the position of the stream (or where it was to start).
func (f *follower) pos() sources.BinlogPosition {
	if f.st == nil {
		return f.safe
	}
	return sources.BinlogPosition{File: f.st.file, Pos: f.st.pos}
}

// follower is one follow's state.
type follower struct {
	r    *Reader
	ctx  context.Context
	st   *stream
	emit func(sources.BinlogTx) error
	srv  *server
	// byName are the followed tables by schema and table name.
	byName map[string]*followed
	// safe is the position after the last transaction (or statement
	// outside one) read whole: where a follow may resume.
	safe     sources.BinlogPosition
	lastAt   time.Time
	lastEmit time.Time
	// the transaction being read.
	inTx    bool
	gtid    string
	pending []sources.RowChange
	// pendAmb[i], when set, is the table whose last DDL's second
	// pending[i] was written in (held: see hold).
	pendAmb []*followed
	// chunked: a chunk of the transaction went out (its last, even
	// empty, carries the End).
	chunked bool
	// held are the transactions kept back until each ambiguous change
	// in them is resolved (see hold), in order.
	held []heldTx
	// stale: a DDL statement since the columns were read.
	stale bool
}

// followed is a followed table and its columns in row-image order.
type followed struct {
	want sources.FollowTable
	cols []string
	// keep are the positions of the columns kept in Values.
	keep []int
	// enums are the ENUM and SET columns' values, by position (enum.go).
	enums map[int]labels
	// altered is the second of the table's last CREATE or ALTER
	// (information_schema's CREATE_TIME; 0 unknown). Until the stream
	// passes that DDL (settled), a row written in or before that second
	// was written with columns that may not be cols.
	altered int64
	settled bool
}

// key is a table's key in byName, as the server compares names.
func (f *follower) key(schema, table string) string {
	if f.srv.fold {
		schema, table = strings.ToLower(schema), strings.ToLower(table)
	}
	return schema + "\x00" + table
}

func (f *follower) lookup(t *replication.TableMapEvent) *followed {
	if t == nil {
		return nil
	}
	return f.byName[f.key(string(t.Schema), string(t.Table))]
}

// prepare reads the server's settings, checks that from is still in the
// binlog (or takes the head) and reads the tables' columns, within the
// reader's timeout.
func (f *follower) prepare(from sources.BinlogPosition, tables []sources.FollowTable) (*server, sources.BinlogPosition, error) {
	r := f.r
	ctx, cancel := context.WithTimeout(f.ctx, r.Timeout)
	defer cancel()
	conn, err := r.connect(ctx, "SQL connection")
	if err != nil {
		return nil, from, err
	}
	defer conn.Close()
	res, err := r.query(ctx, conn, "read the binlog settings", "SELECT @@log_bin, VERSION(), @@binlog_checksum, @@lower_case_table_names")
	if err != nil {
		return nil, from, err
	}
	logBin, _ := res.GetInt(0, 0)
	version, _ := res.GetString(0, 1)
	checksum, _ := res.GetString(0, 2)
	lctn, _ := res.GetInt(0, 3)
	if logBin == 0 {
		return nil, from, &UnavailableError{Addr: r.addr, Reason: "log_bin is OFF: the server keeps no binlog (start it with --log-bin and --binlog-format=ROW)"}
	}
	srv := &server{flavor: flavorOf(version), txPos: -1, crc: strings.EqualFold(checksum, "CRC32"), fold: lctn != 0}
	f.srv = srv
	if srv.files, err = r.binaryLogs(ctx, conn); err != nil {
		return nil, from, err
	}
	if from.File == "" {
		if from, err = r.Head(ctx); err != nil {
			return nil, from, err
		}
	} else if !slices.ContainsFunc(srv.files, func(x file) bool { return x.name == from.File }) {
		return nil, from, &sources.PurgedError{Addr: r.addr, From: from, Oldest: srv.files[0].name}
	}
	if from.Pos < 4 {
		from.Pos = 4
	}
	for _, t := range tables {
		ft := &followed{want: t}
		if err := f.readColumns(ctx, conn, ft); err != nil {
			return nil, from, err
		}
		f.byName[f.key(t.Schema, t.Table)] = ft
	}
	return srv, from, nil
}

// readColumns reads a followed table's columns and which of them are kept.
func (f *follower) readColumns(ctx context.Context, conn *client.Conn, ft *followed) error {
	t := ft.want
	cols, err := f.r.columns(ctx, conn, f.srv, t.Schema, t.Table)
	if err != nil {
		return err
	}
	if len(cols) == 0 {
		return fmt.Errorf("binlog: followed table %s.%s does not exist (with lower_case_table_names=0 the server compares names case-sensitively)", t.Schema, t.Table)
	}
	keep := make([]int, 0, len(cols))
	if len(t.Columns) == 0 {
		for i := range cols {
			keep = append(keep, i)
		}
	}
	for _, c := range t.Columns {
		i, err := position(cols, t.Schema, t.Table, c)
		if err != nil {
			return err
		}
		keep = append(keep, i)
	}
	ls, err := f.r.readLabels(ctx, conn, t.Schema, t.Table)
	if err != nil {
		return err
	}
	ft.enums = nil
	for _, p := range keep {
		if l, ok := ls[cols[p]]; ok {
			if ft.enums == nil {
				ft.enums = map[int]labels{}
			}
			ft.enums[p] = l
		}
	}
	res, err := f.r.query(ctx, conn, "read when "+t.Schema+"."+t.Table+" was last altered",
		"SELECT COALESCE(UNIX_TIMESTAMP(CREATE_TIME), 0) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", t.Schema, t.Table)
	if err != nil {
		return err
	}
	altered := int64(0)
	if res.RowNumber() > 0 {
		altered, _ = res.GetInt(0, 0)
	}
	if altered != ft.altered {
		ft.settled = false
	}
	ft.cols, ft.keep, ft.altered = cols, keep, altered
	return nil
}

// refresh reads the followed tables' columns again (after an ALTER TABLE),
// on a connection of its own bounded by the reader's timeout.
func (f *follower) refresh() error {
	r := f.r
	ctx, cancel := context.WithTimeout(f.ctx, r.Timeout)
	defer cancel()
	conn, err := r.connect(ctx, "SQL connection (the columns after a DDL)")
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, ft := range f.byName {
		if err := f.readColumns(ctx, conn, ft); err != nil {
			return err
		}
	}
	f.stale = false
	return nil
}

// decode decodes the rows of the followed tables only.
func (f *follower) decode(e *replication.RowsEvent, data []byte) error {
	pos, err := e.DecodeHeader(data)
	if err != nil {
		return err
	}
	if f.lookup(e.Table) == nil {
		return nil
	}
	var typ *replication.EventType
	if f.st != nil {
		typ = &f.st.typ
	}
	return decodeRows(e, data, pos, typ)
}

// send emits one transaction (or progress mark).
func (f *follower) send(tx sources.BinlogTx) error {
	f.lastEmit = time.Now()
	return f.emit(tx)
}

// event feeds one event, which starts at pos of the stream's file.
func (f *follower) event(ev *replication.BinlogEvent, pos uint32) error {
	h := ev.Header
	artificial := h.Flags&replication.LOG_EVENT_ARTIFICIAL_F != 0 || h.Timestamp == 0
	at := time.Unix(int64(h.Timestamp), 0).UTC()
	if !artificial {
		f.lastAt = at
		if err := f.settleAll(int64(h.Timestamp), false); err != nil {
			return err
		}
	}
	if h.EventType == replication.HEARTBEAT_EVENT || h.EventType == replication.HEARTBEAT_LOG_EVENT_V2 {
		// The server waits at the binlog's end: any DDL before it was read.
		if err := f.settleAll(0, true); err != nil {
			return err
		}
	}
	file := f.st.file
	switch e := ev.Event.(type) {
	case *replication.RotateEvent:
		if !f.inTx {
			// The stream moved on to the next file's start.
			f.safe = sources.BinlogPosition{File: f.st.file, Pos: f.st.pos, GTID: f.safe.GTID}
		}
	case *replication.MariadbGTIDEvent:
		f.gtid = fmt.Sprintf("%d-%d-%d", e.GTID.DomainID, e.GTID.ServerID, e.GTID.SequenceNumber)
		if !e.IsStandalone() {
			f.begin()
		}
	case *replication.GTIDEvent:
		f.gtid = mysqlGTID(e.SID, e.GNO) // a BEGIN follows, or one DDL
	case *replication.QueryEvent:
		q := strings.TrimSpace(string(e.Query))
		switch {
		case strings.EqualFold(q, "BEGIN"):
			if !f.inTx {
				f.begin()
			}
		case strings.EqualFold(q, "COMMIT"):
			return f.commit(at)
		case strings.EqualFold(q, "ROLLBACK"):
			f.reset()
		default:
			if err := f.statement(file, pos, int64(h.Timestamp), string(e.Schema), q); err != nil {
				return err
			}
			if !f.inTx {
				// One statement outside a transaction (a DDL, or MySQL's
				// statement-format autocommit): complete by itself.
				return f.commit(at)
			}
		}
	case *replication.ExecuteLoadQueryEvent:
		// LOAD DATA in statement format: go-mysql does not decode which
		// table it loads.
		_ = e
		f.add(sources.RowChange{
			Statement: fmt.Sprintf("a statement-format LOAD DATA at %s:%d may have changed a followed table: the binlog holds the statement, not its rows", file, pos)}, nil)
	case *replication.XIDEvent:
		return f.commit(at)
	case *replication.TransactionPayloadEvent:
		// MySQL 8's binlog_transaction_compression.
		for _, inner := range e.Events {
			if err := f.event(inner, pos); err != nil {
				return err
			}
		}
	case *replication.TableMapEvent:
		if ft := f.lookup(e); ft != nil && (f.stale || int(e.ColumnCount) != len(ft.cols)) {
			if err := f.refresh(); err != nil {
				return err
			}
		}
	case *replication.RowsEvent:
		f.rows(e, rowsKind(h.EventType), int64(h.Timestamp), file, pos)
		if len(f.pending) >= FollowMaxChanges {
			// The transaction's End is not known yet: a chunk resumes
			// from before the transaction.
			chunk, amb := f.pending, f.pendAmb
			f.pending, f.pendAmb, f.chunked = nil, nil, true
			return f.out(sources.BinlogTx{Changes: chunk, End: f.safe, CommittedAt: at, More: true}, amb)
		}
	}
	return nil
}

func (f *follower) begin() {
	f.reset()
	f.inTx = true
}

func (f *follower) reset() { f.inTx, f.pending, f.pendAmb, f.chunked = false, nil, nil, false }

// add appends a change to the transaction; amb is its table when it was
// written in the second of the table's last DDL.
func (f *follower) add(c sources.RowChange, amb *followed) {
	f.pending = append(f.pending, c)
	f.pendAmb = append(f.pendAmb, amb)
}

// A row written in the very second of its table's last CREATE or ALTER
// (binlog times are seconds) may come before the DDL or after it. Its
// transaction, and every one after it, is held until the stream tells:
// the DDL's own event comes later (the row had the old columns: it is
// unreadable), or a later second or the binlog's end comes first (the DDL
// was before the follow's start: the row has today's columns).
type heldTx struct {
	tx  sources.BinlogTx
	amb []*followed
}

// out emits a transaction, or holds it behind the ambiguous ones.
func (f *follower) out(tx sources.BinlogTx, amb []*followed) error {
	if len(f.held) == 0 && !slices.ContainsFunc(amb, func(a *followed) bool { return a != nil }) {
		return f.send(tx)
	}
	f.held = append(f.held, heldTx{tx: tx, amb: amb})
	return nil
}

// settle resolves ft's ambiguous changes: before is true when they came
// before its DDL (unreadable). The held transactions go out once none is
// ambiguous.
func (f *follower) settle(ft *followed, before bool) error {
	ft.settled = true
	pending := false
	for i := range f.held {
		h := &f.held[i]
		for j, a := range h.amb {
			switch {
			case a == ft && before:
				c := h.tx.Changes[j]
				h.tx.Changes[j] = sources.RowChange{Schema: c.Schema, Table: c.Table,
					Statement: fmt.Sprintf("a row of %s.%s written in the second of its last ALTER TABLE (%s), before it: the columns it was written with are not known", c.Schema, c.Table, stamp(ft.altered))}
				h.amb[j] = nil
			case a == ft:
				h.amb[j] = nil
			case a != nil:
				pending = true
			}
		}
	}
	if pending {
		return nil
	}
	held := f.held
	f.held = nil
	for _, h := range held {
		if err := f.send(h.tx); err != nil {
			return err
		}
	}
	return nil
}

// settleAll resolves every unsettled table's ambiguity at a time after its
// DDL's second (or the binlog's end): its DDL came before the follow's
// start.
func (f *follower) settleAll(ts int64, end bool) error {
	for _, ft := range f.byName {
		if !ft.settled && (end || ts > ft.altered) {
			if err := f.settle(ft, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// commit ends the transaction (or lone statement) at the stream's
// position, emitting its changes of the followed tables.
func (f *follower) commit(at time.Time) error {
	f.safe = sources.BinlogPosition{File: f.st.file, Pos: f.st.pos, GTID: f.gtid}
	changes, amb, chunked := f.pending, f.pendAmb, f.chunked
	f.reset()
	f.gtid = ""
	if len(changes) == 0 && !chunked {
		return nil
	}
	return f.out(sources.BinlogTx{Changes: changes, End: f.safe, CommittedAt: at}, amb)
}

// statement notes a statement-format event: a DDL makes the columns stale;
// a change of a followed table is a change whose rows are unknown.
func (f *follower) statement(file string, pos uint32, ts int64, schema, q string) error {
	truncate := strings.HasPrefix(strings.ToUpper(q), "TRUNCATE")
	if !truncate && !isDML(q) {
		f.stale = true
		for _, ft := range f.byName {
			if !ft.settled && ts >= ft.altered && namesTable(q, schema, ft.want.Schema, ft.want.Table, f.srv.fold) {
				// The DDL that made cols: the rows held before it had
				// other columns; later rows have cols.
				return f.settle(ft, true)
			}
		}
		return nil
	}
	for _, ft := range f.byName {
		if namesTable(q, schema, ft.want.Schema, ft.want.Table, f.srv.fold) {
			f.add(sources.RowChange{Schema: ft.want.Schema, Table: ft.want.Table,
				Statement: fmt.Sprintf("a statement-format event at %s:%d changes %s.%s: the binlog holds the statement %q, not its rows (binlog_format was STATEMENT or MIXED for it)",
					file, pos, ft.want.Schema, ft.want.Table, clip(q, 200))}, nil)
		}
	}
	return nil
}

// rows turns a followed table's rows event into changes.
func (f *follower) rows(e *replication.RowsEvent, kind replication.EnumRowsEventType, ts int64, file string, pos uint32) {
	ft := f.lookup(e.Table)
	if ft == nil {
		return
	}
	schema, table := ft.want.Schema, ft.want.Table
	if int(e.ColumnCount) != len(ft.cols) {
		f.add(sources.RowChange{Schema: schema, Table: table,
			Statement: fmt.Sprintf("the rows event at %s:%d has %d columns of %s.%s, which has %d now (an ALTER TABLE since): its rows cannot be named", file, pos, e.ColumnCount, schema, table, len(ft.cols))}, nil)
		return
	}
	var amb *followed
	if !ft.settled && ts == ft.altered {
		amb = ft // held until the stream tells
	}
	if !ft.settled && ts < ft.altered {
		f.add(sources.RowChange{Schema: schema, Table: table,
			Statement: fmt.Sprintf("the rows event at %s:%d (%s) was written before %s.%s's last ALTER TABLE (%s), which this follow started after: the columns it was written with are not known", file, pos, stamp(ts), schema, table, stamp(ft.altered))}, nil)
		return
	}
	var k sources.ChangeKind
	step := 1
	switch kind {
	case replication.EnumRowsEventTypeInsert:
		k = sources.ChangeInsert
	case replication.EnumRowsEventTypeUpdate:
		k, step = sources.ChangeUpdate, 2
	case replication.EnumRowsEventTypeDelete:
		k = sources.ChangeDelete
	default:
		return
	}
	var zoned []string
	if e.Table != nil {
		for _, p := range ft.keep {
			if p < len(e.Table.ColumnType) && (e.Table.ColumnType[p] == gomysql.MYSQL_TYPE_TIMESTAMP || e.Table.ColumnType[p] == gomysql.MYSQL_TYPE_TIMESTAMP2) {
				zoned = append(zoned, ft.cols[p])
			}
		}
	}
	for i := 0; i+step-1 < len(e.Rows); i += step {
		c := sources.RowChange{Schema: schema, Table: table, Kind: k, Values: make(map[string]string, len(ft.keep)), Zoned: zoned}
		img, bits := e.Rows[i], e.ColumnBitmap1
		var before []any
		if step == 2 {
			// After image first; a column it lacks (MINIMAL) that the
			// before image holds was not changed.
			before, img, bits = e.Rows[i], e.Rows[i+1], e.ColumnBitmap2
		}
		if before != nil {
			c.Before = make(map[string]string, len(ft.keep))
			for _, p := range ft.keep {
				if p < len(before) && hasColumn(e.ColumnBitmap1, p) && before[p] != nil {
					c.Before[ft.cols[p]] = ft.text(p, before[p])
				}
			}
		}
		for _, p := range ft.keep {
			name := ft.cols[p]
			switch {
			case p < len(img) && hasColumn(bits, p):
				if img[p] != nil {
					c.Values[name] = ft.text(p, img[p])
				}
			case before != nil && p < len(before) && hasColumn(e.ColumnBitmap1, p):
				if before[p] != nil {
					c.Values[name] = ft.text(p, before[p])
				}
			default:
				c.Missing = append(c.Missing, name)
			}
		}
		f.add(c, amb)
	}
}

// text is column p's value as text: an ENUM's or a SET's by its labels.
func (ft *followed) text(p int, v any) string {
	if l, ok := ft.enums[p]; ok {
		if s, ok := l.label(v); ok {
			return s
		}
	}
	return text(v)
}

// idleConn fails a read that waits longer than its limit: a follow's
// dump idles for as long as the server has nothing to send, but never
// longer than the heartbeat period, so a longer silence is a stall.
//
// It also paces the reads at the stream's tail: after a read that
// returned less than tailBytes (the follow has caught up, and the server
// sends each event as it writes it), the next read waits until pace after
// it, so that the events of that time come in one read, not one read, one
// wake-up and one scheduling of the follower each (at 300 operations/s in
// the lab the follower was 27% of the watch's CPU, and the watch 27% of a
// core before this, 21% after: docs/performance.md). A follow that is
// behind reads full buffers and is never paced.
type idleConn struct {
	net.Conn
	limit   time.Duration
	stalled *atomic.Bool
	// pace applies once streaming is set (the handshake's reads are
	// not paced).
	pace      time.Duration
	streaming *atomic.Bool
	// tail is when the last read that found the tail returned (zero when
	// the last read was a full one).
	tail time.Time
	// sleep waits (time.Sleep when nil; tests note it instead).
	sleep func(time.Duration)
}

const (
	// followPace is a follow's pace at the stream's tail: it adds at most
	// that much to a change's delivery (the watch reads a round at most
	// every 200 ms: docs/watch.md#how-it-works).
	followPace = 20 * time.Millisecond
	// tailBytes: a read of less than this found the stream's tail.
	tailBytes = 16 << 10
)

// Read reads with a deadline of limit from now, paced at the tail.
func (c *idleConn) Read(b []byte) (int, error) {
	if !c.tail.IsZero() {
		if d := time.Until(c.tail.Add(c.pace)); d > 0 {
			if c.sleep == nil {
				time.Sleep(d)
			} else {
				c.sleep(d)
			}
		}
	}
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.limit)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(b)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.stalled.Store(true)
	}
	c.tail = time.Time{}
	if c.pace > 0 && n < tailBytes && c.streaming.Load() {
		c.tail = time.Now()
	}
	return n, err
}

// idleDial is boundDial with reads bounded by limit each, paced at the
// stream's tail once streaming is set.
func idleDial(limit time.Duration, stalled, streaming *atomic.Bool) client.Dialer {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := boundDial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &idleConn{Conn: c, limit: limit, stalled: stalled, pace: followPace, streaming: streaming}, nil
	}
}
