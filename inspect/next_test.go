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
			`opctl repair plan --pipeline settlement --reason "$REASON" --out plan.json -- PAY-1`,
			"opctl repair apply plan.json --dry-run",
			"opctl explain DUPLICATE_EFFECT"}},
		{"unknown outcome, probe configured", unknown, UnknownOutcome, []string{
			"curl -s 'http://127.0.0.1:8081/notify/status?request_id=PAY-1%3Anotify%3A1'   # probe the downstream",
			`opctl repair plan --pipeline settlement --action manual --from-step notify --attest "$ATTEST" --reason "$REASON" --outcome applied --out plan.json -- PAY-1   # ask the downstream of step notify whether the call took effect; if it did, set ATTEST to its answer (who said what, when) and run this line`,
			`opctl repair plan --pipeline settlement --action manual --from-step notify --attest "$ATTEST" --reason "$REASON" --outcome absent --out plan.json -- PAY-1   # if it never took effect, set ATTEST to its answer and run this line instead`,
			"opctl repair apply plan.json --dry-run",
			"opctl explain UNKNOWN_OUTCOME"}},
		{"read error: read again once the query works", newEv(settlement(), join(all(1, 1, acked("a")), state("DONE"), kafka(101, 0), stepFailed(0))...), ReadError, []string{
			"opctl where --pipeline settlement -- PAY-1   # again once every query reads: fix the failed query PARTIAL names (opctl.yaml, the schema or a grant; opctl schema check)",
			"opctl explain READ_ERROR"}},
		{"will redeliver", newEv(settlement(), join(all(1, 0), state("DEBIT_DONE"), kafka(100, 0))...), WillRedeliver, []string{
			"opctl where --pipeline settlement -- PAY-1   # again once the consumer has caught up", "opctl explain WILL_REDELIVER"}},
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

// TestNextRedactsProbeCredentials: the curl line of a probe whose URL
// carries credentials prints the URL without them and says so; a probe
// without credentials gets the plain line.
func TestNextRedactsProbeCredentials(t *testing.T) {
	for _, c := range []struct {
		name, probe string
		opts        []evOpt
		want        string
	}{
		{"{request_id} probe", "http://ops:s3cret@127.0.0.1:8081/notify/status?request_id={request_id}",
			join(all(1, 1, unacked("PAY-1:notify:1")), state("LEDGER_DONE"), kafka(100, 0)),
			"curl -s 'http://127.0.0.1:8081/notify/status?request_id=PAY-1%3Anotify%3A1'   # probe the downstream; the credentials of the configured URL were removed: add them (-u USER, curl asks for the password)"},
		{"{biz_id} probe, a user only", "https://token-1234@wms.internal/effects?biz_id={biz_id}",
			join(all(1, 1), state("LEDGER_DONE"), kafka(100, 0), func(e *sources.Evidence) {
				e.DB.Steps[2].BizProbe = &sources.ProbeResult{Outcome: sources.ProbeInconclusive, Detail: "connection refused"}
			}),
			"curl -s 'https://wms.internal/effects?biz_id=PAY-1'   # probe the downstream; the credentials of the configured URL were removed: add them (-u USER, curl asks for the password)"},
		{"no credentials", "http://127.0.0.1:8081/effects?biz_id={biz_id}",
			join(all(1, 1), state("LEDGER_DONE"), kafka(100, 0), func(e *sources.Evidence) {
				e.DB.Steps[2].BizProbe = &sources.ProbeResult{Outcome: sources.ProbeInconclusive, Detail: "connection refused"}
			}),
			"curl -s 'http://127.0.0.1:8081/effects?biz_id=PAY-1'   # probe the downstream"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := settlement()
			p.Steps[2].Probe = c.probe
			r := Diagnose(newEv(p, c.opts...))
			if r.Verdict.Code != UnknownOutcome {
				t.Fatalf("verdict %s, want UNKNOWN_OUTCOME; findings %v", r.Verdict.Code, r.Findings)
			}
			next := strings.Join(r.Verdict.Next, "\n")
			if strings.Contains(next, "s3cret") || strings.Contains(next, "token-1234") || strings.Contains(next, "ops@") {
				t.Errorf("NEXT carries the probe's credentials:\n%s", next)
			}
			if r.Verdict.Next[0] != c.want {
				t.Errorf("curl line:\n%s\nwant:\n%s", r.Verdict.Next[0], c.want)
			}
		})
	}
}
