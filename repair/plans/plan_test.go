package plans

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

func sp(s string) *string { return &s }

func TestPlanHashAndVerify(t *testing.T) {
	p := &Plan{PlanVersion: 1, CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC), Reason: "r", Pipeline: "settlement", BizID: "PAY-1",
		Actions: []Action{{Index: 1, Type: Reverse, Guards: []Guard{{Check: CheckStateVersion, Op: "==", Value: "4"}},
			Reverse: &ReverseSpec{Identity: "3", Row: Image{{"id", sp("3")}, {"delta", sp("-30.00")}, {"note", nil}}}}}}
	if err := p.Seal(); err != nil {
		t.Fatal(err)
	}
	if len(p.ID) != 64 || p.Verify() != nil {
		t.Fatalf("id %q verify %v", p.ID, p.Verify())
	}
	var buf bytes.Buffer
	if err := Encode(&buf, p); err != nil {
		t.Fatal(err)
	}
	q, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if q.Verify() != nil || !reflect.DeepEqual(p, q) {
		t.Fatalf("round trip: %v\n%+v\n%+v", q.Verify(), p, q)
	}
	if got := string(mustJSON(t, q.Actions[0].Reverse.Row)); got != `{"id":"3","delta":"-30.00","note":null}` {
		t.Fatalf("image JSON %s (column order must be kept)", got)
	}
	q.Actions[0].Guards[0].Value = "5"
	var rf *RefusedError
	if err := q.Verify(); !errors.As(err, &rf) || rf.Code != CodeTampered {
		t.Fatalf("verify after an edit: %v", err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDiffFingerprints(t *testing.T) {
	v4, v5 := int64(4), int64(5)
	a := Observed{Verdict: "DUPLICATE_EFFECT", Redelivery: "no", State: ObservedState{Found: true, Status: "DONE", Version: &v4},
		Steps: []ObservedStep{{Name: "debit", Status: "duplicated", Evidence: []ObservedRow{{ID: "1"}, {ID: "3"}}}}}
	b := a
	b.State.Version = &v5
	b.Steps = []ObservedStep{{Name: "debit", Status: "applied", Evidence: []ObservedRow{{ID: "1"}, {ID: "3", Reversed: true}}}}
	b.Verdict = "COMPLETE"
	got := Diff(a, b)
	want := []string{"verdict: DUPLICATE_EFFECT → COMPLETE", "state.version: 4 → 5", "steps.debit.status: duplicated → applied", "steps.debit.evidence[3]: live → reversed"}
	if len(got) != len(want) {
		t.Fatalf("diff %v", got)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("diff[%d] %q, want %q", i, got[i], want[i])
		}
	}
	if d := Diff(a, a); len(d) != 0 {
		t.Errorf("self diff %v", d)
	}
}

// pureConfig mirrors testdata/config/settlement.yaml (with reverse) and
// skip.yaml.
func pureConfig() *config.Config {
	return &config.Config{Pipelines: []config.Pipeline{{
		Name: "settlement", Topic: "settlement-event", Group: "settlement-consumer", Partitioner: "murmur2", MessageKey: "{biz_id}", HonoursOpctlHeaders: true,
		State: &config.State{Table: "biz_operation", Key: "biz_id", Status: "status", Version: "version", Owner: "owner", LeaseUntil: "lease_until",
			UpdatedAt: "updated_at", Initial: []string{"INIT"}, Terminal: []string{"DONE"}, Failed: []string{"FAILED"}},
		Steps: []config.Step{
			{Name: "debit", Kind: "local", DoneStatus: "DEBIT_DONE", Evidence: "SELECT id, delta FROM j WHERE biz_id = ?",
				Reverse: []string{"INSERT INTO j (biz_id, delta, reverses_id) VALUES (:biz_id, -:delta, :id)"}},
			{Name: "ledger", Kind: "local", DoneStatus: "LEDGER_DONE", Evidence: "SELECT id FROM l WHERE biz_id = ?"},
			{Name: "notify", Kind: "remote", DoneStatus: "DONE", Intent: "SELECT request_id FROM i WHERE biz_id = ?"},
		},
	}, {
		Name: "orders", Topic: "order-event", Group: "order-consumer", Partitioner: "murmur2", MessageKey: "{biz_id}", HonoursOpctlHeaders: true,
		Steps:       []config.Step{{Name: "points", Kind: "local", Evidence: "SELECT id FROM p WHERE order_id = ?"}},
		Idempotency: &config.Idempotency{Table: "idem", Key: "msg_id", BizID: "biz_id", Action: "action"},
		Entity:      &config.Entity{Query: "SELECT status FROM orders WHERE order_id = ?", Cancels: []string{"REFUNDED"}, EffectStep: "points"},
	}}}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// evidence builds sources.Evidence for the pure planner tests.
func settlementEvidence(status string, version int64, debits, ledgers int, notify []sources.Intent) sources.Evidence {
	cfg := pureConfig()
	p := cfg.Pipeline("settlement")
	ev := sources.Evidence{BizID: "PAY-9", Pipeline: p, Sources: map[string]string{"mysql": "ok", "kafka": "ok"}}
	ev.DB.Now = t0
	ev.DB.State = sources.StateRow{Found: true, Status: status, Version: &version, MsgID: "m-9"}
	rows := func(n int, first int64) []sources.Row {
		var out []sources.Row
		for i := 0; i < n; i++ {
			out = append(out, sources.Row{Columns: []string{"id", "delta"}, Values: []sources.Value{first + int64(i), "-5.00"}})
		}
		return out
	}
	ev.DB.Steps = []sources.StepEvidence{{Name: "debit", Rows: rows(debits, 10)}, {Name: "ledger", Rows: rows(ledgers, 20)}, {Name: "notify", Intents: notify}}
	ev.Kafka = sources.KafkaEvidence{Partition: 2, Offset: 7, Located: sources.LocatedStored,
		Message: &sources.Message{Partition: 2, Offset: 7, Key: []byte("PAY-9"), Value: []byte(`{"x":1}`), Headers: map[string]string{"msg_id": "m-9"}},
		Group:   sources.GroupView{Topic: "settlement-event", Partitions: map[int32]sources.PartitionView{2: {Partition: 2, Committed: 8, LogStart: 0, LogEnd: 9}}}}
	return ev
}

func build(t *testing.T, ev sources.Evidence, o Options) (*Plan, error) {
	t.Helper()
	if o.Reason == "" {
		o.Reason = "r"
	}
	return Build(Input{Config: pureConfig(), Report: inspect.Diagnose(ev), Evidence: &ev, RedrivePartitions: 8, Options: o})
}

func acked(id string) sources.Intent {
	return sources.Intent{RequestID: id, SentAt: &t0, AckedAt: &t0}
}

func TestBuildRules(t *testing.T) {
	cases := []struct {
		name  string
		ev    sources.Evidence
		o     Options
		types []ActionType
		err   string
	}{
		{"duplicate local", settlementEvidence("DONE", 4, 3, 1, []sources.Intent{acked("a")}), Options{}, []ActionType{Reverse, Reverse}, ""},
		{"duplicate remote needs attest", settlementEvidence("DONE", 4, 1, 1, []sources.Intent{acked("a"), acked("b")}), Options{}, nil, "--attest"},
		{"duplicate remote manual", settlementEvidence("DONE", 4, 1, 1, []sources.Intent{acked("a"), acked("b")}), Options{Attest: "done"}, []ActionType{Manual}, ""},
		{"stranded", settlementEvidence("LEDGER_DONE", 3, 1, 1, nil), Options{}, []ActionType{Republish}, ""},
		{"stranded from-step rewinds", settlementEvidence("LEDGER_DONE", 3, 1, 1, nil), Options{FromStep: "ledger"}, []ActionType{RewindState, Republish}, ""},
		{"stranded republish only", settlementEvidence("LEDGER_DONE", 3, 1, 1, nil), Options{Action: Republish}, []ActionType{Republish}, ""},
		{"stranded forced reverse", settlementEvidence("LEDGER_DONE", 3, 1, 1, nil), Options{Action: Reverse}, nil, "add --force"},
		{"state behind", settlementEvidence("DEBIT_DONE", 2, 1, 1, nil), Options{}, []ActionType{AdvanceState, Republish}, ""},
		{"state behind to the end", settlementEvidence("INIT", 1, 1, 1, []sources.Intent{acked("a")}), Options{}, []ActionType{AdvanceState}, ""},
		{"missing effect", settlementEvidence("LEDGER_DONE", 3, 1, 0, nil), Options{}, []ActionType{RewindState, Republish}, ""},
		{"unknown without probe", settlementEvidence("LEDGER_DONE", 3, 1, 1, []sources.Intent{{RequestID: "a", SentAt: &t0}}), Options{}, nil, "no probe"},
		{"unknown absent", settlementEvidence("DONE", 4, 1, 1, []sources.Intent{{RequestID: "a", SentAt: &t0}}), Options{Action: Manual, Attest: "x", Outcome: "absent"}, []ActionType{Manual, RewindState, Republish}, ""},
		{"complete", settlementEvidence("DONE", 4, 1, 1, []sources.Intent{acked("a")}), Options{}, nil, "nothing to repair: COMPLETE"},
		{"complete forced republish", settlementEvidence("DONE", 4, 1, 1, []sources.Intent{acked("a")}), Options{Action: Republish, Force: true, FromStep: "notify"}, []ActionType{Republish}, ""},
		{"forced republish needs a step", settlementEvidence("DONE", 4, 1, 1, []sources.Intent{acked("a")}), Options{Action: Republish, Force: true}, nil, "--from-step"},
		{"bad action", settlementEvidence("DONE", 4, 1, 1, nil), Options{Action: "drop"}, nil, "want one of"},
		{"force without action", settlementEvidence("DONE", 4, 1, 1, nil), Options{Force: true}, nil, "--force needs --action"},
	}
	for _, c := range cases {
		p, err := build(t, c.ev, c.o)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var types []ActionType
		for _, a := range p.Actions {
			types = append(types, a.Type)
		}
		if !reflect.DeepEqual(types, c.types) {
			t.Errorf("%s: actions %v, want %v", c.name, types, c.types)
		}
		if p.Verify() != nil {
			t.Errorf("%s: plan does not verify", c.name)
		}
	}
}

func TestBuildInFlightNeverForced(t *testing.T) {
	ev := settlementEvidence("DEBIT_DONE", 2, 2, 0, nil)
	until := t0.Add(time.Hour)
	ev.DB.State.Owner, ev.DB.State.LeaseUntil = "c-1", &until
	for _, o := range []Options{{}, {Action: Reverse, Force: true, FromStep: "debit"}, {Action: Republish, Force: true, FromStep: "1"}} {
		_, err := build(t, ev, o)
		var rf *RefusedError
		if !errors.As(err, &rf) || rf.Code != CodeInFlight {
			t.Errorf("%+v: %v", o, err)
		}
	}
	// release_lease: refused while c-1 is a member, allowed once it left.
	ev.Kafka.Group.Members = []sources.GroupMember{{MemberID: "m-1", ClientID: "c-1"}}
	if _, err := build(t, ev, Options{Action: ReleaseLease}); err == nil || !strings.Contains(err.Error(), "live member") {
		t.Errorf("release with a live member: %v", err)
	}
	ev.Kafka.Group.Members = nil
	p, err := build(t, ev, Options{Action: ReleaseLease})
	if err != nil || p.Actions[0].Type != ReleaseLease || p.Actions[0].State.ReleaseOwner != "c-1" {
		t.Fatalf("release: %v %+v", err, p)
	}
}

func TestBuildRepublishReplayRecordAndHeaders(t *testing.T) {
	ev := settlementEvidence("LEDGER_DONE", 3, 1, 1, nil)
	ev.Kafka.Message = nil // deleted by retention
	p, err := build(t, ev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ps := p.Actions[0].Publish
	if ps.Copy || string(ps.Value) != `{"biz_id":"PAY-9","msg_id":"m-9","replay":true}` || string(ps.Key) != "PAY-9" {
		t.Fatalf("replay record %+v", ps)
	}
	if ps.Headers[HeaderFromStep] != "notify" || ps.Headers[HeaderMsgID] != "m-9" || ps.Headers[HeaderPlan] != "" {
		t.Fatalf("headers %v (opctl-plan is added at apply)", ps.Headers)
	}
	if len(p.Notes) == 0 || !strings.Contains(p.Notes[0], "replay record") {
		t.Fatalf("notes %v", p.Notes)
	}
	var b strings.Builder
	_ = Render(&b, p, RenderOptions{})
	for _, want := range []string{"+ message → settlement-event partition", "replay record", "opctl-from-step=notify", "opctl-plan=" + p.ID} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("render lacks %q:\n%s", want, b.String())
		}
	}
}

// --incident is carried like --reason: in the plan, covered by its id,
// and through Rederive; a name a terminal could not show is refused.
func TestBuildIncident(t *testing.T) {
	for _, tc := range []struct {
		name, incident, err string
	}{
		{"none", "", ""},
		{"named", "INC-4711 broker blip", ""},
		{"escape", "INC\x1b[2J", "printable characters only"},
		{"too long", strings.Repeat("i", MaxIncident+1), "at most 128"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := build(t, settlementEvidence("LEDGER_DONE", 3, 1, 1, nil), Options{Incident: tc.incident})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Incident != tc.incident {
				t.Fatalf("incident %q, want %q", p.Incident, tc.incident)
			}
			if err := Rederive(pureConfig(), p); err != nil {
				t.Fatalf("rederive: %v", err)
			}
			q := *p
			q.Incident = "INC-other"
			if q.Verify() == nil {
				t.Fatal("an edited incident still verifies: the id does not cover it")
			}
		})
	}
}

