package binlog

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
)

// The limits of the binlog (docs/where.md#binlog-evidence): every event of
// the window is read as rows, or the read says why not and draws no
// count from it. Each test here is a case that read "absent" or a wrong
// count before (issue 23).

// dedicated starts a binlog server for one test that changes or damages
// the server itself (RESET MASTER, restarts, its files).
func dedicated(t *testing.T, id int) (*testenv.BinlogServer, *fixture) {
	t.Helper()
	srv := testenv.BinlogServerFor(t, testenv.BinlogOptions{ServerID: id})
	db := srv.MySQL(t)
	db.Exec(t, seed000)
	r, err := New(db.DSN, 0, 10*time.Second)
	testenv.Must(t, err, "reader")
	return srv, &fixture{db: db, reader: r, t0: time.Now().Truncate(time.Second)}
}

// unavailable asserts that reading req fails with an *UnavailableError
// whose reason says want.
func unavailable(t *testing.T, f *fixture, req sources.BinlogRequest, want string) {
	t.Helper()
	read, err := f.reader.Changes(context.Background(), req)
	var ue *UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v (%d changes); want the window unknown: %q", err, len(read.Changes), want)
	}
	t.Log(err)
}

// A session that sets binlog_format=STATEMENT writes its debit as SQL text:
// the window holds a change that is not a row event.
func TestStatementFormatSession(t *testing.T) {
	f := newFixture(t)
	f.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES ('S-1', 100), ('S-2', 100)")
	f.db.Exec(t, "CREATE TABLE other_table (id INT PRIMARY KEY, n INT)")
	f.debit(t, "S-1", "30", "PAY-S1", true)
	// Another table in statement format: not this window's concern.
	conn, err := f.db.SQL.Conn(context.Background())
	testenv.Must(t, err, "conn")
	defer conn.Close()
	for _, q := range []string{"SET SESSION binlog_format = 'STATEMENT'", "INSERT INTO other_table VALUES (1, 1)"} {
		_, err := conn.ExecContext(context.Background(), q)
		testenv.Must(t, err, "%s", q)
	}
	read, err := f.reader.Changes(context.Background(), f.request("S-1"))
	if err != nil || len(read.Changes) != 1 {
		t.Fatalf("a statement on another table: err %v, %d changes; want the one debit", err, len(read.Changes))
	}
	// The redelivery's debit, by a session in statement format.
	_, err = conn.ExecContext(context.Background(), "UPDATE account_balance SET balance = balance - 30 WHERE account_id = 'S-1'")
	testenv.Must(t, err, "statement debit")
	unavailable(t, f, f.request("S-1"), "statement-format event")
}

// A session with binlog_row_image=MINIMAL writes an UPDATE whose before
// image has only the primary key: the delta cannot be read (it read
// `"" is not a decimal` before).
func TestMinimalImageSession(t *testing.T) {
	f := newFixture(t)
	f.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES ('M-1', 100), ('M-2', 100)")
	conn, err := f.db.SQL.Conn(context.Background())
	testenv.Must(t, err, "conn")
	defer conn.Close()
	for _, q := range []string{"SET SESSION binlog_row_image = 'MINIMAL'", "UPDATE account_balance SET balance = balance - 30 WHERE account_id = 'M-2'"} {
		_, err := conn.ExecContext(context.Background(), q)
		testenv.Must(t, err, "%s", q)
	}
	// Another account's minimal change: this row's window is whole.
	read, err := f.reader.Changes(context.Background(), f.request("M-1"))
	if err != nil || len(read.Changes) != 0 {
		t.Fatalf("another row's minimal image: err %v, %d changes; want none", err, len(read.Changes))
	}
	_, err = conn.ExecContext(context.Background(), "UPDATE account_balance SET balance = balance - 30 WHERE account_id = 'M-1'")
	testenv.Must(t, err, "minimal debit")
	unavailable(t, f, f.request("M-1"), "binlog_row_image=MINIMAL")
}

