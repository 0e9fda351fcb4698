package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// The statements that frame a snapshot read. The isolation is set for the
// next transaction only (no SESSION): whatever the session's, the
// snapshot's is REPEATABLE READ, the level at which every consistent read
// of a transaction sees the one snapshot its start took; the session's own
// is left as it was.
const (
	snapshotIsolation = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
	snapshotStart     = "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"
	snapshotEnd       = "COMMIT"
)

// snapshotFrame is the number of statements a snapshot read runs besides
// its queries: the isolation, the start, the commit.
const snapshotFrame = 3

// ReadOperationSnapshot reads what ReadOperation reads of one operation
// (the same statements, buildQueries; the same evidence and errors,
// assemble) in one consistent snapshot: on one connection of the pool, a
// READ ONLY transaction at REPEATABLE READ started WITH CONSISTENT
// SNAPSHOT, the statements one after another, then COMMIT. Every row it
// returns was committed before the snapshot and none after, so an
// operation whose state row and effects one transaction writes is never
// read half-written, as ReadOperation's concurrent statements (each its
// own snapshot) may read it while it commits (docs/watch.md#how-it-works).
// NOW(6) is the state statement's clock, as in ReadOperation.
//
// It costs its queries one after another instead of at once, plus three
// statements (the isolation, the start, the commit), and each query is
// prepared on that connection (ReadStats counts them all): the watch
// reads it only to confirm a target. The connection goes back to the pool
// with its transaction ended; one whose transaction could not be ended
// (out of time, broken) is closed, never reused. A snapshot that cannot
// start (the server refuses the statement, or cannot be reached) is an
// error that is not a *PartialError: nothing was read; a server whose
// parser refuses it (go-mysql-server, the embedded demo's) is not asked
// again, every later snapshot read returning that error. The idempotency
// records of a table without a biz_id column (ReadIdempotencyByKeys) are
// read after the messages, outside the snapshot, as with ReadOperation.
func (r *Reader) ReadOperationSnapshot(ctx context.Context, p *config.Pipeline, auditTable string, bizID string) (sources.DBEvidence, error) {
	start := time.Now()
	if p == nil {
		return sources.DBEvidence{}, errors.New("mysql: ReadOperationSnapshot: nil pipeline")
	}
	qs, err := buildQueries(p, auditTable, bizID)
	if err != nil {
		return sources.DBEvidence{}, err
	}
	if refused := r.snapshotRefused.Load(); refused != nil {
		return sources.DBEvidence{}, *refused
	}
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return sources.DBEvidence{}, r.connError(err)
	}
	clean := false
	defer func() {
		if !clean {
			// A transaction that may still be open (or a pending
			// isolation for the next one) never goes back to the pool.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = conn.Close()
	}()
	for _, text := range []string{snapshotIsolation, snapshotStart} {
		if _, err := conn.ExecContext(ctx, text); err != nil {
			if isConnError(err) {
				return sources.DBEvidence{}, r.connError(err)
			}
			refused := fmt.Errorf("mysql %s: %s: %s (a consistent snapshot needs MySQL or MariaDB with InnoDB)", r.addr, text, scrub(err.Error(), r.passwd))
			if isParseError(err) {
				r.snapshotRefused.Store(&refused)
			}
			return sources.DBEvidence{}, refused
		}
	}
	results := make([]result, len(qs))
	for i, q := range qs {
		results[i] = r.fetchQueryOn(ctx, conn, q)
		if r.snapshotStep != nil {
			r.snapshotStep(i)
		}
	}
	if _, err := conn.ExecContext(ctx, snapshotEnd); err == nil {
		clean = true
	}
	n := len(qs) + snapshotFrame
	r.mu.Lock()
	r.stats = ReadStats{Statements: n, CriticalPath: n, Elapsed: time.Since(start), Failed: failures(results)}
	r.mu.Unlock()
	return r.assemble(p, qs, results)
}

// isParseError reports whether err is the server's parser refusing a
// statement (MySQL's and MariaDB's 1064, go-mysql-server's 1105 "syntax
// error"): a server that will refuse it again, whatever the moment.
func isParseError(err error) bool {
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	return me.Number == 1064 || me.Number == 1105 && strings.Contains(me.Message, "syntax error")
}

// fetchOn is fetch on conn when it is not nil (no statement cache: a
// connection's prepared statements are its own), else fetch.
func (r *Reader) fetchOn(ctx context.Context, conn *sql.Conn, text string, limit int, args ...any) result {
	if conn == nil {
		return r.fetch(ctx, text, limit, args...)
	}
	rows, err := conn.QueryContext(ctx, text, args...)
	if err != nil {
		return result{err: err}
	}
	return scan(rows, limit)
}

var _ sources.SnapshotDB = (*Reader)(nil)
