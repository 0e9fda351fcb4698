package cmd

import (
	"io"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/inspect"
)

// whereView renders reports. One implementation per output format, chosen
// once (Terraform's views), instead of `if json` through the command.
type whereView interface {
	Render(reports []inspect.Report) error
}

func newWhereView(io *iostreams.IOStreams, output Format) whereView {
	switch output {
	case FormatJSON, FormatJSONL:
		return &whereJSONView{w: io.Out, format: output}
	}
	return &whereHumanView{w: io.Out, table: tableFor(io, output), st: ui.NewStyles(io.Out, io.ColorEnabled())}
}

// whereHumanView prints the report for a person (ui.Where).
type whereHumanView struct {
	w     io.Writer
	table ui.TableOptions
	st    ui.Styles
}

func (v *whereHumanView) Render(rs []inspect.Report) error {
	return ui.WhereFit(v.w, v.table, v.st, rs)
}

// whereJSONView prints docs/where.md's object (an array when several reports).
// -o jsonl prints one report a line.
type whereJSONView struct {
	w      io.Writer
	format Format
}

func (v *whereJSONView) Render(rs []inspect.Report) error {
	enc := jsonEncoder(v.w, v.format)
	if v.format == FormatJSONL {
		for _, r := range rs {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	if len(rs) == 1 {
		return enc.Encode(rs[0])
	}
	return enc.Encode(rs)
}
