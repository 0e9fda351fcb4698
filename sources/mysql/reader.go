// Package mysql reads one operation's rows from MySQL or MariaDB through
// go-sql-driver/mysql. It implements sources.DB: every query of an operation
// (state row with the database clock, each step's evidence and intents,
// idempotency records, the entity, opctl's audit) is issued concurrently, so
// that one operation costs one round of statements on the critical path.
//
// Identifiers reach SQL only through config.QuoteIdent; the biz_id and every
// other value are bound as parameters of server-side prepared statements
// (InterpolateParams is always off).
package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// MaxRows bounds the rows read from any one query of an operation. A query
// that returns more is read only up to MaxRows rows: the per-operation
// evidence of a sane pipeline is a handful of rows, and memory stays bounded
// whatever an operator's evidence query returns.
const MaxRows = 1000

// maxOpenConns is the pool size: the number of statements that can run at
// the same time. One operation issues far fewer (one per query).
const maxOpenConns = 16

// maxCachedStmts bounds the prepared-statement cache. Statement texts come
// from the configuration only, so the bound is never reached in practice;
// beyond it statements are prepared per use.
const maxCachedStmts = 512

// Reader reads operations from one MySQL/MariaDB server. It is safe for
// concurrent use. Close it when done.
type Reader struct {
	db   *sql.DB
	addr string
	// passwd is kept only to scrub it from error texts, should a driver
	// error ever echo it.
	passwd string

	mu    sync.Mutex
	stmts map[string]*sql.Stmt
	stats ReadStats
	batch BatchStats
	// unkeyed are the keyed batch texts the server rejected (fetchKeyed);
	// keyedLookups counts byKeys' keyed statements (tests).
	unkeyed      map[string]bool
	keyedLookups int

	// keyed says whether batches may use their keyed form (keyedOK);
	// unionOnly (tests) makes every batch a UNION ALL.
	keyedOnce sync.Once
	keyed     bool
	unionOnly bool

	// noRollup: the server rejected GROUP BY ... WITH ROLLUP
	// (go-mysql-server); SweepRange counts its pages apart.
	noRollup atomic.Bool

	// snapshotStep (tests) is called after each query of a snapshot read,
	// with its index, before the next one runs.
	snapshotStep func(i int)
	// snapshotRefused is the error of a server whose parser refused a
	// snapshot's statements (go-mysql-server: the embedded demo), returned
	// by every snapshot read without asking again.
	snapshotRefused atomic.Pointer[error]
}

// ReadStats describes the statements of the most recent ReadOperation of a
// Reader (with concurrent reads: the one that finished last).
type ReadStats struct {
	// Statements is the number of SQL statements the read executed.
	Statements int
	// CriticalPath is the largest number of statements the read waited for
	// one after another. Every statement of a read runs in its own goroutine
	// and none depends on another's result, so it is 1 unless the read issued
	// more statements than the pool has connections (16); then statements
	// queue for a connection and it is ceil(Statements/16). It counts
	// statements, not protocol round trips: a statement's first use on a
	// connection also prepares it (one more round trip); prepared
	// statements are cached per Reader, so repeated reads skip that.
	CriticalPath int
	// Failed is the number of statements that returned an error (a missing
	// audit table included).
	Failed int
	// Elapsed is the wall time of the read.
	Elapsed time.Duration
}

// Options are how Open connects.
type Options struct {
	// Timeout (when > 0) sets the dial, read and write timeouts that the DSN
	// does not set itself.
	Timeout time.Duration
	// TimeZone is mysql.time_zone (config.ParseTimeZone): the session time
	// zone of every connection and the zone DATETIMEs are read in; "" is the
	// server's @@global.time_zone.
	TimeZone string
}

// Open is OpenWith with only a timeout: the server's default time zone.
func Open(dsn string, timeout time.Duration) (*Reader, error) {
	return OpenWith(dsn, Options{Timeout: timeout})
}

