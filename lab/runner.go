package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/lab/consumer"
)

// Progress is reported while scenarios run.
type Progress struct {
	Index, Total int
	Scenario     string
	// Done is false when the scenario starts, true when it ended.
	Done    bool
	Err     error
	Elapsed time.Duration
}

// ScenarioTimeout bounds one scenario.
const ScenarioTimeout = 30 * time.Second

// Run runs the named scenarios (all when names is empty), in the order of
// Scenarios(), and returns their results. Consumers are stopped after each
// scenario, except the in-flight one's, which keep their lease until Close.
func (e *Env) Run(ctx context.Context, names []string, progress func(Progress)) ([]Result, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var list []Scenario
	for _, s := range Scenarios() {
		if len(want) == 0 || want[s.Name] {
			list = append(list, s)
			delete(want, s.Name)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("lab: no scenario %q (have: %s)", n, scenarioNames())
	}
	producer, err := sarama.NewSyncProducer(e.Cluster.Brokers, consumer.ProducerConfig("opctl-lab-producer"))
	if err != nil {
		return nil, fmt.Errorf("lab: producer: %v", err)
	}
	defer producer.Close()

	rec := newRecorder()
	var results []Result
	for i, s := range list {
		if progress != nil {
			progress(Progress{Index: i, Total: len(list), Scenario: s.Name})
		}
		start := time.Now()
		res := Result{Scenario: s}
		r := &run{e: e, rec: rec, producer: producer, res: &res}
		sctx, cancel := context.WithTimeout(ctx, ScenarioTimeout)
		res.Err = s.run(sctx, r)
		cancel()
		for _, x := range res.Expect {
			if x.Affected {
				res.Story = append(res.Story, x.BizID+": "+fmtEvents(rec.of(x.BizID)))
			}
		}
		if r.keepLive {
			e.inflight = append(e.inflight, r.live...)
		} else {
			for _, c := range r.live {
				c.Kill()
			}
		}
		res.Elapsed = time.Since(start)
		results = append(results, res)
		if progress != nil {
			progress(Progress{Index: i, Total: len(list), Scenario: s.Name, Done: true, Err: res.Err, Elapsed: res.Elapsed})
		}
		if ctx.Err() != nil {
			return results, ctx.Err()
		}
	}
	return results, nil
}

func scenarioNames() string {
	var out string
	for i, s := range Scenarios() {
		if i > 0 {
			out += ", "
		}
		out += s.Name
	}
	return out
}
