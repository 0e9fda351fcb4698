// Package triage runs the read-then-diagnose cycle of `opctl where` for
// callers that need it outside the command (the lab, the demo, repair).
package triage

import (
	"context"
	"sync"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Triage collects and diagnoses one id in each given pipeline, concurrently.
// It fails only when MySQL cannot be reached at all (a *sources.ConnError).
func Triage(ctx context.Context, c *sources.Collector, pipelines []*config.Pipeline, bizID string) ([]inspect.Report, error) {
	reports := make([]inspect.Report, len(pipelines))
	errs := make([]error, len(pipelines))
	var wg sync.WaitGroup
	for i, p := range pipelines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev, err := c.Collect(ctx, p, bizID)
			if err != nil {
				errs[i] = err
				return
			}
			reports[i] = inspect.Diagnose(ev)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return reports, nil
}
