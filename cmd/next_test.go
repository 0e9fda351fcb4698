package cmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

func TestNextFlags(t *testing.T) {
	for _, tc := range []struct {
		name   string
		g      GlobalOptions
		line   string
		want   string
		hidden bool
	}{
		{name: "none", line: "opctl where PAY-1", want: "opctl where PAY-1"},
		{name: "config", g: GlobalOptions{ConfigPath: "prod.yaml"}, line: "opctl where PAY-1", want: "opctl --config prod.yaml where PAY-1"},
		{name: "config quoted", g: GlobalOptions{ConfigPath: "my conf/it's.yaml"}, line: "opctl audit PAY-1", want: `opctl --config 'my conf/it'\''s.yaml' audit PAY-1`},
		{name: "dsn without password", g: GlobalOptions{MySQLDSN: "ro@tcp(db:3306)/pay"}, line: "opctl where PAY-1", want: "opctl --mysql-dsn 'ro@tcp(db:3306)/pay' where PAY-1"},
		{name: "dsn with password", g: GlobalOptions{ConfigPath: "c.yaml", MySQLDSN: "app:s3cr@t@tcp(db:3306)/pay"}, line: "opctl where PAY-1", want: "opctl --config c.yaml where PAY-1", hidden: true},
		{name: "brokers", g: GlobalOptions{Brokers: []string{"k1:9092", "k2:9092"}}, line: "opctl repair plan PAY-1", want: "opctl --brokers k1:9092,k2:9092 repair plan PAY-1"},
		{name: "not an opctl command", g: GlobalOptions{ConfigPath: "c.yaml"}, line: "do the refund by hand", want: "do the refund by hand"},
		{name: "opctl-tui is not opctl", g: GlobalOptions{ConfigPath: "c.yaml"}, line: "opctl-tui", want: "opctl-tui"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.g.Next()
			if got := n.Apply(tc.line); got != tc.want {
				t.Errorf("Apply(%q) = %q, want %q", tc.line, got, tc.want)
			}
			if n.HiddenDSN != tc.hidden {
				t.Errorf("HiddenDSN %v, want %v", n.HiddenDSN, tc.hidden)
			}
			var b bytes.Buffer
			n.Note(&b)
			if (b.Len() > 0) != tc.hidden || bytes.Contains(b.Bytes(), []byte("s3cr")) {
				t.Errorf("note %q", b.String())
			}
		})
	}
}

// TestNextLines: the planner's steps as the lines `opctl where` prints,
// ready to paste: the id and pipeline quoted; --attest "$ATTEST" exactly
// when the plan has a manual action, with a comment saying what to do
// first; a probe's URL without its credentials (and a note saying so).
// TestNextLinesPasteAsPrinted pastes them through a shell.
func TestNextLines(t *testing.T) {
	cfg, dup, dupReport := goldenOp(t)
	unknown := func(probe string) (*config.Config, sources.Evidence, inspect.Report) {
		c, ev, _ := goldenOp(t)
		p := c.Pipeline("settlement")
		p.Steps[2].Probe = probe
		ev.Pipeline = p
		ev.DB.State.Status = "LEDGER_DONE"
		ev.DB.Steps[0].Rows = ev.DB.Steps[0].Rows[:1]
		sent := *ev.DB.Steps[2].Intents[0].SentAt
		ev.DB.Steps[2].Intents = []sources.Intent{{RequestID: "PAY-1:notify:1", SentAt: &sent,
			Probe: &sources.ProbeResult{Outcome: sources.ProbeInconclusive, Detail: "connection refused"}}}
		return c, ev, inspect.Diagnose(ev)
	}
	withCreds := "http://ops:s3cret@127.0.0.1:8081/notify/status?request_id={request_id}"
	plain := "http://127.0.0.1:8081/notify/status?request_id={request_id}"
	attested := func(note string) []string {
		return []string{
			"curl -s 'http://127.0.0.1:8081/notify/status?request_id=PAY-1%3Anotify%3A1'   # probe the downstream" + note,
			`opctl repair plan --pipeline settlement --action manual --from-step notify --attest "$ATTEST" --reason "$REASON" --outcome applied --out plan.json -- PAY-1   # ask the downstream of step notify whether the call took effect; if it did, set ATTEST to its answer (who said what, when) and run this line`,
			`opctl repair plan --pipeline settlement --action manual --from-step notify --attest "$ATTEST" --reason "$REASON" --outcome absent --out plan.json -- PAY-1   # if it never took effect, set ATTEST to its answer and run this line instead`,
			"opctl repair apply plan.json --dry-run",
			"opctl explain UNKNOWN_OUTCOME"}
	}
	type tc struct {
		name string
		cfg  *config.Config
		ev   sources.Evidence
		r    inspect.Report
		code inspect.Code
		want []string
	}
	cases := []tc{{"duplicate a manual action undoes", cfg, dup, dupReport, inspect.DuplicateEffect, []string{
		`opctl repair plan --pipeline settlement --attest "$ATTEST" --reason "$REASON" --out plan.json -- PAY-1   # first undo 1 extra effect(s) of step notify by hand (PAY-1:notify:2), then set ATTEST to what was done`,
		"opctl repair apply plan.json --dry-run",
		"opctl explain DUPLICATE_EFFECT"}}}
	c, ev, r := unknown(withCreds)
	cases = append(cases, tc{"unknown outcome, a probe with credentials", c, ev, r, inspect.UnknownOutcome,
		attested("; the credentials of the configured URL were removed: add them (-u USER, curl asks for the password)")})
	c, ev, r = unknown(plain)
	cases = append(cases, tc{"unknown outcome, a probe", c, ev, r, inspect.UnknownOutcome, attested("")})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.r.Verdict.Code != c.code {
				t.Fatalf("verdict %s (%s), want %s", c.r.Verdict.Code, c.r.Verdict.Summary, c.code)
			}
			got := NextFlags{}.Lines(plans.Next(plans.Input{Config: c.cfg, Report: c.r, Evidence: &c.ev, RedrivePartitions: 8}))
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("next:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if strings.Contains(strings.Join(got, "\n"), "s3cret") {
				t.Errorf("NEXT carries the probe's credentials")
			}
		})
	}
}
