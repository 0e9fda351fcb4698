package tui

import (
	"context"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/spinner"
	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
)

// screen is what the console shows.
type screen int

const (
	screenList screen = iota
	screenDetail
)

// input is the line or form that has the keyboard, if any.
type input int

const (
	inputNone input = iota
	inputFilter
	inputGoTo
	inputConfirm
	inputAttest
)

// env is what every screen of the console reads and none changes: the
// context, the options, the key map, the styles and the key help. New
// makes it once; the screens and the root model share it.
type env struct {
	ctx   context.Context
	opts  Options
	keys  KeyMap
	st    Styles
	ranks map[inspect.Code]int
	help  help.Model
}

// Model is the console: the root model over its screens — the list
// (listModel), the detail with the repair flow (detailModel, its forms in
// form.go) and the help (help.go) — and the go-to line, which works on
// every screen. Its methods are pure: every read and write is a tea.Cmd
// (commands.go) whose message Update hands to the screen it is for.
type Model struct {
	*env
	width, height int

	screen   screen
	list     listModel
	detail   detailModel
	showHelp bool

	// goTo is the go-to line (':'), open when goingTo.
	goTo    textinput.Model
	goingTo bool

	spin  spinner.Model
	crash error
}

// New returns the console's model; Run runs it.
func New(ctx context.Context, o Options, st Styles) Model {
	if o.Since <= 0 {
		o.Since = DefaultSince
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
		if o.Watch != "" {
			o.Refresh = DefaultWatchRefresh
		}
	}

	if o.Now == nil {
		o.Now = time.Now
	}
	keys := DefaultKeyMap()
	if o.Keys != nil {
		keys = *o.Keys
	}
	e := &env{ctx: ctx, opts: o, keys: keys, st: st, ranks: rank(), help: newHelp(st)}
	m := Model{env: e, width: 80, height: 24, spin: spinner.New(spinner.WithSpinner(spinner.Line)),
		goTo:   newInput(st, "", sources.MaxBizID),
		list:   listModel{env: e, width: 80, height: 24, widths: widths(nil), refreshing: true, line: newInput(st, "", 256)},
		detail: detailModel{env: e, width: 80, height: 24, vp: viewport.New(viewport.WithWidth(80), viewport.WithHeight(18))}}
	for i := range m.detail.form {
		m.detail.form[i] = newInput(st, "", plans.MaxReason)
	}
	if o.BizID != "" {
		m.screen = screenDetail
		m.detail = m.detail.openDetail(o.BizID, o.Pipeline)
	}
	return m
}

// newInput is a line of input drawn with the terminal's own cursor (View
// places it), in the console's colours or plain.
func newInput(st Styles, prompt string, limit int) textinput.Model {
	in := textinput.New()
	in.Prompt, in.CharLimit = prompt, limit
	in.SetVirtualCursor(false)
	if !st.Color {
		in.SetStyles(textinput.Styles{Cursor: textinput.CursorStyle{Shape: tea.CursorBlock, Blink: true}})
	}
	return in
}

// newHelp is the key help (bubbles/help) in the console's styles.
func newHelp(st Styles) help.Model {
	h := help.New()
	h.ShortSeparator = " · "
	h.Styles = help.Styles{ShortKey: st.Bold, ShortDesc: st.Dim, ShortSeparator: st.Dim, Ellipsis: st.Dim,
		FullKey: st.Bold, FullDesc: lipgloss.NewStyle(), FullSeparator: st.Dim}
	return h
}

// Init starts the first refresh (and the detail asked for on the command
// line) and the spinner.
func (m Model) Init() tea.Cmd {
	cmds := []tea.Cmd{m.reconcileCmd(m.list.gen), m.spin.Tick}
	if d := m.detail.d; d != nil {
		cmds = append(cmds, m.whereCmd(d.bizID, d.pipeline))
	}
	return tea.Batch(cmds...)
}

// request is what a screen's key asks of the root model: a command that
// reads or writes (commands.go), or another screen.
type request struct {
	kind            requestKind
	bizID, pipeline string
	d               *detail
	reason          string
}

type requestKind int

const (
	reqNone    requestKind = iota
	reqRefresh             // read the list again now
	reqOpen                // open the detail of bizID in pipeline
	reqBack                // back to the list
	reqWhere               // triage the detail's operation again
	reqPlan                // build d's plan
	reqDryRun              // dry-run d's plan
	reqApply               // apply d's plan under reason
	reqAudit               // read d's audit
)

// Messages of the commands.
type (
	tickMsg    struct{ gen int }
	refreshMsg struct {
		gen   int
		items []Item
		sum   *reconcile.Summary
		err   error
		// notReady is why the watch read is not ready (--watch).
		notReady string
	}
	whereMsg struct {
		bizID, pipeline string
		triage          *triage.Result
		err             error
	}
	planMsg struct {
		bizID       string
		plan        *plans.Plan
		err         error
		needAttest  bool
		needOutcome bool
	}
	applyMsg struct {
		bizID  string
		dry    bool
		planID string // the plan run: the reviewed one, under the typed reason for a real apply
		res    *repair.Result
		err    error
		triage *triage.Result // the re-triage after a real apply
		terr   error
	}
	auditMsg struct {
		bizID string
		log   *sources.AuditLog
		err   error
	}
	crashMsg struct{ err error }
)

