package tui

import (
	"errors"
	"runtime/debug"

	tea "charm.land/bubbletea/v2"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
)

// reviewReason is the reason of the plan `p` shows for review and `d`
// dry-runs: the operator types the real one in the confirmation, and that
// very plan is applied under it (applyCmd).
const reviewReason = "under review in opctl tui (the reason is typed at apply)"

// pendingAttest stands for the attestation of a plan whose manual action
// is shown before the operator has entered it; such a plan is never run.
const pendingAttest = "(attestation not entered yet)"

// safe runs a command's I/O and turns a panic into a crashMsg: the
// console then quits cleanly, the terminal restored.
func safe(f func() tea.Msg) tea.Cmd {
	return func() (msg tea.Msg) {
		defer func() {
			if r := recover(); r != nil {
				msg = crashMsg{err: &sources.InternalError{Value: r, Stack: string(debug.Stack())}}
			}
		}()
		return f()
	}
}

// reconcileCmd runs one reconcile of the list's pipelines and collects
// its targets and watch items (in the command's goroutine: input is never
// blocked).
func (m Model) reconcileCmd(gen int) tea.Cmd {
	ctx, o := m.ctx, m.opts
	if o.Watch != "" {
		return safe(func() tea.Msg {
			if o.Targets == nil {
				return refreshMsg{gen: gen, err: errors.New("no reader of the watch's /targets")}
			}
			evs, notReady, err := o.Targets(ctx)
			if err != nil {
				return refreshMsg{gen: gen, err: err}
			}
			return refreshMsg{gen: gen, items: watchItems(evs, o.Pipeline, o.Now()), notReady: notReady}
		})
	}
	return safe(func() tea.Msg {
		run, err := o.Reconcile()
		if err != nil {
			return refreshMsg{gen: gen, err: err}
		}
		var c collector
		sum, err := run(ctx, reconcile.Options{Pipelines: o.Pipelines, Since: o.Since, OlderThan: o.OlderThan},
			func(r reconcile.Result) error { c.add(r); return nil })
		return refreshMsg{gen: gen, items: c.done(), sum: sum, err: err}
	})
}

// whereCmd triages one id as `opctl where` does, with its NEXT.
func (m Model) whereCmd(bizID, pipeline string) tea.Cmd {
	ctx, open, keys := m.ctx, m.opts.Triage, m.keys
	return safe(func() tea.Msg {
		tr, err := open()
		if err != nil {
			return whereMsg{bizID: bizID, pipeline: pipeline, err: err}
		}
		t, err := where(ctx, tr, keys, bizID, pipeline)
		return whereMsg{bizID: bizID, pipeline: pipeline, triage: t, err: err}
	})
}

// planOptions are the planner's options for the operation shown: the
// console's operator and incident, the attestation entered, and for an
// unknown outcome the manual action with the downstream's answer, as
// `opctl where`'s NEXT gives them (plans.Next).
func (m Model) planOptions(d *detail, reason string) plans.Options {
	o := plans.Options{Reason: reason, Operator: m.opts.Operator, Incident: m.opts.Incident, Attest: d.attest}
	if d.needOutcome && d.outcome != "" {
		o.Action, o.Outcome = plans.Manual, d.outcome
		for _, f := range d.op.Report.Findings {
			if f.Code == inspect.UnknownOutcome && f.Step != "" {
				o.FromStep = f.Step
				break
			}
		}
	}
	return o
}

// planCmd builds the plan of the operation shown. A plan refused for want
// of an attestation is built again with a placeholder, to be shown (never
// run) while the operator enters it.
func (m Model) planCmd(d *detail) tea.Cmd {
	ctx, open, op, bizID := m.ctx, m.opts.Service, d.op, d.bizID
	o := m.planOptions(d, reviewReason)
	return safe(func() tea.Msg {
		svc, err := open()
		if err != nil {
			return planMsg{bizID: bizID, err: err}
		}
		p, err := svc.Plan(ctx, op, o)
		if o.Attest != "" {
			return planMsg{bizID: bizID, plan: p, err: err, needAttest: true, needOutcome: o.Outcome != ""}
		}
		if err == nil {
			return planMsg{bizID: bizID, plan: p}
		}
		if op.Report.Verdict.Code == inspect.UnknownOutcome {
			return planMsg{bizID: bizID, err: err, needAttest: true, needOutcome: true}
		}
		var ie *plans.InputError
		if errors.As(err, &ie) {
			o.Attest = pendingAttest
			if q, qerr := svc.Plan(ctx, op, o); qerr == nil {
				return planMsg{bizID: bizID, plan: q, needAttest: true}
			}
		}
		return planMsg{bizID: bizID, err: err}
	})
}

// applyCmd dry-runs the reviewed plan, or applies it: the very plan
// shown (and dry-run, when d was pressed) under the reason typed in the
// confirmation — only its reason and so its id change, and
// plans.Equivalent confirms it is the same repair — through
// repair.Service.Apply, the guarded path of `opctl repair apply` (id,
// re-derivation, stale check, guards under FOR UPDATE, audit). Then the
// operation is triaged again.
func (m Model) applyCmd(d *detail, dry bool, reason string) tea.Cmd {
	ctx, open, reads, keys, bizID, reviewed, pipeline := m.ctx, m.opts.Service, m.opts.Triage, m.keys, d.bizID, d.plan, d.opPipeline()
	ao := repair.ApplyOptions{DryRun: dry, Operator: m.opts.Operator}
	return safe(func() tea.Msg {
		plan := reviewed
		if !dry {
			var err error
			if plan, err = underReason(reviewed, reason); err != nil {
				return applyMsg{bizID: bizID, err: err}
			}
		}
		svc, err := open()
		if err != nil {
			return applyMsg{bizID: bizID, dry: dry, err: err}
		}
		res, err := svc.Apply(ctx, plan, ao)
		msg := applyMsg{bizID: bizID, dry: dry, planID: plan.ID, res: res, err: err}
		if !dry {
			tr, err := reads()
			if err != nil {
				msg.terr = err
				return msg
			}
			msg.triage, msg.terr = where(ctx, tr, keys, bizID, pipeline)
		}
		return msg
	})
}

// underReason is the reviewed plan under the reason typed at apply, sealed
// anew; refused unless it is the same repair (plans.Equivalent).
func underReason(reviewed *plans.Plan, reason string) (*plans.Plan, error) {
	if reviewed == nil {
		return nil, errors.New("no plan to apply: press p first")
	}
	p := *reviewed
	p.Reason = reason
	if err := p.Seal(); err != nil {
		return nil, err
	}
	if !plans.Equivalent(&p, reviewed) {
		return nil, errors.New("the plan to apply is not the one reviewed: press p to review it again; nothing was applied")
	}
	return &p, nil
}

// auditCmd reads the operation's audit as `opctl audit --biz-id` does.
func (m Model) auditCmd(bizID, pipeline string) tea.Cmd {
	ctx, open := m.ctx, m.opts.Service
	return safe(func() tea.Msg {
		svc, err := open()
		if err != nil {
			return auditMsg{bizID: bizID, err: err}
		}
		log, err := svc.Audit(ctx, sources.AuditFilter{BizID: bizID, Pipeline: pipeline})
		return auditMsg{bizID: bizID, log: log, err: err}
	})
}
