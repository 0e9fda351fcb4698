package binlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
)

// follow runs r.Follow from from in the background and returns what it
// emitted once done says so (the follow is then cancelled) or limit
// passes (the test fails), with the follow's error.
func follow(t *testing.T, r *Reader, from sources.BinlogPosition, tables []sources.FollowTable, limit time.Duration, done func([]sources.BinlogTx) bool) ([]sources.BinlogTx, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	txs := make(chan sources.BinlogTx, 1024)
	end := make(chan error, 1)
	go func() {
		end <- r.Follow(ctx, from, tables, func(tx sources.BinlogTx) error {
			select {
			case txs <- tx:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	var got []sources.BinlogTx
	deadline := time.After(limit)
	for {
		if done(got) {
			cancel()
			err := <-end
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("follow ended with %v, want context.Canceled", err)
			}
			return got, nil
		}
		select {
		case tx := <-txs:
			got = append(got, tx)
		case err := <-end:
			return got, err
		case <-deadline:
			t.Fatalf("follow: nothing more within %s; got %d transactions: %+v", limit, len(got), got)
		}
	}
}

// changesOf are the row changes of txs, in order.
func changesOf(txs []sources.BinlogTx) []sources.RowChange {
	var out []sources.RowChange
	for _, tx := range txs {
		out = append(out, tx.Changes...)
	}
	return out
}

// count is a done func: at least n changes.
func count(n int) func([]sources.BinlogTx) bool {
	return func(txs []sources.BinlogTx) bool { return len(changesOf(txs)) >= n }
}

func head(t *testing.T, r *Reader) sources.BinlogPosition {
	t.Helper()
	h, err := r.Head(context.Background())
	testenv.Must(t, err, "Head")
	if h.File == "" || h.Pos < 4 {
		t.Fatalf("Head = %+v", h)
	}
	return h
}

func balanceTable(f *fixture) []sources.FollowTable {
	return []sources.FollowTable{{Schema: f.db.Name, Table: "account_balance", Columns: []string{"account_id", "balance"}}}
}

// Transactions come whole and in order, each with the position after its
// commit; a follow resumed from any End (across a FLUSH BINARY LOGS
// rotation) reads every later change once: no duplicate, no gap.
func TestFollowResumeAcrossRotation(t *testing.T) {
	f := newFixture(t)
	start := head(t, f.reader)
	tables := balanceTable(f)
	f.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES ('R-0', 100), ('R-1', 100)")
	// A transaction of two tables: one tx with the followed table's rows
	// only; the ledger is not followed.
	f.debit(t, "R-0", "10", "PAY-R0", true)
	f.db.Exec(t, "FLUSH BINARY LOGS")
	for i := 0; i < 6; i++ {
		f.debit(t, "R-1", "1", fmt.Sprintf("PAY-R1-%d", i), true)
		if i == 2 {
			f.db.Exec(t, "FLUSH BINARY LOGS")
		}
	}
	const want = 2 + 1 + 6
	all, err := follow(t, f.reader, start, tables, 20*time.Second, count(want))
	testenv.Must(t, err, "follow")
	var txs []sources.BinlogTx
	for _, tx := range all {
		if len(tx.Changes) > 0 {
			txs = append(txs, tx)
		}
	}
	if len(txs) != 8 || len(txs[0].Changes) != 2 {
		t.Fatalf("%d transactions, the first of %d changes; want 8, the insert of 2 rows first: %+v", len(txs), len(txs[0].Changes), txs)
	}
	files := map[string]bool{}
	for i, tx := range txs {
		files[tx.End.File] = true
		if tx.CommittedAt.IsZero() || tx.End.GTID == "" {
			t.Errorf("tx %d: CommittedAt %v, GTID %q", i, tx.CommittedAt, tx.End.GTID)
		}
		for _, c := range tx.Changes {
			if c.Table != "account_balance" || c.Values["account_id"] == "" || c.Values["balance"] == "" || len(c.Values) != 2 {
				t.Errorf("tx %d: change %+v", i, c)
			}
		}
	}
	if len(files) != 3 {
		t.Errorf("the transactions end in %d files, want 3 (two rotations)", len(files))
	}
	last := txs[len(txs)-1].Changes[0].Values["balance"]
	if last != "94.0000000000" {
		t.Errorf("last balance %q, want 94.0000000000", last)
	}
	key := func(c sources.RowChange) string { return c.Values["account_id"] + "=" + c.Values["balance"] }
	whole := changesOf(txs)
	// Resume from each End: exactly the changes after it.
	for i, tx := range txs {
		rest := whole[len(changesOf(txs[:i+1])):]
		got, err := follow(t, f.reader, tx.End, tables, 20*time.Second, func(got []sources.BinlogTx) bool {
			// Every change after End came, and one progress mark
			// after them says nothing else did.
			ch := changesOf(got)
			return len(ch) >= len(rest) && len(got) > 0 && len(got[len(got)-1].Changes) == 0 && got[len(got)-1].End.Pos > 0
		})
		testenv.Must(t, err, "resume")
		ch := changesOf(got)
		if len(ch) != len(rest) {
			t.Fatalf("resumed from %s (tx %d): %d changes, want %d", tx.End, i, len(ch), len(rest))
		}
		for j := range ch {
			if key(ch[j]) != key(rest[j]) {
				t.Fatalf("resumed from %s: change %d is %s, want %s", tx.End, j, key(ch[j]), key(rest[j]))
			}
		}
	}
}

// With nothing followed changing, progress marks keep coming (about one a
// second) with a position the caller can save; a change after them
// follows them.
func TestFollowProgress(t *testing.T) {
	f := newFixture(t)
	f.db.Exec(t, "CREATE TABLE unfollowed (id INT PRIMARY KEY)")
	start := head(t, f.reader)
	f.db.Exec(t, "INSERT INTO unfollowed VALUES (1), (2)")
	t0 := time.Now()
	got, err := follow(t, f.reader, start, balanceTable(f), 10*time.Second, func(got []sources.BinlogTx) bool { return len(got) >= 3 })
	testenv.Must(t, err, "follow")
	took := time.Since(t0)
	for _, tx := range got {
		if len(tx.Changes) != 0 || tx.End.File == "" || tx.End.Pos < start.Pos {
			t.Errorf("progress mark %+v (from %s)", tx, start)
		}
	}
	if got[len(got)-1].End.Pos <= start.Pos {
		t.Errorf("progress stayed at %s after an unfollowed transaction", got[len(got)-1].End)
	}
	if took > 5*time.Second {
		t.Errorf("3 progress marks took %s, want about 3 s", took)
	}
}

// A cancelled follow returns within a second, idle or not.
func TestFollowCancel(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	end := make(chan error, 1)
	started := make(chan struct{}, 1)
	go func() {
		end <- f.reader.Follow(ctx, sources.BinlogPosition{}, balanceTable(f), func(sources.BinlogTx) error {
			select {
			case started <- struct{}{}:
			default:
			}
			return nil
		})
	}()
	select {
	case <-started:
	case err := <-end:
		t.Fatalf("follow ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no progress mark within 10 s")
	}
	cancel()
	t0 := time.Now()
	select {
	case err := <-end:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if d := time.Since(t0); d > time.Second {
			t.Errorf("returned %s after the cancel, want ≤ 1 s", d)
		}
	case <-time.After(hangLimit):
		t.Fatal("follow did not return after its context was cancelled")
	}
}

// A server that stops sending (not even a heartbeat) ends the follow with
// an error within the reader's timeout; it never hangs.
func TestFollowStalled(t *testing.T) {
	f := newFixture(t)
	target := strings.SplitN(strings.SplitN(f.db.DSN, "tcp(", 2)[1], ")", 2)[0]
	// The answers stop in the handshake, in the settings' queries, in the
	// dump's first events: the follow returns within about its timeout
	// of the silence.
	const timeout = 1500 * time.Millisecond
	for _, after := range []int{0, 1200, 2500} {
		p := testenv.NewStallProxy(t, target, after)
		r, err := New(strings.Replace(f.db.DSN, target, p.Addr, 1), 0, timeout)
		testenv.Must(t, err, "reader")
		at := make(chan time.Time, 1)
		go func() {
			<-p.Stalled()
			at <- time.Now()
		}()
		err, _ = within(t, 40*time.Second, "a stalled follow", func() error {
			return r.Follow(context.Background(), sources.BinlogPosition{}, balanceTable(f), func(sources.BinlogTx) error { return nil })
		})
		returned := time.Now()
		if err == nil || !strings.Contains(err.Error(), "1.5s timeout") {
			t.Errorf("stalled after %d bytes: %v; want the timeout named", after, err)
		}
		var stalledAt time.Time
		select {
		case stalledAt = <-at:
		case <-time.After(time.Second):
			t.Fatalf("stalled after %d bytes: the proxy never stalled, yet: %v", after, err)
		}
		if took := returned.Sub(stalledAt); took > timeout+time.Second {
			t.Errorf("stalled after %d bytes: returned %s after the silence began, want within about the %s timeout", after, took, timeout)
		}
		t.Logf("stalled after %d bytes: returned %s after the silence began: %v", after, returned.Sub(stalledAt), err)
		p.Close()
	}
}

// ALTER TABLE mid-stream: the rows after it are named by the new columns,
// the rows before it by the old.
func TestFollowAlterTable(t *testing.T) {
	f := newFixture(t)
	start := head(t, f.reader)
	tables := []sources.FollowTable{{Schema: f.db.Name, Table: "account_balance"}}
	f.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES ('A-0', 100)")
	f.db.Exec(t, "ALTER TABLE account_balance ADD COLUMN note VARCHAR(32) NULL AFTER account_id")
	f.db.Exec(t, "INSERT INTO account_balance (account_id, note, balance) VALUES ('A-1', 'hello', 7)")
	got, err := follow(t, f.reader, start, tables, 20*time.Second, count(2))
	testenv.Must(t, err, "follow")
	ch := changesOf(got)
	if ch[1].Values["account_id"] != "A-1" || ch[1].Values["note"] != "hello" || ch[1].Values["balance"] != "7.0000000000" {
		t.Errorf("after the ALTER: %+v", ch[1].Values)
	}
	// The row before the ALTER has one column fewer than the table now:
	// its rows cannot be named, and it says so.
	if ch[0].Statement == "" || !strings.Contains(ch[0].Statement, "ALTER TABLE") {
		t.Errorf("before the ALTER: %+v; want it unreadable, said", ch[0])
	}
	// An ALTER that keeps the column count, read from history: the rows
	// before it are not named by today's columns, and say so.
	replay := head(t, f.reader)
	f.db.Exec(t, "INSERT INTO account_balance (account_id, note, balance) VALUES ('A-2', 'x', 1)")
	f.db.Exec(t, "ALTER TABLE account_balance DROP COLUMN note, ADD COLUMN tag VARCHAR(32) NULL FIRST")
	f.db.Exec(t, "INSERT INTO account_balance (tag, account_id, balance) VALUES ('t', 'A-3', 2)")
	got, err = follow(t, f.reader, replay, tables, 20*time.Second, count(2))
	testenv.Must(t, err, "follow")
	ch = changesOf(got)
	if ch[0].Statement == "" || ch[0].Values != nil {
		t.Errorf("a row before a count-keeping ALTER, replayed: %+v; want it unreadable, said (not misnamed)", ch[0])
	}
	if ch[1].Values["tag"] != "t" || ch[1].Values["account_id"] != "A-3" || ch[1].Values["balance"] != "2.0000000000" {
		t.Errorf("after DROP/ADD: %+v", ch[1])
	}
	// Followed live across the same kind of ALTER: both named right.
	live := head(t, f.reader)
	stmts := []string{"INSERT INTO account_balance (tag, account_id, balance) VALUES ('u', 'A-4', 3)",
		"ALTER TABLE account_balance DROP COLUMN tag, ADD COLUMN code VARCHAR(32) NULL AFTER balance",
		"INSERT INTO account_balance (account_id, balance, code) VALUES ('A-5', 4, 'c')"}
	got, err = follow(t, f.reader, live, tables, 20*time.Second, func(got []sources.BinlogTx) bool {
		if len(got) > 0 && stmts != nil { // the follow is running
			for _, q := range stmts {
				f.db.Exec(t, q)
			}
			stmts = nil
		}
		return count(2)(got)
	})
	testenv.Must(t, err, "follow")
	ch = changesOf(got)
	if ch[0].Values["tag"] != "u" || ch[0].Values["account_id"] != "A-4" || ch[1].Values["code"] != "c" || ch[1].Values["account_id"] != "A-5" || ch[1].Values["balance"] != "4.0000000000" {
		t.Errorf("live across the ALTER: %+v", ch)
	}
}

// inSession runs the statements on one connection (a session's SET
// applies to the statements after it).
func inSession(t *testing.T, f *fixture, qs ...string) {
	t.Helper()
	conn, err := f.db.SQL.Conn(context.Background())
	testenv.Must(t, err, "conn")
	defer conn.Close()
	for _, q := range qs {
		_, err := conn.ExecContext(context.Background(), q)
		testenv.Must(t, err, "%s", q)
	}
}

// binlog_row_image=MINIMAL: the columns an image lacks are Missing, never
// empty values.
func TestFollowMinimalImage(t *testing.T) {
	f := newFixture(t)
	f.db.Exec(t, "INSERT INTO ledger_entry (id, biz_order_id, direction, amount) VALUES (1, 'PAY-M', 'DEBIT', 10)")
	start := head(t, f.reader)
	inSession(t, f, "SET SESSION binlog_row_image = 'MINIMAL'", "UPDATE ledger_entry SET amount = 5 WHERE id = 1", "DELETE FROM ledger_entry WHERE id = 1")
	got, err := follow(t, f.reader, start, []sources.FollowTable{{Schema: f.db.Name, Table: "ledger_entry"}}, 20*time.Second, count(2))
	testenv.Must(t, err, "follow")
	ch := changesOf(got)
	up, del := ch[0], ch[1]
	rest := []string{"biz_order_id", "direction", "created_at"}
	if up.Kind != sources.ChangeUpdate || up.Values["id"] != "1" || up.Values["amount"] != "5.0000000000" || !slices.Equal(up.Missing, rest) {
		t.Errorf("update: %+v; want id and amount, %v missing", up, rest)
	}
	if del.Kind != sources.ChangeDelete || del.Values["id"] != "1" || len(del.Values) != 1 || !slices.Equal(del.Missing, append(rest[:2:2], "amount", "created_at")) {
		t.Errorf("delete: %+v", del)
	}
}

// An update carries its before image of the kept columns (the watch reads
// a state row's version in both); an insert and a delete carry none.
func TestFollowUpdateBefore(t *testing.T) {
	f := newFixture(t)
	f.db.Exec(t, "INSERT INTO ledger_entry (id, biz_order_id, direction, amount) VALUES (1, 'PAY-B', 'DEBIT', 10)")
	start := head(t, f.reader)
	f.db.Exec(t, "UPDATE ledger_entry SET amount = 5 WHERE id = 1")
	f.db.Exec(t, "INSERT INTO ledger_entry (id, biz_order_id, direction, amount) VALUES (2, 'PAY-B2', 'DEBIT', 7)")
	got, err := follow(t, f.reader, start, []sources.FollowTable{{Schema: f.db.Name, Table: "ledger_entry", Columns: []string{"id", "amount"}}}, 20*time.Second, count(2))
	testenv.Must(t, err, "follow")
	ch := changesOf(got)
	up, ins := ch[0], ch[1]
	if up.Kind != sources.ChangeUpdate || up.Values["amount"] != "5.0000000000" || up.Before["amount"] != "10.0000000000" || up.Before["id"] != "1" || len(up.Before) != 2 {
		t.Errorf("update: %+v; want amount 10 before, 5 after", up)
	}
	if ins.Kind != sources.ChangeInsert || ins.Before != nil {
		t.Errorf("insert: %+v; want no before image", ins)
	}
}

// A TIMESTAMP column is named in Zoned (its text is in this process's
// zone), a DATETIME one is not.
func TestFollowZoned(t *testing.T) {
	f := newFixture(t)
	f.db.Exec(t, "CREATE TABLE zoned (id INT PRIMARY KEY, ts TIMESTAMP(3) NULL, dt DATETIME(3) NULL)")
	start := head(t, f.reader)
	f.db.Exec(t, "INSERT INTO zoned VALUES (1, '2026-12-02 04:00:00.120', '2026-12-02 04:00:00.120')")
	got, err := follow(t, f.reader, start, []sources.FollowTable{{Schema: f.db.Name, Table: "zoned", Columns: []string{"id", "ts", "dt"}}}, 20*time.Second, count(1))
	testenv.Must(t, err, "follow")
	ch := changesOf(got)
	if len(ch) != 1 || !slices.Equal(ch[0].Zoned, []string{"ts"}) {
		t.Fatalf("changes %+v; want one with Zoned [ts]", ch)
	}
}

// A session in binlog_format=STATEMENT that changes a followed table is a
// change with Statement set; one that changes another table is not.
func TestFollowStatementFormat(t *testing.T) {
	f := newFixture(t)
	f.db.Exec(t, "CREATE TABLE other_table (id INT PRIMARY KEY, n INT)")
	start := head(t, f.reader)
	inSession(t, f, "SET SESSION binlog_format = 'STATEMENT'", "INSERT INTO other_table VALUES (1, 1)",
		"INSERT INTO account_balance (account_id, balance) VALUES ('S-1', 100)")
	got, err := follow(t, f.reader, start, balanceTable(f), 20*time.Second, count(1))
	testenv.Must(t, err, "follow")
	ch := changesOf(got)
	if len(ch) != 1 || ch[0].Table != "account_balance" || !strings.Contains(ch[0].Statement, "S-1") || ch[0].Kind != "" {
		t.Fatalf("changes %+v; want one statement change of account_balance", ch)
	}
	t.Log(ch[0].Statement)
}

// A follow from a purged file is a *sources.PurgedError naming it.
func TestFollowPurged(t *testing.T) {
	_, f := dedicated(t, 41)
	old := head(t, f.reader)
	f.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES ('P-1', 100)")
	f.db.Exec(t, "FLUSH BINARY LOGS")
	now := head(t, f.reader)
	// MariaDB keeps a file until InnoDB no longer needs it for crash
	// recovery (a warning, not an error): purge until it is gone.
	for i := 0; ; i++ {
		f.db.Exec(t, "PURGE BINARY LOGS TO '"+now.File+"'")
		var first string
		var size any
		testenv.Must(t, f.db.SQL.QueryRow("SHOW BINARY LOGS").Scan(&first, &size), "binary logs")
		if first == now.File {
			break
		}
		if i == 50 {
			t.Fatalf("%s is still the first binlog after PURGE BINARY LOGS TO %s", first, now.File)
		}
		time.Sleep(200 * time.Millisecond)
	}
	err, _ := within(t, hangLimit, "a follow of a purged file", func() error {
		return f.reader.Follow(context.Background(), old, balanceTable(f), func(sources.BinlogTx) error { return nil })
	})
	var pe *sources.PurgedError
	if !errors.As(err, &pe) || pe.From.File != old.File || pe.Oldest != now.File || !strings.Contains(err.Error(), old.File) {
		t.Fatalf("err = %v; want a PurgedError naming %s", err, old.File)
	}
	t.Log(err)
}

// One flipped byte in a change's row image: the follow stops with the
// checksum error before that transaction, never emitting a wrong row.
func TestFollowCorruptedEvent(t *testing.T) {
	_, f, path, evs, b := damaged(t, 42)
	up := updates(evs)
	e := up[1]
	b[e.pos+e.size-5] ^= 0x01
	testenv.Must(t, os.WriteFile(path, b, 0o600), "write the damaged file")
	name := path[strings.LastIndex(path, "/")+1:]
	var got []sources.BinlogTx
	err, _ := within(t, hangLimit, "a follow of a damaged file", func() error {
		return f.reader.Follow(context.Background(), sources.BinlogPosition{File: name, Pos: 4}, balanceTable(f), func(tx sources.BinlogTx) error {
			got = append(got, tx)
			return nil
		})
	})
	var ue *UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "fails its CRC32 checksum") {
		t.Fatalf("err = %v; want the checksum failure", err)
	}
	ch := changesOf(got)
	// The insert and the first debit, whole; never the damaged second.
	if len(ch) != 2 || ch[1].Values["balance"] != "70.0000000000" {
		t.Fatalf("changes before the damage: %+v", ch)
	}
}

// BenchmarkFollow: the follower's rate over a 100k-row insert stream
// (1,000 transactions of 100 rows of a five-column operations table,
// written before the follow starts): each iteration follows from before
// the stream until it has emitted every row. Reported: rows/s and
// transactions/s of the follow (decode, naming, grouping, emit).
//
//	go test -run '^$' -bench Follow -benchtime 3x ./sources/binlog/
func BenchmarkFollow(b *testing.B) {
	srv := shared.Get(b)
	db := srv.MySQL(b)
	db.Exec(b, `CREATE TABLE ops (id BIGINT PRIMARY KEY, biz_id VARCHAR(64) NOT NULL, state VARCHAR(16) NOT NULL,
		amount DECIMAL(30,10) NOT NULL, updated_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3))`)
	r, err := New(db.DSN, 0, 10*time.Second)
	testenv.Must(b, err, "reader")
	start, err := r.Head(context.Background())
	testenv.Must(b, err, "head")
	const txs, perTx = 1000, 100
	q := "INSERT INTO ops (id, biz_id, state, amount) VALUES " + strings.TrimSuffix(strings.Repeat("(?, ?, 'DONE', ?),", perTx), ",")
	args := make([]any, 0, 3*perTx)
	for t := range txs {
		args = args[:0]
		for i := range perTx {
			id := t*perTx + i
			args = append(args, id, fmt.Sprintf("PAY-%d", id), fmt.Sprintf("%d.25", id%1000))
		}
		if _, err := db.SQL.Exec(q, args...); err != nil {
			b.Fatal(err)
		}
	}
	tables := []sources.FollowTable{{Schema: db.Name, Table: "ops"}}
	b.ResetTimer()
	t0 := time.Now()
	for range b.N {
		ctx, cancel := context.WithCancel(context.Background())
		rows, n := 0, 0
		err := r.Follow(ctx, start, tables, func(tx sources.BinlogTx) error {
			rows += len(tx.Changes)
			if len(tx.Changes) > 0 {
				n++
			}
			if rows >= txs*perTx {
				cancel()
			}
			return nil
		})
		cancel()
		if !errors.Is(err, context.Canceled) || rows != txs*perTx || n != txs {
			b.Fatalf("follow: %v after %d rows in %d transactions", err, rows, n)
		}
	}
	took := time.Since(t0).Seconds()
	b.ReportMetric(float64(b.N*txs*perTx)/took, "rows/s")
	b.ReportMetric(float64(b.N*txs)/took, "tx/s")
}

// A transaction larger than the buffer comes in chunks: every chunk but
// the last has More and the position before the transaction (a resume
// from it reads the whole transaction again), the last the position after.
// Every row comes once.
func TestFollowHugeTransaction(t *testing.T) {
	f := newFixture(t)
	f.db.Exec(t, "CREATE TABLE big (id INT PRIMARY KEY)")
	start := head(t, f.reader)
	const n = FollowMaxChanges*2 + 3000
	f.db.Exec(t, fmt.Sprintf("INSERT INTO big (id) SELECT seq FROM seq_1_to_%d", n))
	// The chunks: from the first change to the first tx past the
	// transaction (progress marks before it end at start).
	chunksOf := func(got []sources.BinlogTx) (chunks []sources.BinlogTx, whole bool) {
		for _, tx := range got {
			if len(tx.Changes) > 0 || tx.End != start {
				chunks = append(chunks, tx)
				if !tx.More {
					return chunks, true
				}
			}
		}
		return chunks, false
	}
	got, err := follow(t, f.reader, start, []sources.FollowTable{{Schema: f.db.Name, Table: "big"}}, 60*time.Second, func(got []sources.BinlogTx) bool {
		_, whole := chunksOf(got)
		return whole
	})
	testenv.Must(t, err, "follow")
	chunks, _ := chunksOf(got)
	// A chunk ends after the rows event that reached the buffer's size
	// (an event holds at most binlog_row_event_max_size, 8 kB, of rows).
	last := chunks[len(chunks)-1]
	if len(chunks) < 3 || last.More {
		t.Fatalf("%d chunks, the last with More %v; want at least 3, the last without", len(chunks), last.More)
	}
	for i, c := range chunks[:len(chunks)-1] {
		if !c.More || c.End != start || len(c.Changes) < FollowMaxChanges || len(c.Changes) > FollowMaxChanges+8192 {
			t.Errorf("chunk %d: More %v, End %s, %d changes; want More, %s, about %d", i, c.More, c.End, len(c.Changes), start, FollowMaxChanges)
		}
	}
	if last.End == start || last.End.File == start.File && last.End.Pos <= start.Pos {
		t.Errorf("last chunk's End %s; want after the transaction (started %s)", last.End, start)
	}
	seen := map[string]bool{}
	for _, c := range changesOf(chunks) {
		seen[c.Values["id"]] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct rows, want %d", len(seen), n)
	}
}
