package plans

import (
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
)

func TestEquivalent(t *testing.T) {
	base := func() *Plan {
		v := int64(4)
		p := &Plan{PlanVersion: PlanVersion, CreatedAt: time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC), Operator: "alice",
			Reason: "under review", Pipeline: "settlement", BizID: "PAY-1", Verdict: inspect.DuplicateEffect,
			ConfigFingerprint: "f00d", Incident: "INC-7", Request: Request{FromStep: "debit"}, Notes: []string{"a note"},
			Observed: Observed{Verdict: inspect.DuplicateEffect, State: ObservedState{Found: true, Status: "DONE", Version: &v}},
			Actions: []Action{{Index: 1, Type: Reverse, Step: "debit", Summary: "reverse debit row 12",
				Guards:  []Guard{{Check: CheckStateVersion, Op: "==", Value: "4"}},
				Reverse: &ReverseSpec{Identity: "12", Row: Image{{"id", sp("12")}, {"delta", sp("-30.00")}}}}}}
		if err := p.Seal(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name   string
		change func(*Plan)
		want   bool
	}{
		{"itself", func(*Plan) {}, true},
		{"another reason (the one typed at apply)", func(p *Plan) { p.Reason = "INC-7 double debit" }, true},
		{"another operator", func(p *Plan) { p.Operator = "bob" }, true},
		{"made later", func(p *Plan) { p.CreatedAt = p.CreatedAt.Add(time.Minute) }, true},
		{"another id", func(p *Plan) { p.ID = "0123" }, true},
		{"another operation", func(p *Plan) { p.BizID = "PAY-2" }, false},
		{"another pipeline", func(p *Plan) { p.Pipeline = "fulfilment" }, false},
		{"another verdict", func(p *Plan) { p.Verdict = inspect.Stranded }, false},
		{"another configuration", func(p *Plan) { p.ConfigFingerprint = "beef" }, false},
		{"forced", func(p *Plan) { p.Forced = true }, false},
		{"an attestation", func(p *Plan) { p.Attest = "undone by hand" }, false},
		{"another incident", func(p *Plan) { p.Incident = "INC-8" }, false},
		{"a runbook run", func(p *Plan) { p.Runbook, p.RunID = "dup", "r1" }, false},
		{"another request", func(p *Plan) { p.Request.Outcome = inspect.AttestAbsent }, false},
		{"another note", func(p *Plan) { p.Notes = append(p.Notes, "more") }, false},
		{"another observation", func(p *Plan) { v := int64(5); p.Observed.State.Version = &v }, false},
		{"another guard", func(p *Plan) { p.Actions[0].Guards[0].Value = "5" }, false},
		{"another row", func(p *Plan) { p.Actions[0].Reverse.Row[1].Value = sp("-31.00") }, false},
		{"an action more", func(p *Plan) { p.Actions = append(p.Actions, Action{Index: 2, Type: Republish}) }, false},
		{"no action", func(p *Plan) { p.Actions = nil }, false},
		{"another plan version", func(p *Plan) { p.PlanVersion++ }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := base(), base()
			tc.change(b)
			if got := Equivalent(a, b); got != tc.want {
				t.Errorf("Equivalent = %v, want %v", got, tc.want)
			}
			if got := Equivalent(b, a); got != tc.want {
				t.Errorf("Equivalent (swapped) = %v, want %v", got, tc.want)
			}
		})
	}
	if Equivalent(nil, base()) || Equivalent(base(), nil) || Equivalent(nil, nil) {
		t.Error("a nil plan is equivalent to another")
	}
}
