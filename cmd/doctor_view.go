package cmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/sop/doctor"
)

// doctorView renders doctor's report: one implementation per output
// format, chosen once.
type doctorView interface {
	Report(rep *doctor.Report) error
}

func newDoctorView(ios *iostreams.IOStreams, format Format) doctorView {
	if format.IsJSON() {
		return &doctorJSON{w: ios.Out, format: format}
	}
	return &doctorHuman{ios: ios, table: tableFor(ios, format)}
}

// doctorJSON prints docs/doctor.md's {"checks": [...]}.
type doctorJSON struct {
	w      io.Writer
	format Format
}

func (v *doctorJSON) Report(rep *doctor.Report) error {
	return jsonEncoder(v.w, v.format).Encode(rep)
}

// doctorHuman prints the checks as a table, then the fix of each check
// that did not pass. Every detail can hold a value read from the database
// or Kafka: each goes through ui.Safe.
type doctorHuman struct {
	ios   *iostreams.IOStreams
	table ui.TableOptions
}

func (v *doctorHuman) Report(rep *doctor.Report) error {
	st := ui.NewStyles(v.ios.Out, v.ios.ColorEnabled())
	rows := [][]string{}
	counts := map[string]int{}
	for _, c := range rep.Checks {
		counts[c.Status]++
		status := c.Status
		switch c.Status {
		case doctor.Pass:
			status = st.OK.Render(status)
		case doctor.Fail:
			status = st.Action.Render(status)
		case doctor.Warn:
			status = st.Watch.Render(status)
		}
		rows = append(rows, []string{ui.Safe(c.Pipeline), c.Check, status, ui.Safe(c.Detail)})
	}
	var b strings.Builder
	if err := ui.FitTable(&b, v.table, []string{"PIPELINE", "CHECK", "STATUS", "DETAIL"}, rows); err != nil {
		return err
	}
	var fixes []string
	for _, c := range rep.Checks {
		if c.Fix != "" && c.Status != doctor.Pass {
			fixes = append(fixes, fmt.Sprintf("%s %s (%s): %s", ui.Safe(c.Pipeline), c.Check, c.Status, ui.Safe(c.Fix)))
		}
	}
	if len(fixes) > 0 {
		b.WriteString("\nFIX\n")
		for _, f := range fixes {
			b.WriteString(v.table.Wrap("  "+f, "    "))
		}
	}
	fmt.Fprintf(&b, "\n%d pass, %d warn, %d fail, %d skip\n", counts[doctor.Pass], counts[doctor.Warn], counts[doctor.Fail], counts[doctor.Skip])
	_, err := io.WriteString(v.ios.Out, b.String())
	return err
}