// RESET MASTER deletes every binlog: a window before it is not in the
// binlog, whose first file now starts after it (it read "absent").
func TestResetMaster(t *testing.T) {
	_, f := dedicated(t, 31)
	f.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES ('R-1', 100)")
	f.debit(t, "R-1", "30", "PAY-R", false)
	f.debit(t, "R-1", "30", "PAY-R", false)
	req := f.request("R-1")
	time.Sleep(1100 * time.Millisecond) // the new first file starts a second later
	f.db.Exec(t, "RESET MASTER")
	unavailable(t, f, req, "never logged there (RESET MASTER, log_bin off)")
}

// log_bin off for a while: the server stopped (its binlog ends with a stop
// event), ran without a binlog, and started again with one. A window
// across that gap is not covered (it counted the logged debit only).
func TestLogBinGap(t *testing.T) {
	srv, f := dedicated(t, 32)
	f.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES ('G-1', 100)")
	f.debit(t, "G-1", "30", "PAY-G", true)
	testenv.Must(t, srv.Restart(testenv.BinlogOptions{ServerID: 32, NoBinlog: true}), "restart without binlog")
	f.debit(t, "G-1", "30", "PAY-G", false) // the redelivery, not logged
	time.Sleep(1100 * time.Millisecond)
	testenv.Must(t, srv.Restart(testenv.BinlogOptions{ServerID: 32}), "restart with binlog")
	unavailable(t, f, f.request("G-1"), "ends with a stop event")

	// A window wholly after the restart is covered (from the second after
	// it: the server ran without a binlog until some time in that one).
	time.Sleep(1100 * time.Millisecond)
	t1 := time.Now().Truncate(time.Second)
	f.debit(t, "G-1", "10", "PAY-G2", true)
	req := f.request("G-1")
	req.From = t1
	read, err := f.reader.Changes(context.Background(), req)
	if err != nil || len(read.Changes) != 1 {
		t.Fatalf("after the restart: err %v, %d changes; want 1", err, len(read.Changes))
	}
}

// With lower_case_table_names=0 (the default on Linux) Account_Balance and
// account_balance are two tables: a change of one is not the other's.
func TestTableNameCase(t *testing.T) {
	f := newFixture(t)
	var lctn int
	testenv.Must(t, f.db.SQL.QueryRow("SELECT @@lower_case_table_names").Scan(&lctn), "lower_case_table_names")
	if lctn != 0 {
		t.Fatalf("the test server runs with lower_case_table_names=%d, want 0", lctn)
	}
	f.db.Exec(t, "CREATE TABLE Account_Balance LIKE account_balance")
	f.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES ('C-1', 100)")
	f.db.Exec(t, "INSERT INTO Account_Balance (account_id, balance) VALUES ('C-1', 100)")
	f.debit(t, "C-1", "30", "PAY-C", true)
	for range 2 {
		f.db.Exec(t, "UPDATE Account_Balance SET balance = balance - 30 WHERE account_id = 'C-1'")
	}
	for _, c := range []struct {
		table string
		want  int
	}{{"account_balance", 1}, {"Account_Balance", 2}} {
		req := f.request("C-1")
		req.Table = c.table
		read, err := f.reader.Changes(context.Background(), req)
		if err != nil || len(read.Changes) != c.want {
			t.Errorf("%s: err %v, %d changes; want %d", c.table, err, len(read.Changes), c.want)
		}
	}
	req := f.request("C-1")
	req.Table = "ACCOUNT_BALANCE"
	if _, err := f.reader.Changes(context.Background(), req); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("ACCOUNT_BALANCE: err %v, want a table that does not exist", err)
	}
}

// binlogEvent is one event header of a binlog file as written on disk.
type binlogEvent struct {
	pos, size uint32
	typ       byte
}

// fileEvents walks the event headers of a binlog file.
func fileEvents(t *testing.T, path string) ([]binlogEvent, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	testenv.Must(t, err, "read binlog file")
	var out []binlogEvent
	for pos := uint32(4); int(pos)+19 <= len(b); {
		size := binary.LittleEndian.Uint32(b[pos+9:])
		if size < 19 {
			t.Fatalf("%s: event at %d has size %d", path, pos, size)
		}
		out = append(out, binlogEvent{pos: pos, size: size, typ: b[pos+4]})
		pos += size
	}
	return out, b
}

const (
	typeUpdateRowsV1 = 24
	typeMariaGTID    = 162
)

