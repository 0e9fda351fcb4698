package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// readCommitted opens a Reader on dsn whose every connection is READ
// COMMITTED (the pool's whole size, set on each connection: opctl's DSN
// takes no session variable but a few), where each statement of a
// transaction sees the latest commits unless the transaction says
// otherwise: a snapshot read that did not set REPEATABLE READ for its
// transaction would read every statement in a snapshot of its own.
func readCommitted(t testing.TB, dsn string) *Reader {
	t.Helper()
	r, err := Open(dsn, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	ctx := context.Background()
	conns := make([]*sql.Conn, maxOpenConns)
	for i := range conns {
		if conns[i], err = r.DB().Conn(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := conns[i].ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	return r
}

// poolIsClean holds every connection the pool may have at once and checks
// that none is in a transaction and each has the session isolation it
// was given (isolation; "": a connection may have been opened since): a
// snapshot read gives its connection back as it took it, or closes it.
func poolIsClean(t *testing.T, r *Reader, isolation string) {
	t.Helper()
	ctx := context.Background()
	conns := make([]*sql.Conn, maxOpenConns)
	for i := range conns {
		c, err := r.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	for i, c := range conns {
		var inTx int
		var iso string
		if err := c.QueryRowContext(ctx, "SELECT @@in_transaction, @@tx_isolation").Scan(&inTx, &iso); err != nil {
			t.Fatal(err)
		}
		if inTx != 0 || isolation != "" && iso != isolation {
			t.Errorf("connection %d: in_transaction %d, isolation %s; want 0, %s", i, inTx, iso, isolation)
		}
	}
	for _, c := range conns {
		c.Close()
	}
}

// TestReadOperationSnapshot: on a quiet database, for the lab's
// settlement, settlement_anchored and orders pipelines and each seed's
// preset on its own schema, and for queries that fail (a missing table,
// a missing column, a state value of the wrong type, a missing audit
// table), a snapshot read returns for every operation exactly what
// ReadOperation returns, evidence and error, in its queries plus three
// statements, and leaves every connection of the pool out of any
// transaction, at its session's isolation.
func TestReadOperationSnapshot(t *testing.T) {
	const n = 40
	ctx := context.Background()
	check := func(t *testing.T, r *Reader, p *config.Pipeline, audit string, ids []string) {
		t.Helper()
		evs := make([]sources.DBEvidence, len(ids))
		errs := make([]error, len(ids))
		qs, err := buildQueries(p, audit, "x")
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			evs[i], errs[i] = r.ReadOperationSnapshot(ctx, p, audit, id)
			if st := r.Stats(); st.Statements != len(qs)+3 || st.CriticalPath != st.Statements {
				t.Fatalf("%q: stats %+v, want %d statements one after another", id, st, len(qs)+3)
			}
		}
		sameAsOne(t, r, p, audit, ids, evs, errs)
	}
	for _, c := range hybridCases() {
		t.Run(c.name, func(t *testing.T) {
			db, _ := loadCase(t, c, n)
			r := readCommitted(t, db.DSN)
			ids := []string{}
			for i := 1; i <= n; i++ {
				ids = append(ids, c.id(i))
			}
			check(t, r, c.p(t), "opctl_audit", append(ids, c.extra...))
			poolIsClean(t, r, "READ-COMMITTED")
		})
	}
	t.Run("failures", func(t *testing.T) {
		c := hybridCases()[0]
		db, _ := loadCase(t, c, n)
		r := readCommitted(t, db.DSN)
		p := labPipeline(t, "settlement")
		p.State.Version = "msg_id" // a number for even operations only
		p.Steps[0].Evidence = strings.ReplaceAll(p.Steps[0].Evidence, "FROM debit_log r", "FROM no_such_log r")
		p.Steps[1].Evidence = "SELECT id, nope FROM ledger_entry WHERE biz_order_id = ?"
		p.Entity = &config.Entity{Query: "SELECT status FROM biz_operation WHERE biz_id = ? AND nope = 1"}
		ids := []string{"PAY-MISSING", "工单-1", c.id(1), c.id(2), c.id(7)}
		for _, audit := range []string{"opctl_audit", "no_such_audit"} {
			check(t, r, p, audit, ids)
		}
		poolIsClean(t, r, "READ-COMMITTED")
	})
}

// twoTables is a consumer's two tables that one transaction writes
// together (settlement_anchored's design): op's version counts the
// effects, and the pipeline that reads them.
func twoTables(t *testing.T) (*testenv.DB, *config.Pipeline) {
	t.Helper()
	db := testenv.MySQL(t)
	db.Exec(t, `CREATE TABLE op (id VARCHAR(32) PRIMARY KEY, status VARCHAR(16) NOT NULL, version INT NOT NULL, updated_at DATETIME(6) NOT NULL) ENGINE=InnoDB;
		CREATE TABLE effect (id BIGINT AUTO_INCREMENT PRIMARY KEY, biz_id VARCHAR(32) NOT NULL, KEY ix_biz (biz_id)) ENGINE=InnoDB;
		INSERT INTO op VALUES ('OP-1', 'WORKING', 0, NOW(6))`)
	p := &config.Pipeline{Name: "two", State: &config.State{Table: "op", Key: "id", Status: "status", Version: "version", UpdatedAt: "updated_at",
		Terminal: []string{"DONE"}},
		Steps: []config.Step{{Name: "effect", Kind: config.KindLocal, Evidence: "SELECT id FROM effect WHERE biz_id = ?"}}}
	return db, p
}

// apply is one transaction of the consumer: an effect and the state row
// that counts it, committed together.
func apply(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO effect (biz_id) VALUES ('OP-1')"); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE op SET version = version + 1, updated_at = NOW(6) WHERE id = 'OP-1'"); err != nil {
		return err
	}
	return tx.Commit()
}

// half reports whether ev read the effects and the state row of different
// moments: version must count the effect rows.
func half(ev sources.DBEvidence) (bool, int64, int) {
	var v int64
	if ev.State.Version != nil {
		v = *ev.State.Version
	}
	rows := len(ev.Steps[0].Rows)
	return int64(rows) != v, v, rows
}

// TestSnapshotSeesNoHalf: a consumer's transaction that commits between
// the snapshot read's state statement and its evidence statement is not
// seen at all (the state row and effects of before it), where the same two
// statements outside a snapshot read the state of before and the effect
// of after; the next read sees both. The sessions are READ COMMITTED: the
// snapshot's REPEATABLE READ is its own.
func TestSnapshotSeesNoHalf(t *testing.T) {
	db, p := twoTables(t)
	r := readCommitted(t, db.DSN)
	ctx := context.Background()
	var committed atomic.Int32
	r.snapshotStep = func(i int) {
		if i == 0 && committed.Add(1) == 1 { // after the state statement, once
			if err := apply(ctx, db.SQL); err != nil {
				t.Error(err)
			}
		}
	}
	ev, err := r.ReadOperationSnapshot(ctx, p, "", "OP-1")
	if err != nil {
		t.Fatal(err)
	}
	if h, v, rows := half(ev); h || v != 0 {
		t.Errorf("snapshot read version %d and %d effect rows: want the state before the commit, whole (0, 0)", v, rows)
	}
	ev, err = r.ReadOperationSnapshot(ctx, p, "", "OP-1")
	if err != nil {
		t.Fatal(err)
	}
	if h, v, rows := half(ev); h || v != 1 {
		t.Errorf("the next snapshot read version %d and %d effect rows: want (1, 1)", v, rows)
	}
	poolIsClean(t, r, "READ-COMMITTED")

	// The same statements, one after another outside a snapshot, with a
	// commit between them: the read the snapshot prevents.
	qs, err := buildQueries(p, "", "OP-1")
	if err != nil {
		t.Fatal(err)
	}
	var version int64
	if err := r.DB().QueryRowContext(ctx, "SELECT version FROM op WHERE id = 'OP-1'").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if err := apply(ctx, db.SQL); err != nil {
		t.Fatal(err)
	}
	res := r.fetch(ctx, qs[1].text, MaxRows, qs[1].args...)
	if res.err != nil {
		t.Fatal(res.err)
	}
	if int64(len(res.rows)) == version {
		t.Fatalf("outside a snapshot: version %d and %d effect rows; the test's interleaving does not tear a read", version, len(res.rows))
	}
}

// TestSnapshotUnderWriter: while a consumer commits its state row and its
// effect together in a loop, no snapshot read ever sees one without the
// other (asserted on every read, whatever the timing); the reads go on
// until the writer has committed many times during them and they have
// seen the version move.
func TestSnapshotUnderWriter(t *testing.T) {
	db, p := twoTables(t)
	r := readCommitted(t, db.DSN)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var commits atomic.Int64
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() {
		for ctx.Err() == nil {
			if err := apply(ctx, db.SQL); err != nil {
				if ctx.Err() == nil {
					werr = err
				}
				return
			}
			commits.Add(1)
		}
	})
	const enough = 100
	reads, moved, last := 0, 0, int64(-1)
	for ; reads < 20000 && (reads < enough || moved < enough/4); reads++ {
		ev, err := r.ReadOperationSnapshot(ctx, p, "", "OP-1")
		if err != nil {
			t.Fatal(err)
		}
		h, v, rows := half(ev)
		if h {
			t.Fatalf("read %d: version %d with %d effect rows: a half of the writer's transaction", reads, v, rows)
		}
		if v != last {
			moved++
		}
		last = v
	}
	// ReadOperation under the same writer, for the log: its statements
	// are concurrent, each its own snapshot.
	torn := 0
	for range enough {
		ev, err := r.ReadOperation(ctx, p, "", "OP-1")
		if err != nil {
			t.Fatal(err)
		}
		if h, _, _ := half(ev); h {
			torn++
		}
	}
	cancel()
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	if moved < enough/4 {
		t.Fatalf("%d snapshot reads saw the version move %d times (%d commits): the writer did not write during them", reads, moved, commits.Load())
	}
	t.Logf("%d snapshot reads, none half, the version moving %d times (%d commits); %d of %d ReadOperation reads under the same writer were half", reads, moved, commits.Load(), torn, enough)
	poolIsClean(t, r, "READ-COMMITTED")
}

// TestSnapshotInterrupted: a snapshot read whose context ends part-way
// fails its remaining statements as ReadOperation would, and its
// connection, whose transaction cannot be ended, is closed: the pool
// holds no connection in a transaction.
func TestSnapshotInterrupted(t *testing.T) {
	db, p := twoTables(t)
	r := readCommitted(t, db.DSN)
	ctx, cancel := context.WithCancel(context.Background())
	r.snapshotStep = func(i int) {
		if i == 0 {
			cancel()
		}
	}
	ev, err := r.ReadOperationSnapshot(ctx, p, "", "OP-1")
	if err == nil && ev.Steps[0].Err == "" {
		t.Fatalf("an interrupted read: no error, step %+v", ev.Steps[0])
	}
	r.snapshotStep = nil
	poolIsClean(t, r, "") // the closed connection's replacement is the server's default
	if _, err := r.ReadOperationSnapshot(context.Background(), p, "", "OP-1"); err != nil {
		t.Fatalf("the next read: %v", err)
	}
}

// TestReadOperationSnapshotDown: a server that cannot be reached is a
// *ConnError, as ReadOperation's.
func TestReadOperationSnapshotDown(t *testing.T) {
	r, err := Open("root@tcp(127.0.0.1:1)/x", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.ReadOperationSnapshot(context.Background(), settlementPipeline(), "opctl_audit", "PAY-1")
	var ce *ConnError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *ConnError", err)
	}
}

// TestIsParseError: only the parser's refusal (MySQL's and MariaDB's
// 1064, go-mysql-server's 1105 "syntax error") makes a Reader stop asking
// for snapshots; any other refusal is tried again next time.
func TestIsParseError(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"MariaDB parse error", &gomysql.MySQLError{Number: 1064, Message: "You have an error in your SQL syntax"}, true},
		{"go-mysql-server syntax error", &gomysql.MySQLError{Number: 1105, Message: "syntax error at position 44 near 'SNAPSHOT'"}, true},
		{"go-mysql-server other error", &gomysql.MySQLError{Number: 1105, Message: "unknown error"}, false},
		{"a transaction in progress", &gomysql.MySQLError{Number: 1568, Message: "Transaction characteristics can't be changed while a transaction is in progress"}, false},
		{"not a server's error", errors.New("syntax error"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := isParseError(c.err); got != c.want {
				t.Errorf("isParseError(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}
