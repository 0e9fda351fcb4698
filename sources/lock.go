package sources

import (
	"fmt"
	"time"
)

// Lock is a named lock the write database holds for one opctl process
// (sources/mysql.Writer.Lock: MySQL's GET_LOCK on a connection of its own):
// one apply of a plan, one run of a runbook, the repair leadership of
// `opctl watch`. The server releases it when the connection ends, so a
// process that dies (SIGKILL, a machine that stops) loses it within the
// server's notice of the closed connection, and nobody else can take it
// while the holder lives (docs/repair.md "One apply at a time").
type Lock interface {
	// Name is the lock's name on the server.
	Name() string
	// Contended says whom the lock was held by when it was asked for
	// (LockHolder.String), "" when it was free at once: the caller waited
	// for another process.
	Contended() string
	// Lost is closed when the lock can no longer be trusted: its
	// connection failed a keep-alive, so the server may have released it.
	// A holder stops what the lock protects when it is closed.
	Lost() <-chan struct{}
	// Release gives the lock back and ends its connection. It is safe to
	// call more than once.
	Release() error
}

// LockHolder is who holds a lock, as the server tells it: the connection
// and, where the server lets the asker see it (the same user, or the
// PROCESS privilege), its user, client address and how long it has been
// connected.
type LockHolder struct {
	Connection int64
	// User and Host are the holder's account and client address
	// ("10.0.0.7:53122"); empty when they cannot be read.
	User, Host string
	// For is how long the holder's connection has existed, when known.
	For time.Duration
}

// String names the holder for an operator.
func (h LockHolder) String() string {
	if h.Connection == 0 {
		return "another opctl (its connection could not be identified)"
	}
	s := fmt.Sprintf("MySQL connection %d", h.Connection)
	if h.User != "" || h.Host != "" {
		s += fmt.Sprintf(" (%s@%s", h.User, h.Host)
		if h.For > 0 {
			s += ", connected " + h.For.String()
		}
		s += ")"
	}
	return s
}

// LockHeldError is a lock that another process holds: it was not given
// within the time asked for (exit 5: refused, nothing was done).
type LockHeldError struct {
	// Name is the lock's name; What says what it protects ("plan 3f1c9a0b1e2d").
	Name, What string
	Holder     LockHolder
	// Waited is how long the asker waited for it.
	Waited time.Duration
}

// Error names what is held, by whom, and what to do.
func (e *LockHeldError) Error() string {
	what := e.What
	if what == "" {
		what = "lock " + e.Name
	}
	s := fmt.Sprintf("%s is held by %s", what, e.Holder)
	if e.Waited > 0 {
		s += fmt.Sprintf(" (waited %s)", e.Waited.Round(time.Millisecond))
	}
	return s + ": another opctl is working on it; wait for it to finish, then try again"
}

// ExitCode is 5: refused, nothing was done.
func (e *LockHeldError) ExitCode() int { return ExitRefused }

// MaxLockName is the longest lock name MySQL takes (GET_LOCK, 5.7 and
// later); MariaDB takes longer ones, opctl never uses them.
const MaxLockName = 64
