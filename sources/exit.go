package sources

import "fmt"

// Exit statuses of every opctl command (docs/exit-codes.md). Errors that
// decide a status carry it (an ExitCode method); cmd.Main reads it in one
// place.
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

// ExitCode is exit 1: nothing could be read from MySQL.
func (e *ConnError) ExitCode() int { return ExitError }

// InternalError is a panic turned into an error (a bug of opctl, exit 1):
// the operator sees one line, the attempt row keeps the stack.
type InternalError struct {
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack string
}

// Error is PanicMessage of the value.
func (e *InternalError) Error() string { return PanicMessage(e.Value) }

// ExitCode is exit 1.
func (e *InternalError) ExitCode() int { return ExitError }

// PanicMessage is the one line an operator sees for a panic of opctl.
func PanicMessage(v any) string {
	return fmt.Sprintf("internal error: %v (a bug of opctl: please report it with the command run; nothing after the failing step was done)", v)
}
