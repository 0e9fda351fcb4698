package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/spinner"
	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"

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

// pane is what the detail shows below its header.
type pane int

const (
	paneReport pane = iota
	panePlan
	paneDryRun
	paneResult
	paneAudit
)

// Model is the console's state. Its methods are pure: every read and
// write is a tea.Cmd (commands.go) whose message Update folds in.
type Model struct {
	ctx    context.Context
	opts   Options
	keys   KeyMap
	st     Styles
	ranks  map[inspect.Code]int
	width  int
	height int

	// The list.
	items      []Item
	visible    []int // indexes into items, filtered
	cursor     int   // index into visible
	offset     int   // first visible row shown
	sortCol    Column
	widths     columns // what the items' values need (widths), per column
	filter     string
	refreshing bool
	refreshed  time.Time
	summary    *reconcile.Summary
	listErr    string
	gen        int // refresh generation: a late answer of an older one is dropped

	// The detail.
	screen  screen
	pane    pane
	loading bool
	detail  *detail
	vp      viewport.Model

	// The line or form that has the keyboard.
	in       input
	line     textinput.Model
	form     [2]textinput.Model
	formAt   int
	formWhy  string
	showHelp bool

	spin   spinner.Model
	status string
	crash  error
}

// detail is the operation the detail shows, and the repair made of it.
type detail struct {
	bizID, pipeline string
	triage          *triage.Result
	op              *triage.Operation
	err             string
	// others are the other pipelines that know the id.
	others []string

	plan            *plans.Plan
	planErr         string
	needAttest      bool // the plan has a manual action: an attestation is due
	needOutcome     bool // ...and the downstream's answer (UNKNOWN_OUTCOME)
	attest, outcome string
	dry             *repair.Result
	dryErr          string
	result          *repair.Result
	resultErr       string
	audit           *sources.AuditLog
	auditErr        string
	busy            string // what is running ("planning", "applying", ...)
}

