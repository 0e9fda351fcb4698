package cmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/opctl-dev/opctl/sources"
)

// Exit codes (SPEC §5). This is the one place they are defined.
const (
	ExitOK          = 0
	ExitError       = 1
	ExitUsage       = 2
	ExitAttention   = 3
	ExitNotFound    = 4
	ExitRefused     = 5
	ExitPartial     = 6
	ExitInterrupted = 130
)

// exitStatusHelp is appended to every command's help (restic's habit).
const exitStatusHelp = `
EXIT STATUS
  0    ok
  1    error (config, connection, internal)
  2    usage
  3    attention: a verdict or reconcile target needs action
  4    not found
  5    refused: a guard failed, the plan is stale or was changed, or the operation is in flight
  6    partial: a source was unreachable; the verdict was computed from what was read
  130  interrupted
`

// CodeError carries an exit code. With a nil Err nothing more is printed:
// the command already wrote its output (a verdict that needs attention).
type CodeError struct {
	Code int
	Err  error
}

// Error is the wrapped error's message, or "exit N".
func (e *CodeError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *CodeError) Unwrap() error { return e.Err }

// UsageError is a bad invocation: exit 2.
type UsageError struct{ Err error }

// Error is the usage problem.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the usage problem.
func (e *UsageError) Unwrap() error { return e.Err }

func usageErrorf(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// exitCode maps an error to the exit code of SPEC §5.
func exitCode(err error, interrupted bool) int {
	if err == nil {
		return ExitOK
	}
	if interrupted || errors.Is(err, context.Canceled) {
		return ExitInterrupted
	}
	var ee *CodeError
	if errors.As(err, &ee) {
		return ee.Code
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	var ce *sources.ConnError
	if errors.As(err, &ce) {
		return ExitError
	}
	return ExitError
}
