package triage

import (
	"context"
	"errors"
	"testing"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

func op(pipeline string, code inspect.Code) Operation {
	return Operation{Pipeline: &config.Pipeline{Name: pipeline},
		Report: inspect.Report{BizID: "PAY-1", Pipeline: pipeline, Verdict: inspect.Verdict{Code: code}, Steps: []inspect.StepView{{Name: "s"}}}}
}

// TestResult: what `where` shows and what a repair acts on, from the
// operations of every pipeline triaged.
func TestResult(t *testing.T) {
	names := []string{"settlement", "orders"}
	for _, c := range []struct {
		name     string
		asked    string
		ops      []Operation
		shown    []string // the pipelines of the reports shown
		one      string   // the pipeline a repair acts on
		notFound bool
		ambig    bool
	}{
		{name: "known to one of two", ops: []Operation{op("settlement", inspect.Stranded), op("orders", inspect.NotFound)},
			shown: []string{"settlement"}, one: "settlement"},
		{name: "known to both", ops: []Operation{op("settlement", inspect.Stranded), op("orders", inspect.Complete)},
			shown: []string{"settlement", "orders"}, ambig: true},
		{name: "known to none: one NOT_FOUND for all", ops: []Operation{op("settlement", inspect.NotFound), op("orders", inspect.NotFound)},
			shown: []string{""}, notFound: true},
		{name: "the pipeline asked, whatever it knows", asked: "orders", ops: []Operation{op("orders", inspect.NotFound)},
			shown: []string{"orders"}, one: "orders"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Result{BizID: "PAY-1", Pipeline: c.asked, Ops: c.ops, Names: names}
			rs := r.Reports()
			if len(rs) != len(c.shown) {
				t.Fatalf("reports %+v, want pipelines %v", rs, c.shown)
			}
			for i, p := range c.shown {
				if rs[i].Pipeline != p {
					t.Errorf("report %d of pipeline %q, want %q", i, rs[i].Pipeline, p)
				}
			}
			if c.notFound && (rs[0].Verdict.Summary != "PAY-1 is not known to any pipeline (settlement, orders)" || len(rs[0].Steps) != 0) {
				t.Errorf("not found: %+v", rs[0])
			}
			got, err := r.One()
			var nf *inspect.NotFoundError
			var am *AmbiguousError
			switch {
			case c.notFound:
				if !errors.As(err, &nf) || nf.ExitCode() != sources.ExitNotFound {
					t.Errorf("One: %v, want not found", err)
				}
			case c.ambig:
				if !errors.As(err, &am) || am.ExitCode() != sources.ExitUsage || len(am.Pipelines) != 2 {
					t.Errorf("One: %v, want ambiguous between both", err)
				}
			case err != nil || got.Pipeline.Name != c.one:
				t.Errorf("One: %v %v, want %s", got, err, c.one)
			}
		})
	}
}

type counter struct{ n int32 }

func (c counter) PartitionCount(context.Context, string) (int32, error) { return c.n, nil }

// TestRedrivePartitions: read only when Kafka answered the operation's
// read, and 0 (unknown) without a counter.
func TestRedrivePartitions(t *testing.T) {
	p := &config.Pipeline{Name: "settlement", Topic: "t"}
	ok := sources.Evidence{Sources: map[string]string{"kafka": sources.StatusOK}}
	down := sources.Evidence{Sources: map[string]string{"kafka": "failed: refused"}}
	if n := RedrivePartitions(context.Background(), counter{8}, p, ok); n != 8 {
		t.Errorf("kafka ok: %d, want 8", n)
	}
	if n := RedrivePartitions(context.Background(), counter{8}, p, down); n != 0 {
		t.Errorf("kafka down: %d, want 0", n)
	}
	if n := RedrivePartitions(context.Background(), nil, p, ok); n != 0 {
		t.Errorf("no counter: %d, want 0", n)
	}
}
