package cmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
)

// explainView renders `opctl explain`: one implementation per output
// format, chosen once.
type explainView interface {
	// List is every verdict, in precedence order.
	List(list []explained) error
	// One is one verdict in full.
	One(e explained) error
}

func newExplainView(ios *iostreams.IOStreams, format Format) explainView {
	if format.IsJSON() {
		return &explainJSON{w: ios.Out, format: format}
	}
	return &explainHuman{w: ios.Out, table: tableFor(ios, format), st: ui.NewStyles(ios.Out, ios.ColorEnabled())}
}

type explainJSON struct {
	w      io.Writer
	format Format
}

func (v *explainJSON) List(list []explained) error { return encodeList(v.w, v.format, list) }

func (v *explainJSON) One(e explained) error { return jsonEncoder(v.w, v.format).Encode(e) }

type explainHuman struct {
	w     io.Writer
	table ui.TableOptions
	st    ui.Styles
}

func (v *explainHuman) List(list []explained) error {
	rows := [][]string{}
	for _, e := range list {
		rows = append(rows, []string{string(e.Code), string(e.Severity), e.Meaning})
	}
	return ui.FitTable(v.w, v.table, []string{"VERDICT", "SEVERITY", "MEANING"}, rows)
}

func (v *explainHuman) One(e explained) error {
	st, t := v.st, v.table
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)\n\n", st.Severity(e.Severity, string(e.Code)), e.Severity)
	b.WriteString(t.Wrap(e.Meaning, ""))
	list := func(title string, items []string) {
		if len(items) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n%s\n", st.Title.Render(title))
		for _, it := range items {
			b.WriteString(t.Wrap("  - "+it, "    "))
		}
	}
	list("TYPICAL CAUSES", e.Causes)
	list("SAFE", e.Safe)
	list("NOT SAFE", e.Unsafe)
	fmt.Fprintf(&b, "\n%s\n", st.Title.Render("REPAIR"))
	b.WriteString(t.Wrap("  "+e.Repair, "  "))
	if e.Runbook != "" {
		fmt.Fprintf(&b, "\n%s\n", st.Title.Render("RUNBOOK"))
		b.WriteString(t.Wrap(fmt.Sprintf("  opctl sop run %s --biz-id ID --reason TEXT (opctl sop show %s)", e.Runbook, e.Runbook), "  "))
	}
	_, err := io.WriteString(v.w, b.String())
	return err
}
