package plans

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
)

// Refusal codes of a *RefusedError.
const (
	// CodeInFlight: a live owner holds the lease; no plan, --force or not.
	CodeInFlight = "in_flight"
	// CodeNoSafePlan: the verdict calls for a repair opctl cannot make safely
	// (an inconclusive probe, nothing contiguous to advance over, ...).
	CodeNoSafePlan = "no_safe_plan"
	// CodeNotCalledFor: --action names an action the verdict does not call
	// for, without --force.
	CodeNotCalledFor = "not_called_for"
	// CodeTampered: the plan's id does not match its body.
	CodeTampered = "tampered"
	// CodeConfigChanged: the plan's pipeline is missing from the config, or
	// its configuration changed since the plan was made.
	CodeConfigChanged = "config_changed"
	// CodeStale: what the plan observed no longer matches what is read.
	CodeStale = "stale"
	// CodeGuardFailed: an action's guard no longer holds.
	CodeGuardFailed = "guard_failed"
	// CodeLiveLease: a guard found a live lease.
	CodeLiveLease = "live_lease"
	// CodeUnknownOutcome: a crash left a compensation whose outcome cannot
	// be told.
	CodeUnknownOutcome = "unknown_outcome"
)

// RefusedError is a refusal (exit 5): a plan that cannot be made, or a plan
// that must not be applied. Nothing after the refused action was changed.
type RefusedError struct {
	Code   string
	Detail string
	// Action is the 1-based index of the refused action (0: the whole plan).
	Action int
	// Guard is the guard that failed (guard_failed, live_lease).
	Guard *Guard
	// Got is what the guard read instead.
	Got string
	// Diff lists what changed (stale).
	Diff []Change
}

// Error says what was refused and why; a stale refusal lists the diff.
// Values from a plan file or the database are printed with their control
// characters escaped (Printable): an error reaches a terminal.
func (e *RefusedError) Error() string { return e.text() }

func (e *RefusedError) text() string {
	e = &RefusedError{Code: e.Code, Detail: Printable(e.Detail), Action: e.Action, Guard: e.Guard, Got: Printable(e.Got), Diff: e.Diff}
	var b strings.Builder
	switch e.Code {
	case CodeStale:
		b.WriteString("stale plan: what it observed changed")
		if e.Detail != "" {
			b.WriteString(": " + e.Detail)
		}
		for _, c := range e.Diff {
			b.WriteString("\n  " + Printable(c.String()))
		}
		b.WriteString("\nmake a new plan (opctl repair plan)")
		return b.String()
	case CodeGuardFailed, CodeLiveLease:
		if e.Guard != nil {
			fmt.Fprintf(&b, "refused at action %d: guard %s failed", e.Action, Printable(e.Guard.String()))
		} else {
			fmt.Fprintf(&b, "refused at action %d", e.Action)
		}
		if e.Got != "" {
			fmt.Fprintf(&b, " (read %s)", e.Got)
		}
		if e.Detail != "" {
			b.WriteString(": " + e.Detail)
		}
		return b.String()
	case CodeTampered:
		return "refused: tampered plan: " + e.Detail
	}
	b.WriteString("refused")
	if e.Action > 0 {
		fmt.Fprintf(&b, " at action %d", e.Action)
	}
	b.WriteString(": " + e.Detail)
	return b.String()
}

// Printable is s with every rune that is not printable (a control
// character, an invalid byte) written as a Go escape (\x1b, \u2028): text
// from a plan file or a database that goes into a message can never move
// the cursor, clear the screen or hide what precedes it.
func Printable(s string) string {
	if printable(s) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// Shown is the one rule of human output (docs/where.md#values-in-human-output):
// a value read from a database, Kafka, a downstream, a file or the command
// line is shown as it is when it is valid UTF-8 and every rune of it is
// printable (strconv.IsPrint: no ESC, CR, BEL, TAB, newline, U+2028, bidi
// override or C1 control), else as a quoted Go string ("PAY\x1b[2J"),
// visible and harmless. A value that starts with a double quote is quoted
// too, so that a value in double quotes is always one to read with its
// escapes. cmd/ui.Safe is this function; Render uses it for every value of a
// plan.
func Shown(s string) string {
	if printable(s) && !strings.HasPrefix(s, `"`) {
		return s
	}
	return strconv.Quote(s)
}

// printable reports whether s is valid UTF-8 made of printable runes only.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}

// InputError is a bad invocation of the planner: a missing --reason, an
// unknown --action, --from-step that names no step, a manual action without
// --attest (exit 2).
type InputError struct{ Msg string }

// Error returns the message.
func (e *InputError) Error() string { return e.Msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// NothingToRepairError says the verdict needs no repair (exit 0, no plan).
type NothingToRepairError struct {
	Verdict inspect.Code
	Summary string
}

// Error reads "nothing to repair: VERDICT".
func (e *NothingToRepairError) Error() string { return "nothing to repair: " + string(e.Verdict) }

// ExitCode is exit 5: refused.
func (e *RefusedError) ExitCode() int { return sources.ExitRefused }

// ExitCode is exit 2: a usage error.
func (e *InputError) ExitCode() int { return sources.ExitUsage }

// ExitCode is exit 0: nothing to repair is not a failure.
func (e *NothingToRepairError) ExitCode() int { return sources.ExitOK }
