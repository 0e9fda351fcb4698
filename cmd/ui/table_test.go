package ui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

var (
	fitHeader = []string{"PIPELINE", "CHECK", "STATUS", "DETAIL"}
	fitRows   = [][]string{
		{"settlement", "tables", "\x1b[1;32mpass\x1b[0m", "every table and column the configuration names exists, with the types the checks read"},
		{"fulfilment_with_a_long_name", "grants", "fail", "SELECT on ops_audit is missing: GRANT SELECT ON ops.ops_audit TO 'opctl'@'%'"},
	}
)

// TestFitTable: on a terminal a table fits the width, the cells cut with
// "…" (a styled one closed before it); -o wide and piped output keep
// every value whole, piped as tab-separated lines.
func TestFitTable(t *testing.T) {
	for _, width := range []int{40, 60, 80, 120} {
		var b strings.Builder
		o := TableOptions{TTY: true, Width: width}.WithGives(Give{Col: 3, Floor: 10})
		if err := FitTable(&b, o, fitHeader, fitRows); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			if w := ansi.StringWidth(l); w > width {
				t.Errorf("width %d: a line of %d cells:\n%s", width, w, b.String())
			}
		}
		if width < 120 && !strings.Contains(b.String(), "…") {
			t.Errorf("width %d: nothing cut:\n%s", width, b.String())
		}
		if width >= 60 && !strings.Contains(b.String(), "settlement") {
			t.Errorf("width %d: the pipeline, which gives way after the detail, was cut:\n%s", width, b.String())
		}
		if strings.Contains(b.String(), "\x1b[1;32mpass\x1b[0m") == false {
			t.Errorf("width %d: the styled cell:\n%q", width, b.String())
		}
	}
	// -o wide: box art, every value whole.
	var wide strings.Builder
	if err := FitTable(&wide, TableOptions{TTY: true, Width: 40, Wide: true}, fitHeader, fitRows); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(wide.String(), "…") || !strings.Contains(wide.String(), fitRows[1][3]) || !strings.Contains(wide.String(), "│") {
		t.Errorf("wide:\n%s", wide.String())
	}
	// Piped: tab-separated lines, whatever the width.
	var piped strings.Builder
	if err := FitTable(&piped, TableOptions{Width: 40}, fitHeader, fitRows); err != nil {
		t.Fatal(err)
	}
	want := strings.Join(fitHeader, "\t") + "\n" + strings.Join(fitRows[0], "\t") + "\n" + strings.Join(fitRows[1], "\t") + "\n"
	if piped.String() != want {
		t.Errorf("piped:\n%q\nwant\n%q", piped.String(), want)
	}
}

// TestWrap: a note below a table wraps to the width on a terminal, its
// lines after the first indented; piped or wide it is one line.
func TestWrap(t *testing.T) {
	note := "settlement/duplicates: refused: no index serves the walk; run opctl schema check for the DDL that adds it"
	got := TableOptions{TTY: true, Width: 40}.Wrap(note, "    ")
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) < 3 {
		t.Fatalf("not wrapped:\n%s", got)
	}
	for i, l := range lines {
		if ansi.StringWidth(l) > 40 || (i > 0 && !strings.HasPrefix(l, "    ")) {
			t.Errorf("line %d: %q", i, l)
		}
	}
	if strings.Join(strings.Fields(got), " ") != note {
		t.Errorf("words lost:\n%s", got)
	}
	for _, o := range []TableOptions{{Width: 40}, {TTY: true, Width: 40, Wide: true}} {
		if got := o.Wrap(note, "    "); got != note+"\n" {
			t.Errorf("%+v: %q", o, got)
		}
	}
	if got := (TableOptions{TTY: true, Width: 40}).Truncate(note, 20); ansi.StringWidth(got) != 20 || !strings.HasSuffix(got, "…") {
		t.Errorf("truncate on a terminal: %q", got)
	}
	if got := (TableOptions{Width: 40}).Truncate(note, 20); got != note {
		t.Errorf("truncate piped: %q", got)
	}
}
