package schema

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Executor runs statements on one server (sources/mysql's Writer on
// mysql.write_dsn) and names it, without its password.
type Executor interface {
	Exec(ctx context.Context, stmts []string) error
	Addr() string
}

// Apply runs DDL on w (docs/config.md "Timeouts"). timeout (--timeout)
// bounds reaching the server: connecting (dial, handshake, login) and a
// first round trip (SELECT 1: every server opctl talks to knows it, the
// lab's embedded one too); a server that does not answer within it fails
// the apply before any statement is sent. The statements themselves are
// bounded only by ctx (Ctrl-C, and the DSN's own readTimeout, if it sets
// one): an index build on a large table can take minutes, during which the
// server sends nothing.
func Apply(ctx context.Context, w Executor, timeout time.Duration, stmts []string) error {
	addr := w.Addr()
	pctx, cancel := context.WithTimeout(ctx, timeout)
	err := w.Exec(pctx, []string{"SELECT 1"})
	cancel()
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("mysql.write_dsn (%s) did not answer within --timeout %s; nothing was run (is the server up and reachable? on a slow link, raise --timeout)", addr, timeout)
	case err != nil:
		return fmt.Errorf("schema apply: %w; nothing was run", err)
	}
	return w.Exec(ctx, stmts)
}
