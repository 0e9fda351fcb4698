package cmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/sources/schema"
)

// schemaView renders `opctl schema print|check|apply`: one implementation
// per output format, chosen once. print writes a SQL script in every
// format: the script is what it is for (opctl schema print | mysql).
type schemaView interface {
	// Print writes the recommended tables (none with --audit) and the
	// audit tables.
	Print(dialect string, recommended, audit []string) error
	Check(rep *schema.Report) error
	// DryRun says what apply would run, on which server.
	DryRun(what, server string, stmts []string) error
	// Nothing says that apply has nothing to run.
	Nothing(msg string) error
	// Applied says what apply ran.
	Applied(n int, server, what string) error
}

func newSchemaView(ios *iostreams.IOStreams, format Format) schemaView {
	if format.IsJSON() {
		return &schemaJSON{w: ios.Out, format: format}
	}
	return &schemaHuman{w: ios.Out, table: tableFor(ios, format), st: ui.NewStyles(ios.Out, ios.ColorEnabled())}
}

// printScript is schema print's SQL script, in every format.
func printScript(w io.Writer, dialect string, recommended, audit []string) error {
	var b strings.Builder
	if len(recommended) > 0 {
		fmt.Fprintf(&b, "-- opctl recommended schema (%s): the anchored consumer of docs/design.md\n\n", dialect)
		b.WriteString(schema.Script(recommended))
		b.WriteString("-- opctl's audit tables (docs/repair.md)\n\n")
	}
	b.WriteString(schema.Script(audit))
	_, err := io.WriteString(w, b.String())
	return err
}

// --- human ---------------------------------------------------------------

type schemaHuman struct {
	w     io.Writer
	table ui.TableOptions
	st    ui.Styles
}

func (v *schemaHuman) Print(dialect string, recommended, audit []string) error {
	return printScript(v.w, dialect, recommended, audit)
}

// Check writes the items as a table, then what is missing and the DDL that
// adds it. An index name is read from the database: every value is shown
// through ui.Safe.
func (v *schemaHuman) Check(rep *schema.Report) error {
	st := v.st
	rows := [][]string{}
	for _, it := range rep.Items {
		status := ui.Safe(it.Status)
		switch it.Status {
		case schema.StatusOK:
			status = st.OK.Render(status)
		case schema.StatusMissing:
			status = st.Action.Render(status)
		default:
			status = st.Watch.Render(status)
		}
		what := ui.Safe(it.What)
		if what == "" {
			what = "-"
		}
		note := ui.Safe(it.Why)
		if it.Index != "" {
			note = "index " + ui.Safe(it.Index) + ": " + note
		}
		if len(it.Checks) > 0 {
			note = "reconcile " + ui.Safe(strings.Join(it.Checks, ",")) + ": " + note
		}
		pl := ui.Safe(it.Pipeline)
		if pl == "" {
			pl = "-"
		}
		rows = append(rows, []string{pl, ui.Safe(it.Kind), ui.Safe(it.Table), what, status, note})
	}
	var b strings.Builder
	// The note gives way first, the table names last.
	_ = ui.FitTable(&b, v.table.WithGives(ui.Give{Col: 5, Floor: 16}, ui.Give{Col: 3, Floor: 12}), []string{"PIPELINE", "KIND", "TABLE", "WHAT", "STATUS", "NOTE"}, rows)
	missing := rep.Missing()
	if len(missing) == 0 {
		b.WriteString("\nnothing missing\n")
	} else {
		fmt.Fprintf(&b, "\n%d missing.", len(missing))
		if ddl := rep.DDL(); len(ddl) > 0 {
			b.WriteString(" Add the indexes with (or: opctl schema apply --indexes):\n\n")
			for _, d := range ddl {
				b.WriteString(ui.Safe(d) + "\n")
			}
		} else {
			b.WriteString("\n")
		}
		for _, it := range missing {
			if it.Kind != schema.KindIndex {
				b.WriteString(v.table.Wrap(fmt.Sprintf("%s %s %s: create it or fix the config (%s)", ui.Safe(it.Kind), ui.Safe(it.Table), ui.Safe(it.What), ui.Safe(it.Why)), "    "))
			}
		}
	}
	_, err := io.WriteString(v.w, b.String())
	return err
}

func (v *schemaHuman) DryRun(what, server string, stmts []string) error {
	_, err := fmt.Fprintf(v.w, "-- dry run: would %s on %s\n\n%s", what, server, schema.Script(stmts))
	return err
}

func (v *schemaHuman) Nothing(msg string) error {
	_, err := fmt.Fprintln(v.w, msg)
	return err
}

func (v *schemaHuman) Applied(n int, server, what string) error {
	_, err := fmt.Fprintf(v.w, "applied %d statement(s) on %s: %s\n", n, server, what)
	return err
}

// --- JSON ----------------------------------------------------------------

type schemaJSON struct {
	w      io.Writer
	format Format
}

func (v *schemaJSON) Print(dialect string, recommended, audit []string) error {
	return printScript(v.w, dialect, recommended, audit)
}

func (v *schemaJSON) Check(rep *schema.Report) error {
	return jsonEncoder(v.w, v.format).Encode(struct {
		Items []schema.Item `json:"items"`
		DDL   []string      `json:"ddl"`
	}{rep.Items, append([]string{}, rep.DDL()...)})
}

// schemaApplied is apply's object: what it ran (or, in a dry run, would
// run) and on which server.
type schemaApplied struct {
	DryRun     bool     `json:"dry_run"`
	What       string   `json:"what"`
	Server     string   `json:"server,omitempty"`
	Applied    int      `json:"applied"`
	Statements []string `json:"statements"`
}

func (v *schemaJSON) DryRun(what, server string, stmts []string) error {
	return jsonEncoder(v.w, v.format).Encode(schemaApplied{DryRun: true, What: what, Server: server, Statements: append([]string{}, stmts...)})
}

func (v *schemaJSON) Nothing(msg string) error {
	return jsonEncoder(v.w, v.format).Encode(schemaApplied{What: msg, Statements: []string{}})
}

func (v *schemaJSON) Applied(n int, server, what string) error {
	return jsonEncoder(v.w, v.format).Encode(schemaApplied{What: what, Server: server, Applied: n, Statements: []string{}})
}
