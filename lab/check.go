package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/opctl-dev/opctl/cmd"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/sources/connect"
)

// Check is one expectation of a scenario next to what `opctl where` says.
type Check struct {
	Scenario string `json:"scenario"`
	Expectation
	Verdict inspect.Code   `json:"verdict"`
	OK      bool           `json:"ok"`
	Report  inspect.Report `json:"-"`
}

// InvariantCheck is one invariant and whether it holds now.
type InvariantCheck struct {
	Scenario string `json:"scenario"`
	Name     string `json:"name"`
	Holds    bool   `json:"holds"`
	Detail   string `json:"detail"`
}

// Service opens the clients and the repair service `opctl` uses, on the
// lab's config (the same sources/connect and repair code); close releases
// them.
func (e *Env) Service(timeout time.Duration) (*repair.Service, func(), error) {
	c, err := connect.Open(e.Config, connect.Options{Timeout: timeout})
	if err != nil {
		return nil, nil, err
	}
	svc := cmd.NewRepairService(c, c.Triage())
	return svc, func() { svc.Close(); c.Close() }, nil
}

// Triage runs `where` for one id of one pipeline of the lab.
func (e *Env) Triage(ctx context.Context, svc *repair.Service, pipeline, bizID string) (inspect.Report, error) {
	t, err := svc.Triage.Triage(ctx, bizID, pipeline)
	if err != nil {
		return inspect.Report{}, err
	}
	return t.Ops[0].Report, nil
}

// Where is `opctl where ID --pipeline P`: Triage, and the NEXT lines the
// planner makes of a verdict that calls for a plan, as opctl prints them.
func (e *Env) Where(ctx context.Context, svc *repair.Service, pipeline, bizID string) (inspect.Report, error) {
	t, err := svc.Triage.Triage(ctx, bizID, pipeline)
	if err != nil {
		return inspect.Report{}, err
	}
	return cmd.NextFlags{}.Reports(t)[0], nil
}

// Check triages every expectation of the results with the same code as
// `opctl where` (its NEXT lines included) and compares verdicts.
func (e *Env) Check(ctx context.Context, results []Result) ([]Check, error) {
	svc, closeFn, err := e.Service(5 * time.Second)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	var out []Check
	for _, res := range results {
		for _, x := range res.Expect {
			r, err := e.Where(ctx, svc, x.Pipeline, x.BizID)
			if err != nil {
				return out, err
			}
			out = append(out, Check{Scenario: res.Scenario.Name, Expectation: x, Verdict: r.Verdict.Code,
				OK: r.Verdict.Code == x.Verdict, Report: r})
		}
	}
	return out, nil
}

// Invariants evaluates every scenario's invariants now.
func (e *Env) Invariants(ctx context.Context, results []Result) ([]InvariantCheck, error) {
	var out []InvariantCheck
	for _, res := range results {
		for _, inv := range res.Invariants {
			ok, detail, err := inv.Check(ctx, e)
			if err != nil {
				return out, fmt.Errorf("lab: invariant %q of %s: %v", inv.Name, res.Scenario.Name, err)
			}
			out = append(out, InvariantCheck{Scenario: res.Scenario.Name, Name: inv.Name, Holds: ok, Detail: detail})
		}
	}
	return out, nil
}
