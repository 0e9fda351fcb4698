package repair

import (
	"context"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources/config"
)

// A skipped target records the pipeline it was triaged in: with
// --pipeline, that one, not the target line's. (Both pipelines asked for
// are missing from the configuration, so nothing is read.)
func TestPlanTargetsSkipRecordsTheEffectivePipeline(t *testing.T) {
	s := &Service{Config: &config.Config{Pipelines: []config.Pipeline{{Name: "settlement"}}}}
	plan := func(t *testing.T, lines, override string) *Batch {
		t.Helper()
		b, err := s.PlanTargets(context.Background(), strings.NewReader(lines), "targets.jsonl", override, plans.Options{Reason: "test"})
		if err != nil {
			t.Fatalf("--pipeline %q: %v", override, err)
		}
		return b
	}
	t.Run("--pipeline", func(t *testing.T) {
		b := plan(t, `{"biz_id":"PAY-1","pipeline":"settlement"}`+"\n"+`{"biz_id":"PAY-2","pipeline":"gone"}`+"\n", "refunds")
		if len(b.Skipped) != 2 || b.Skipped[0].Pipeline != "refunds" || b.Skipped[1].Pipeline != "refunds" ||
			!strings.Contains(b.Skipped[0].Why, "refunds") {
			t.Errorf("skipped %+v, want PAY-1 and PAY-2 in refunds", b.Skipped)
		}
	})
	t.Run("the line's", func(t *testing.T) {
		b := plan(t, `{"biz_id":"PAY-2","pipeline":"gone"}`+"\n", "")
		if len(b.Skipped) != 1 || b.Skipped[0].BizID != "PAY-2" || b.Skipped[0].Pipeline != "gone" {
			t.Errorf("skipped %+v, want PAY-2 in gone", b.Skipped)
		}
	})
}
