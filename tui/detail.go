package tui

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/tui/render"
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

// detailModel is the detail screen: one operation's where report and the
// repair flow made of it (plan, dry run, apply, attest, audit panes, and
// the confirmation and attestation forms).
type detailModel struct {
	*env
	width, height int

	pane    pane
	loading bool
	d       *detail
	vp      viewport.Model
	status  string

	// The confirmation or attestation form, when one is open (in).
	in      input
	form    [2]textinput.Model
	formAt  int
	formWhy string
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

func errText(err error) string {
	if err == nil {
		return ""
	}
	return plans.Shown(err.Error())
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

// resize fits the detail to a window of w×h: its viewport is what the two
// head lines and the two foot lines leave.
func (m detailModel) resize(w, h int) detailModel {
	m.width, m.height = w, h
	m.vp.SetWidth(w)
	m.vp.SetHeight(max(h-4, 1))
	m.vp.SetContent(m.detailBody())
	return m
}

// openDetail shows bizID's detail (loading) and starts nothing: the
// root model returns whereCmd.
func (m detailModel) openDetail(bizID, pipeline string) detailModel {
	m.pane, m.loading, m.in = paneReport, true, inputNone
	m.d = &detail{bizID: bizID, pipeline: pipeline}
	m.status = ""
	m.vp.SetContent("")
	m.vp.GotoTop()
	return m
}

func (m detailModel) whereDone(msg whereMsg) detailModel {
	d := m.d
	if d == nil || d.bizID != msg.bizID {
		return m
	}
	nd := *d
	m.d = &nd
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

func (m detailModel) planDone(msg planMsg) detailModel {
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
func (m detailModel) show(d *detail, p pane) detailModel {
	m.d, m.pane = d, p
	m.vp.SetContent(m.detailBody())
	m.vp.GotoTop()
	return m
}

func (m detailModel) applyDone(msg applyMsg) detailModel {
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

func (m detailModel) auditDone(msg auditMsg) detailModel {
	d := m.detailFor(msg.bizID)
	if d == nil {
		return m
	}
	d.busy = ""
	d.audit, d.auditErr = msg.log, errText(msg.err)
	return m.show(d, paneAudit)
}

// detailFor is a copy of the detail when it still shows bizID.
func (m detailModel) detailFor(bizID string) *detail {
	if m.d == nil || m.d.bizID != bizID {
		return nil
	}
	d := *m.d
	return &d
}

// key handles a key on the detail (the form first, when open); an I/O or
// the way back is a request to the root model.
func (m detailModel) key(k tea.KeyPressMsg) (detailModel, tea.Cmd, request) {
	if m.in != inputNone {
		return m.formKey(k)
	}
	d := m.d
	switch {
	case key.Matches(k, m.keys.Back):
		if m.pane != paneReport {
			m.pane = paneReport
			m.vp.SetContent(m.detailBody())
			m.vp.GotoTop()
			return m, nil, request{}
		}
		m.d, m.status = nil, ""
		return m, nil, request{kind: reqBack}
	case key.Matches(k, m.keys.Reread):
		m.loading = true
		return m, nil, request{kind: reqWhere, d: d}
	}
	if m.loading || d.busy != "" {
		switch {
		case key.Matches(k, m.keys.Plan), key.Matches(k, m.keys.DryRun), key.Matches(k, m.keys.Apply), key.Matches(k, m.keys.Audit), key.Matches(k, m.keys.Attest):
			m.status = "wait: " + orLoading(d.busy)
			return m, nil, request{}
		}
	}
	switch {
	case key.Matches(k, m.keys.Plan):
		if d.op == nil {
			m.status = "no plan: the operation could not be read"
			return m, nil, request{}
		}
		return m.start(d, "planning", request{kind: reqPlan})
	case key.Matches(k, m.keys.DryRun):
		if d.plan == nil {
			m.status = "no plan to dry-run: press p first"
			return m, nil, request{}
		}
		if d.needAttest && d.attest == "" {
			m.status = m.applyBlocked()
			return m, nil, request{}
		}
		return m.start(d, "dry run", request{kind: reqDryRun})
	case key.Matches(k, m.keys.Apply):
		if why := m.applyBlocked(); why != "" {
			m.status = why
			return m, nil, request{}
		}
		return m.openForm(inputConfirm), nil, request{}
	case key.Matches(k, m.keys.Attest):
		if d.plan == nil && !d.needAttest {
			m.status = "no plan asks for an attestation: press p first"
			return m, nil, request{}
		}
		if !d.needAttest {
			m.status = "this plan needs no attestation"
			return m, nil, request{}
		}
		return m.openForm(inputAttest), nil, request{}
	case key.Matches(k, m.keys.Audit):
		return m.start(d, "reading the audit", request{kind: reqAudit})
	}
	var cmd tea.Cmd
	m.vp, cmd = m.vp.Update(k)
	return m, cmd, request{}
}

// start marks the detail busy with what and asks the root model for req
// on the busy detail.
func (m detailModel) start(d *detail, what string, req request) (detailModel, tea.Cmd, request) {
	nd := *d
	nd.busy = what
	m.d = &nd
	req.d = &nd
	return m, nil, req
}

// applyBlocked says why `a` cannot apply now, "" when it can
// (docs/tui.md "What disables apply").
func (m detailModel) applyBlocked() string {
	d := m.d
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

// view is the detail screen, spin the spinner's frame and foot the go-to
// line when open ("": the key hints).
func (m detailModel) view(spin, foot string) []string {
	d := m.d
	var head []string
	switch {
	case d == nil:
		head = []string{"", ""}
	case m.loading && d.op == nil:
		head = []string{m.st.Bold.Render(shown(d.bizID)) + "  " + spin + " reading…", ""}
	case d.op == nil:
		head = []string{m.st.Bold.Render(shown(d.bizID)), m.st.Error.Render(d.err)}
	default:
		r := d.op.Report
		h := render.Head(m.st, r)
		if m.loading {
			h += "  " + spin
		}
		if d.busy != "" {
			h += "  " + spin + " " + d.busy + "…"
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
	if foot == "" {
		foot = m.hints(m.width, m.keys.detailHelp(m.opts.ReadOnly))
		if m.opts.ReadOnly {
			foot = "READONLY  " + foot
		}
	}
	return append(append(head, body...), status, foot)
}

// detailBody is the viewport's content for the current pane, wrapped to
// the window.
func (m detailModel) detailBody() string {
	d := m.d
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

func (m detailModel) section(b *strings.Builder, title string) {
	b.WriteString("\n" + m.st.Title.Render(title) + "\n")
}

// reportBody is the where report of the operation shown, drawn by opctl's
// one where renderer as the console's detail (render.Report).
func (m detailModel) reportBody(b *strings.Builder, d *detail) {
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

func (m detailModel) planBody(b *strings.Builder, d *detail) {
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

func (m detailModel) colorize(class, text string) string {
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

func (m detailModel) resultBody(b *strings.Builder, res *repair.Result, errText string, dry bool) {
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

func (m detailModel) outcome(o repair.Outcome) string {
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

func (m detailModel) auditBody(b *strings.Builder, d *detail) {
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
