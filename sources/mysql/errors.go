package mysql

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	gomysql "github.com/go-sql-driver/mysql"
)

// PartialError is returned by ReadOperation together with the evidence it
// did read when one or more operation-level queries (state, idempotency,
// entity, audit) failed while others succeeded. The evidence of the failed
// queries is missing (the zero value), so the caller must mark its verdict
// partial. A failing step query is not listed here: it is recorded in that
// step's StepEvidence.Err, which makes the step unknown.
type PartialError struct {
	// Addr is the server address.
	Addr string
	// Failed lists the queries that failed, in a fixed order.
	Failed []QueryError
}

// QueryError is one failed query of a partial read.
type QueryError struct {
	// Query is "state", "idempotency", "entity" or "audit".
	Query string
	// Err is the driver's error.
	Err error
}

// Error lists the failed queries.
func (e *PartialError) Error() string {
	parts := make([]string, len(e.Failed))
	for i, f := range e.Failed {
		parts[i] = f.Query + " query: " + f.Err.Error()
	}
	return fmt.Sprintf("mysql %s: partial read: %s", e.Addr, strings.Join(parts, "; "))
}

// Unwrap returns the errors of the failed queries.
func (e *PartialError) Unwrap() []error {
	out := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		out[i] = f.Err
	}
	return out
}

// Queries returns the names of the failed queries.
func (e *PartialError) Queries() []string {
	out := make([]string, len(e.Failed))
	for i, f := range e.Failed {
		out[i] = f.Query
	}
	return out
}

// ConnError is a connection-level failure: the server could not be reached,
// refused the login, or did not answer before the deadline. Its message
// names the server address (and the user for a refused login), never the
// password or the DSN.
type ConnError struct {
	// Addr is the server address of the DSN.
	Addr string
	// Reason is the short cause ("connection refused", "access denied ...").
	Reason string
	// Err is the driver's error, for errors.Is and errors.As; Error prints
	// Reason, never Err verbatim.
	Err  error
	hint bool
}

// Error reads like "mysql 127.0.0.1:3307: connection refused (check
// mysql.dsn / --mysql-dsn)".
func (e *ConnError) Error() string {
	if e.hint {
		return fmt.Sprintf("mysql %s: %s (check mysql.dsn / --mysql-dsn)", e.Addr, e.Reason)
	}
	return fmt.Sprintf("mysql %s: %s", e.Addr, e.Reason)
}

// Unwrap returns the underlying error.
func (e *ConnError) Unwrap() error { return e.Err }

// ConnectionLevel is true: what sources.IsConnError looks for.
func (e *ConnError) ConnectionLevel() bool { return true }

// connError turns a connection-level driver error into a *ConnError.
func (r *Reader) connError(err error) error {
	reason, hint := describe(err)
	return &ConnError{Addr: r.addr, Reason: scrub(reason, r.passwd), Err: err, hint: hint}
}

// describe gives a short reason for a connection-level error and whether
// checking the DSN is the likely fix.
func describe(err error) (string, bool) {
	var me *gomysql.MySQLError
	var dnsErr *net.DNSError
	var netErr net.Error
	var ze *zoneError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer before the deadline (--timeout)", false
	case errors.Is(err, context.Canceled):
		return "interrupted", false
	case errors.As(err, &ze):
		return ze.msg, false
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused", true
	case errors.As(err, &dnsErr):
		return "cannot resolve host " + dnsErr.Name, true
	case errors.As(err, &me):
		switch me.Number {
		case 1045, 1698:
			// The server's message names user@host, never the password.
			return "access denied: " + me.Message, true
		case 1044, 1049:
			return me.Message, true
		}
		return me.Error(), false
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout connecting (is the server up? --timeout)", true
	}
	return err.Error(), true
}

// scrub removes a password from a message. Driver errors do not carry the
// password; this is a second line of defence.
func scrub(msg, passwd string) string {
	if passwd == "" {
		return msg
	}
	return strings.ReplaceAll(msg, passwd, "xxxxx")
}

// Partial marks the error as a partial read for sources.Collector, which
// cannot import this package.
func (e *PartialError) Partial() bool { return true }

// Server errors that say a bound value cannot be compared with a column
// because the column's character set cannot hold it.
const (
	// errMixOfCollations: "Illegal mix of collations (latin1_swedish_ci,
	// IMPLICIT) and (utf8mb4_general_ci,COERCIBLE) for operation '='";
	// a column (IMPLICIT) against a bound value (COERCIBLE) only when the
	// value's characters are not in the column's character set.
	errMixOfCollations = 1267
	// errImpossibleConversion (MySQL 8.0.22+): "Conversion from collation
	// utf8mb4_0900_ai_ci into latin1_swedish_ci impossible for parameter".
	errImpossibleConversion = 3988
)

// unholdable reports whether err is the server saying that a bound value
// of args is not in the character set of the column it is compared with
// (a latin1 key column asked for '支付-1'): no row can hold that value, so
// the query's answer is that none matches (docs/where.md "Ids a key
// column cannot hold"). Only an argument with a character outside ASCII
// can be that value: every character set opctl reads holds ASCII, and the
// same error for an ASCII value is a query's own mix of collations (two
// columns), kept as an error.
func unholdable(err error, args []any) bool {
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case errImpossibleConversion:
	case errMixOfCollations:
		// A column against a bound value, in either order.
		if !strings.Contains(me.Message, ",IMPLICIT) and (") || !strings.Contains(me.Message, ",COERCIBLE)") {
			return false
		}
	default:
		return false
	}
	for _, a := range args {
		if s, ok := a.(string); ok && !isASCII(s) {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