// damaged runs a double debit of D-1, moves the server to a new binlog
// file, and returns the file holding the debits with its events.
func damaged(t *testing.T, id int) (*testenv.BinlogServer, *fixture, string, []binlogEvent, []byte) {
	t.Helper()
	srv, f := dedicated(t, id)
	f.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES ('D-1', 100)")
	f.debit(t, "D-1", "30", "PAY-D", true)
	f.debit(t, "D-1", "30", "PAY-D", true)
	var name string
	var rest [3]any
	testenv.Must(t, f.db.SQL.QueryRow("SHOW MASTER STATUS").Scan(&name, &rest[0], &rest[1], &rest[2]), "master status")
	time.Sleep(1100 * time.Millisecond) // the next file starts after the window's first second
	f.db.Exec(t, "FLUSH BINARY LOGS")
	path := srv.BinlogPath(name)
	evs, b := fileEvents(t, path)
	read, err := f.reader.Changes(context.Background(), f.request("D-1"))
	if err != nil || len(read.Changes) != 2 {
		t.Fatalf("before the damage: err %v, %d changes; want 2", err, len(read.Changes))
	}
	return srv, f, path, evs, b
}

// updates are the UPDATE rows events of a file, in order.
func updates(evs []binlogEvent) []binlogEvent {
	var out []binlogEvent
	for _, e := range evs {
		if e.typ == typeUpdateRowsV1 {
			out = append(out, e)
		}
	}
	return out
}

// One flipped byte in the second debit's after image: the event fails its
// CRC32 (it read as another delta before, and the double debit vanished).
func TestCorruptedEvent(t *testing.T) {
	_, f, path, evs, b := damaged(t, 33)
	up := updates(evs)
	if len(up) != 2 {
		t.Fatalf("%d UPDATE events in %s, want 2", len(up), path)
	}
	e := up[1]
	// The after image ends just before the 4-byte checksum: its last
	// byte is the balance's last DECIMAL byte.
	b[e.pos+e.size-5] ^= 0x01
	testenv.Must(t, os.WriteFile(path, b, 0o600), "write the damaged file")
	unavailable(t, f, f.request("D-1"), "fails its CRC32 checksum")
}

// The file cut at an event boundary, just before the second debit's
// transaction: the file ends without its rotate event, and the changes
// between it and the next file are not in the binlog (it read one debit).
func TestTruncatedFile(t *testing.T) {
	t.Run("at an event boundary", func(t *testing.T) {
		_, f, path, evs, _ := damaged(t, 34)
		up := updates(evs)
		cut := uint32(0)
		for _, e := range evs {
			if e.typ == typeMariaGTID && e.pos < up[1].pos {
				cut = e.pos
			}
		}
		testenv.Must(t, os.Truncate(path, int64(cut)), "truncate")
		unavailable(t, f, f.request("D-1"), "does not cover the window contiguously")
	})
	t.Run("in the middle of an event", func(t *testing.T) {
		_, f, path, evs, _ := damaged(t, 35)
		up := updates(evs)
		testenv.Must(t, os.Truncate(path, int64(up[1].pos+up[1].size/2)), "truncate")
		read, err := f.reader.Changes(context.Background(), f.request("D-1"))
		if err == nil {
			t.Fatalf("a file cut in an event read %d changes and no error", len(read.Changes))
		}
		t.Log(err)
	})
}

// A binlog file that starts in the window's first second: the events of
// that second before it are at the end of the file before (the search
// started at the new file, and the window's debits were not read).
func TestWindowStartsWithAFile(t *testing.T) {
	f := newFixture(t)
	f.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES ('F-1', 100)")
	for {
		// The debits and the new file in one second.
		if time.Now().Nanosecond() < int(600*time.Millisecond) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	req := f.request("F-1")
	req.From = time.Now().Truncate(time.Second)
	f.debit(t, "F-1", "30", "PAY-F", true)
	f.debit(t, "F-1", "30", "PAY-F", true)
	f.db.Exec(t, "FLUSH BINARY LOGS")
	if time.Now().Truncate(time.Second) != req.From {
		t.Skip("SKIPPING: the second passed before the rotation (a slow machine); nothing was tested")
	}
	read, err := f.reader.Changes(context.Background(), req)
	if err != nil || len(read.Changes) != 2 {
		t.Fatalf("err %v, %d changes; want the 2 debits", err, len(read.Changes))
	}
}
