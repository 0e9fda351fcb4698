package tui

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
)

// openForm opens the confirmation (biz_id, reason) or the attestation
// (attestation, outcome) form.
func (m detailModel) openForm(in input) detailModel {
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
		m.form[0].SetValue(m.d.attest)
		m.form[1].SetValue(m.d.outcome)
	}
	m.form[0].Focus()
	return m
}

// formKey edits the open form; enter on its last field submits it.
func (m detailModel) formKey(k tea.KeyPressMsg) (detailModel, tea.Cmd, request) {
	switch k.String() {
	case "esc":
		m.in = inputNone
		m.status = "cancelled; nothing was changed"
		return m, nil, request{}
	case "tab", "shift+tab", "down", "up":
		m.form[m.formAt].Blur()
		m.formAt = 1 - m.formAt
		m.form[m.formAt].Focus()
		return m, nil, request{}
	case "enter":
		if m.formAt == 0 && (m.in == inputConfirm || m.d.needOutcome) {
			m.form[0].Blur()
			m.formAt = 1
			m.form[1].Focus()
			return m, nil, request{}
		}
		return m.submitForm()
	}
	var cmd tea.Cmd
	m.form[m.formAt], cmd = m.form[m.formAt].Update(k)
	return m, cmd, request{}
}

// submitForm checks the form and asks for the apply (confirmation) or a
// plan with the attestation.
func (m detailModel) submitForm() (detailModel, tea.Cmd, request) {
	d := *m.d
	a, b := m.form[0].Value(), strings.TrimSpace(m.form[1].Value())
	if m.in == inputConfirm {
		switch {
		case a != d.op.Report.BizID:
			m.formWhy = "the biz_id typed is not " + plans.Shown(d.op.Report.BizID) + ": nothing was applied"
			return m, nil, request{}
		case b == "":
			m.formWhy = "a reason is required (an incident, a ticket): it is recorded in the plan and every audit row"
			return m, nil, request{}
		}
		m.in = inputNone
		d.busy = "applying"
		m.d = &d
		m.status = ""
		return m, nil, request{kind: reqApply, d: &d, reason: b}
	}
	switch {
	case strings.TrimSpace(a) == "":
		m.formWhy = "an attestation is required: what was done by hand, or what the downstream said"
		return m, nil, request{}
	case d.needOutcome && b != inspect.AttestApplied && b != inspect.AttestAbsent:
		m.formWhy = "outcome: type applied or absent (what the downstream says of the unknown call)"
		return m, nil, request{}
	}
	d.attest = strings.TrimSpace(a)
	if d.needOutcome {
		d.outcome = b
	}
	m.in = inputNone
	d.busy = "planning"
	m.d = &d
	return m, nil, request{kind: reqPlan, d: &d}
}

// formView is the confirmation or attestation form, and the lines its two
// fields are drawn on.
func (m detailModel) formView() (lines []string, at [2]int) {
	d := m.d
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
