package lab

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
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

// Run runs scenarios (Select names them) in the given order and returns
// their results. Consumers are stopped after each scenario, except the
// in-flight one's, which keep their lease until Close. They run with
// Options.Timings, as Repair's fixed consumers do.
func (e *Env) Run(ctx context.Context, list []Scenario, progress func(Progress)) ([]Result, error) {
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
			killAll(r.live)
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

// killAll kills consumers at once, as a crash of the whole deployment would:
// none of them sees the others leave (no rebalance hands one of them the
// others' partitions on the way out), and no one waits for the next.
func killAll(cs []*consumer.Consumer) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Kill()
		}()
	}
	wg.Wait()
}

// Select returns the named scenarios (every one of Scenarios() when names
// is empty) in the order of Scenarios(), BinlogScenarios(),
// StrandedSeedScenarios() and SeedScenarios(), each once; a name that is no scenario is an error.
func Select(names []string) ([]Scenario, error) {
	want := map[string]bool{}
	for _, n := range names {
		if !isScenario(n) {
			return nil, fmt.Errorf("no scenario %q (have: %s)", n, strings.Join(ScenarioNames(), ", "))
		}
		want[n] = true
	}
	var list []Scenario
	for _, s := range Scenarios() {
		if len(names) == 0 || want[s.Name] {
			list = append(list, s)
		}
	}
	for _, s := range slices.Concat(BinlogScenarios(), StrandedSeedScenarios(), SeedScenarios()) {
		if want[s.Name] {
			list = append(list, s)
		}
	}
	return list, nil
}

// allScenarios are Scenarios, BinlogScenarios, StrandedSeedScenarios and
// SeedScenarios.
func allScenarios() []Scenario {
	return slices.Concat(Scenarios(), BinlogScenarios(), StrandedSeedScenarios(), SeedScenarios())
}

// ScenarioNames lists the scenarios in the order they run.
func ScenarioNames() []string {
	var out []string
	for _, s := range allScenarios() {
		out = append(out, s.Name)
	}
	return out
}

// isScenario reports whether name is a scenario.
func isScenario(name string) bool {
	for _, s := range allScenarios() {
		if s.Name == name {
			return true
		}
	}
	return false
}
