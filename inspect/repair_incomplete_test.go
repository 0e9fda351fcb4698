package inspect

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources"
)

// REPAIR_INCOMPLETE: opctl's newest plan of the operation stopped part-way
// (docs/verdicts.md).
func TestRepairIncomplete(t *testing.T) {
	row := func(plan string, index int, action, outcome string, actions int) sources.AuditAction {
		return sources.AuditAction{PlanID: plan, ActionIndex: index, Action: action, Outcome: outcome, PlanActions: actions, At: t0}
	}
	audit := func(rows ...sources.AuditAction) evOpt {
		return func(e *sources.Evidence) { e.DB.Audit = rows }
	}
	p1 := strings.Repeat("a", 64)
	p2 := strings.Repeat("b", 64)
	healthy := all(1, 1, acked("PAY-1:notify"))
	stranded := join(all(1, 1), state("LEDGER_DONE"), kafka(101, 0))
	cases := []struct {
		name     string
		opts     []evOpt
		want     Code
		findings bool // REPAIR_INCOMPLETE among the findings
		plan     string
	}{
		{"no audit", stranded, Stranded, false, ""},
		{"first of two actions took effect", join(stranded, audit(row(p1, 1, "rewind_state", "applied", 2))), RepairIncomplete, true, p1},
		{"republish left publishing", join(stranded, audit(row(p1, 1, "flip_skipped", "applied", 2), row(p1, 2, "republish", "publishing", 2))), RepairIncomplete, true, p1},
		{"compensation left compensating", join(stranded, audit(row(p1, 1, "compensate_remote", "compensating", 1))), RepairIncomplete, true, p1},
		{"every action took effect", join(stranded, audit(row(p1, 1, "rewind_state", "applied", 2), row(p1, 2, "republish", "published", 2))), Stranded, false, ""},
		{"superseded by a newer plan that finished", join(stranded, audit(row(p1, 1, "rewind_state", "applied", 2), row(p2, 1, "republish", "published", 1))), Stranded, false, ""},
		{"a newer plan stopped", join(stranded, audit(row(p1, 1, "republish", "published", 1), row(p2, 1, "rewind_state", "applied", 2))), RepairIncomplete, true, p2},
		{"moot: the consumer finished the operation", join(healthy, state("DONE"), kafka(101, 0), audit(row(p1, 1, "rewind_state", "applied", 2))), Complete, false, p1},
		{"an older opctl's row without plan_actions", join(stranded, audit(row(p1, 1, "rewind_state", "applied", 0))), Stranded, false, ""},
		{"in flight wins", join(stranded, lease("c-3", t0.Add(time.Hour)), audit(row(p1, 1, "rewind_state", "applied", 2))), InFlight, true, p1},
		{"watch verdicts do not hide it", join(all(1, 0), state("DEBIT_DONE"), kafka(100, 0), audit(row(p1, 1, "rewind_state", "applied", 2))), RepairIncomplete, true, p1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Diagnose(newEv(settlement(), c.opts...))
			if r.Verdict.Code != c.want {
				t.Fatalf("verdict %s (%s), want %s; findings %v", r.Verdict.Code, r.Verdict.Summary, c.want, r.Findings)
			}
			has := slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Code == RepairIncomplete })
			if has != c.findings {
				t.Fatalf("REPAIR_INCOMPLETE among the findings: %v, want %v (%v)", has, c.findings, r.Findings)
			}
			if got := ""; r.Repair != nil {
				got = r.Repair.PlanID
				if got != c.plan {
					t.Fatalf("repair plan %q, want %q", got, c.plan)
				}
			} else if c.plan != "" {
				t.Fatalf("no repair view, want plan %s", c.plan)
			}
			if c.want == RepairIncomplete {
				if r.Verdict.Severity != SeverityAction || ExitCode([]Report{r}) != 3 {
					t.Fatalf("severity %s exit %d", r.Verdict.Severity, ExitCode([]Report{r}))
				}
			}
		})
	}
}
