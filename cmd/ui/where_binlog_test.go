package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
)

// A binlog change is shown with its identity, time, before → after and
// attribution; values read from the binlog go through Safe.
func TestWhereBinlogChange(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC)
	row := func(id, before, after, how string) inspect.EvidenceRow {
		return inspect.EvidenceRow{Row: sources.Row{Columns: sources.BinlogColumns,
			Values: []sources.Value{id, "acct\x1b[31m", "-30.00", before, after, at, how}}}
	}
	rev := row("0-1-9#0", "70.00", "40.00", "message")
	rev.Reversed = true
	r := inspect.Report{BizID: "PAY-1", Pipeline: "settlement", Verdict: inspect.Verdict{Code: inspect.DuplicateEffect},
		Steps: []inspect.StepView{{Index: 1, Name: "debit", Kind: "local", Status: inspect.StepDuplicated, EvidenceCount: 1,
			Evidence: []inspect.EvidenceRow{row("0-1-5#0", "100.00", "70.00\x07", "transaction"), rev}}}}
	var b strings.Builder
	if err := Where(&b, false, Styles{}, []inspect.Report{r}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"change 0-1-5#0 at 2026-12-01 10:00:05 100.00 → \"70.00\\a\" (transaction)",
		"change 0-1-9#0 at 2026-12-01 10:00:05 70.00 → 40.00 (message) (reversed)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsAny(out, "\x07\x1b") {
		t.Errorf("raw control characters in the output:\n%q", out)
	}
}
