package lab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/lab/consumer"
	"github.com/opctl-dev/opctl/lab/downstream"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
)

// Repair is what the demo did about one affected operation.
type Repair struct {
	Scenario string       `json:"scenario"`
	BizID    string       `json:"biz_id"`
	Pipeline string       `json:"pipeline"`
	Before   inspect.Code `json:"before"`
	// PlanID is empty when there was no plan; Why then says why.
	PlanID string `json:"plan_id,omitempty"`
	Why    string `json:"why,omitempty"`
	// Attest is what the operator attested for a manual action.
	Attest string `json:"attest,omitempty"`
	// PlanText is the plan as `opctl repair show` renders it.
	PlanText string       `json:"-"`
	Applied  string       `json:"applied,omitempty"`
	After    inspect.Code `json:"after"`
	OK       bool         `json:"ok"`
}

// RepairTimeout bounds the wait for the redriven operations to settle.
const RepairTimeout = 40 * time.Second

// Repair plans and applies a repair for every affected operation of checks,
// exactly as `opctl repair plan` + `opctl repair apply --yes` do, then
// deploys the fixed consumers (naive ones with ResumeFromState) so that
// republished and redelivered messages are processed, and triages again
// until each operation is COMPLETE or SKIPPED_OK (or RepairTimeout).
func (e *Env) Repair(ctx context.Context, checks []Check, progress func(string)) ([]Repair, error) {
	if progress == nil {
		progress = func(string) {}
	}
	svc, closeFn, err := e.Service(5 * time.Second)
	if err != nil {
		return nil, err
	}
	defer closeFn()

	var out []Repair
	for _, c := range checks {
		if !c.Affected {
			continue
		}
		rp := Repair{Scenario: c.Scenario, BizID: c.BizID, Pipeline: c.Pipeline, Before: c.Verdict}
		opts := plans.Options{Reason: "lab/demo: " + c.Scenario, Operator: "lab/demo"}
		if c.Verdict == inspect.UnknownOutcome {
			// The operator asks the downstream team; the lab's journal answers.
			step, svc := e.unknownStep(c.Report)
			if svc == nil {
				rp.Why = "no downstream to ask for the unknown step"
				out = append(out, rp)
				continue
			}
			n := svc.Net(c.BizID)
			opts.Action, opts.FromStep, opts.Outcome = plans.Manual, step, "applied"
			if n == 0 {
				opts.Outcome = "absent"
			}
			opts.Attest = fmt.Sprintf("%s team checked their journal: %d effect(s) for %s", step, n, c.BizID)
			rp.Attest = opts.Attest
		}
		plan, _, err := svc.PlanID(ctx, c.BizID, c.Pipeline, opts)
		var nothing *plans.NothingToRepairError
		var refused *plans.RefusedError
		switch {
		case errors.As(err, &nothing):
			rp.Why = err.Error()
			progress(fmt.Sprintf("%s: %s", c.BizID, rp.Why))
			out = append(out, rp)
			continue
		case errors.As(err, &refused):
			rp.Why = err.Error()
			progress(fmt.Sprintf("%s: %s", c.BizID, rp.Why))
			out = append(out, rp)
			continue
		case err != nil:
			return out, fmt.Errorf("lab: plan for %s: %v", c.BizID, err)
		}
		var sb strings.Builder
		_ = plans.Render(&sb, plan, plans.RenderOptions{})
		rp.PlanID, rp.PlanText = plan.ID, sb.String()
		res, err := svc.Apply(ctx, plan, repair.ApplyOptions{Operator: "lab/demo"})
		if err != nil {
			rp.Applied = "refused: " + err.Error()
		} else {
			rp.Applied = fmt.Sprintf("%s %d/%d", res.Outcome, res.Applied+res.Previously, res.Total)
		}
		progress(fmt.Sprintf("%s: plan %.12s %s", c.BizID, plan.ID, rp.Applied))
		out = append(out, rp)
	}

	pipelines := make([]string, 0, len(checks))
	for _, c := range checks {
		pipelines = append(pipelines, c.Pipeline)
	}
	if err := e.DeployFixed(ctx, pipelines); err != nil {
		return out, err
	}
	progress("fixed consumers deployed; waiting for redriven operations")

	// Each round triages only the operations not yet settled: COMPLETE and
	// SKIPPED_OK are final once the fixed consumers run.
	deadline := time.Now().Add(RepairTimeout)
	for {
		pending := 0
		for i := range out {
			if out[i].OK {
				continue
			}
			r, err := e.Triage(ctx, svc, out[i].Pipeline, out[i].BizID)
			if err != nil {
				return out, err
			}
			out[i].After = r.Verdict.Code
			out[i].OK = r.Verdict.Code == inspect.Complete || r.Verdict.Code == inspect.SkippedOK
			if !out[i].OK {
				pending++
			}
		}
		if pending == 0 || time.Now().After(deadline) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// DeployFixed is what follows a repair in the lab: the in-flight owner
// finishes (its delay is cut short and its lease given back), and the
// fixed consumers are deployed on every pipeline (a naive one with its
// fix, an anchored one as it is) and on the seed pipelines among
// pipelines (their own consumers, unchanged: a republished message meets
// them). Repair calls it; `go run ./lab/demo --watch` calls it before the
// watch's recovery worker repairs.
func (e *Env) DeployFixed(ctx context.Context, pipelines []string) error {
	for _, c := range e.inflight {
		_ = c.Stop()
	}
	e.inflight = nil
	fixed := []string{"settlement", "settlement_anchored", "fulfilment", "fulfilment_anchored", "orders", "orders_anchored"}
	for _, p := range pipelines {
		if _, design := kindOf(p); design == consumer.Seed && !slices.Contains(fixed, p) {
			fixed = append(fixed, p)
		}
	}
	for _, name := range fixed {
		c, err := e.startFixed(ctx, name)
		if err != nil {
			return err
		}
		e.onClose(c.Kill)
	}
	return nil
}

// startFixed starts the post-incident consumer of a pipeline: a naive
// one with its fix (ResumeFromState), an anchored one as it is, and a
// seed's own consumer as its team wrote it.
func (e *Env) startFixed(ctx context.Context, pipeline string) (*consumer.Consumer, error) {
	cfg, err := e.consumerConfig(pipeline, pipeline+"-fixed")
	if err != nil {
		return nil, err
	}
	cfg.LeaseTTL, cfg.ResumeFromState, cfg.Timings = time.Minute, cfg.Design != consumer.Seed, e.timings
	// No scenario relies on these consumers' timeouts: a generous bound,
	// so that a loaded machine (CI runs every package at once) does not
	// turn a slow probe into an inconclusive one, and a redrive into a
	// parked UNKNOWN_OUTCOME.
	cfg.RPCTimeout = 5 * time.Second
	c, err := consumer.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("lab: start the fixed %s consumer: %v", pipeline, err)
	}
	return c, nil
}

// unknownStep returns the step of an UNKNOWN_OUTCOME and the downstream
// service that can answer for it.
func (e *Env) unknownStep(r inspect.Report) (string, *downstream.Service) {
	for _, f := range r.Findings {
		if f.Code != inspect.UnknownOutcome {
			continue
		}
		if svc := e.serviceOf(r.Pipeline, f.Step); svc != nil {
			return f.Step, svc
		}
	}
	return "", nil
}

// serviceOf is the lab downstream service that step of pipeline calls
// (nil for a step that calls none).
func (e *Env) serviceOf(pipeline, step string) *downstream.Service {
	set := e.Naive
	switch _, design := kindOf(pipeline); design {
	case consumer.Anchored:
		set = e.Anchored
	case consumer.Seed:
		set = e.Seeds
	}
	switch step {
	case "notify":
		return set.Notify
	case "wms_lock":
		return set.WMS
	case "logistics":
		return set.Logistics
	case "points":
		return set.Points
	}
	return nil
}
