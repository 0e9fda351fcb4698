package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/sources"
)

// LockKeepAlive is how often a held lock's connection is pinged: a
// connection the server or the network dropped (the server then released
// the lock) is noticed within this time, and an idle connection is never
// closed by the server's wait_timeout while it holds a lock.
const LockKeepAlive = time.Second

// Lock takes the named lock with GET_LOCK on a connection of its own, so
// that one process at a time does what it protects, across processes and
// machines that share the database (docs/repair.md "One apply at a time").
// The server releases the lock when that connection ends, so a process that
// dies gives it up without help.
//
// It first asks without waiting; a lock held by another connection is then
// waited for at most wait (bounded by ctx and, when wait exceeds it, by the
// write path's timeout, which also bounds the statement). A lock still held
// after that is a *sources.LockHeldError naming its holder (the connection,
// its user and client address as information_schema.PROCESSLIST shows them
// to this user).
//
// The lock's connection is pinged every LockKeepAlive; when a ping fails
// Lost is closed: the server may have released the lock, and the holder
// must stop what it protects. Release gives the lock back and closes the
// connection (it never returns to the pool holding a lock).
func (w *Writer) Lock(ctx context.Context, name string, wait time.Duration) (sources.Lock, error) {
	if name == "" || len(name) > sources.MaxLockName {
		return nil, fmt.Errorf("mysql: lock name %q: want 1 to %d bytes", name, sources.MaxLockName)
	}
	if w.timeout > 0 && wait > w.timeout-lockMargin {
		// The statement that waits must end before the driver's read
		// timeout would cut the connection.
		wait = max(0, w.timeout-lockMargin)
	}
	conn, err := w.r.db.Conn(ctx)
	if err != nil {
		return nil, w.r.connError(err)
	}
	l := &heldLock{name: name, conn: conn, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	got, err := l.get(ctx, 0)
	if err == nil && !got {
		holder := w.holder(ctx, conn, name)
		l.contended = holder.String()
		if wait > 0 {
			start := time.Now()
			got, err = l.get(ctx, wait)
			if err == nil && !got {
				holder = w.holder(ctx, conn, name)
				l.discard()
				return nil, &sources.LockHeldError{Name: name, Holder: holder, Waited: time.Since(start)}
			}
		} else {
			l.discard()
			return nil, &sources.LockHeldError{Name: name, Holder: holder}
		}
	}
	if err != nil {
		l.discard()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if isConnError(err) {
			return nil, w.r.connError(err)
		}
		return nil, fmt.Errorf("mysql: take the lock %s: %w", name, w.r.scrubErr(err))
	}
	go l.keepAlive(w.timeout)
	return l, nil
}

// lockMargin is how much shorter than the write path's timeout a lock wait
// is.
const lockMargin = 250 * time.Millisecond

// holder reads who holds the lock name: IS_USED_LOCK's connection id, and
// that connection's user, host and age where PROCESSLIST shows it.
func (w *Writer) holder(ctx context.Context, conn *sql.Conn, name string) sources.LockHolder {
	var h sources.LockHolder
	var id sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", name).Scan(&id); err != nil || !id.Valid {
		return h
	}
	h.Connection = id.Int64
	var user, host sql.NullString
	var secs sql.NullInt64
	err := conn.QueryRowContext(ctx, "SELECT USER, HOST, TIME FROM information_schema.PROCESSLIST WHERE ID = ?", id.Int64).Scan(&user, &host, &secs)
	if err == nil {
		h.User, h.Host = user.String, host.String
		if secs.Valid && secs.Int64 > 0 {
			h.For = time.Duration(secs.Int64) * time.Second
		}
	}
	return h
}

// heldLock is a lock taken with GET_LOCK on conn.
type heldLock struct {
	name      string
	contended string
	conn      *sql.Conn

	lost     chan struct{}
	lostOnce sync.Once
	stop     chan struct{}
	done     chan struct{}

	mu       sync.Mutex
	released bool
}

var _ sources.Lock = (*heldLock)(nil)

func (l *heldLock) Name() string          { return l.name }
func (l *heldLock) Contended() string     { return l.contended }
func (l *heldLock) Lost() <-chan struct{} { return l.lost }

// get runs GET_LOCK(name, wait): true when this connection holds it.
func (l *heldLock) get(ctx context.Context, wait time.Duration) (bool, error) {
	var got sql.NullInt64
	if err := l.conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", l.name, wait.Seconds()).Scan(&got); err != nil {
		return false, err
	}
	if !got.Valid {
		return false, errors.New("GET_LOCK returned NULL (the server could not take the lock)")
	}
	return got.Int64 == 1, nil
}

// keepAlive pings the lock's connection until Release; a failed ping (or
// a server that says another connection holds the lock) closes lost.
func (l *heldLock) keepAlive(timeout time.Duration) {
	defer close(l.done)
	if timeout <= 0 {
		timeout = sources.DefaultTimeout
	}
	t := time.NewTicker(LockKeepAlive)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), min(timeout, 5*LockKeepAlive))
		var mine sql.NullInt64
		err := l.conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", l.name).Scan(&mine)
		cancel()
		if err != nil || !mine.Valid || mine.Int64 != 1 {
			l.lostOnce.Do(func() { close(l.lost) })
			return
		}
	}
}

// Release releases the lock and closes its connection for good: a
// connection that still held the lock must never go back to the pool.
func (l *heldLock) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	l.released = true
	close(l.stop)
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var ok sql.NullInt64
	err := l.conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", l.name).Scan(&ok)
	l.discard()
	return err
}

// discard closes the lock's connection instead of returning it to the
// pool: the server ends its session and every lock it held.
func (l *heldLock) discard() {
	_ = l.conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = l.conn.Close()
}
