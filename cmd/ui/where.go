package ui

import (
	"io"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/tui/render"
)

// Where writes where reports for a person with opctl's one where renderer
// (render.Where, which the console's detail uses too): with tty the tables
// have box art; otherwise they are tab-separated (docs/where.md).
func Where(w io.Writer, tty bool, st Styles, rs []inspect.Report) error {
	return WhereFit(w, TableOptions{TTY: tty}, st, rs)
}

// WhereFit is Where with its tables fitted as t says (the terminal's
// width on a terminal; whole values when piped or wide).
func WhereFit(w io.Writer, t TableOptions, st Styles, rs []inspect.Report) error {
	return render.Where(w, rs, render.WhereOptions{Styles: st,
		Table: func(w io.Writer, header []string, rows [][]string) error { return FitTable(w, t, header, rows) }})
}
