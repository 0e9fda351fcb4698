package ui

import (
	"io"
	"slices"
	"strings"

	"github.com/charmbracelet/x/ansi"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// TableOptions say how human output fits where it goes: on a terminal a
// table gets box art and, unless Wide, fits Width (the cells that would
// make it wider cut with "…", a note wrapped below it); piped, a table is
// tab-separated and every value is whole (docs/README.md).
type TableOptions struct {
	// TTY is whether stdout is a terminal.
	TTY bool
	// Width is the terminal's columns; 0 or less: no limit.
	Width int
	// Wide keeps every value whole on a terminal too (-o wide).
	Wide bool
	// Gives is the order in which the columns give way when the table is
	// too wide (long free text first, the ids the operator acts on
	// last); after them every column down to its header's width.
	Gives []Give
}

// Give is one step of fitting a table: column Col gives way down to Floor
// cells (never below its header's width).
type Give struct{ Col, Floor int }

// Fits reports whether output is fitted to Width: on a terminal, not
// wide, with a known width.
func (o TableOptions) Fits() bool { return o.TTY && !o.Wide && o.Width > 0 }

// WithGives returns o with the columns giving way in the order gs.
func (o TableOptions) WithGives(gs ...Give) TableOptions {
	o.Gives = gs
	return o
}

// Table writes rows under a header: box art on a terminal, tab-separated
// lines otherwise (easy to cut, awk and grep). Every value is whole: see
// FitTable for a table that fits the terminal.
func Table(w io.Writer, tty bool, header []string, rows [][]string) error {
	return FitTable(w, TableOptions{TTY: tty}, header, rows)
}

// FitTable writes rows under a header as o says: piped, tab-separated
// lines with every value whole; on a terminal, box art, and when o.Fits
// the columns that make the table wider than o.Width cut (tablewriter
// truncates them, by display width and through styles, with "…").
func FitTable(w io.Writer, o TableOptions, header []string, rows [][]string) error {
	if !o.TTY {
		if err := TSVRow(w, header); err != nil {
			return err
		}
		for _, r := range rows {
			if err := TSVRow(w, r); err != nil {
				return err
			}
		}
		return nil
	}
	opts := []tablewriter.Option{
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleLight)})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
	}
	if o.Fits() {
		if cut := columnWidths(o, header, rows); cut != nil {
			m := tw.NewMapper[int, int]()
			for col, n := range cut {
				m.Set(col, n+2) // the cell's padding, one space each side
			}
			opts = append(opts, tablewriter.WithRowAutoWrap(tw.WrapTruncate), tablewriter.WithColumnWidths(m))
		}
	}
	t := tablewriter.NewTable(w, opts...)
	t.Header(header)
	for _, r := range rows {
		if err := t.Append(r); err != nil {
			return err
		}
	}
	return t.Render()
}

// columnWidths is the width each column that must give way gets so that
// the table fits o.Width (nil when it fits as it is): the columns give way
// in the order of o.Gives, each only as much as the table still needs,
// then every column, the widest first, down to its header's width.
func columnWidths(o TableOptions, header []string, rows [][]string) map[int]int {
	n := len(header)
	if n == 0 {
		return nil
	}
	// The box art: "│ " before each cell, " " after it, "│" at the end.
	avail := o.Width - 3*n - 1
	floor := make([]int, n)
	w := make([]int, n)
	for i, h := range header {
		floor[i] = ansi.StringWidth(h)
		w[i] = floor[i]
	}
	for _, r := range rows {
		for i := 0; i < n && i < len(r); i++ {
			w[i] = max(w[i], ansi.StringWidth(r[i]))
		}
	}
	excess := -avail
	for _, x := range w {
		excess += x
	}
	if excess <= 0 {
		return nil
	}
	// After o.Gives, the widest columns first, each down to its header.
	rest := make([]int, n)
	for i := range rest {
		rest[i] = i
	}
	slices.SortStableFunc(rest, func(a, b int) int { return w[b] - w[a] })
	gives := append([]Give{}, o.Gives...)
	for _, i := range rest {
		gives = append(gives, Give{Col: i})
	}
	cut := map[int]int{}
	for _, g := range gives {
		if excess <= 0 {
			break
		}
		if g.Col < 0 || g.Col >= n {
			continue
		}
		c := min(excess, max(0, w[g.Col]-max(g.Floor, floor[g.Col])))
		if c == 0 {
			continue
		}
		w[g.Col] -= c
		excess -= c
		cut[g.Col] = w[g.Col]
	}
	return cut
}

// Wrap is text for below a table: on a terminal that o fits, wrapped at
// spaces to lines of at most o.Width cells, the lines after the first
// indented (a word longer than a line stays whole); otherwise text as it
// is, whole. It ends with a newline.
func (o TableOptions) Wrap(text, indent string) string {
	if !o.Fits() || ansi.StringWidth(text) <= o.Width {
		return text + "\n"
	}
	lines := strings.SplitN(ansi.Wordwrap(text, o.Width, ""), "\n", 2)
	var b strings.Builder
	b.WriteString(strings.TrimRight(lines[0], " ") + "\n")
	if len(lines) == 2 {
		// Wordwrap turned the spaces it broke at into newlines: the rest
		// is wrapped again, narrower by the indent.
		rest := strings.ReplaceAll(lines[1], "\n", " ")
		for _, l := range strings.Split(ansi.Wordwrap(rest, max(1, o.Width-ansi.StringWidth(indent)), ""), "\n") {
			b.WriteString(indent + strings.TrimRight(l, " ") + "\n")
		}
	}
	return b.String()
}

// Truncate is s cut to at most n cells with "…" when o fits the terminal
// and s is wider; otherwise s whole (piped, -o wide).
func (o TableOptions) Truncate(s string, n int) string {
	if !o.Fits() || n <= 0 {
		return s
	}
	return ansi.Truncate(s, n, "…")
}
