// Package ui renders tables and styled text for terminals, and plain
// tab-separated text when stdout is not a terminal (docs/README.md: no colour and no
// box art when piped).
package ui

import (
	"io"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
)

// Styles are the styles of human output. Built once per command run.
type Styles struct {
	Bold, Dim, OK, Watch, Action, Title lipgloss.Style
	color                               bool
}

// NewStyles returns styles writing to w; without color every style is plain.
func NewStyles(w io.Writer, color bool) Styles {
	r := lipgloss.NewRenderer(w)
	if color {
		r.SetColorProfile(termenv.ANSI256)
	} else {
		r.SetColorProfile(termenv.Ascii)
	}
	return Styles{
		Bold:   r.NewStyle().Bold(true),
		Dim:    r.NewStyle().Foreground(lipgloss.Color("245")),
		OK:     r.NewStyle().Bold(true).Foreground(lipgloss.Color("2")),
		Watch:  r.NewStyle().Bold(true).Foreground(lipgloss.Color("3")),
		Action: r.NewStyle().Bold(true).Foreground(lipgloss.Color("1")),
		Title:  r.NewStyle().Bold(true).Foreground(lipgloss.Color("6")),
		color:  color,
	}
}

// Severity styles a text by a verdict severity (ok, watch, action).
func (s Styles) Severity(sev inspect.Severity, text string) string {
	switch sev {
	case inspect.SeverityOK:
		return s.OK.Render(text)
	case inspect.SeverityWatch:
		return s.Watch.Render(text)
	case inspect.SeverityAction:
		return s.Action.Render(text)
	}
	return s.Bold.Render(text)
}

// tsvClean keeps a cell on its line and in its column. A Replacer builds
// itself on first use: no work at package init (docs/architecture.md).
var tsvClean = strings.NewReplacer("\t", " ", "\n", " ")

// TSVRow writes one line of piped table output: the cells separated by
// tabs, a tab or newline inside a cell turned into a space. Table writes
// its header and rows with it; a view that streams rows (reconcile's
// targets) writes the header once, then a row at a time.
func TSVRow(w io.Writer, cells []string) error {
	clean := make([]string, len(cells))
	for i, c := range cells {
		clean[i] = tsvClean.Replace(c)
	}
	_, err := io.WriteString(w, strings.Join(clean, "\t")+"\n")
	return err
}

// Safe is s for a terminal, by the one rule of human output
// (plans.Shown, docs/where.md#values-in-human-output): s itself when it is
// valid UTF-8, every rune of it is printable (strconv.IsPrint, the ASCII
// space included) and it does not start with a double quote, else s quoted
// as a Go string ("PAY\x1b[2J"). Every value a view shows that opctl did not
// write itself (read from the database, Kafka, a downstream, a file, the
// command line) goes through it where it is rendered, before it is styled:
// a control character (an ESC starting a terminal command, a carriage
// return hiding what precedes it, a TAB or newline breaking a table's
// columns) never reaches the terminal raw. Where a view has only a text
// opctl composed around such values (a finding, a timeline entry, an
// error line), the text goes through it as a whole.
func Safe(s string) string { return plans.Shown(s) }

// SafeLines is a multi-line text (an error: a stale plan's diff, a list of
// config errors, cobra's "Did you mean this?" suggestions) with each of its
// lines through Safe: the newlines and the tabs that indent a line, which
// the text uses on purpose, stay; a line with a raw control character
// after its indentation is shown quoted.
func SafeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		rest := strings.TrimLeft(l, " \t")
		lines[i] = l[:len(l)-len(rest)] + Safe(rest)
	}
	return strings.Join(lines, "\n")
}
