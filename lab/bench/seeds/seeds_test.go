package main

import (
	"context"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
)

// TestSeedsTiny runs the benchmark at a tiny size on seeds 001 and 003
// (seed 000 needs a binlog server: lab's TestSeedScenarioFromBinlog covers
// its reconcile), reconcile in process: the generator, the preset, the
// naive statements and the comparison keep working, and both sides find
// exactly what was planted.
func TestSeedsTiny(t *testing.T) {
	testenv.MySQL(t) // skips (or fails in CI) without MariaDB
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := run(ctx, options{Seeds: []string{"001", "003"}, Ops: 1000, Rate: 0.002, DSN: testenv.RootDSN(),
		InProcess: true, Since: "1d"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("%d results, want 2", len(res))
	}
	wantPlanted := map[string]map[string]int{
		"001": {"STRANDED": 2, "DUPLICATE_EFFECT": 2},
		"003": {"WRONGLY_SKIPPED": 2},
	}
	for _, r := range res {
		got := map[string]int{}
		for _, w := range r.Manifest {
			got[w.Verdict]++
		}
		for v, n := range wantPlanted[r.Seed] {
			if got[v] != n {
				t.Errorf("seed %s: %d planted %s, want %d", r.Seed, got[v], v, n)
			}
		}
		if !r.OpctlExact.Exact() || r.Opctl.Exit != 3 {
			t.Errorf("seed %s: opctl reconcile exit %d, exact %s", r.Seed, r.Opctl.Exit, r.OpctlExact)
		}
		if !r.NaiveExact.Exact() {
			t.Errorf("seed %s: naive exact %s", r.Seed, r.NaiveExact)
		}
		if r.Opctl.Rows <= 0 || r.Naive.Rows <= 0 {
			t.Errorf("seed %s: rows examined opctl %d, naive %d: not measured", r.Seed, r.Opctl.Rows, r.Naive.Rows)
		}
	}
}

// The comparison itself: a miss, an extra and a wrong verdict each make a
// run inexact.
func TestCompare(t *testing.T) {
	m := []want{{"A", "STRANDED"}, {"B", "DUPLICATE_EFFECT"}}
	for _, tc := range []struct {
		found map[string]string
		exact bool
	}{
		{map[string]string{"A": "STRANDED", "B": "DUPLICATE_EFFECT"}, true},
		{map[string]string{"A": "STRANDED"}, false},
		{map[string]string{"A": "STRANDED", "B": "DUPLICATE_EFFECT", "C": "STRANDED"}, false},
		{map[string]string{"A": "STRANDED", "B": "STRANDED"}, false},
	} {
		if x := compare(m, tc.found); x.Exact() != tc.exact {
			t.Errorf("%v: exact %v (%s), want %v", tc.found, x.Exact(), x, tc.exact)
		}
	}
}
