package lab_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd"
	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/lab/consumer"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sop"
)

// TestRunbooksOnTheLab runs, for every affected operation of every
// scenario whose verdict calls for action, `opctl sop run --biz-id ID
// --yes` (no runbook name: the runbook of its verdict) on the lab the real
// consumers and faults left: each run finishes, its verify step sees one of
// the verdicts it expects, and where (a moment later, with the lab's
// consumers live) gives one of them too.
func TestRunbooksOnTheLab(t *testing.T) {
	testenv.MySQL(t)
	t.Setenv("XDG_STATE_HOME", t.TempDir()) // the run records
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, err := lab.Start(ctx, lab.Options{MySQLDSN: testenv.RootDSN(), Timings: consumer.FastTimings()})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	results, err := env.Run(ctx, lab.Scenarios(), nil)
	if err != nil {
		t.Fatal(err)
	}
	checks, err := env.Check(ctx, results)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for _, c := range checks {
		if !c.Affected || inspect.SeverityOf(c.Verdict) != inspect.SeverityAction {
			continue
		}
		t.Run(c.BizID, func(t *testing.T) {
			args := []string{"--config", env.ConfigPath, "sop", "run", "--biz-id", c.BizID, "--pipeline", c.Pipeline,
				"--reason", "lab: " + c.Scenario, "--operator", "lab-test", "--yes", "-o", "json"}
			if c.Verdict == inspect.UnknownOutcome {
				// The operator asks the logistics team; the lab's journal answers.
				outcome := "applied"
				if env.Anchored.Logistics.Net(c.BizID) == 0 {
					outcome = "absent"
				}
				args = append(args, "--action", "manual", "--outcome", outcome, "--attest", fmt.Sprintf("logistics team checked %s: %s", c.BizID, outcome))
			}
			ios, _, out, errOut := iostreams.Test()
			code := cmd.Run(ctx, ios, args)
			var last, sum map[string]any
			sc := bufio.NewScanner(strings.NewReader(out.String()))
			for sc.Scan() {
				var m map[string]any
				if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
					t.Fatalf("not JSON: %q", sc.Text())
				}
				if _, ok := m["run_id"]; ok {
					sum = m
				} else {
					last = m
				}
			}
			if code != 0 || sum == nil || sum["outcome"] != "done" {
				t.Fatalf("%s (%s): exit %d\n%s\n%s", c.BizID, c.Verdict, code, out, errOut)
			}
			ran[fmt.Sprint(sum["runbook"])] = true
			if last["type"] != "verify" {
				t.Fatalf("the run ends with %v, want a verify", last)
			}
			svc, closeFn, err := env.Service(5 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer closeFn()
			r, err := env.Triage(ctx, svc, c.Pipeline, c.BizID)
			if err != nil {
				t.Fatal(err)
			}
			// The lab's consumers are live: the republished message may
			// already be read, so where is any verdict the verify accepts.
			lib, err := sop.Builtins()
			if err != nil {
				t.Fatal(err)
			}
			rb, _ := lib.Get(fmt.Sprint(sum["runbook"]))
			expect := rb.Steps[len(rb.Steps)-1].Expect
			if !slices.Contains(expect, inspect.Code(fmt.Sprint(last["verdict"]))) || !slices.Contains(expect, r.Verdict.Code) {
				t.Fatalf("the verify saw %v and where says %s; the runbook expects %v", last["verdict"], r.Verdict.Code, expect)
			}
		})
	}
	for _, want := range []string{"duplicate-effect", "wrongly-skipped", "stranded", "unknown-outcome", "state-behind"} {
		if !ran[want] {
			t.Errorf("no lab incident ran %s (ran %v)", want, ran)
		}
	}
}
