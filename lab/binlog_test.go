package lab_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/lab/consumer"
	"github.com/opctl-dev/opctl/lab/testenv"
)

// binlogSrv is the package's binlog test server (a second MariaDB with a ROW
// binlog), started by the first test that needs it.
var binlogSrv testenv.SharedBinlog

func TestMain(m *testing.M) {
	code := m.Run()
	binlogSrv.Stop()
	os.Exit(code)
}

// TestSeedScenarioFromBinlog runs settlement-double-debit on seed 000's own
// tables with the real consumer and the broker blip: where says
// DUPLICATE_EFFECT on the debit from the binlog alone, the repair reverses
// the second debit and compensates the second notify, and the invariants
// hold again.
func TestSeedScenarioFromBinlog(t *testing.T) {
	srv := binlogSrv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := lab.Start(ctx, lab.Options{MySQLDSN: srv.RootDSN, Timings: consumer.FastTimings()})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
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
	for _, c := range checks {
		if !c.OK || c.Report.Partial {
			t.Errorf("%s %s: where says %s (partial %v), want %s; sources %v", c.Scenario, c.BizID, c.Verdict, c.Report.Partial, c.Expectation.Verdict, c.Report.Sources)
		}
		if c.BizID == "PAY-BL-1" {
			for _, s := range c.Report.Steps {
				if s.Name == "debit" && (s.EvidenceCount != 2 || len(s.Evidence) != 2 || !s.Evidence[0].IsBinlogChange()) {
					t.Errorf("PAY-BL-1 debit: %+v", s)
				}
			}
		}
	}
	invs, err := env.Invariants(ctx, results)
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range invs {
		if strings.HasPrefix(inv.Name, "seed account") && inv.Holds {
			t.Errorf("the double debit did not happen: %s", inv.Detail)
		}
	}
	repairs, err := env.Repair(ctx, checks, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range repairs {
		if !r.OK {
			t.Errorf("repair %+v", r)
		}
	}
	invs, err = env.Invariants(ctx, results)
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range invs {
		if !inv.Holds {
			t.Errorf("after the repair: %s: %s", inv.Name, inv.Detail)
		}
	}
}

// The lab's copy of seed 000's schema is testdata's.
func TestSeedSchemaIsTestdata(t *testing.T) {
	lab, err := os.ReadFile("schema_seed000.sql")
	if err != nil {
		t.Fatal(err)
	}
	td, err := os.ReadFile("../testdata/schema/seed000.sql")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(lab), string(td)) {
		t.Fatal("lab/schema_seed000.sql differs from testdata/schema/seed000.sql (below its header)")
	}
}
