package repair

import (
	"context"
	"errors"
	"fmt"

	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
)

// PlanApplier applies one plan (*Service).
type PlanApplier interface {
	Apply(ctx context.Context, plan *plans.Plan, o ApplyOptions) (*Result, error)
}

// ApplyEach applies the plans of a JSON lines file in turn
// (docs/repair.md): they are independent operations, so a plan that is
// refused or fails does not stop the others; an interrupt does. each is
// called with every plan's result and error as it ends (an error it
// returns stops the batch and is returned). ApplyEach returns nil when
// every plan applied, ctx's error when interrupted, else an *EachError
// with the plans that did not apply.
func ApplyEach(ctx context.Context, a PlanApplier, ps []*plans.Plan, o ApplyOptions, each func(p *plans.Plan, res *Result, err error) error) error {
	var failed EachError
	for _, p := range ps {
		res, err := a.Apply(ctx, p, o)
		if verr := each(p, res, err); verr != nil {
			return verr
		}
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		failed.Failed = append(failed.Failed, PlanError{Plan: p, Err: err})
	}
	if len(failed.Failed) == 0 {
		return nil
	}
	return &failed
}

// PlanError is a plan of a batch that did not apply, and why.
type PlanError struct {
	Plan *plans.Plan
	Err  error
}

// EachError is the plans of a batch (ApplyEach) that did not apply.
type EachError struct{ Failed []PlanError }

// Error counts them and names the first.
func (e *EachError) Error() string {
	f := e.Failed[0]
	return fmt.Sprintf("%d plan(s) did not apply; the first, %s (%s): %v", len(e.Failed), f.Plan.Short(), f.Plan.BizID, f.Err)
}

// ExitCode is the worst of the plans' exit statuses: an error wins over a
// refusal (docs/exit-codes.md).
func (e *EachError) ExitCode() int {
	worst := sources.ExitOK
	for _, f := range e.Failed {
		code := sources.ExitError
		var c interface{ ExitCode() int }
		if errors.As(f.Err, &c) {
			code = c.ExitCode()
		}
		if worst == sources.ExitOK || (worst == sources.ExitRefused && code != sources.ExitRefused) {
			worst = code
		}
	}
	return worst
}