// Update folds a message into the model. A panic is recovered: the
// console then quits cleanly and Run returns it (docs/tui.md).
func (m Model) Update(msg tea.Msg) (model tea.Model, cmd tea.Cmd) {
	defer func() {
		if r := recover(); r != nil {
			m.crash = &sources.InternalError{Value: r}
			model, cmd = m, tea.Quit
		}
	}()
	return m.update(msg)
}

func (m Model) update(msg tea.Msg) (Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.list = m.list.resize(msg.Width, msg.Height)
		m.detail = m.detail.resize(msg.Width, msg.Height)
		return m, nil
	case spinner.TickMsg:
		var cmd tea.Cmd
		m.spin, cmd = m.spin.Update(msg)
		return m, cmd
	case crashMsg:
		m.crash = msg.err
		return m, tea.Quit
	case tickMsg:
		if msg.gen != m.list.gen || m.list.refreshing {
			return m, nil
		}
		return m.refresh()
	case refreshMsg:
		if msg.gen != m.list.gen {
			return m, nil // a refresh that an 'r' overtook
		}
		m.list = m.list.answer(msg)
		return m, m.tickCmd(msg.gen)
	case whereMsg:
		m.detail = m.detail.whereDone(msg)
		return m, nil
	case planMsg:
		m.detail = m.detail.planDone(msg)
		return m, nil
	case applyMsg:
		m.detail = m.detail.applyDone(msg)
		return m, nil
	case auditMsg:
		m.detail = m.detail.auditDone(msg)
		return m, nil
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	return m, nil
}

// refresh starts a reconcile of the list now; the next tick is scheduled
// when it ends.
func (m Model) refresh() (Model, tea.Cmd) {
	if m.list.refreshing {
		m.list.status = "a refresh is already running"
		return m, nil
	}
	m.list.refreshing = true
	m.list.gen++
	return m, m.reconcileCmd(m.list.gen)
}

// do carries out what a screen's key asked for.
func (m Model) do(req request, cmd tea.Cmd) (Model, tea.Cmd) {
	switch req.kind {
	case reqRefresh:
		return m.refresh()
	case reqOpen:
		m.screen = screenDetail
		m.detail = m.detail.openDetail(req.bizID, req.pipeline)
		return m, m.whereCmd(req.bizID, req.pipeline)
	case reqBack:
		m.screen = screenList
	case reqWhere:
		return m, m.whereCmd(req.d.bizID, req.d.pipeline)
	case reqPlan:
		return m, m.planCmd(req.d)
	case reqDryRun:
		return m, m.applyCmd(req.d, true, "")
	case reqApply:
		return m, m.applyCmd(req.d, false, req.reason)
	case reqAudit:
		return m, m.auditCmd(req.d.bizID, req.d.opPipeline())
	}
	return m, cmd
}

// tickCmd starts the next refresh opts.Refresh after one ended.
func (m Model) tickCmd(gen int) tea.Cmd {
	return tea.Tick(m.opts.Refresh, func(time.Time) tea.Msg { return tickMsg{gen: gen} })
}

// key handles a key press: any key closes the help; an open line or form
// has the keyboard; then the keys of every screen, then the screen's.
func (m Model) key(k tea.KeyPressMsg) (Model, tea.Cmd) {
	if k.String() == "ctrl+c" {
		return m, tea.Quit
	}
	if m.showHelp {
		m.showHelp = false
		return m, nil
	}
	if m.goingTo {
		return m.goToKey(k)
	}
	typing := (m.screen == screenList && m.list.filtering) || (m.screen == screenDetail && m.detail.in != inputNone)
	if !typing {
		switch {
		case key.Matches(k, m.keys.Quit):
			return m, tea.Quit
		case key.Matches(k, m.keys.Help):
			m.showHelp = true
			return m, nil
		case key.Matches(k, m.keys.GoTo):
			m.goingTo = true
			m.goTo.SetValue("")
			m.goTo.Focus()
			return m, nil
		}
	}
	var (
		cmd tea.Cmd
		req request
	)
	if m.screen == screenDetail {
		m.detail, cmd, req = m.detail.key(k)
	} else {
		m.list, cmd, req = m.list.key(k)
	}
	return m.do(req, cmd)
}

// goToKey edits the go-to line: enter opens the id's detail, whether or
// not the list holds it.
func (m Model) goToKey(k tea.KeyPressMsg) (Model, tea.Cmd) {
	switch k.String() {
	case "esc":
		m.goingTo = false
		m.goTo.Blur()
		return m, nil
	case "enter":
		id := strings.TrimSpace(m.goTo.Value())
		if err := sources.ValidateBizID(id); err != nil {
			m = m.setStatus(plans.Shown(err.Error()))
			return m, nil
		}
		m.goingTo = false
		m.goTo.Blur()
		return m.do(request{kind: reqOpen, bizID: id, pipeline: m.opts.Pipeline}, nil)
	}
	var cmd tea.Cmd
	m.goTo, cmd = m.goTo.Update(k)
	return m, cmd
}

// setStatus says s in the status line of the screen shown.
func (m Model) setStatus(s string) Model {
	if m.screen == screenDetail {
		m.detail.status = s
	} else {
		m.list.status = s
	}
	return m
}

// statusText is the status line's own text on the screen shown.
func (m Model) statusText() string {
	if m.screen == screenDetail {
		return m.detail.status
	}
	return m.list.status
}

// input is the line or form that has the keyboard.
func (m Model) input() input {
	switch {
	case m.goingTo:
		return inputGoTo
	case m.screen == screenList && m.list.filtering:
		return inputFilter
	case m.screen == screenDetail:
		return m.detail.in
	}
	return inputNone
}
