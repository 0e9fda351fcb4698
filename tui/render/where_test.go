package render

import (
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/inspect"
)

// One renderer, two layouts: `opctl where` and the console's detail show
// the same state, Kafka, findings and NEXT lines; the console draws the
// steps as a timeline, the partition as a bar and the verdict explained,
// and leaves its head line to the screen above.
func TestWhereConsoleAndCommandShareSections(t *testing.T) {
	start, end, off, com, part := int64(0), int64(500), int64(100), int64(101), int32(3)
	r := inspect.Report{BizID: "PAY-1", Pipeline: "settlement",
		Verdict: inspect.Verdict{Code: inspect.Stranded, Severity: inspect.SeverityAction, Summary: "committed past it",
			Next: []string{"opctl repair plan -- PAY-1"}},
		Steps: []inspect.StepView{{Index: 1, Name: "debit", Kind: "local", Status: inspect.StepApplied, EvidenceCount: 1},
			{Index: 2, Name: "notify", Kind: "remote", Status: inspect.StepAbsent}},
		Kafka:    inspect.KafkaView{Topic: "settlement-event", Partition: &part, Offset: &off, Committed: &com, LogStart: &start, LogEnd: &end},
		Findings: []inspect.Finding{{Code: inspect.Stranded, Detail: "committed offset 101 > message offset 100"}},
	}
	var cmdOut, console strings.Builder
	Report(&cmdOut, r, WhereOptions{})
	Report(&console, r, WhereOptions{Console: true, Width: 80})
	for _, shared := range []string{"STATE", "no state row", "settlement-event partition 3 offset 100", "FINDINGS", "committed offset 101 > message offset 100", "NEXT", "opctl repair plan -- PAY-1"} {
		if !strings.Contains(cmdOut.String(), shared) || !strings.Contains(console.String(), shared) {
			t.Errorf("%q is not in both:\n%s\n---\n%s", shared, cmdOut.String(), console.String())
		}
	}
	for _, only := range []string{"● applied", "○ absent", "KAFKA  settlement-event partition 3", "[─", "VERDICT"} {
		if !strings.Contains(console.String(), only) || strings.Contains(cmdOut.String(), only) {
			t.Errorf("%q should be the console's only", only)
		}
	}
	if head := Head(Styles{}, r); !strings.HasPrefix(cmdOut.String(), head) || strings.Contains(console.String(), head) {
		t.Errorf("head %q: opctl where starts with it, the console leaves it out", head)
	}
}
