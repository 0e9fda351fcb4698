package inspect

import (
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/sources"
)

// TestNextCommands: what each verdict tells the operator to run, ready to
// paste: the id and pipeline quoted, and for UNKNOWN_OUTCOME the plan that
// carries the downstream's answer (a plain `repair plan` would be refused).
func TestNextCommands(t *testing.T) {
	unknown := newEv(settlement(), join(all(1, 1, unacked("PAY-1:notify:1")), state("LEDGER_DONE"), kafka(100, 0))...)
	cases := []struct {
		name string
		ev   sources.Evidence
		code Code
		want []string
	}{
		{"duplicate", newEv(settlement(), join(all(2, 1, acked("a")), state("DONE"), kafka(101, 0))...), DuplicateEffect, []string{
			`opctl repair plan PAY-1 --pipeline settlement --reason "$REASON" --out plan.json`,
			"opctl repair apply plan.json --dry-run",
			"opctl explain DUPLICATE_EFFECT"}},
		{"unknown outcome, probe configured", unknown, UnknownOutcome, []string{
			"curl -s 'http://127.0.0.1:8081/notify/status?request_id=PAY-1%3Anotify%3A1'   # probe the downstream",
			`opctl repair plan PAY-1 --pipeline settlement --action manual --from-step notify --attest "$ATTEST" --reason "$REASON" --outcome applied --out plan.json   # the downstream says the call took effect`,
			`opctl repair plan PAY-1 --pipeline settlement --action manual --from-step notify --attest "$ATTEST" --reason "$REASON" --outcome absent --out plan.json   # the downstream says it never did`,
			"opctl repair apply plan.json --dry-run",
			"opctl explain UNKNOWN_OUTCOME"}},
		{"will redeliver", newEv(settlement(), join(all(1, 0), state("DEBIT_DONE"), kafka(100, 0))...), WillRedeliver, []string{
			"opctl where PAY-1 --pipeline settlement   # again once the consumer has caught up", "opctl explain WILL_REDELIVER"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Diagnose(c.ev)
			if r.Verdict.Code != c.code {
				t.Fatalf("verdict %s, want %s", r.Verdict.Code, c.code)
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