// OpenWith prepares a connection pool for dsn, a go-sql-driver/mysql DSN
// that CheckDSN accepts. It does not connect: an unreachable server
// is reported by the first read. opctl sets, whatever the DSN says:
// parseTime on, InterpolateParams off (values are always bound
// server-side), the session's time_zone (o.TimeZone, or none: the server's
// default) and the zone DATETIMEs are read in (the same zone; the DSN's loc
// is ignored), so that NOW(6) and the consumers' DATETIMEs compare as they
// were written and stand for the right instants (zone.go).
func OpenWith(dsn string, o Options) (*Reader, error) {
	if p := CheckDSN(dsn); p != "" {
		return nil, fmt.Errorf("mysql: invalid DSN %q: it %s (check mysql.dsn / --mysql-dsn)", config.RedactDSN(dsn), p)
	}
	tz, problem := config.ParseTimeZone(o.TimeZone)
	if problem != "" {
		return nil, fmt.Errorf("mysql: mysql.time_zone %q %s", o.TimeZone, problem)
	}
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		// ParseDSN errors name the faulty part, never the password.
		return nil, fmt.Errorf("mysql: invalid DSN: %v (check mysql.dsn / --mysql-dsn)", err)
	}
	cfg.ParseTime = true
	cfg.InterpolateParams = false
	delete(cfg.Params, "time_zone")
	if tz.Set != "" {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params["time_zone"] = tz.Set
	}
	// Until the server says which zone it is in (zone.go), UTC.
	cfg.Loc = time.UTC
	if tz.Loc != nil {
		cfg.Loc = tz.Loc
	}
	if timeout := o.Timeout; timeout > 0 {
		if cfg.Timeout == 0 {
			cfg.Timeout = timeout
		}
		if cfg.ReadTimeout == 0 {
			cfg.ReadTimeout = timeout
		}
		if cfg.WriteTimeout == 0 {
			cfg.WriteTimeout = timeout
		}
	}
	// The driver's own log lines ("[mysql] packets.go:58 read tcp ...: i/o
	// timeout") repeat on stderr what the error returned says.
	cfg.Logger = quietLogger{}
	conn, err := newZoneConnector(cfg, tz.Loc, o.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("mysql %s: %s (check mysql.dsn / --mysql-dsn)", cfg.Addr, scrub(err.Error(), cfg.Passwd))
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(maxOpenConns)
	db.SetMaxIdleConns(maxOpenConns)
	return &Reader{
		db:     db,
		addr:   cfg.Addr,
		passwd: cfg.Passwd,
		stmts:  make(map[string]*sql.Stmt),
	}, nil
}

// DB returns the underlying pool, for callers that run their own statements
// on the same server (guards and writes use their own DSN).
func (r *Reader) DB() *sql.DB { return r.db }

// Addr is the server address of the DSN (host:port or socket path): the only
// part of the DSN that error messages show.
func (r *Reader) Addr() string { return r.addr }

// Close closes the cached prepared statements and the pool.
func (r *Reader) Close() error {
	r.mu.Lock()
	stmts := r.stmts
	r.stmts = make(map[string]*sql.Stmt)
	r.mu.Unlock()
	for _, s := range stmts {
		_ = s.Close()
	}
	return r.db.Close()
}

// Stats returns the statistics of the most recent ReadOperation.
func (r *Reader) Stats() ReadStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Ping connects (or reuses a connection) and reports a connection-level
// failure in the same words as ReadOperation.
func (r *Reader) Ping(ctx context.Context) error {
	if err := r.db.PingContext(ctx); err != nil {
		return r.connError(err)
	}
	return nil
}

