package cmd

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/sources"
)

// auditView renders the audit log: one implementation per output format,
// chosen once.
type auditView interface {
	Log(log *sources.AuditLog) error
}

func newAuditView(ios *iostreams.IOStreams, format Format) auditView {
	if format.IsJSON() {
		return &auditJSON{w: ios.Out, format: format}
	}
	return &auditHuman{w: ios.Out, table: tableFor(ios, format), st: ui.NewStyles(ios.Out, ios.ColorEnabled())}
}

// auditJSON prints {"actions": [...], "attempts": [...]} with the full
// images (docs/repair.md).
type auditJSON struct {
	w      io.Writer
	format Format
}

func (v *auditJSON) Log(log *sources.AuditLog) error { return jsonEncoder(v.w, v.format).Encode(log) }

// auditHuman prints one table of actions and attempts, oldest first.
type auditHuman struct {
	w     io.Writer
	table ui.TableOptions
	st    ui.Styles
}

func (v *auditHuman) Log(log *sources.AuditLog) error { return renderAudit(v.w, v.table, v.st, log) }

// auditLine is one row of the human audit view: an action or an attempt.
type auditLine struct {
	at   time.Time
	cols []string
}

// renderAudit writes the audit table; every value read from the audit
// tables is shown through ui.Safe.
func renderAudit(w io.Writer, t ui.TableOptions, st ui.Styles, log *sources.AuditLog) error {
	var lines []auditLine
	for _, a := range log.Actions {
		lines = append(lines, auditLine{at: a.CreatedAt, cols: []string{
			a.CreatedAt.Format("2006-01-02 15:04:05.000"), shortID(a.PlanID), fmt.Sprint(a.ActionIndex), ui.Safe(a.Action),
			styleOutcome(st, a.Outcome), ui.Safe(a.Pipeline) + "/" + ui.Safe(a.BizID), ui.Safe(a.Operator), imageSummary(a.AfterImage) + reasonSuffix(a.Reason)}})
	}
	for _, a := range log.Attempts {
		idx := fmt.Sprint(a.ActionIndex)
		if a.ActionIndex == 0 {
			idx = "-"
		}
		lines = append(lines, auditLine{at: a.CreatedAt, cols: []string{
			a.CreatedAt.Format("2006-01-02 15:04:05.000"), shortID(a.PlanID), idx, "(attempt)",
			styleOutcome(st, a.Outcome), ui.Safe(a.BizID), ui.Safe(a.Operator), detailSummary(a.Detail)}})
	}
	if len(lines) == 0 {
		_, err := fmt.Fprintln(w, "no audit rows")
		return err
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].at.Before(lines[j].at) })
	rows := make([][]string, len(lines))
	for i, l := range lines {
		rows[i] = l.cols
	}
	// The detail gives way first, then the operator; the plan id, the
	// action and the operation last.
	t = t.WithGives(ui.Give{Col: 7, Floor: 16}, ui.Give{Col: 6, Floor: 8}, ui.Give{Col: 5, Floor: 16})
	return ui.FitTable(w, t, []string{"AT", "PLAN", "#", "ACTION", "OUTCOME", "OPERATION", "OPERATOR", "DETAIL"}, rows)
}
