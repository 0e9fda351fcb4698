package tui

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/repair/plans"
)

// listModel is the list screen: the reconcile's targets and watch items.
type listModel struct {
	*env
	width, height int

	items      []Item
	visible    []int // indexes into items, filtered
	cursor     int   // index into visible
	offset     int   // first visible row shown
	sortCol    Column
	widths     columns              // what the items' values need (widths), per column
	perVerdict map[inspect.Code]int // the header's counts, made once per refresh
	filter     string
	filtering  bool // the filter line has the keyboard
	line       textinput.Model
	refreshing bool
	refreshed  time.Time
	summary    *reconcile.Summary
	// watchRead is when /targets last answered (--watch); zero: never.
	watchRead time.Time
	// watchNotReady is why the watch said it is not ready at that read.
	watchNotReady string
	listErr       string
	gen           int // refresh generation: a late answer of an older one is dropped
	status        string
}

// resize fits the list to a window of w×h.
func (m listModel) resize(w, h int) listModel {
	m.width, m.height = w, h
	return m.clampCursor()
}

// answer folds in the answer of a reconcile: its items (the selection
// kept on the same operation), its summary, or its error.
func (m listModel) answer(msg refreshMsg) listModel {
	m.refreshing = false
	now := m.opts.Now()
	m.listErr = ""
	switch {
	case m.opts.Watch != "" && msg.err != nil:
		// The last list stays, and says how old it is (docs/tui.md#watch).
		// How old the list is comes first: at 80 columns the reason may be
		// cut, never that. Whether the watch is ready is not known now.
		m.watchNotReady = ""
		m.listErr = "watch unreachable: " + plans.Shown(msg.err.Error())
		if !m.watchRead.IsZero() {
			m.listErr = fmt.Sprintf("list of %s (%s ago): ", m.watchRead.Format("15:04:05"), fmtDur(now.Sub(m.watchRead))) + m.listErr
		}
		return m
	case m.opts.Watch != "":
		m.watchRead, m.watchNotReady = now, msg.notReady
	case msg.err != nil:
		m.listErr = "refresh failed: " + plans.Shown(msg.err.Error())
	}
	m.refreshed = now
	if msg.sum != nil {
		m.summary = msg.sum
	}
	if msg.items != nil || msg.err == nil {
		var keep Item
		hadSel := m.cursor < len(m.visible)
		if hadSel {
			keep = m.items[m.visible[m.cursor]]
		}
		m.items = msg.items
		m.widths = widths(m.items)
		m.perVerdict = map[inspect.Code]int{}
		for _, it := range m.items {
			m.perVerdict[it.Verdict]++
		}
		sortItems(m.items, m.sortCol, m.ranks)
		m = m.refilter()
		if hadSel {
			for i, v := range m.visible {
				if m.items[v].BizID == keep.BizID && m.items[v].Pipeline == keep.Pipeline {
					m.cursor = i
					break
				}
			}
			m = m.clampCursor()
		}
	}
	return m
}

func (m listModel) refilter() listModel {
	m.visible = filterItems(m.items, m.filter, make([]int, 0, len(m.items)))
	return m.clampCursor()
}

func (m listModel) clampCursor() listModel {
	if m.cursor >= len(m.visible) {
		m.cursor = len(m.visible) - 1
	}
	if m.cursor < 0 {
		m.cursor = 0
	}
	rows := m.listRows()
	if m.cursor < m.offset {
		m.offset = m.cursor
	}
	if m.cursor >= m.offset+rows {
		m.offset = m.cursor - rows + 1
	}
	if m.offset < 0 {
		m.offset = 0
	}
	return m
}

// listRows is how many rows of the list fit.
func (m listModel) listRows() int {
	n := m.height - 4 - len(m.countLines())
	if n < 1 {
		return 1
	}
	return n
}

