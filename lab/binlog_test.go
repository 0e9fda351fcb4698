package lab_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/lab/testenv"
)

// binlogSrv is the package's binlog test server (a second MariaDB with a ROW
// binlog), started by the first test that needs it.
var binlogSrv testenv.SharedBinlog

func TestMain(m *testing.M) { os.Exit(binlogSrv.Main(m)) }

// TestSeedScenarioFromBinlog runs settlement-double-debit on seed 000's own
// tables (the seed000 preset's pipeline) with the real consumer and the
// broker blip: where says DUPLICATE_EFFECT on the debit from the binlog
// alone, with PAY-BL-1's two changes, COMPLETE for the healthy PAY-BL-2 and
// for the look-alike PAY-BL-3 (the same account, the same amount, once,
// inside PAY-BL-1's window); the repair reverses PAY-BL-1's second debit,
// after which it reads COMPLETE, and the balances hold again.
func TestSeedScenarioFromBinlog(t *testing.T) {
	srv := binlogSrv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := startSeedLab(ctx, t, srv.RootDSN)
	if !env.Binlog || env.Config.Pipeline("settlement_seed") == nil {
		t.Fatalf("the lab on a ROW binlog server has no seed pipeline (binlog %v)", env.Binlog)
	}
	results, err := env.Run(ctx, lab.BinlogScenarios(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("scenario %s: %v", r.Scenario.Name, r.Err)
		}
	}
	checks, err := env.Check(ctx, results)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("where", func(t *testing.T) {
		for _, c := range checks {
			if !c.OK || c.Report.Partial {
				t.Errorf("%s %s: where says %s (partial %v), want %s; sources %v", c.Scenario, c.BizID, c.Verdict, c.Report.Partial, c.Expectation.Verdict, c.Report.Sources)
			}
		}
		// The wall time of a triage that reads the binlog, for the record
		// (measured, not asserted): where PAY-BL-1, five times.
		svc, closeFn, err := env.Service(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer closeFn()
		var took []time.Duration
		for range 5 {
			start := time.Now()
			if _, err := env.Where(ctx, svc, "settlement_seed", "PAY-BL-1"); err != nil {
				t.Fatal(err)
			}
			took = append(took, time.Since(start).Round(time.Millisecond))
		}
		t.Logf("where PAY-BL-1 (binlog step): %v", took)
	})
	// Each operation counts its own changes of its account: PAY-BL-1 two,
	// the others one. PAY-BL-3's change is inside PAY-BL-1's window, but
	// PAY-BL-3 must own one change and has no other in its own window
	// (docs/where.md#binlog-evidence).
	t.Run("attribution", func(t *testing.T) {
		for _, c := range checks {
			want := map[string]int{"PAY-BL-1": 2, "PAY-BL-2": 1, "PAY-BL-3": 1}[c.BizID]
			for _, s := range c.Report.Steps {
				if s.Name == "debit" && (s.EvidenceCount != want || len(s.Evidence) != want || !s.Evidence[0].IsBinlogChange()) {
					t.Errorf("%s debit: %d changes, want %d: %+v", c.BizID, s.EvidenceCount, want, s.Evidence)
				}
			}
		}
	})
	t.Run("reconcile", func(t *testing.T) {
		for _, r := range results {
			seedReconcile(ctx, t, env, r)
		}
	})
	invs, err := env.Invariants(ctx, results)
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range invs {
		if strings.HasPrefix(inv.Name, "seed account 3001") == inv.Holds {
			t.Errorf("before the repair: %s: holds %v: %s", inv.Name, inv.Holds, inv.Detail)
		}
	}
	// The repair reverses PAY-BL-1's second debit, never PAY-BL-3's: the
	// balances hold and every operation reads COMPLETE.
	t.Run("repair", func(t *testing.T) { repairSeeds(ctx, t, env, results, checks) })
}

// The lab's copies of the seeds' schemas are testdata's, below their
// headers.
func TestSeedSchemaIsTestdata(t *testing.T) {
	for _, n := range []string{"000", "001", "003"} {
		lab, err := os.ReadFile("schema_seed" + n + ".sql")
		if err != nil {
			t.Fatal(err)
		}
		td, err := os.ReadFile("../testdata/schema/seed" + n + ".sql")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(lab), string(td)) {
			t.Errorf("lab/schema_seed%s.sql differs from testdata/schema/seed%s.sql (below its header)", n, n)
		}
	}
}
