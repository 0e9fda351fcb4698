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
	// Text is Detail with the options it names as data (Phrase); empty
	// for a detail that names none.
	Text Message
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

// InputError is a bad invocation of the planner: a missing reason, an
// unknown action, a from-step that names no step, a manual action without
// an attestation (exit 2). Msg is the message as opctl says it, with its
// flags; Option and Text say the same as data, for a front end with other
// words (Phrase).
type InputError struct {
	Msg string
	// Option is the option at fault, "" when none in particular.
	Option Option
	// Text is the message with the options it names as data; empty for a
	// message that names none.
	Text Message
}

// Error returns the message.
func (e *InputError) Error() string { return e.Msg }

// inputErrorf is an *InputError about option opt, its message format
// naming options as Message does.
func inputErrorf(opt Option, format string, args ...any) error {
	m := Message{Format: format, Args: args}
	return &InputError{Msg: m.Phrase(Flags), Option: opt, Text: m}
}

// refusedf is a *RefusedError of code whose detail names options as
// Message does: Detail is it as opctl says it (Flags), Text as data.
func refusedf(code, format string, args ...any) *RefusedError {
	m := Message{Format: format, Args: args}
	return &RefusedError{Code: code, Detail: m.Phrase(Flags), Text: m}
}

// Option is one of the planner's options (the fields of Options). The
// planner's errors name them as data, and each front end spells them its
// own way: opctl as its flags (Flags), the console as its keys.
type Option string

// The planner's options.
const (
	OptReason   Option = "reason"
	OptOperator Option = "operator"
	OptIncident Option = "incident"
	OptAction   Option = "action"
	OptOutcome  Option = "outcome"
	OptForce    Option = "force"
	OptFromStep Option = "from-step"
	OptAttest   Option = "attest"
)

// Words spell an option, with the value it is given ("" for none), as one
// front end names it.
type Words func(o Option, value string) string

// Flags spells an option as opctl's flag: "--action manual".
func Flags(o Option, value string) string {
	if value == "" {
		return "--" + string(o)
	}
	return "--" + string(o) + " " + value
}

// Message is a planner's message that names options as data: Format
// writes "{option}" or "{option value}" where it names one (the value may
// hold fmt verbs), and Args are its fmt arguments: the values from the
// operator, the configuration or the database, never read for options.
type Message struct {
	Format string
	Args   []any
}

// Phrase is the message with its options spelled by w.
func (m Message) Phrase(w Words) string {
	var b strings.Builder
	f := m.Format
	for {
		i := strings.IndexByte(f, '{')
		j := strings.IndexByte(f[i+1:], '}')
		if i < 0 || j < 0 {
			b.WriteString(f)
			break
		}
		b.WriteString(f[:i])
		name, value, _ := strings.Cut(f[i+1:i+1+j], " ")
		b.WriteString(w(Option(name), value))
		f = f[i+j+2:]
	}
	return fmt.Sprintf(b.String(), m.Args...)
}

// Phrase is err as a front end says it: a planner's error (an
// *InputError, a *RefusedError) with its options spelled by w, any other
// error's own text (an error wrapped with more text: its own text too).
func Phrase(err error, w Words) string {
	switch e := err.(type) {
	case *InputError:
		if e.Text.Format != "" {
			return e.Text.Phrase(w)
		}
	case *RefusedError:
		if e.Text.Format != "" {
			c := *e
			c.Detail = e.Text.Phrase(w)
			return c.text()
		}
	}
	return err.Error()
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
