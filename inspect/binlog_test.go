package inspect

import (
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Seed 000's pipeline on its own schema: the debit's evidence is the binlog's
// changes of the account's row (docs/where.md#binlog-evidence); the verdict
// follows from their count, less what opctl reversed.
func TestBinlogDebit(t *testing.T) {
	p := &config.Pipeline{Name: "settlement", Topic: "settlement-event", MessageKey: "{biz_id}", Steps: []config.Step{
		{Name: "debit", Kind: config.KindLocal, Binlog: &config.Binlog{Table: "account_balance", Key: "account_id", Delta: "balance",
			MessageKey: "$.account_id", MessageDelta: "-$.amount", Transaction: "ledger_entry.biz_order_id"}},
		{Name: "ledger", Kind: config.KindLocal, Evidence: "SELECT id, direction, amount, created_at FROM ledger_entry WHERE biz_order_id = ?"},
	}}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	changes := func(n int) []sources.Row {
		var cs []sources.BinlogChange
		for i := range n {
			cs = append(cs, sources.BinlogChange{GTID: "0-1-" + string(rune('5'+i)), Key: int64(1001), At: at,
				Before: []string{"500.00", "470.00", "440.00"}[i], After: []string{"470.00", "440.00", "410.00"}[i]})
		}
		rows, err := sources.AttributeChanges(cs, "PAY-1", "-30.00", true)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	ledger := []sources.Row{{Columns: []string{"id", "direction", "amount", "created_at"}, Values: []sources.Value{int64(1), "OUT", "30.00", at}}}
	reversal := []sources.AuditAction{{PlanID: "p1", ActionIndex: 1, Action: "reverse", Outcome: "applied", Step: "debit", ReversedID: "0-1-6#0", PlanActions: 1, At: at}}
	cases := []struct {
		name      string
		debit     sources.StepEvidence
		audit     []sources.AuditAction
		binlog    string
		verdict   Code
		status    StepStatus
		count     int
		detail    string
		partial   bool
		reversedN int
	}{
		{"two debits: DUPLICATE_EFFECT from the binlog alone", sources.StepEvidence{Name: "debit", Rows: changes(2)}, nil, sources.StatusOK,
			DuplicateEffect, StepDuplicated, 2, "2 changes of account_balance in the binlog", false, 0},
		{"one debit", sources.StepEvidence{Name: "debit", Rows: changes(1)}, nil, sources.StatusOK,
			Incomplete, StepApplied, 1, "", false, 0},
		{"two debits, the newest reversed by opctl", sources.StepEvidence{Name: "debit", Rows: changes(2)}, reversal, sources.StatusOK,
			Incomplete, StepApplied, 1, "", false, 1},
		{"three debits, one reversed: still duplicated", sources.StepEvidence{Name: "debit", Rows: changes(3)}, reversal, sources.StatusOK,
			DuplicateEffect, StepDuplicated, 2, "2 changes of account_balance in the binlog", false, 1},
		{"the window purged: unknown, partial, never COMPLETE", sources.StepEvidence{Name: "debit", BinlogErr: "debit: binlog: the changes of the window were purged"}, nil,
			"debit: binlog: the changes of the window were purged", ReadError, StepUnknown, 0, "purged", true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := sources.Evidence{BizID: "PAY-1", Pipeline: p,
				DB:      sources.DBEvidence{Now: at, Steps: []sources.StepEvidence{c.debit, {Name: "ledger", Rows: ledger}}, Audit: c.audit},
				Sources: map[string]string{"mysql": sources.StatusOK, "kafka": sources.StatusOK, "binlog": c.binlog}}
			r := Diagnose(ev)
			d := r.Steps[0]
			if r.Verdict.Code != c.verdict || d.Status != c.status || d.EvidenceCount != c.count || r.Partial != c.partial {
				t.Fatalf("verdict %s, debit %s count %d, partial %v; want %s %s %d %v (findings %v)", r.Verdict.Code, d.Status, d.EvidenceCount, r.Partial, c.verdict, c.status, c.count, c.partial, r.Findings)
			}
			if c.detail != "" && !strings.Contains(r.Verdict.Summary+" "+findingText(r.Findings), c.detail) {
				t.Errorf("findings %v lack %q", r.Findings, c.detail)
			}
			n := 0
			for _, e := range d.Evidence {
				if e.Reversed {
					n++
				}
			}
			if n != c.reversedN {
				t.Errorf("%d reversed changes, want %d", n, c.reversedN)
			}
		})
	}
}

func findingText(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.Detail + "; ")
	}
	return b.String()
}

// Binlog times have a resolution of one second: a change of second S sorts
// after every event of that second (its own message, produced at S.300,
// came first), carries the resolution, and never a fake fraction.
func TestBinlogTimeResolution(t *testing.T) {
	p := &config.Pipeline{Name: "settlement", Topic: "settlement-event", MessageKey: "{biz_id}", Steps: []config.Step{
		{Name: "debit", Kind: config.KindLocal, Binlog: &config.Binlog{Table: "account_balance", Key: "account_id", Delta: "balance",
			MessageKey: "$.account_id", MessageDelta: "-$.amount"}},
		{Name: "ledger", Kind: config.KindLocal, Evidence: "SELECT id, direction, amount, created_at FROM ledger_entry WHERE biz_order_id = ?"},
	}}
	s := time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC)
	rows, err := sources.AttributeChanges([]sources.BinlogChange{{GTID: "0-1-5", Key: int64(1001), At: s, Before: "100.00", After: "70.00"}}, "PAY-1", "-30.00", true)
	if err != nil {
		t.Fatal(err)
	}
	ledger := []sources.Row{{Columns: []string{"id", "direction", "amount", "created_at"}, Values: []sources.Value{int64(1), "OUT", "30.00", s.Add(700 * time.Millisecond)}}}
	ev := sources.Evidence{BizID: "PAY-1", Pipeline: p,
		DB:      sources.DBEvidence{Now: s.Add(time.Minute), Steps: []sources.StepEvidence{{Name: "debit", Rows: rows}, {Name: "ledger", Rows: ledger}}},
		Kafka:   sources.KafkaEvidence{Message: &sources.Message{Timestamp: s.Add(300 * time.Millisecond)}},
		Sources: map[string]string{"mysql": sources.StatusOK, "kafka": sources.StatusOK, "binlog": sources.StatusOK}}
	r := Diagnose(ev)
	var got []string
	for _, e := range r.Timeline {
		got = append(got, e.Source+"/"+e.Resolution)
	}
	// The debit ran after its message; the ledger row (.700) is in the
	// same second: the change of second :05 is placed after both.
	if want := "kafka/,ledger_entry/,binlog account_balance/1s"; strings.Join(got, ",") != want {
		t.Fatalf("timeline %v, want %s", got, want)
	}
	if at := r.Timeline[2].At; !at.Equal(s) {
		t.Fatalf("the change is shown at %v, want its second %v", at, s)
	}
}
