package inspect

import (
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// reversible is settlement() with the debit's reverse statements of
// testdata/config/settlement.yaml: a duplicated debit is reversed by opctl.
func reversible() *config.Pipeline {
	p := settlement()
	p.Steps[0].Reverse = []string{"INSERT INTO balance_journal (biz_id, reverses_id) VALUES (:biz_id, :id)"}
	return p
}

// TestNextCommands: what each verdict tells the operator to run, ready to
// paste: the id and pipeline quoted; --attest "$ATTEST" exactly when the
// plan has a manual action (a duplicate opctl cannot undo, an unknown
// outcome), with a comment saying what to do first; no plan line when the
// plan would be refused for what the report shows. (TestNextPlansAsPrinted
// holds every plan line against the planner itself.)
func TestNextCommands(t *testing.T) {
	unknown := newEv(settlement(), join(all(1, 1, unacked("PAY-1:notify:1")), state("LEDGER_DONE"), kafka(100, 0))...)
	cases := []struct {
		name string
		ev   sources.Evidence
		code Code
		want []string
	}{
		// Whether a plan needs --attest or is refused is the planner's to
		// say: repair/plans Next (TestNextPlansAsPrinted) replaces these
		// lines for the verdicts that call for a plan.
		{"duplicate, every extra effect undone by opctl", newEv(reversible(), join(all(2, 1, acked("a")), state("DONE"), kafka(101, 0))...), DuplicateEffect, []string{
			`opctl repair plan PAY-1 --pipeline settlement --reason "$REASON" --out plan.json`,
			"opctl repair apply plan.json --dry-run",
			"opctl explain DUPLICATE_EFFECT"}},
		{"unknown outcome, probe configured", unknown, UnknownOutcome, []string{
			"curl -s 'http://127.0.0.1:8081/notify/status?request_id=PAY-1%3Anotify%3A1'   # probe the downstream",
			`opctl repair plan PAY-1 --pipeline settlement --action manual --from-step notify --attest "$ATTEST" --reason "$REASON" --outcome applied --out plan.json   # ask the downstream of step notify whether the call took effect; if it did, set ATTEST to its answer (who said what, when) and run this line`,
			`opctl repair plan PAY-1 --pipeline settlement --action manual --from-step notify --attest "$ATTEST" --reason "$REASON" --outcome absent --out plan.json   # if it never took effect, set ATTEST to its answer and run this line instead`,
			"opctl repair apply plan.json --dry-run",
			"opctl explain UNKNOWN_OUTCOME"}},
		{"will redeliver", newEv(settlement(), join(all(1, 0), state("DEBIT_DONE"), kafka(100, 0))...), WillRedeliver, []string{
			"opctl where PAY-1 --pipeline settlement   # again once the consumer has caught up", "opctl explain WILL_REDELIVER"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Diagnose(c.ev)
			if r.Verdict.Code != c.code {
				t.Fatalf("verdict %s, want %s; findings %v", r.Verdict.Code, c.code, r.Findings)
			}
			if got := strings.Join(r.Verdict.Next, "\n"); got != strings.Join(c.want, "\n") {
				t.Errorf("next:\n%s\nwant:\n%s", got, strings.Join(c.want, "\n"))
			}
		})
	}
	if q := ShellQuote("it's a; test"); q != `'it'\''s a; test'` {
		t.Errorf("ShellQuote: %s", q)
	}
}
