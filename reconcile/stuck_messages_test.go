package reconcile

import (
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/sources/config"
)

// On seed 000's own schema (no state, no idempotency table) stuck reads the
// committed messages and looks them up in the ledger by its unique key's
// biz_order_id; it does not apply when a commit proves nothing, when a
// message's key does not name its operation, or when nothing can be
// looked up (docs/reconcile.md#committed-messages-without-a-state-table).
func TestStuckByMessagesRequirements(t *testing.T) {
	raw, err := config.Preset("seed000")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseWithEnv("opctl.yaml", raw, func(string) (string, bool) { return "u@tcp(db:3306)/pay", true })
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Pipeline("settlement")
	reqs, na := Requirements(p, CheckStuck)
	if na != "" || len(reqs) != 1 || reqs[0].Table != "ledger_entry" || reqs[0].Step != "ledger" ||
		len(reqs[0].Columns) != 1 || reqs[0].Columns[0] != "biz_order_id" || reqs[0].Walk {
		t.Fatalf("seed 000: %+v %q", reqs, na)
	}
	for _, tc := range []struct {
		name string
		edit func(p *config.Pipeline)
		want string
	}{
		{"auto commit", func(p *config.Pipeline) { p.Commit = config.CommitAuto }, "says nothing of its steps"},
		{"key not the biz_id", func(p *config.Pipeline) { p.MessageKey = "pay-{biz_id}" }, "is not {biz_id}"},
		{"no scan block", func(p *config.Pipeline) {
			for i := range p.Steps {
				p.Steps[i].Scan = nil
			}
		}, "no step has a scan block"},
		{"an idempotency table", func(p *config.Pipeline) { p.Idempotency = &config.Idempotency{Table: "idem"} }, "no state table"},
	} {
		q := *p
		q.Steps = append([]config.Step(nil), p.Steps...)
		tc.edit(&q)
		if reqs, na := Requirements(&q, CheckStuck); len(reqs) != 0 || !strings.Contains(na, tc.want) {
			t.Errorf("%s: %+v %q, want skipped: %q", tc.name, reqs, na, tc.want)
		}
	}
}
