package tui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
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
	foot := "" // the screen's own, unless the go-to line is open
	if m.goingTo {
		foot = goToPrompt + m.goTo.View()
	}
	var lines []string
	switch {
	case m.showHelp:
		lines = m.helpView()
	case m.screen == screenDetail:
		lines = m.detail.view(m.spin.View(), foot)
	default:
		lines = m.list.view(m.spin.View(), foot)
	}
	out = m.fit(lines)
	switch in := m.input(); {
	case in == inputGoTo:
		if c := m.goTo.Cursor(); c != nil {
			c.Y, c.X = max(m.height, 1)-1, c.X+ansi.StringWidth(goToPrompt)
			cur = c
		}
	case in == inputFilter:
		if c := m.list.line.Cursor(); c != nil {
			c.Y, c.X = max(m.height, 1)-1, c.X+ansi.StringWidth(filterPrompt)
			cur = c
		}
	case in == inputConfirm || in == inputAttest:
		if c := m.detail.form[m.detail.formAt].Cursor(); c != nil {
			_, at := m.detail.formView()
			c.Y = 2 + at[m.detail.formAt] // below the detail's two-line head
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

func pad(n int) string {
	if n < 1 {
		return " "
	}
	return strings.Repeat(" ", n)
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

func cell(s string, w int) string {
	if ansi.StringWidth(s) > w {
		return ansi.Truncate(s, w, "…")
	}
	return s + strings.Repeat(" ", w-ansi.StringWidth(s))
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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// hints are the key hints of a screen's foot (bubbles/help), width wide.
func (e *env) hints(width int, bs []key.Binding) string {
	h := e.help
	h.SetWidth(width)
	if width < 100 {
		h.ShortSeparator = "  "
	}
	return h.ShortHelpView(bs)
}

// The prompts of the input lines.
const (
	filterPrompt = "/"
	goToPrompt   = "go to biz_id: "
)

// --- help -----------------------------------------------------------------

// --- detail ---------------------------------------------------------------

func shownJoin(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = shown(s)
	}
	return strings.Join(out, ", ")
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
