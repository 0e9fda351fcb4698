package tui

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/tui/render"
)

// shown is the one rule of human output for every value the console did
// not write itself (docs/where.md#values-in-human-output).
func shown(s string) string { return plans.Shown(s) }

// View renders the whole screen in the alternate screen, the terminal's
// cursor on the line of input that has the keyboard, if any.
func (m Model) View() tea.View {
	content, cur := m.draw()
	v := tea.NewView(content)
	v.AltScreen = true
	v.Cursor = cur
	return v
}

// draw is the whole screen: exactly height lines, none wider than the
// window, and where the cursor is (nil: hidden).
func (m Model) draw() (out string, cur *tea.Cursor) {
	defer func() {
		if r := recover(); r != nil {
			out, cur = sources.PanicMessage(r)+"\npress q to quit", nil
		}
	}()
	var lines []string
	switch {
	case m.showHelp:
		lines = m.helpView()
	case m.screen == screenDetail:
		lines = m.detailView()
	default:
		lines = m.listView()
	}
	out = m.fit(lines)
	switch m.in {
	case inputFilter, inputGoTo:
		if c := m.line.Cursor(); c != nil {
			c.Y = max(m.height, 1) - 1
			c.X += ansi.StringWidth(m.linePrompt())
			cur = c
		}
	case inputConfirm, inputAttest:
		if c := m.form[m.formAt].Cursor(); c != nil {
			_, at := m.formView()
			c.Y = 2 + at[m.formAt] // below the detail's two-line head
			cur = c
		}
	}
	if cur != nil && (cur.Y >= max(m.height, 1) || cur.X >= m.width) {
		cur = nil
	}
	return out, cur
}

