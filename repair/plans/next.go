package plans

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// StepKind is what a NEXT step does.
type StepKind string

// The kinds of NEXT step (docs/where.md "NEXT commands").
const (
	// StepWhere triages the id again: in Pipeline, or in every pipeline
	// when Pipeline is "". Again says when, Refused why not a plan.
	StepWhere StepKind = "where"
	// StepExplain explains Verdict.
	StepExplain StepKind = "explain"
	// StepProbe asks a downstream whether a call took effect: a GET of
	// URL (without the configured credentials; Redacted says some were
	// removed).
	StepProbe StepKind = "probe"
	// StepPlan makes the plan of BizID in Pipeline, with Action,
	// FromStep, Outcome and an attestation (Attest) when set; the reason
	// is the operator's.
	StepPlan StepKind = "plan"
	// StepDryRun dry-runs the plan StepPlan made.
	StepDryRun StepKind = "dry_run"
	// StepFinish dry-runs, to review and then apply, the stored plan
	// PlanID that stopped part-way.
	StepFinish StepKind = "finish"
)

// Again says when a StepWhere is worth running.
type Again string

// The reasons to triage again.
const (
	// AgainAnywhere: in every configured pipeline (no pipeline knows the
	// id in the one asked).
	AgainAnywhere Again = "anywhere"
	// AgainLease: after the live lease expires.
	AgainLease Again = "lease"
	// AgainRead: once every query reads.
	AgainRead Again = "read"
	// AgainConsumer: once the consumer has caught up.
	AgainConsumer Again = "consumer"
)

// Step is one thing to do next, as data: the planner makes them (Next),
// and each front end says them its own way: cmd as shell lines to paste,
// the console as its keys.
type Step struct {
	Kind     StepKind
	BizID    string
	Pipeline string
	// Verdict is the verdict StepExplain explains.
	Verdict inspect.Code
	// Again is when a StepWhere is worth running ("" with Refused).
	Again Again
	// Refused is the planner's refusal that makes a StepWhere stand where
	// a plan would; IfOutcome, when set, is the downstream's answer
	// (applied, absent) that plan was tried with.
	Refused   error
	IfOutcome string
	// Action, FromStep, Outcome and Attest are the options of a StepPlan
	// (Attest: it needs the operator's attestation).
	Action   ActionType
	FromStep string
	Outcome  string
	Attest   bool
	// Undo is what the operator does by hand before a StepPlan's
	// attestation (its manual actions' instructions, printable).
	Undo string
	// Shared marks the StepPlan of a step whose binlog changes other
	// operations may own: the operator finds out which are this one's
	// (docs/where.md#binlog-evidence).
	Shared bool
	// PlanID is the stored plan a StepFinish finishes.
	PlanID string
	// URL is a StepProbe's GET; Redacted: credentials were removed.
	URL      string
	Redacted bool
}

// Next is the NEXT of a report, made by the planner itself rather than
// guessed (docs/where.md "NEXT commands"): for a verdict that calls for a
// plan, the plan Build makes of it (`--attest` and what to undo by hand
// when it has a manual action), or, when Build would refuse, a triage
// again with the refusal; UNKNOWN_OUTCOME gets its probes and one plan per
// downstream answer (applied, absent) that makes one. Other verdicts get
// what the operator can do: triage again later, finish a stopped plan,
// explain. It does no I/O: in is what `opctl repair plan` would build
// from (its Options are ignored).
func Next(in Input) []Step {
	r := in.Report
	id, pl, code := r.BizID, r.Pipeline, r.Verdict.Code
	where := Step{Kind: StepWhere, BizID: id, Pipeline: pl}
	explain := Step{Kind: StepExplain, Verdict: code}
	dryRun := Step{Kind: StepDryRun}
	plan := Step{Kind: StepPlan, BizID: id, Pipeline: pl}
	try := func(o Options) (*Plan, error) {
		o.Reason, o.Operator, o.Now = "next", "", time.Unix(0, 0)
		in.Options = o
		return Build(in)
	}
	again := func(a Again) []Step {
		where.Again = a
		return []Step{where, explain}
	}
	switch code {
	case inspect.NotFound:
		return []Step{{Kind: StepWhere, BizID: id, Again: AgainAnywhere}}
	case inspect.InFlight:
		return again(AgainLease)
	case inspect.RepairIncomplete:
		if r.Repair == nil {
			return []Step{explain}
		}
		return []Step{{Kind: StepFinish, BizID: id, Pipeline: pl, PlanID: r.Repair.PlanID}, explain}
	case inspect.UnknownOutcome:
		// No answer says whether the call took effect: a plan needs what
		// the downstream's team says, attested (docs/repair.md).
		out := probes(&r, pipelineOf(in))
		step := unknownStep(&r)
		shared := false
		if v := stepNamed(&r, step); v != nil && v.Status == inspect.StepAmbiguous {
			shared = true
		}
		planned := 0
		for _, outcome := range []string{inspect.AttestApplied, inspect.AttestAbsent} {
			if _, err := try(Options{Action: Manual, FromStep: step, Outcome: outcome, Attest: "next"}); err != nil {
				w := where
				w.Refused, w.IfOutcome = err, outcome
				out = append(out, w)
				continue
			}
			p := plan
			p.Action, p.FromStep, p.Outcome, p.Attest, p.Shared = Manual, step, outcome, true, shared
			out = append(out, p)
			planned++
		}
		if planned > 0 {
			out = append(out, dryRun)
		}
		return append(out, explain)
	case inspect.DuplicateEffect, inspect.WronglySkipped, inspect.MissingEffect, inspect.StateBehind, inspect.Stranded:
		p, err := try(Options{Attest: "next"})
		if err != nil {
			where.Refused = err
			return []Step{where, explain}
		}
		if undo := manualUndo(p); undo != "" {
			plan.Attest, plan.Undo = true, undo
		}
		return []Step{plan, dryRun, explain}
	case inspect.ReadError:
		return again(AgainRead)
	case inspect.WillRedeliver, inspect.CompleteUncommitted, inspect.Incomplete:
		return again(AgainConsumer)
	case inspect.Failed:
		return []Step{explain}
	}
	return []Step{}
}