// key handles a key on the list (the filter line first, when open); an
// I/O or another screen is a request to the root model.
func (m listModel) key(k tea.KeyPressMsg) (listModel, tea.Cmd, request) {
	if m.filtering {
		m, cmd := m.filterKey(k)
		return m, cmd, request{}
	}
	switch {
	case key.Matches(k, m.keys.Up):
		m.cursor--
	case key.Matches(k, m.keys.Down):
		m.cursor++
	case key.Matches(k, m.keys.PageUp):
		m.cursor -= m.listRows()
	case key.Matches(k, m.keys.PageDown):
		m.cursor += m.listRows()
	case key.Matches(k, m.keys.Top):
		m.cursor = 0
	case key.Matches(k, m.keys.Bottom):
		m.cursor = len(m.visible) - 1
	case key.Matches(k, m.keys.Filter):
		m.filtering = true
		m.line.SetValue(m.filter)
		m.line.CursorEnd()
		m.line.Focus()
		return m, nil, request{}
	case key.Matches(k, m.keys.Sort):
		m.sortCol = (m.sortCol + 1) % numColumns
		m.items = slices.Clone(m.items) // the previous model's list stays as it was
		sortItems(m.items, m.sortCol, m.ranks)
		m = m.refilter()
		m.status = "sorted by " + m.sortCol.String()
	case key.Matches(k, m.keys.Refresh):
		return m, nil, request{kind: reqRefresh}
	case key.Matches(k, m.keys.Open):
		if m.cursor >= len(m.visible) {
			return m, nil, request{}
		}
		it := m.items[m.visible[m.cursor]]
		m.status = ""
		return m, nil, request{kind: reqOpen, bizID: it.BizID, pipeline: it.Pipeline}
	case key.Matches(k, m.keys.Back):
		if m.filter != "" {
			m.filter = ""
			m = m.refilter()
		}
	}
	return m.clampCursor(), nil, request{}
}

// filterKey edits the filter line: the list narrows as it is typed; enter
// keeps the filter, esc clears it.
func (m listModel) filterKey(k tea.KeyPressMsg) (listModel, tea.Cmd) {
	switch k.String() {
	case "enter":
		m.filtering = false
		m.line.Blur()
		return m, nil
	case "esc":
		m.filtering = false
		m.line.Blur()
		m.filter = ""
		return m.refilter(), nil
	}
	var cmd tea.Cmd
	m.line, cmd = m.line.Update(k)
	if v := m.line.Value(); v != m.filter {
		m.filter = v
		m.cursor, m.offset = 0, 0
		m = m.refilter()
	}
	return m, cmd
}

func (m listModel) title(spin string) string {
	if m.opts.Watch != "" {
		return m.watchTitle(spin)
	}
	scope := "every pipeline"
	if m.opts.Pipeline != "" {
		scope = "pipeline " + shown(m.opts.Pipeline)
	}
	// Every filter in force is named: an operation younger than
	// --older-than is not listed as stuck (docs/tui.md).
	t := fmt.Sprintf("opctl tui · %s · since %s · older than %s · every %s", scope, fmtDur(m.opts.Since), fmtDur(m.opts.OlderThan), fmtDur(m.opts.Refresh))
	right := ""
	switch {
	case m.refreshing:
		right = spin + " refreshing"
	case !m.refreshed.IsZero():
		right = "read " + m.refreshed.Format("15:04:05")
	}
	return m.titleLine(t, right)
}

// titleLine is the title t with the console's incident and READONLY, and
// right (the refresh state) at the right edge.
func (m listModel) titleLine(t, right string) string {
	if m.opts.Incident != "" {
		t += " · incident " + shown(m.opts.Incident)
	}
	if m.opts.ReadOnly {
		t += " · READONLY"
	}
	if room := m.width - ansi.StringWidth(right) - 1; right != "" && ansi.StringWidth(t) > room && room > 10 {
		// The refresh state stays in view; the title gives way.
		t = ansi.Truncate(t, room, "…")
	}
	return m.st.Title.Render(t) + pad(m.width-ansi.StringWidth(t)-ansi.StringWidth(right)) + right
}

// counts is the header's count per verdict, most urgent first, on one
// line (countLines wraps it to the window).
func (m listModel) counts() string {
	var b strings.Builder
	for _, t := range m.countTokens() {
		b.WriteString(t.sep + t.text)
	}
	return b.String()
}

// countToken is one piece of the counts line and the separator before it:
// the line wraps between pieces, never inside a verdict's name.
type countToken struct{ sep, text string }

func (m listModel) countTokens() []countToken {
	n := m.perVerdict
	var parts []countToken
	for _, c := range inspect.Precedence() {
		if n[c] > 0 {
			sep := "  "
			if len(parts) == 0 {
				sep = " · "
			}
			parts = append(parts, countToken{sep, m.st.Severity(inspect.SeverityOf(c), string(c)) + " " + fmt.Sprint(n[c])})
		}
	}
	head := fmt.Sprintf("%d operation(s)", len(m.items))
	if m.filter != "" {
		head += fmt.Sprintf(", %d match /%s", len(m.visible), shown(m.filter))
	}
	var uncovered []countToken
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
		for i, u := range unc {
			if i == 0 {
				uncovered = append(uncovered, countToken{" · ", "not covered: " + u})
			} else {
				uncovered = append(uncovered, countToken{", ", u})
			}
		}
	}
	out := []countToken{{"", head}}
	switch {
	case len(parts) > 0:
		out = append(out, parts...)
		return append(out, uncovered...)
	case !m.read() && m.listErr != "":
		return append(out, countToken{" · ", "not read: see the status line"})
	case !m.read():
		return append(out, countToken{" · ", "reading…"})
	}
	out = append(out, countToken{" · ", "nothing to act on or watch"})
	return append(out, uncovered...)
}