// New returns the console's model; Run runs it.
func New(ctx context.Context, o Options, st Styles) Model {
	if o.Since <= 0 {
		o.Since = DefaultSince
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	keys := DefaultKeyMap()
	if o.Keys != nil {
		keys = *o.Keys
	}
	m := Model{ctx: ctx, opts: o, keys: keys, st: st, ranks: rank(), width: 80, height: 24, widths: widths(nil),
		spin: spinner.New(spinner.WithSpinner(spinner.Line)), vp: viewport.New(viewport.WithWidth(80), viewport.WithHeight(18)), refreshing: true}
	m.line = newInput(st, "", sources.MaxBizID)
	for i := range m.form {
		m.form[i] = newInput(st, "", plans.MaxReason)
	}
	if o.BizID != "" {
		m = m.openDetail(o.BizID, o.Pipeline)
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

// Init starts the first refresh (and the detail asked for on the command
// line) and the spinner.
func (m Model) Init() tea.Cmd {
	cmds := []tea.Cmd{m.reconcileCmd(m.gen), m.spin.Tick}
	if m.detail != nil {
		cmds = append(cmds, m.whereCmd(m.detail.bizID, m.detail.pipeline))
	}
	return tea.Batch(cmds...)
}

// Messages of the commands.
type (
	tickMsg    struct{ gen int }
	refreshMsg struct {
		gen   int
		items []Item
		sum   *reconcile.Summary
		err   error
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
		m = m.layout()
		return m, nil
	case spinner.TickMsg:
		var cmd tea.Cmd
		m.spin, cmd = m.spin.Update(msg)
		return m, cmd
	case crashMsg:
		m.crash = msg.err
		return m, tea.Quit
	case tickMsg:
		if msg.gen != m.gen || m.refreshing {
			return m, nil
		}
		return m.startRefresh()
	case refreshMsg:
		if msg.gen != m.gen {
			return m, nil // a refresh that an 'r' overtook
		}
		return m.refreshed_(msg), m.tickCmd(msg.gen)
	case whereMsg:
		return m.whereDone(msg), nil
	case planMsg:
		return m.planDone(msg), nil
	case applyMsg:
		return m.applyDone(msg), nil
	case auditMsg:
		return m.auditDone(msg), nil
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	return m, nil
}

// startRefresh starts a reconcile now; the next tick is scheduled when it
// ends.
func (m Model) startRefresh() (Model, tea.Cmd) {
	if m.refreshing {
		return m, nil
	}
	m.refreshing = true
	m.gen++
	return m, m.reconcileCmd(m.gen)
}

func (m Model) refreshed_(msg refreshMsg) Model {
	m.refreshing = false
	m.refreshed = m.opts.Now()
	m.listErr = ""
	if msg.err != nil {
		m.listErr = "refresh failed: " + plans.Shown(msg.err.Error())
	}
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

// tickCmd starts the next refresh opts.Refresh after one ended.
func (m Model) tickCmd(gen int) tea.Cmd {
	return tea.Tick(m.opts.Refresh, func(time.Time) tea.Msg { return tickMsg{gen: gen} })
}

func (m Model) refilter() Model {
	m.visible = filterItems(m.items, m.filter, make([]int, 0, len(m.items)))
	return m.clampCursor()
}

func (m Model) clampCursor() Model {
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
func (m Model) listRows() int {
	n := m.height - 5
	if n < 1 {
		return 1
	}
	return n
}

// layout sizes the detail's viewport to the window.
func (m Model) layout() Model {
	m.vp.SetWidth(m.width)
	m.vp.SetHeight(max(m.height-4, 1))
	m = m.clampCursor()
	m.vp.SetContent(m.detailBody())
	return m
}

// openDetail shows bizID's detail (loading) and starts nothing: the
// caller returns whereCmd.
func (m Model) openDetail(bizID, pipeline string) Model {
	m.screen, m.pane, m.loading = screenDetail, paneReport, true
	m.detail = &detail{bizID: bizID, pipeline: pipeline}
	m.status = ""
	m.vp.SetContent("")
	m.vp.GotoTop()
	return m
}

func (m Model) whereDone(msg whereMsg) Model {
	d := m.detail
	if d == nil || d.bizID != msg.bizID {
		return m
	}
	nd := *d
	m.detail = &nd
	m.loading = false
	if msg.err != nil {
		nd.err = plans.Shown(msg.err.Error())
		nd.triage, nd.op = nil, nil
		m.vp.SetContent(m.detailBody())
		return m
	}
	nd.err = ""
	nd.busy = ""
	nd.triage = msg.triage
	nd.op, nd.others = pick(msg.triage)
	m.vp.SetContent(m.detailBody())
	return m
}

// pick is the operation the detail shows: the one pipeline that knows the
// id, else the first that does (the others are named), else the first.
func pick(t *triage.Result) (*triage.Operation, []string) {
	if t == nil || len(t.Ops) == 0 {
		return nil, nil
	}
	if op, err := t.One(); err == nil {
		return op, nil
	}
	var known []int
	for i, op := range t.Ops {
		if op.Report.Verdict.Code != inspect.NotFound {
			known = append(known, i)
		}
	}
	if len(known) == 0 {
		return &t.Ops[0], nil
	}
	var others []string
	for _, i := range known[1:] {
		others = append(others, t.Ops[i].Pipeline.Name)
	}
	return &t.Ops[known[0]], others
}

func (m Model) planDone(msg planMsg) Model {
	d := m.detailFor(msg.bizID)
	if d == nil {
		return m
	}
	d.busy = ""
	d.plan, d.planErr = msg.plan, ""
	d.needAttest, d.needOutcome = msg.needAttest, msg.needOutcome
	d.dry, d.dryErr = nil, ""
	if msg.err != nil {
		d.plan, d.planErr = nil, plans.Shown(plans.Phrase(msg.err, m.keys.words()))
	}
	m.status = ""
	m = m.show(d, panePlan)
	if d.needAttest && d.attest == "" {
		m.status = m.applyBlocked()
	}
	return m
}

// show puts d in the detail on pane p, scrolled to its top.
func (m Model) show(d *detail, p pane) Model {
	m.detail, m.pane = d, p
	m.vp.SetContent(m.detailBody())
	m.vp.GotoTop()
	return m
}

func (m Model) applyDone(msg applyMsg) Model {
	d := m.detailFor(msg.bizID)
	if d == nil {
		return m
	}
	d.busy = ""
	if msg.dry {
		if d.plan == nil || (msg.planID != "" && msg.planID != d.plan.ID) {
			return m // the dry run of a plan since replaced
		}
		d.dry, d.dryErr = msg.res, errText(msg.err)
		return m.show(d, paneDryRun)
	}
	d.result, d.resultErr = msg.res, errText(msg.err)
	if msg.triage != nil {
		d.triage = msg.triage
		d.op, d.others = pick(msg.triage)
	}
	if msg.terr != nil {
		d.err = "re-triage failed: " + plans.Shown(msg.terr.Error())
	}
	// The plan was applied (or refused): a new repair starts from a new plan.
	d.plan, d.dry = nil, nil
	return m.show(d, paneResult)
}

func (m Model) auditDone(msg auditMsg) Model {
	d := m.detailFor(msg.bizID)
	if d == nil {
		return m
	}
	d.busy = ""
	d.audit, d.auditErr = msg.log, errText(msg.err)
	return m.show(d, paneAudit)
}

// detailFor is a copy of the detail when it still shows bizID.
func (m Model) detailFor(bizID string) *detail {
	if m.detail == nil || m.detail.bizID != bizID {
		return nil
	}
	d := *m.detail
	return &d
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return plans.Shown(err.Error())
}

// key handles a key press.
func (m Model) key(k tea.KeyPressMsg) (Model, tea.Cmd) {
	if k.String() == "ctrl+c" {
		return m, tea.Quit
	}
	if m.showHelp {
		m.showHelp = false // any key closes the help
		return m, nil
	}
	switch m.in {
	case inputFilter:
		return m.filterKey(k)
	case inputGoTo:
		return m.goToKey(k)
	case inputConfirm, inputAttest:
		return m.formKey(k)
	}
	switch {
	case key.Matches(k, m.keys.Quit):
		return m, tea.Quit
	case key.Matches(k, m.keys.Help):
		m.showHelp = true
		return m, nil
	case key.Matches(k, m.keys.GoTo):
		m.in = inputGoTo
		m.line.SetValue("")
		m.line.Focus()
		return m, nil
	}
	if m.screen == screenDetail {
		return m.detailKey(k)
	}
	return m.listKey(k)
}

func (m Model) listKey(k tea.KeyPressMsg) (Model, tea.Cmd) {
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
		m.in = inputFilter
		m.line.SetValue(m.filter)
		m.line.CursorEnd()
		m.line.Focus()
		return m, nil
	case key.Matches(k, m.keys.Sort):
		m.sortCol = (m.sortCol + 1) % numColumns
		m.items = slices.Clone(m.items) // the previous model's list stays as it was
		sortItems(m.items, m.sortCol, m.ranks)
		m = m.refilter()
		m.status = "sorted by " + m.sortCol.String()
	case key.Matches(k, m.keys.Refresh):
		if m.refreshing {
			m.status = "a refresh is already running"
			return m, nil
		}
		return m.startRefresh()
	case key.Matches(k, m.keys.Open):
		if m.cursor >= len(m.visible) {
			return m, nil
		}
		it := m.items[m.visible[m.cursor]]
		m = m.openDetail(it.BizID, it.Pipeline)
		return m, m.whereCmd(it.BizID, it.Pipeline)
	case key.Matches(k, m.keys.Back):
		if m.filter != "" {
			m.filter = ""
			m = m.refilter()
		}
	}
	return m.clampCursor(), nil
}

// closeLine gives the keyboard back from the filter or go-to line.
func (m Model) closeLine() Model {
	m.in = inputNone
	m.line.Blur()
	return m
}

func (m Model) filterKey(k tea.KeyPressMsg) (Model, tea.Cmd) {
	switch k.String() {
	case "enter":
		return m.closeLine(), nil
	case "esc":
		m = m.closeLine()
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

func (m Model) goToKey(k tea.KeyPressMsg) (Model, tea.Cmd) {
	switch k.String() {
	case "esc":
		return m.closeLine(), nil
	case "enter":
		id := strings.TrimSpace(m.line.Value())
		if err := sources.ValidateBizID(id); err != nil {
			m.status = plans.Shown(err.Error())
			return m, nil
		}
		m = m.closeLine().openDetail(id, m.opts.Pipeline)
		return m, m.whereCmd(id, m.opts.Pipeline)
	}
	var cmd tea.Cmd
	m.line, cmd = m.line.Update(k)
	return m, cmd
}

func (m Model) detailKey(k tea.KeyPressMsg) (Model, tea.Cmd) {
	d := m.detail
	switch {
	case key.Matches(k, m.keys.Back):
		if m.pane != paneReport {
			m.pane = paneReport
			m.vp.SetContent(m.detailBody())
			m.vp.GotoTop()
			return m, nil
		}
		m.screen, m.detail, m.status = screenList, nil, ""
		return m, nil
	case key.Matches(k, m.keys.Refresh):
		m.loading = true
		return m, m.whereCmd(d.bizID, d.pipeline)
	}
	if m.loading || d.busy != "" {
		switch {
		case key.Matches(k, m.keys.Plan), key.Matches(k, m.keys.DryRun), key.Matches(k, m.keys.Apply), key.Matches(k, m.keys.Audit), key.Matches(k, m.keys.Attest):
			m.status = "wait: " + orLoading(d.busy)
			return m, nil
		}
	}
	switch {
	case key.Matches(k, m.keys.Plan):
		if d.op == nil {
			m.status = "no plan: the operation could not be read"
			return m, nil
		}
		return m.start(d, "planning", m.planCmd)
	case key.Matches(k, m.keys.DryRun):
		if d.plan == nil {
			m.status = "no plan to dry-run: press p first"
			return m, nil
		}
		if d.needAttest && d.attest == "" {
			m.status = m.applyBlocked()
			return m, nil
		}
		return m.start(d, "dry run", func(d *detail) tea.Cmd { return m.applyCmd(d, true, "") })
	case key.Matches(k, m.keys.Apply):
		if why := m.applyBlocked(); why != "" {
			m.status = why
			return m, nil
		}
		return m.openForm(inputConfirm), nil
	case key.Matches(k, m.keys.Attest):
		if d.plan == nil && !d.needAttest {
			m.status = "no plan asks for an attestation: press p first"
			return m, nil
		}
		if !d.needAttest {
			m.status = "this plan needs no attestation"
			return m, nil
		}
		return m.openForm(inputAttest), nil
	case key.Matches(k, m.keys.Audit):
		return m.start(d, "reading the audit", func(d *detail) tea.Cmd { return m.auditCmd(d.bizID, d.opPipeline()) })
	}
	var cmd tea.Cmd
	m.vp, cmd = m.vp.Update(k)
	return m, cmd
}

// start marks the detail busy with what and returns the command cmd
// makes of it.
func (m Model) start(d *detail, what string, cmd func(*detail) tea.Cmd) (Model, tea.Cmd) {
	nd := *d
	nd.busy = what
	m.detail = &nd
	return m, cmd(&nd)
}

func orLoading(busy string) string {
	if busy == "" {
		return "reading the operation"
	}
	return busy
}

// opPipeline is the pipeline of the operation shown ("" before it is read).
func (d *detail) opPipeline() string {
	if d.op != nil && d.op.Pipeline != nil {
		return d.op.Pipeline.Name
	}
	return d.pipeline
}

// applyBlocked says why `a` cannot apply now, "" when it can
// (docs/tui.md "What disables apply").
func (m Model) applyBlocked() string {
	d := m.detail
	switch {
	case m.opts.ReadOnly:
		return "apply disabled: the console runs with --readonly"
	case d == nil || d.op == nil:
		return "apply disabled: the operation could not be read"
	}
	r := d.op.Report
	switch {
	case r.State.LeaseActive || r.Verdict.Code == inspect.InFlight:
		owner := plans.Shown(r.State.Owner)
		if owner == "" {
			owner = "a consumer"
		}
		until := ""
		if r.State.LeaseUntil != nil {
			until = " until " + r.State.LeaseUntil.UTC().Format("15:04:05.000")
		}
		return fmt.Sprintf("apply disabled: %s holds a live lease%s (IN_FLIGHT)", owner, until)
	case d.needAttest && d.attest == "" && d.needOutcome:
		return "apply disabled: needs an attestation and the outcome (applied|absent): press t"
	case d.needAttest && d.attest == "":
		return "apply disabled: the plan has a manual action: press t to attest what was done"
	case d.plan == nil && d.planErr != "":
		return "apply disabled: no plan: " + d.planErr
	case d.plan == nil:
		return "apply disabled: press p to build and review the plan first"
	}
	return ""
}

// openForm opens the confirmation (biz_id, reason) or the attestation
// (attestation, outcome) form.
func (m Model) openForm(in input) Model {
	m.in, m.formAt, m.formWhy = in, 0, ""
	for i := range m.form {
		m.form[i].SetValue("")
		m.form[i].Blur()
	}
	if in == inputConfirm {
		m.form[0].Prompt, m.form[1].Prompt = "type the biz_id to confirm: ", "reason: "
		m.form[1].SetValue(m.opts.Incident)
	} else {
		m.form[0].Prompt, m.form[1].Prompt = "attestation (what was done, what the downstream said): ", "outcome (applied|absent): "
		m.form[0].SetValue(m.detail.attest)
		m.form[1].SetValue(m.detail.outcome)
	}
	m.form[0].Focus()
	return m
}

func (m Model) formKey(k tea.KeyPressMsg) (Model, tea.Cmd) {
	switch k.String() {
	case "esc":
		m.in = inputNone
		m.status = "cancelled; nothing was changed"
		return m, nil
	case "tab", "shift+tab", "down", "up":
		m.form[m.formAt].Blur()
		m.formAt = 1 - m.formAt
		m.form[m.formAt].Focus()
		return m, nil
	case "enter":
		if m.formAt == 0 && (m.in == inputConfirm || m.detail.needOutcome) {
			m.form[0].Blur()
			m.formAt = 1
			m.form[1].Focus()
			return m, nil
		}
		return m.submitForm()
	}
	var cmd tea.Cmd
	m.form[m.formAt], cmd = m.form[m.formAt].Update(k)
	return m, cmd
}

func (m Model) submitForm() (Model, tea.Cmd) {
	d := *m.detail
	a, b := m.form[0].Value(), strings.TrimSpace(m.form[1].Value())
	if m.in == inputConfirm {
		switch {
		case a != d.op.Report.BizID:
			m.formWhy = "the biz_id typed is not " + plans.Shown(d.op.Report.BizID) + ": nothing was applied"
			return m, nil
		case b == "":
			m.formWhy = "a reason is required (an incident, a ticket): it is recorded in the plan and every audit row"
			return m, nil
		}
		m.in = inputNone
		d.busy = "applying"
		m.detail = &d
		m.status = ""
		return m, m.applyCmd(&d, false, b)
	}
	switch {
	case strings.TrimSpace(a) == "":
		m.formWhy = "an attestation is required: what was done by hand, or what the downstream said"
		return m, nil
	case d.needOutcome && b != inspect.AttestApplied && b != inspect.AttestAbsent:
		m.formWhy = "outcome: type applied or absent (what the downstream says of the unknown call)"
		return m, nil
	}
	d.attest = strings.TrimSpace(a)
	if d.needOutcome {
		d.outcome = b
	}
	m.in = inputNone
	d.busy = "planning"
	m.detail = &d
	return m, m.planCmd(&d)
}