// pipelineOf is the pipeline of the report: the evidence's, else the
// configuration's; nil when neither knows it.
func pipelineOf(in Input) *config.Pipeline {
	if in.Evidence != nil && in.Evidence.Pipeline != nil {
		return in.Evidence.Pipeline
	}
	if in.Config != nil {
		return in.Config.Pipeline(in.Report.Pipeline)
	}
	return nil
}

// probes are the probe steps of UNKNOWN_OUTCOME: one GET per unknown call
// of a step whose probe has {request_id}, one per step whose probe has
// {biz_id}; the URL without its userinfo (sources.RedactURL).
func probes(r *inspect.Report, p *config.Pipeline) []Step {
	if p == nil {
		return nil
	}
	var out []Step
	for _, f := range r.Findings {
		if f.Code != inspect.UnknownOutcome {
			continue
		}
		i := p.StepIndex(f.Step)
		if i < 0 || i >= len(r.Steps) || p.Steps[i].Probe == "" {
			continue
		}
		var urls []string
		if strings.Contains(p.Steps[i].Probe, "{request_id}") {
			for _, in := range r.Steps[i].Intents {
				if in.Outcome == inspect.IntentUnknown {
					urls = append(urls, sources.Expand(p.Steps[i].Probe, map[string]string{"request_id": in.RequestID, "biz_id": r.BizID}, true))
				}
			}
		} else {
			urls = append(urls, sources.Expand(p.Steps[i].Probe, map[string]string{"biz_id": r.BizID}, true))
		}
		for _, u := range urls {
			// Never the configured credentials (docs/where.md#next-commands).
			s := Step{Kind: StepProbe, BizID: r.BizID, Pipeline: r.Pipeline, URL: sources.RedactURL(u), Redacted: sources.RedactURL(u) != u}
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// unknownStep is the step an UNKNOWN_OUTCOME plan attests (the first
// finding's; the planner takes it as --from-step).
func unknownStep(r *inspect.Report) string {
	for _, f := range r.Findings {
		if f.Code == inspect.UnknownOutcome && f.Step != "" {
			return f.Step
		}
	}
	return ""
}

// stepNamed is the view of the step named step, nil when none is.
func stepNamed(r *inspect.Report, step string) *inspect.StepView {
	for i := range r.Steps {
		if r.Steps[i].Name == step {
			return &r.Steps[i]
		}
	}
	return nil
}

// manualUndo says what the plan's manual actions leave to the operator
// ("undo 1 extra effect(s) of step notify by hand (PAY-1:notify:2)"), ""
// without any.
func manualUndo(p *Plan) string {
	var s []string
	for _, a := range p.Actions {
		if a.Type == Manual && a.Manual != nil {
			s = append(s, a.Manual.Instructions)
		}
	}
	return Printable(strings.Join(s, "; "))
}

// Why is the planner's refusal of a step as one line, its options spelled
// by w (Flags: as opctl says it): a refusal's detail (or the error's
// text, Phrase), Printable, so that a control character or a newline from
// the database is an escape.
func Why(err error, w Words) string {
	var rf *RefusedError
	if errors.As(err, &rf) && rf.Detail != "" {
		if rf.Text.Format != "" {
			return Printable(rf.Text.Phrase(w))
		}
		return Printable(rf.Detail)
	}
	return Printable(Phrase(err, w))
}
