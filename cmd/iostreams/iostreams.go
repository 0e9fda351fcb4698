// Package iostreams carries a command's stdin, stdout and stderr with what
// it needs to know about them: whether stdout is a terminal and whether
// colour is allowed (NO_COLOR, --no-color).
package iostreams

import (
	"bytes"
	"io"
	"os"
	"strconv"

	"github.com/charmbracelet/x/term"
	"github.com/mattn/go-isatty"
)

// IOStreams are the standard streams of one command run.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	stdoutTTY bool
	stdinTTY  bool
	noColor   bool
	// width returns the terminal's columns (0: unknown); nil for none.
	width func() int
}

// System returns the process's streams with TTY detection and NO_COLOR.
func System() *IOStreams {
	return &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		stdoutTTY: isatty.IsTerminal(os.Stdout.Fd()) || isatty.IsCygwinTerminal(os.Stdout.Fd()),
		stdinTTY:  isatty.IsTerminal(os.Stdin.Fd()),
		noColor:   os.Getenv("NO_COLOR") != "",
		width: func() int {
			if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
				return n
			}
			if w, _, err := term.GetSize(os.Stdout.Fd()); err == nil {
				return w
			}
			return 0
		},
	}
}

// Test returns streams backed by buffers: in, out, errOut.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errOut := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

// IsStdoutTTY reports whether stdout is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }

// IsStdinTTY reports whether stdin is a terminal (for confirmations).
func (s *IOStreams) IsStdinTTY() bool { return s.stdinTTY }

// SetStdoutTTY forces the terminal flag (tests, --output decisions).
func (s *IOStreams) SetStdoutTTY(v bool) { s.stdoutTTY = v }

// SetStdinTTY forces the stdin terminal flag (tests).
func (s *IOStreams) SetStdinTTY(v bool) { s.stdinTTY = v }

// SetNoColor disables colour (--no-color).
func (s *IOStreams) SetNoColor(v bool) { s.noColor = v }

// DefaultWidth is TerminalWidth when the terminal does not say.
const DefaultWidth = 80

// TerminalWidth is the width of the terminal stdout is, in columns: $COLUMNS
// when it is a positive number, else what the terminal says, else
// DefaultWidth. Only meaningful when IsStdoutTTY.
func (s *IOStreams) TerminalWidth() int {
	if s.width != nil {
		if n := s.width(); n > 0 {
			return n
		}
	}
	return DefaultWidth
}

// SetTerminalWidth fixes the terminal width (tests).
func (s *IOStreams) SetTerminalWidth(n int) { s.width = func() int { return n } }

// ColorEnabled reports whether styled output is allowed: stdout is a
// terminal and neither NO_COLOR nor --no-color is set.
func (s *IOStreams) ColorEnabled() bool { return s.stdoutTTY && !s.noColor }