// maxCountLines bounds how many lines the counts may take from the list.
const maxCountLines = 3

// countLines is the counts line wrapped to the window's width between its
// pieces, so that no verdict's name and no uncovered step is cut at 80
// columns; a piece wider than the window alone is cut with …, and the
// last allowed line ends with … when more did not fit.
func (m listModel) countLines() []string {
	toks := m.countTokens()
	if m.width <= 0 {
		return []string{m.counts()}
	}
	var lines []string
	cur := ""
	for i, t := range toks {
		piece := t.sep + t.text
		if cur != "" && ansi.StringWidth(cur+piece) > m.width {
			if len(lines) == maxCountLines-1 {
				cur = ansi.Truncate(cur+piece, m.width, "…")
				if i < len(toks)-1 || ansi.StringWidth(cur) >= m.width {
					cur = ansi.Truncate(cur, m.width-1, "") + "…"
				}
				return append(lines, cur)
			}
			lines, cur = append(lines, cur), ""
			piece = strings.TrimLeft(t.sep, " ·,") + t.text
		}
		cur += piece
		if ansi.StringWidth(cur) > m.width {
			cur = ansi.Truncate(cur, m.width, "…")
		}
	}
	return append(lines, cur)
}

// columns share the window's width by what each column must show: the
// verdict, the pipeline, the age and the position whole (a verdict or a
// pipeline cut would make two rows look alike: COMPLETE_UNCOMMITTED,
// fulfilment_eu and fulfilment_us); the id, the step and the owner share
// the rest (the id cut first, with …, when it must be: the detail shows it
// whole).
func (m listModel) columns() columns {
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
		// The id needs less than it got: the step, then the owner, take
		// the rest.
		c.id = want.id
		more := min(spare, want.step-c.step)
		c.step += more
		c.owner = min(want.owner, c.owner+spare-more)
	}
	return c
}

func (m listModel) header(c columns) string {
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

func (m listModel) row(it Item, c columns, selected bool) string {
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

// view is the list screen, spin the spinner's frame and foot the go-to
// line when open ("": the filter line or the key hints).
func (m listModel) view(spin, foot string) []string {
	c := m.columns()
	lines := append([]string{m.title(spin)}, m.countLines()...)
	lines = append(lines, m.header(c))
	top := len(lines)
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
		case m.opts.Watch != "" && m.read():
			lines = append(lines, m.st.Dim.Render("  the watch flags no operation now; : opens any id"))
		case m.summary != nil:
			lines = append(lines, m.st.Dim.Render("  no target and nothing to watch in the last "+fmtDur(m.opts.Since)+"; : opens any id"))
		}
	}
	for len(lines) < top+rows {
		lines = append(lines, "")
	}
	switch {
	case foot != "":
	case m.filtering:
		foot = filterPrompt + m.line.View()
	default:
		foot = m.hints(m.width, m.keys.ShortHelp())
	}
	return append(lines, m.statusLine(), foot)
}

// statusLine is the one line of what went wrong or what was done: a
// failed refresh, refused or failed checks, unreachable sources, the last
// key's answer.
func (m listModel) statusLine() string {
	var parts []string
	if m.status != "" {
		parts = append(parts, m.status)
	}
	if m.listErr != "" {
		parts = append(parts, m.listErr)
	}
	if m.watchNotReady != "" {
		// Its flags may be behind: a source it reads does not answer.
		parts = append(parts, "watch "+shown(m.watchNotReady))
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

// read reports whether a list was read: a reconcile's summary, or a
// watch's /targets.
func (m listModel) read() bool { return m.summary != nil || !m.watchRead.IsZero() }

// watchTitle is the title of a list read from a running watch: its URL
// and the refresh, the time of the last answer on the right.
func (m listModel) watchTitle(spin string) string {
	right := ""
	switch {
	case m.refreshing:
		right = spin + " reading"
	case !m.watchRead.IsZero():
		right = "read " + m.watchRead.Format("15:04:05")
	}
	return m.titleLine(fmt.Sprintf("opctl tui · watch %s · every %s", shown(m.opts.Watch), fmtDur(m.opts.Refresh)), right)
}