// fit cuts lines to the window and pads it to its height.
func (m Model) fit(lines []string) string {
	h := m.height
	if h < 1 {
		h = 1
	}
	if len(lines) > h {
		lines = lines[:h]
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	for i, l := range lines {
		if ansi.StringWidth(l) > m.width {
			lines[i] = ansi.Truncate(l, m.width, "…")
		}
	}
	return strings.Join(lines, "\n")
}

// --- list -----------------------------------------------------------------

func (m Model) title() string {
	scope := "every pipeline"
	if m.opts.Pipeline != "" {
		scope = "pipeline " + shown(m.opts.Pipeline)
	}
	// Every filter in force is named: an operation younger than
	// --older-than is not listed as stuck (docs/tui.md).
	t := fmt.Sprintf("opctl tui · %s · since %s · older than %s · every %s", scope, fmtDur(m.opts.Since), fmtDur(m.opts.OlderThan), fmtDur(m.opts.Refresh))
	if m.opts.Incident != "" {
		t += " · incident " + shown(m.opts.Incident)
	}
	if m.opts.ReadOnly {
		t += " · READONLY"
	}
	right := ""
	switch {
	case m.refreshing:
		right = m.spin.View() + " refreshing"
	case !m.refreshed.IsZero():
		right = "read " + m.refreshed.Format("15:04:05")
	}
	if room := m.width - ansi.StringWidth(right) - 1; right != "" && ansi.StringWidth(t) > room && room > 10 {
		// The refresh state stays in view; the title gives way.
		t = ansi.Truncate(t, room, "…")
	}
	return m.st.Title.Render(t) + pad(m.width-ansi.StringWidth(t)-ansi.StringWidth(right)) + right
}

func pad(n int) string {
	if n < 1 {
		return " "
	}
	return strings.Repeat(" ", n)
}

// counts is the header's count per verdict, most urgent first.
func (m Model) counts() string {
	n := map[inspect.Code]int{}
	for _, it := range m.items {
		n[it.Verdict]++
	}
	var parts []string
	for _, c := range inspect.Precedence() {
		if n[c] > 0 {
			parts = append(parts, m.st.Severity(inspect.SeverityOf(c), string(c))+" "+fmt.Sprint(n[c]))
		}
	}
	head := fmt.Sprintf("%d operation(s)", len(m.items))
	if m.filter != "" {
		head += fmt.Sprintf(", %d match /%s", len(m.visible), shown(m.filter))
	}
	uncovered := ""
	if m.summary != nil {
		// What no check could reach is said, not hidden
		// (docs/reconcile.md#steps-without-a-scan-block). orphans reaches
		// no step without a scan block by its nature (the duplicates check
		// covers those): only what the other checks could not reach is
		// named.
		var unc []string
		for _, c := range m.summary.Checks {
			if c.Check == reconcile.CheckOrphans {
				continue
			}
			for _, u := range c.Uncovered {
				step, _, _ := strings.Cut(u, ":")
				if s := shown(c.Pipeline) + "/" + shown(step); !slices.Contains(unc, s) {
					unc = append(unc, s)
				}
			}
		}
		if len(unc) > 0 {
			uncovered = " · not covered: " + strings.Join(unc, ", ")
		}
	}
	switch {
	case len(parts) > 0:
		return head + " · " + strings.Join(parts, "  ") + uncovered
	case m.summary == nil && m.listErr != "":
		return head + " · not read: see the status line"
	case m.summary == nil:
		return head + " · reading…"
	}
	return head + " · nothing to act on or watch" + uncovered
}

// columns are the list's column widths for the window's width.
type columns struct{ id, pipeline, verdict, step, age, pos, owner, gap int }

// The list's column names, in order; a column's header is its name and,
// when the list is sorted by it, ▾.
var (
	columnOrder  = [...]Column{ColBizID, ColPipeline, ColVerdict, ColStep, ColAge, ColPosition, ColOwner}
	columnHeader = [...]string{"BIZ_ID", "PIPELINE", "VERDICT", "STEP", "AGE", "PART/OFFSET", "OWNER"}
)

func (c columns) list() []int {
	return []int{c.id, c.pipeline, c.verdict, c.step, c.age, c.pos, c.owner}
}

// widths are the widths the list's values need, column by column: what
// each column would take to show every row whole.
func widths(items []Item) columns {
	h := func(i int) int { return len(columnHeader[i]) + 1 } // the name and ▾
	w := columns{id: h(0), pipeline: h(1), verdict: h(2), step: h(3), age: h(4), pos: h(5), owner: h(6), gap: 2}
	for _, it := range items {
		w.id = max(w.id, ansi.StringWidth(shown(it.BizID)))
		w.pipeline = max(w.pipeline, ansi.StringWidth(shown(it.Pipeline)))
		w.verdict = max(w.verdict, len(verdictText(it)))
		w.step = max(w.step, ansi.StringWidth(shown(it.Step)))
		w.age = max(w.age, len(ageText(it)))
		w.pos = max(w.pos, len(posText(it)))
		w.owner = max(w.owner, ansi.StringWidth(shown(it.Owner)))
	}
	return w
}

// Column widths the list never goes below: an id, a step and an owner may
// be cut (with …) to this, never further.
const (
	minID    = 10
	minStep  = 6
	minOwner = 5
)

// columns share the window's width by what each column must show: the
// verdict, the pipeline, the age and the position whole (a verdict or a
// pipeline cut would make two rows look alike: COMPLETE_UNCOMMITTED,
// fulfilment_eu and fulfilment_us); the id, the step and the owner share
// the rest (the id cut first, with …, when it must be: the detail shows it
// whole).
func (m Model) columns() columns {
	want := m.widths
	c := want
	rest := m.width - 6*c.gap - want.pipeline - want.verdict - want.age - want.pos // six gaps between seven columns
	if rest >= want.id+want.step+want.owner {
		return c
	}
	c.gap = 1 // tighter before anything is cut
	rest += 6
	// Not enough room: the id gives way first (the detail shows it
	// whole), down to its minimum, then the owner, then the step.
	c.step = min(want.step, max(minStep, rest-minID-minOwner))
	c.owner = min(want.owner, max(minOwner, rest-minID-c.step))
	c.id = max(min(minID, want.id), rest-c.step-c.owner)
	if spare := c.id - want.id; spare > 0 {
		c.id = want.id
		c.owner = min(want.owner, c.owner+spare)
	}
	return c
}

func cell(s string, w int) string {
	if ansi.StringWidth(s) > w {
		return ansi.Truncate(s, w, "…")
	}
	return s + strings.Repeat(" ", w-ansi.StringWidth(s))
}

func (m Model) header(c columns) string {
	ws := c.list()
	cells := make([]string, len(ws))
	for i, n := range columnHeader {
		if columnOrder[i] == m.sortCol {
			n += "▾"
		}
		cells[i] = cell(n, ws[i])
	}
	return m.st.Header.Render(strings.TrimRight(strings.Join(cells, strings.Repeat(" ", c.gap)), " "))
}

// posText is a row's partition/offset ("-" unknown).
func posText(it Item) string {
	if it.Partition < 0 {
		return "-"
	}
	if it.Offset < 0 {
		return fmt.Sprint(it.Partition) + "/?"
	}
	return fmt.Sprint(it.Partition) + "/" + fmt.Sprint(it.Offset)
}

// ageText is a row's age ("-" unknown).
func ageText(it Item) string {
	if it.Age < 0 {
		return "-"
	}
	return fmtDur(it.Age)
}

// verdictText is a row's verdict, starred when a source was not read.
func verdictText(it Item) string {
	if it.Partial {
		return string(it.Verdict) + "*"
	}
	return string(it.Verdict)
}

func (m Model) row(it Item, c columns, selected bool) string {
	pos, age, verdict := posText(it), ageText(it), verdictText(it)
	owner := shown(it.Owner)
	if owner == "" {
		owner = "-"
	}
	cells := []string{cell(shown(it.BizID), c.id), cell(shown(it.Pipeline), c.pipeline), cell(verdict, c.verdict),
		cell(orDash(shown(it.Step)), c.step), cell(age, c.age), cell(pos, c.pos), cell(owner, c.owner)}
	if selected {
		return m.st.Selected.Render(strings.Join(cells, strings.Repeat(" ", c.gap)))
	}
	// Only the verdict is coloured: the id stays plain to be read and copied.
	cells[2] = m.st.Severity(it.Severity, cells[2])
	return strings.Join(cells, strings.Repeat(" ", c.gap))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (m Model) listView() []string {
	c := m.columns()
	lines := []string{m.title(), m.counts(), m.header(c)}
	rows := m.listRows()
	end := m.offset + rows
	if end > len(m.visible) {
		end = len(m.visible)
	}
	for i := m.offset; i < end; i++ {
		lines = append(lines, m.row(m.items[m.visible[i]], c, i == m.cursor))
	}
	if len(m.visible) == 0 {
		switch {
		case m.filter != "":
			lines = append(lines, m.st.Dim.Render("  no operation matches /"+shown(m.filter)+" (esc clears the filter)"))
		case m.summary != nil:
			lines = append(lines, m.st.Dim.Render("  no target and nothing to watch in the last "+fmtDur(m.opts.Since)+"; : opens any id"))
		}
	}
	for len(lines) < 3+rows {
		lines = append(lines, "")
	}
	return append(lines, m.statusLine(), m.bottomLine(m.keys.ShortHelp()))
}

// statusLine is the one line of what went wrong or what was done: a
// failed refresh, refused or failed checks, unreachable sources, the last
// key's answer.
func (m Model) statusLine() string {
	var parts []string
	if m.status != "" {
		parts = append(parts, m.status)
	}
	if m.listErr != "" {
		parts = append(parts, m.listErr)
	}
	if s := m.summary; s != nil {
		for _, c := range s.Checks {
			if c.Status == "refused" || c.Status == "failed" {
				parts = append(parts, fmt.Sprintf("%s/%s %s: %s", shown(c.Pipeline), shown(c.Check), c.Status, shown(c.Reason)))
			}
		}
		if s.Partial {
			why := make([]string, len(s.PartialWhy))
			for i, w := range s.PartialWhy {
				why[i] = shown(w)
			}
			parts = append(parts, "PARTIAL: "+strings.Join(why, "; "))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return m.st.Status.Render(strings.Join(parts, " · "))
}

// bottomLine is the input line when one is open, else the key hints.
func (m Model) bottomLine(hints []key.Binding) string {
	if p := m.linePrompt(); p != "" {
		return p + m.line.View()
	}
	h := m.help
	if m.width < 100 {
		h.ShortSeparator = "  "
	}
	return h.ShortHelpView(hints)
}

// linePrompt is the prompt of the open input line ("" when none is open).
func (m Model) linePrompt() string {
	switch m.in {
	case inputFilter:
		return "/"
	case inputGoTo:
		return "go to biz_id: "
	}
	return ""
}

// --- help -----------------------------------------------------------------

func (m Model) helpView() []string {
	h := m.help
	h.SetWidth(m.width - 2)
	// Each column of bubbles/help's full view headed by its screen (a
	// binding no key matches).
	var groups [][]key.Binding
	for i, g := range m.keys.FullHelp() {
		title := key.NewBinding(key.WithKeys(""), key.WithHelp([]string{"LIST", "DETAIL", "ANYWHERE"}[i], ""))
		groups = append(groups, append([]key.Binding{title}, g...))
	}
	lines := []string{m.st.Title.Render("opctl tui — keys (any key closes this)"), ""}
	for _, l := range strings.Split(h.FullHelpView(groups), "\n") {
		lines = append(lines, "  "+l)
	}
	return append(lines, "", m.st.Dim.Render("apply is disabled by --readonly, a live lease, or a plan that needs an attestation (docs/tui.md)"))
}

// --- detail ---------------------------------------------------------------

func (m Model) detailView() []string {
	d := m.detail
	var head []string
	switch {
	case d == nil:
		head = []string{"", ""}
	case m.loading && d.op == nil:
		head = []string{m.st.Bold.Render(shown(d.bizID)) + "  " + m.spin.View() + " reading…", ""}
	case d.op == nil:
		head = []string{m.st.Bold.Render(shown(d.bizID)), m.st.Error.Render(d.err)}
	default:
		r := d.op.Report
		h := render.Head(m.st, r)
		if m.loading {
			h += "  " + m.spin.View()
		}
		if d.busy != "" {
			h += "  " + m.spin.View() + " " + d.busy + "…"
		}
		head = []string{h, shown(r.Verdict.Summary)}
	}
	var body []string
	switch m.in {
	case inputConfirm, inputAttest:
		body, _ = m.formView()
	default:
		body = strings.Split(m.vp.View(), "\n")
	}
	for len(body) < m.vp.Height() {
		body = append(body, "")
	}
	status := m.status
	if status == "" && d != nil && d.err != "" && d.op != nil {
		status = d.err
	}
	if status != "" {
		status = m.st.Status.Render(status)
	}
	foot := m.bottomLine(m.keys.detailHelp(m.opts.ReadOnly))
	if m.opts.ReadOnly && m.in == inputNone {
		foot = "READONLY  " + foot
	}
	return append(append(head, body...), status, foot)
}

// formView is the confirmation or attestation form, and the lines its two
// fields are drawn on.
func (m Model) formView() (lines []string, at [2]int) {
	d := m.detail
	if m.in == inputConfirm {
		lines = append(lines, m.st.Title.Render("APPLY"), "",
			fmt.Sprintf("Apply plan %s (%d action(s)) to %s in pipeline %s?", d.plan.Short(), len(d.plan.Actions), shown(d.plan.BizID), shown(d.plan.Pipeline)),
			"Every guard is re-checked first (repair apply); nothing runs if one fails.")
		if m.opts.Incident != "" {
			lines = append(lines, "Incident: "+shown(m.opts.Incident)+" (recorded in the plan and every audit row)")
		}
	} else {
		lines = append(lines, m.st.Title.Render("ATTEST"), "",
			"The plan has a manual action: do it by hand first, then say what was done.")
		if d.needOutcome {
			lines = append(lines, "Say what the downstream team answered about the unknown call: applied or absent.")
		}
	}
	lines = append(lines, "", m.form[0].View())
	at[0], at[1] = len(lines)-1, len(lines)
	if m.in == inputConfirm || d.needOutcome {
		lines = append(lines, m.form[1].View())
	}
	if m.formWhy != "" {
		lines = append(lines, "", m.st.Error.Render(m.formWhy))
	}
	return append(lines, "", m.st.Dim.Render("enter next/submit · tab switch field · esc cancel")), at
}

// detailBody is the viewport's content for the current pane, wrapped to
// the window.
func (m Model) detailBody() string {
	d := m.detail
	if d == nil {
		return ""
	}
	var b strings.Builder
	switch m.pane {
	case panePlan:
		m.planBody(&b, d)
	case paneDryRun:
		m.resultBody(&b, d.dry, d.dryErr, true)
	case paneResult:
		m.resultBody(&b, d.result, d.resultErr, false)
		if d.op != nil {
			b.WriteString("\n" + m.st.Title.Render("NOW") + "  " + m.st.Severity(d.op.Report.Verdict.Severity, string(d.op.Report.Verdict.Code)) + "  " + shown(d.op.Report.Verdict.Summary) + "\n")
			m.reportBody(&b, d)
		}
	case paneAudit:
		m.auditBody(&b, d)
	default:
		m.reportBody(&b, d)
	}
	w := m.width
	if w < 20 {
		w = 20
	}
	return ansi.Wrap(strings.TrimRight(b.String(), "\n"), w, " ")
}

func (m Model) section(b *strings.Builder, title string) {
	b.WriteString("\n" + m.st.Title.Render(title) + "\n")
}

// reportBody is the where report of the operation shown, drawn by opctl's
// one where renderer as the console's detail (render.Report).
func (m Model) reportBody(b *strings.Builder, d *detail) {
	if d.op == nil {
		if d.err != "" {
			b.WriteString(m.st.Error.Render(d.err) + "\n")
		}
		return
	}
	if len(d.others) > 0 {
		b.WriteString(m.st.Watch.Render("also known to pipeline(s) "+shownJoin(d.others)+": to see it there, run opctl tui --pipeline NAME and go to the id") + "\n")
	}
	render.Report(b, d.op.Report, render.WhereOptions{Styles: m.st, Console: true, Width: m.width})
}

func shownJoin(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = shown(s)
	}
	return strings.Join(out, ", ")
}

func (m Model) planBody(b *strings.Builder, d *detail) {
	m.section(b, "PLAN")
	if d.planErr != "" {
		b.WriteString(m.st.Error.Render("no plan: ") + d.planErr + "\n")
		if d.needAttest {
			b.WriteString("\nPress t to enter the attestation" + map[bool]string{true: " and the downstream's outcome", false: ""}[d.needOutcome] + ", then the plan is built again.\n")
		}
		return
	}
	if d.plan == nil {
		return
	}
	if d.needAttest && d.attest == "" {
		b.WriteString(m.st.Watch.Render("This plan has a manual action: do it by hand, then press t to attest what was done. Dry run and apply are disabled until then.") + "\n\n")
	}
	_ = plans.Render(b, d.plan, plans.RenderOptions{Colorize: m.colorize})
	b.WriteString("\n" + m.st.Dim.Render("d dry run · a apply (asks for the biz_id and a reason) · esc back") + "\n")
}

func (m Model) colorize(class, text string) string {
	switch class {
	case plans.ClassTitle:
		return m.st.Bold.Render(text)
	case plans.ClassAdd:
		return m.st.OK.Render(text)
	case plans.ClassRemove, plans.ClassManual:
		return m.st.Action.Render(text)
	case plans.ClassChange:
		return m.st.Watch.Render(text)
	case plans.ClassGuard, plans.ClassDim:
		return m.st.Dim.Render(text)
	}
	return text
}

func (m Model) resultBody(b *strings.Builder, res *repair.Result, errText string, dry bool) {
	title := "APPLY"
	if dry {
		title = "DRY RUN (each SQL action in a transaction that was rolled back; nothing sent)"
	}
	m.section(b, title)
	if res != nil {
		fmt.Fprintf(b, "plan %.12s: %s, %d/%d action(s)", res.PlanID, m.outcome(res.Outcome), res.Applied+res.Previously, res.Total)
		if res.Previously > 0 {
			fmt.Fprintf(b, " (%d by an earlier apply)", res.Previously)
		}
		b.WriteString("\n")
		for _, a := range res.Actions {
			fmt.Fprintf(b, "  %d. [%s] %s  %s\n", a.Index, a.Type, m.outcome(a.Outcome), shown(a.Summary))
			for _, s := range a.Statements {
				fmt.Fprintf(b, "       %d row(s): %s\n", s.Rows, shown(strings.Join(strings.Fields(s.SQL), " ")))
			}
			if p := a.Published; p != nil {
				if p.Offset >= 0 {
					fmt.Fprintf(b, "       written to %s partition %d offset %d\n", shown(p.Topic), p.Partition, p.Offset)
				} else {
					fmt.Fprintf(b, "       would be written to %s partition %d\n", shown(p.Topic), p.Partition)
				}
			}
			if a.Detail != "" {
				b.WriteString("       " + shown(a.Detail) + "\n")
			}
		}
		for _, c := range res.Stale {
			b.WriteString("  stale: " + shown(c.String()) + "\n")
		}
		if res.Refused != "" {
			b.WriteString(m.st.Error.Render("refused: ") + shown(res.Refused) + "\n")
		}
	}
	if errText != "" && (res == nil || res.Refused == "") {
		b.WriteString(m.st.Error.Render("error: ") + errText + "\n")
	}
}

func (m Model) outcome(o repair.Outcome) string {
	switch o {
	case repair.OutcomeApplied, repair.OutcomePublished, repair.OutcomeAlreadyApplied:
		return m.st.OK.Render(string(o))
	case repair.OutcomeWouldApply:
		return m.st.Watch.Render("would apply")
	case repair.OutcomeRefused, repair.OutcomeFailed:
		return m.st.Action.Render(string(o))
	}
	return string(o)
}

func (m Model) auditBody(b *strings.Builder, d *detail) {
	m.section(b, "AUDIT  "+shown(d.bizID))
	if d.auditErr != "" {
		b.WriteString(m.st.Error.Render("error: ") + d.auditErr + "\n")
		return
	}
	if d.audit == nil {
		return
	}
	type ev struct {
		at   time.Time
		text string
	}
	var evs []ev
	for _, a := range d.audit.Actions {
		evs = append(evs, ev{a.CreatedAt, fmt.Sprintf("%s  plan %.12s #%d %-17s %-10s %s: %s", fmtTS(a.CreatedAt), a.PlanID, a.ActionIndex, a.Action, a.Outcome, shown(a.Operator), shown(a.Reason))})
	}
	for _, a := range d.audit.Attempts {
		evs = append(evs, ev{a.CreatedAt, fmt.Sprintf("%s  plan %.12s #%d attempt %-9s %s", fmtTS(a.CreatedAt), a.PlanID, a.ActionIndex, a.Outcome, shown(a.Operator))})
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	if len(evs) == 0 {
		b.WriteString("  nothing in the audit for this id\n")
	}
	for _, e := range evs {
		b.WriteString("  " + e.text + "\n")
	}
}

func fmtTS(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") }

// fmtDur is a short duration: 45s, 12m, 3h, 2d.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}
