package sources

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
