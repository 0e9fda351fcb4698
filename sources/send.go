package sources

// SendError is a send with an effect outside the database (a Kafka record
// a republish writes) that did not end with an answer saying it took
// effect. It says whether the effect may still have happened, so that the
// caller records the truth: a send that may have gone out is unknown, not
// failed, and is looked up before it is sent again (docs/repair.md "Crash
// safety and resume").
type SendError struct {
	// MayHaveSent is true when the request may have reached the receiver
	// (no answer within the timeout, an interrupt, a connection that broke
	// after the request was written, a broker that timed out waiting for
	// its replicas); false when the receiver refused it or it never left
	// (nothing could be dialled, an error answer).
	MayHaveSent bool
	// Unreachable is true when the receiver did not answer at all (an
	// unreachable or frozen broker): the message says "Kafka unreachable".
	Unreachable bool
	// Source is what was sent to ("Kafka").
	Source string
	Err    error
}

// Error says what failed and whether it may have taken effect.
func (e *SendError) Error() string {
	s := e.Err.Error()
	if e.Unreachable {
		s = e.Source + " unreachable: " + s
	}
	if e.MayHaveSent {
		s += " (the send may have taken effect: its outcome is unknown)"
	}
	return s
}

// Unwrap returns the cause.
func (e *SendError) Unwrap() error { return e.Err }

// ExitCode is 6 when the receiver was unreachable (apply again when it
// answers), else 1.
func (e *SendError) ExitCode() int {
	if e.Unreachable {
		return ExitPartial
	}
	return ExitError
}
