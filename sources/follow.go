package sources

import (
	"fmt"
	"time"
)

// The binlog follower's plain types (docs/watch.md#what-the-binlog-follower-needs):
// the driver (sources/binlog) fills them, `opctl watch` reads them without
// importing a binlog library.

// BinlogPosition is a place in a server's binlog: the file and the byte
// offset after the last event read (where a dump resumes), and the GTID of
// the transaction that ended there when the server logs one (informative:
// a follow resumes by File and Pos).
type BinlogPosition struct {
	File string `json:"file"`
	Pos  uint32 `json:"pos"`
	GTID string `json:"gtid,omitempty"`
}

// String is file:pos.
func (p BinlogPosition) String() string { return fmt.Sprintf("%s:%d", p.File, p.Pos) }

// FollowTable is a table whose row changes a follow emits. Columns, when
// set, are the only columns kept in a change's Values (the others are
// decoded and dropped); empty keeps every column.
type FollowTable struct {
	Schema, Table string
	Columns       []string
}

// ChangeKind is what a row change did.
type ChangeKind string

// The kinds of a row change.
const (
	ChangeInsert ChangeKind = "insert"
	ChangeUpdate ChangeKind = "update"
	ChangeDelete ChangeKind = "delete"
)

// RowChange is one row a followed table's transaction changed, or one
// statement that changed a followed table without rows in the binlog.
type RowChange struct {
	Schema, Table string
	// Kind is insert, update or delete; empty when Statement is set.
	Kind ChangeKind
	// Values are the row's columns by name as text (DECIMALs exact): the
	// after image of an insert or update, the before image of a delete.
	// A NULL column is absent from Values (and not in Missing).
	Values map[string]string
	// Before is an update's before image of the same columns (nil for an
	// insert or a delete); a column the before image does not hold
	// (binlog_row_image=MINIMAL) or that was NULL is absent. The watch
	// reads a state row's version in both to tell that the update moved
	// it (docs/watch.md#how-it-works).
	Before map[string]string
	// Missing names the followed columns the image does not hold
	// (binlog_row_image=MINIMAL or NOBLOB): their values are unknown, not
	// empty.
	Missing []string
	// Zoned names the columns of type TIMESTAMP: the binlog holds them as
	// seconds since the epoch and their text is that instant in this
	// process's time zone, not the wall clock the server's sessions read
	// (a DATETIME's text is its stored wall clock). The watch does not
	// compare them with a value read back (docs/watch.md#how-it-works).
	Zoned []string
	// Statement is set when the change cannot be read as rows: a
	// statement-format event (binlog_format STATEMENT or MIXED, for the
	// server or one session) that changes the table, or rows whose column
	// count is not the table's any more (an ALTER TABLE since). Which rows
	// it changed is unknown: the caller re-reads the table (a sweep),
	// never ignores it.
	Statement string
}

// BinlogTx is one committed transaction's changes of the followed tables,
// or a progress mark (no Changes) that lets the caller save End while
// nothing it follows changes.
type BinlogTx struct {
	Changes []RowChange
	// End is the position after the transaction's commit: a follow from
	// End reads what comes after it, with no duplicate and no gap.
	End BinlogPosition
	// CommittedAt is the commit event's time (the binlog's resolution: one
	// second); for a progress mark, the last event's time read.
	CommittedAt time.Time
	// More is set on every chunk but the last of a transaction larger
	// than the follow's buffer: such a chunk's End is the position before
	// the transaction (a follow resumed from it reads the whole
	// transaction again), the last chunk's End is after it.
	More bool
}

// PurgedError is a follow from a position the server's binlog no longer
// holds (PURGE BINARY LOGS, expire_logs_days, RESET MASTER): the changes
// since it cannot be read, so the caller re-sweeps.
type PurgedError struct {
	Addr string
	// From is the position asked for; Oldest the oldest binlog file the
	// server keeps ("" when it keeps none).
	From   BinlogPosition
	Oldest string
	Reason string
}

// Error names the file and what the server keeps.
func (e *PurgedError) Error() string {
	msg := fmt.Sprintf("binlog of %s: %s is no longer in the binlog", e.Addr, e.From)
	if e.Oldest != "" {
		msg += fmt.Sprintf(" (the oldest file the server keeps is %s)", e.Oldest)
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg + ": the changes since it were purged and must be re-read from the tables"
}