// stmt returns a cached prepared statement for text, preparing it on first
// use. With args == nil the caller uses the pool directly instead.
func (r *Reader) stmt(ctx context.Context, text string) (*sql.Stmt, bool, error) {
	r.mu.Lock()
	s, ok := r.stmts[text]
	r.mu.Unlock()
	if ok {
		return s, true, nil
	}
	s, err := r.db.PrepareContext(ctx, text)
	if err != nil {
		return nil, false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.stmts[text]; ok {
		// Another read prepared it meanwhile: keep one.
		_ = s.Close()
		return old, true, nil
	}
	if len(r.stmts) >= maxCachedStmts {
		return s, false, nil
	}
	r.stmts[text] = s
	return s, true, nil
}

// query runs text with args: without args directly, else as a prepared
// statement from the cache (prepared on first use). done closes the rows
// and, when the statement could not be cached, the statement; call it once
// the rows are read.
func (r *Reader) query(ctx context.Context, text string, args ...any) (*sql.Rows, func(), error) {
	if len(args) == 0 {
		rows, err := r.db.QueryContext(ctx, text)
		if err != nil {
			return nil, nil, err
		}
		return rows, func() { rows.Close() }, nil
	}
	s, cached, err := r.stmt(ctx, text)
	if err != nil {
		return nil, nil, err
	}
	rows, err := s.QueryContext(ctx, args...)
	if err != nil {
		if !cached {
			s.Close()
		}
		return nil, nil, err
	}
	return rows, func() {
		rows.Close()
		if !cached {
			s.Close()
		}
	}, nil
}

// query1 runs a prepared statement that returns at most one row of one
// column into dst: sql.ErrNoRows when it returns none.
func (r *Reader) query1(ctx context.Context, text string, dst any, args ...any) error {
	rows, done, err := r.query(ctx, text, args...)
	if err != nil {
		return err
	}
	defer done()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	return rows.Scan(dst)
}

// result is the raw outcome of one statement.
type result struct {
	cols []string
	// types are the columns' database type names (DECIMAL, BIGINT, ...).
	types []string
	rows  [][]sources.Value
	err   error
}

// fetch runs text with args and reads at most limit rows, converting each
// value (see convertValue).
func (r *Reader) fetch(ctx context.Context, text string, limit int, args ...any) result {
	rows, done, err := r.query(ctx, text, args...)
	if err != nil {
		return result{err: err}
	}
	defer done()
	return scan(rows, limit)
}

// scan reads at most limit rows (rows.Close discards the rest) and converts
// each value by its column's database type: the one row scanner and value
// normalizer of opctl, for the read path and a repair's transactions alike.
func scan(rows *sql.Rows, limit int) result {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return result{err: err}
	}
	types, err := rows.ColumnTypes()
	if err != nil {
		return result{err: err}
	}
	dbTypes := make([]string, len(types))
	for i, t := range types {
		dbTypes[i] = t.DatabaseTypeName()
	}
	var out [][]sources.Value
	raw := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	for len(out) < limit && rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return result{cols: cols, types: dbTypes, rows: out, err: err}
		}
		vals := make([]sources.Value, len(cols))
		for i, v := range raw {
			vals[i] = convertValue(dbTypes[i], v)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		return result{cols: cols, types: dbTypes, rows: out, err: err}
	}
	return result{cols: cols, types: dbTypes, rows: out}
}

// isConnError reports whether err means the server could not be used at all
// (unreachable, authentication refused, deadline, broken connection), as
// opposed to a statement the server rejected.
func isConnError(err error) bool {
	var ze *zoneError
	if errors.As(err, &ze) {
		return true
	}
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1040, // too many connections
			1044, // access denied to database
			1045, // access denied for user
			1049, // unknown database
			1129, // host blocked
			1130, // host not allowed
			1203, // user has too many connections
			1226, // user resource limit exceeded
			1251, // client does not support authentication protocol
			1698: // access denied without a password (MariaDB: a user that does not exist, or one of another auth plugin)
			return true
		}
		return false
	}
	return true
}

// errNoTable is MySQL's "table doesn't exist".
const errNoTable = 1146

func isNoTable(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && me.Number == errNoTable
}

var (
	_ sources.DB       = (*Reader)(nil)
	_ sources.HybridDB = (*Reader)(nil)
)

// quietLogger drops the driver's log lines.
type quietLogger struct{}

func (quietLogger) Print(...any) {}
