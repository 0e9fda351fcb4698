package render

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
			Evidence: []inspect.EvidenceRow{row("0-1-5#0", "100.00", "70.00\x07", "transaction"), rev}}},
		Timeline: []inspect.Event{{At: at.Add(-700 * time.Millisecond), Source: "kafka", What: "message produced"},
			{At: at, Source: "binlog account_balance", What: "debit: change", Resolution: inspect.ResolutionSecond}}}
	var b strings.Builder
	if err := Where(&b, []inspect.Report{r}, WhereOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"change 0-1-5#0 at 2026-12-01 10:00:05 100.00 → \"70.00\\a\" (transaction)",
		"change 0-1-9#0 at 2026-12-01 10:00:05 70.00 → 40.00 (message) (reversed)",
		"2026-12-01 10:00:04.300",
		"binlog times are whole seconds",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "10:00:05.000") {
		t.Errorf("a binlog time shown with a fake fraction:\n%s", out)
	}
	if strings.ContainsAny(out, "\x07\x1b") {
		t.Errorf("raw control characters in the output:\n%q", out)
	}
}

// An ambiguous binlog step says its count range and which changes other
// operations may own.
func TestWhereBinlogAmbiguous(t *testing.T) {
	r := inspect.Report{BizID: "PAY-1", Pipeline: "settlement", Verdict: inspect.Verdict{Code: inspect.UnknownOutcome},
		Steps: []inspect.StepView{{Index: 1, Name: "debit", Kind: "local", Status: inspect.StepAmbiguous, EvidenceCount: 2,
			Binlog: &inspect.BinlogView{Key: "1001", Delta: "-30.00", CountMin: 1, CountMax: 2,
				Competitors: []sources.Competitor{{BizID: "PAY-2", Found: "message", Processed: "step ledger has an evidence row"}},
				Shared:      []sources.SharedChange{{ID: "0-1-5#0", With: []string{"PAY-2"}}, {ID: "0-1-6#0", With: []string{"PAY-2"}}}}}}}
	var b strings.Builder
	if err := Where(&b, []inspect.Report{r}, WhereOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ambiguous", "count 1 to 2", "shared with PAY-2 (message, ran: step ledger has an evidence row): 0-1-5#0, 0-1-6#0"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}
