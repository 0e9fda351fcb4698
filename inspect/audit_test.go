package inspect

import (
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/sources"
)

func TestAuditAttestations(t *testing.T) {
	unacked := sources.Intent{RequestID: "PAY-1:notify:1", SentAt: tp(t0)}
	base := func() sources.Evidence {
		e := sources.Evidence{BizID: "PAY-1", Pipeline: settlement(), Sources: map[string]string{"mysql": "ok", "kafka": "ok"}}
		e.DB.Now = t0
		e.DB.State = sources.StateRow{Found: true, Status: "LEDGER_DONE", Version: ip(3)}
		e.DB.Steps = []sources.StepEvidence{{Name: "debit", Rows: rows(1)}, {Name: "ledger", Rows: rows(1)}, {Name: "notify", Intents: []sources.Intent{unacked}}}
		return e
	}
	// Without an attestation the outcome is unknown.
	if r := Diagnose(base()); r.Verdict.Code != UnknownOutcome {
		t.Fatalf("verdict %s", r.Verdict.Code)
	}
	cases := []struct {
		name    string
		audit   sources.AuditAction
		outcome IntentOutcome
		verdict Code
	}{
		{"manual applied", sources.AuditAction{PlanID: "p1", Action: "manual", Outcome: "applied", Step: "notify", Attested: map[string]string{"PAY-1:notify:1": "applied"}}, "applied", StateBehind},
		{"advance_state applied", sources.AuditAction{PlanID: "p1", Action: "advance_state", Outcome: "applied", Step: "notify", Attested: map[string]string{"PAY-1:notify:1": "applied"}}, "applied", StateBehind},
		{"manual absent", sources.AuditAction{PlanID: "p1", Action: "manual", Outcome: "applied", Step: "notify", Attested: map[string]string{"PAY-1:notify:1": "absent"}}, "absent", Incomplete},
		{"other step", sources.AuditAction{PlanID: "p1", Action: "manual", Outcome: "applied", Step: "ledger", Attested: map[string]string{"PAY-1:notify:1": "applied"}}, "unknown", UnknownOutcome},
		{"not applied", sources.AuditAction{PlanID: "p1", Action: "manual", Outcome: "compensating", Step: "notify", Attested: map[string]string{"PAY-1:notify:1": "applied"}}, "unknown", RepairIncomplete},
		{"republish attests nothing", sources.AuditAction{PlanID: "p1", Action: "republish", Outcome: "applied", Step: "notify", Attested: map[string]string{"PAY-1:notify:1": "applied"}}, "unknown", UnknownOutcome},
	}
	for _, c := range cases {
		e := base()
		e.DB.Audit = []sources.AuditAction{c.audit}
		r := Diagnose(e)
		in := r.Steps[2].Intents[0]
		if in.Outcome != c.outcome || r.Verdict.Code != c.verdict {
			t.Errorf("%s: intent %s verdict %s, want %s %s", c.name, in.Outcome, r.Verdict.Code, c.outcome, c.verdict)
		}
		if c.outcome != "unknown" && !strings.Contains(in.Probe, "attested "+string(c.outcome)+" by opctl plan p1") {
			t.Errorf("%s: note %q", c.name, in.Probe)
		}
	}

	// A compensated duplicate no longer counts, acked or not; a row attested
	// reversed neither.
	e := base()
	e.DB.State.Status = "DONE"
	e.DB.Steps[0].Rows = rows(2)
	e.DB.Steps[2].Intents = []sources.Intent{acked("a"), acked("b")}
	if r := Diagnose(e); r.Verdict.Code != DuplicateEffect {
		t.Fatalf("verdict %s", r.Verdict.Code)
	}
	e.DB.Audit = []sources.AuditAction{
		{PlanID: "p2", Action: "manual", Outcome: "applied", Step: "notify", Attested: map[string]string{"b": "compensated"}},
		{PlanID: "p2", Action: "manual", Outcome: "applied", Step: "debit", Attested: map[string]string{"2": "reversed"}},
	}
	r := Diagnose(e)
	if r.Verdict.Code != Complete || r.Steps[2].EvidenceCount != 1 || r.Steps[2].Intents[1].Outcome != "compensated" || !r.Steps[0].Evidence[1].Reversed {
		t.Fatalf("verdict %s steps %+v", r.Verdict.Code, r.Steps)
	}

	// A step known only by an inconclusive {biz_id} probe, attested as a whole.
	e = base()
	p := e.Pipeline
	p.Steps[2].Intent = ""
	p.Steps[2].Probe = "http://wms/locks?biz_id={biz_id}"
	e.DB.Steps[2] = sources.StepEvidence{Name: "notify", BizProbe: &sources.ProbeResult{Outcome: sources.ProbeInconclusive, Detail: "timeout"}}
	if r := Diagnose(e); r.Steps[2].Status != StepUnknown {
		t.Fatalf("status %s", r.Steps[2].Status)
	}
	e.DB.Audit = []sources.AuditAction{{PlanID: "p3", Action: "manual", Outcome: "applied", Step: "notify", Attested: map[string]string{AttestAll: "applied"}}}
	if r := Diagnose(e); r.Steps[2].Status != StepAhead || r.Steps[2].EvidenceCount != 1 {
		t.Fatalf("status %s count %d", r.Steps[2].Status, r.Steps[2].EvidenceCount)
	}
}
