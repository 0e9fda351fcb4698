package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/internal/triage"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	kafkasrc "github.com/opctl-dev/opctl/sources/kafka"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
	"github.com/opctl-dev/opctl/sources/probe"
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

// Collector builds the same collector `opctl where` uses, on the lab's
// config; close releases its connections.
func (e *Env) Collector(timeout time.Duration) (*sources.Collector, func(), error) {
	db, err := mysqlsrc.Open(e.Config.MySQL.DSN, timeout)
	if err != nil {
		return nil, nil, err
	}
	k := kafkasrc.New(e.Config.Kafka, timeout)
	c := &sources.Collector{DB: db, Kafka: k, Prober: probe.New(timeout), AuditTable: e.Config.Audit.AuditTable(), Timeout: timeout}
	return c, func() { k.Close(); db.Close() }, nil
}

// Triage runs `where` for one id of one pipeline of the lab.
func (e *Env) Triage(ctx context.Context, c *sources.Collector, pipeline, bizID string) (inspect.Report, error) {
	p := e.Config.Pipeline(pipeline)
	if p == nil {
		return inspect.Report{}, fmt.Errorf("lab: no pipeline %q", pipeline)
	}
	rs, err := triage.Triage(ctx, c, []*config.Pipeline{p}, bizID)
	if err != nil {
		return inspect.Report{}, err
	}
	return rs[0], nil
}

// Check triages every expectation of the results with the same code as
// `opctl where` and compares verdicts.
func (e *Env) Check(ctx context.Context, results []Result) ([]Check, error) {
	c, closeFn, err := e.Collector(5 * time.Second)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	var out []Check
	for _, res := range results {
		for _, x := range res.Expect {
			r, err := e.Triage(ctx, c, x.Pipeline, x.BizID)
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
