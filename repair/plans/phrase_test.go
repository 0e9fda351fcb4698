package plans_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources/config"
)

// TestPhrase: the planner's errors name its options as data; opctl's
// phrasing (Flags) is their text, and another front end's words replace
// every flag, values and the operator's input kept as they are.
func TestPhrase(t *testing.T) {
	p := &config.Pipeline{Name: "settlement", Steps: []config.Step{{Name: "notify", Kind: config.KindRemote}}}
	cfg := &config.Config{Pipelines: []config.Pipeline{*p}}
	report := func(code inspect.Code) inspect.Report {
		return inspect.Report{BizID: "PAY-1", Pipeline: "settlement", Verdict: inspect.Verdict{Code: code},
			Findings: []inspect.Finding{{Code: code, Step: "notify"}}, Steps: []inspect.StepView{{Name: "notify", Kind: config.KindRemote, Status: inspect.StepUnknown,
				Intents: []inspect.IntentView{{RequestID: "PAY-1:notify:1", Outcome: inspect.IntentUnknown}}}}}
	}
	words := func(o plans.Option, v string) string { return "<" + string(o) + ":" + v + ">" }
	for _, c := range []struct {
		name  string
		code  inspect.Code
		o     plans.Options
		flags []string // in opctl's text
		want  string   // in the other words
		opt   plans.Option
	}{
		{"no reason", inspect.Stranded, plans.Options{}, []string{"--reason is required"}, "<reason:> is required", plans.OptReason},
		{"force without action", inspect.Stranded, plans.Options{Reason: "r", Force: true}, []string{"--force needs --action"}, "<force:> needs <action:>", plans.OptForce},
		{"unknown action, the operator's value quoted", inspect.Stranded, plans.Options{Reason: "r", Action: "{x}"}, []string{`--action "{x}": want one of`}, `<action:"{x}">: want one of`, plans.OptAction},
		{"not called for", inspect.Complete, plans.Options{Reason: "r", Action: plans.Republish}, []string{"--action republish acts on it only with --force"}, "<action:republish> acts on it only with <force:>", ""},
		{"unknown outcome without a probe", inspect.UnknownOutcome, plans.Options{Reason: "r"}, []string{`--action manual --attest "what they said" --outcome applied|absent`}, `<action:manual> <attest:"what they said"> <outcome:applied|absent>`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := plans.Build(plans.Input{Config: cfg, Report: report(c.code), Options: c.o})
			if err == nil {
				t.Fatal("no error")
			}
			if got := plans.Phrase(err, plans.Flags); got != err.Error() {
				t.Errorf("Phrase(Flags) = %q, Error() = %q", got, err.Error())
			}
			for _, f := range c.flags {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error %q lacks %q", err, f)
				}
			}
			other := plans.Phrase(err, words)
			if !strings.Contains(other, c.want) || strings.Contains(strings.ReplaceAll(other, `"{x}"`, ""), "--") {
				t.Errorf("in other words: %q, want %q and no flag", other, c.want)
			}
			var ie *plans.InputError
			if c.opt != "" && (!errors.As(err, &ie) || ie.Option != c.opt) {
				t.Errorf("error %#v: want an InputError about %s", err, c.opt)
			}
		})
	}
}
