package repair

import (
	"context"
	"errors"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// PartitionCounter says how many partitions a topic has
// (sources/kafka.Reader implements it).
type PartitionCounter interface {
	PartitionCount(ctx context.Context, topic string) (int32, error)
}

// Prepare reads the operation bizID of pipeline p (exactly as `opctl where`
// does), diagnoses it and builds its plan: the whole of `opctl repair plan`
// for one id. counter may be nil (a republish is then refused unless the
// partitioner is "stored"). The report is returned with every outcome but a
// connection error, so that a caller can show why there is no plan.
func Prepare(ctx context.Context, cfg *config.Config, col *sources.Collector, counter PartitionCounter, p *config.Pipeline, bizID string, o Options) (*Plan, inspect.Report, error) {
	if col == nil || p == nil {
		return nil, inspect.Report{}, errors.New("repair: Prepare needs a collector and a pipeline")
	}
	ev, err := col.Collect(ctx, p, bizID)
	if err != nil {
		return nil, inspect.Report{}, err
	}
	return PrepareFrom(ctx, cfg, ev, counter, o)
}

// PrepareFrom diagnoses evidence already collected and builds its plan,
// reading the redrive topic's partition count when the report needs one.
func PrepareFrom(ctx context.Context, cfg *config.Config, ev sources.Evidence, counter PartitionCounter, o Options) (*Plan, inspect.Report, error) {
	rep := inspect.Diagnose(ev)
	var parts int32
	if counter != nil && ev.Pipeline != nil && ev.Sources["kafka"] == sources.StatusOK {
		if n, err := counter.PartitionCount(ctx, ev.Pipeline.EffectiveRedriveTopic()); err == nil {
			parts = n
		}
	}
	plan, err := Build(Input{Config: cfg, Report: rep, Evidence: &ev, RedrivePartitions: parts, Options: o})
	return plan, rep, err
}
