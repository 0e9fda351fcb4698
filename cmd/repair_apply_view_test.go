package cmd

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/sources"
)

// TestRepairApplySQLClippedOnlyOnATerminal: a dry run's statements are cut
// with "…" to the terminal's width on a terminal only; piped, and with -o
// wide, each is whole on its line.
func TestRepairApplySQLClippedOnlyOnATerminal(t *testing.T) {
	sql := "UPDATE `biz_operation` SET `status` = 'LEDGER_DONE', `version` = `version` + 1, `updated_at` = NOW(6)\n  WHERE `biz_id` = 'PAY-1' AND `version` = 4 AND `status` = 'DONE'"
	ar := repair.ActionResult{Index: 1, Type: "rewind_state", Outcome: repair.OutcomeWouldApply,
		Statements: []sources.Statement{{SQL: sql, Rows: 1}}}
	whole := strings.Join(strings.Fields(sql), " ")
	for _, tc := range []struct {
		tty    bool
		format Format
		cut    bool
	}{
		{false, FormatTable, false},
		{true, FormatTable, true},
		{true, FormatWide, false},
	} {
		ios, _, out, _ := iostreams.Test()
		ios.SetStdoutTTY(tc.tty)
		ios.SetNoColor(true)
		ios.SetTerminalWidth(80)
		newRepairApplyView(ios, tc.format, true).Progress(ar)
		s := out.String()
		if tc.cut {
			if strings.Contains(s, whole) || !strings.Contains(s, "…") {
				t.Errorf("tty %v %s: not cut:\n%s", tc.tty, tc.format, s)
			}
			for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
				if w := ansi.StringWidth(l); w > 80 && strings.Contains(l, "row(s)") {
					t.Errorf("a statement line of %d cells:\n%s", w, l)
				}
			}
		} else if !strings.Contains(s, "1 row(s): "+whole+"\n") || strings.Contains(s, "…") {
			t.Errorf("tty %v %s: not whole:\n%s", tc.tty, tc.format, s)
		}
	}
}
