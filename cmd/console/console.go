// Package console runs `opctl tui` in this process: the opctl-tui binary
// and the demo link it, opctl does not (docs/tui.md#the-opctl-tui-binary).
package console

import (
	"context"
	"io"

	"github.com/opctl-dev/opctl/cmd"
	"github.com/opctl-dev/opctl/tui"
)

// Run is a cmd.Console: the tui package on the options `opctl tui` parsed.
func Run(ctx context.Context, in io.Reader, out io.Writer, o cmd.ConsoleOptions) error {
	return tui.Run(ctx, in, out, tui.Options{
		Service: func() (tui.Service, error) {
			s, err := o.Service()
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		Reconcile: o.Reconcile,
		Pipelines: o.Pipelines, Pipeline: o.Pipeline, Since: o.Since, OlderThan: o.OlderThan, Refresh: o.Refresh,
		ReadOnly: o.ReadOnly, Incident: o.Incident, Operator: o.Operator, BizID: o.BizID, Color: o.Color,
	})
}
