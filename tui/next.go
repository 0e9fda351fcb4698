package tui

import (
	"context"

	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/repair/plans"
)

// where triages one id with the read side and gives each operation the
// NEXT the planner makes of it, as `opctl where` shows it.
func where(ctx context.Context, tr Triager, bizID, pipeline string) (*triage.Result, error) {
	t, err := tr.Triage(ctx, bizID, pipeline)
	if err != nil {
		return nil, err
	}
	for i := range t.Ops {
		op := &t.Ops[i]
		op.Report.Verdict.Next = plans.NextLines(plans.Input{Config: t.Config, Report: op.Report, Evidence: &op.Evidence, RedrivePartitions: op.RedrivePartitions})
	}
	return t, nil
}
