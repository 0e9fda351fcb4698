// Package ui renders tables and styled text for terminals, and plain
// tab-separated text when stdout is not a terminal (docs/README.md: no colour and no
// box art when piped).
package ui

import (
	"io"
	"strings"

	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/tui/render"
)

// Styles are the styles of human output: opctl's one set (tui/render),
// shared with the console. Built once per command run.
type Styles = render.Styles

// NewStyles returns the styles for output to w; without color every style
// is plain.
func NewStyles(_ io.Writer, color bool) Styles { return render.NewStyles(color) }

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
