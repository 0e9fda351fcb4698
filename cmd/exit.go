package cmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/opctl-dev/opctl/sources"
)

// Exit statuses (docs/exit-codes.md), as every command returns them.
const (
	ExitOK          = sources.ExitOK
	ExitError       = sources.ExitError
	ExitUsage       = sources.ExitUsage
	ExitAttention   = sources.ExitAttention
	ExitNotFound    = sources.ExitNotFound
	ExitRefused     = sources.ExitRefused
	ExitPartial     = sources.ExitPartial
	ExitInterrupted = sources.ExitInterrupted
)

// exitStatusHelp is appended to every command's help (restic's habit).
const exitStatusHelp = `
EXIT STATUS
  0    ok
  1    error (config, connection, internal)
  2    usage
  3    attention: a verdict or reconcile target needs action, repair plan
       --from-file skipped a target, or a doctor check failed
  4    not found
  5    refused: a guard failed, the plan is stale or was changed, the
       operation is in flight, or a runbook step saw a verdict it does not
       expect
  6    partial: a source was unreachable; the verdict was computed from what
       was read
  130  interrupted
`

// exitCoder is an error that carries its exit status: the typed errors of
// the packages (a refusal, an unknown id, a bad id, an unreachable MySQL,
// ...) and the two of this package below.
type exitCoder interface{ ExitCode() int }

// SilentError ends a command whose output already says everything (a
// verdict that needs attention, a partial read): nothing more is printed,
// the process exits with Code.
type SilentError struct{ Code int }

// Error is "exit N".
func (e *SilentError) Error() string { return fmt.Sprintf("exit %d", e.Code) }

// ExitCode is the status.
func (e *SilentError) ExitCode() int { return e.Code }

// exitWith is nil for status 0, else a SilentError with the status.
func exitWith(code int) error {
	if code == ExitOK {
		return nil
	}
	return &SilentError{Code: code}
}

// UsageError is a bad invocation: exit 2.
type UsageError struct{ Err error }

// Error is the usage problem.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the usage problem.
func (e *UsageError) Unwrap() error { return e.Err }

// ExitCode is exit 2.
func (e *UsageError) ExitCode() int { return ExitUsage }

func usageErrorf(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// exitCode is the one place an error becomes an exit status: none is 0,
// an interrupt 130, an error that carries its status that status, any
// other error 1.
func exitCode(err error, interrupted bool) int {
	if err == nil {
		return ExitOK
	}
	if interrupted || errors.Is(err, context.Canceled) {
		return ExitInterrupted
	}
	var c exitCoder
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return ExitError
}

// RefusedError is a command that refused to go on (exit 5): a confirmation
// that was not given, nothing changed.
type RefusedError struct{ Err error }

// Error says what was refused.
func (e *RefusedError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *RefusedError) Unwrap() error { return e.Err }

// ExitCode is exit 5.
func (e *RefusedError) ExitCode() int { return ExitRefused }