// TestIdentityLess: "the newest duplicate" is the greatest identity;
// integers compare as numbers, and so do the digit runs of a binlog
// change's identity.
func TestIdentityLess(t *testing.T) {
	cases := []struct {
		a, b string
		less bool
	}{
		{"9", "10", true},
		{"10", "9", false},
		{"0-1-9#0", "0-1-10#0", true},
		{"0-1-10#0", "0-1-9#1", false},
		{"0-1-10#0", "0-1-10#1", true},
		{"bin.000002:1024#0", "bin.000002:120#0", false},
		{"bin.000002:9999#0", "bin.000003:4#0", true},
		{"3e11fa47-71ca-11e1-9e33-c80aa9429562:99#0", "3e11fa47-71ca-11e1-9e33-c80aa9429562:100#0", true},
		{"a", "b", true},
		{"x", "x", false},
	}
	for _, c := range cases {
		t.Run(c.a+"<"+c.b, func(t *testing.T) {
			if got := identityLess(c.a, c.b); got != c.less {
				t.Fatalf("identityLess(%q, %q) = %v", c.a, c.b, got)
			}
		})
	}
}

// A consumer that does not honour opctl's replay headers (the default:
// honours_opctl_headers unset) reads a republished record as a plain
// redelivery and redoes every step its own state does not claim: no
// republish is planned that would redo an effect nothing stops from
// running twice, and a WRONGLY_SKIPPED is not flipped and republished
// (its own skip rule would skip it again) but made by hand
// (docs/repair.md#consumers-that-ignore-opctls-headers).
func TestBuildHeadersIgnored(t *testing.T) {
	seed000 := func(idempotentDebit bool) *config.Config {
		return &config.Config{Pipelines: []config.Pipeline{{
			Name: "settlement", Topic: "settlement-event", Group: "settlement-consumer", Partitioner: "murmur2", MessageKey: "{biz_id}",
			Steps: []config.Step{
				{Name: "debit", Kind: "local", Idempotent: idempotentDebit, Evidence: "SELECT id, delta FROM j WHERE biz_id = ?"},
				{Name: "ledger", Kind: "local", Idempotent: true, Evidence: "SELECT id FROM l WHERE biz_id = ?"},
				{Name: "notify", Kind: "remote"},
			},
		}}}
	}
	// Debit done, ledger missing, the group committed past: STRANDED.
	stranded := func(cfg *config.Config) sources.Evidence {
		ev := sources.Evidence{BizID: "PAY-9", Pipeline: cfg.Pipeline("settlement"), Sources: map[string]string{"mysql": "ok", "kafka": "ok"}}
		ev.DB.Now = t0
		ev.DB.Steps = []sources.StepEvidence{{Name: "debit", Rows: []sources.Row{{Columns: []string{"id", "delta"}, Values: []sources.Value{int64(10), "-5.00"}}}}, {Name: "ledger"}, {Name: "notify"}}
		ev.Kafka = sources.KafkaEvidence{Partition: 2, Offset: 7, Located: sources.LocatedSearched,
			Message: &sources.Message{Partition: 2, Offset: 7, Key: []byte("PAY-9"), Value: []byte(`{}`)},
			Group:   sources.GroupView{Topic: "settlement-event", Partitions: map[int32]sources.PartitionView{2: {Partition: 2, Committed: 8, LogStart: 0, LogEnd: 9}}}}
		return ev
	}
	plan := func(cfg *config.Config, ev sources.Evidence, o Options) (*Plan, error) {
		if o.Reason == "" {
			o.Reason = "r"
		}
		rep := inspect.Diagnose(ev)
		if rep.Verdict.Code != inspect.Stranded && rep.Verdict.Code != inspect.WronglySkipped {
			t.Fatalf("verdict %s (%s)", rep.Verdict.Code, rep.Verdict.Summary)
		}
		return Build(Input{Config: cfg, Report: rep, Evidence: &ev, RedrivePartitions: 8, Options: o})
	}
	t.Run("stranded, a republish would debit again", func(t *testing.T) {
		cfg := seed000(false)
		_, err := plan(cfg, stranded(cfg), Options{})
		if err == nil || !strings.Contains(err.Error(), "--attest") {
			t.Fatalf("err %v, want a manual action that asks for --attest", err)
		}
		p, err := plan(cfg, stranded(cfg), Options{Attest: "ledger row written by hand, INC-7"})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Actions) != 1 || p.Actions[0].Type != Manual || p.Actions[0].Summary != "make the effect of ledger by hand" {
			t.Fatalf("actions %+v", p.Actions)
		}
		if !strings.Contains(strings.Join(p.Notes, "\n"), "write debit again") {
			t.Errorf("notes %q do not say why", p.Notes)
		}
	})
	t.Run("stranded, only idempotent effects", func(t *testing.T) {
		cfg := seed000(true)
		p, err := plan(cfg, stranded(cfg), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Actions) != 1 || p.Actions[0].Type != Republish {
			t.Fatalf("actions %+v", p.Actions)
		}
	})
	t.Run("stranded, honours opctl's headers", func(t *testing.T) {
		cfg := seed000(false)
		cfg.Pipelines[0].HonoursOpctlHeaders = true
		p, err := plan(cfg, stranded(cfg), Options{})
		if err != nil || len(p.Actions) != 1 || p.Actions[0].Type != Republish {
			t.Fatalf("plan %+v err %v", p, err)
		}
	})
	t.Run("wrongly skipped", func(t *testing.T) {
		cfg := pureConfig()
		cfg.Pipelines[1].HonoursOpctlHeaders = false
		p := cfg.Pipeline("orders")
		ev := sources.Evidence{BizID: "8821", Pipeline: p, Sources: map[string]string{"mysql": "ok", "kafka": "ok"}}
		ev.DB.Now = t0
		ev.DB.Steps = []sources.StepEvidence{{Name: "points"}}
		ev.DB.Idempotency = []sources.IdempotencyRow{{Key: "msg-7391", Action: "SKIPPED"}, {Key: "msg-7392", Action: "DONE"}}
		ev.DB.Entity = &sources.EntityRow{Found: true, Status: "SHIPPED"}
		pl, err := plan(cfg, ev, Options{Attest: "points granted by hand, INC-8821"})
		if err != nil {
			t.Fatal(err)
		}
		if len(pl.Actions) != 1 || pl.Actions[0].Type != Manual || pl.Actions[0].Attested[inspect.AttestAll] != inspect.AttestApplied {
			t.Fatalf("actions %+v: want one manual action, no flip, no republish", pl.Actions)
		}
	})
}
