package plans

// Fuzz targets for the plan file: a plan is input from outside (a file an
// operator hands to `opctl repair show|apply`), so no input may make opctl
// panic, and bad input must give a clear error.
//
//	go test -run '^$' -fuzz '^FuzzDecode$' -fuzztime 5m -parallel 2 ./repair/plans/
//	go test -run '^$' -fuzz '^FuzzRederive$' -fuzztime 5m -parallel 2 ./repair/plans/
//
// The seeds (f.Add) and the files under testdata/fuzz/FuzzDecode and
// testdata/fuzz/FuzzRederive run as ordinary tests with `go test`; a crasher
// `go test -fuzz` writes there becomes a regression test. The seed files are
// written by
//
//	go test ./repair/plans/ -run '^TestWriteFuzzCorpus$' -write-fuzz-corpus

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

var writeFuzzCorpus = flag.Bool("write-fuzz-corpus", false, "rewrite the seed files of testdata/fuzz/FuzzDecode and FuzzRederive")

// fuzzCredentials are in the configured compensate URL; no plan may carry
// them.
const fuzzCredentials = "ops:s3cret@"

// fuzzConfig is the plan tests' configuration (pureConfig: settlement with
// reverse statements, orders with idempotency and entity) with what the
// fuzzer also needs to reach every action type: a compensate URL (with
// credentials) on settlement's remote step, a redrive topic distinct from
// the topic on both pipelines, and a third pipeline whose remote step is
// compensated and probed by {biz_id}.
func fuzzConfig() *config.Config {
	cfg := pureConfig()
	set := cfg.Pipeline("settlement")
	set.RedriveTopic = "settlement-redrive"
	set.Steps[2].Compensate = "http://" + fuzzCredentials + "downstream.test/notify/compensate?request_id={request_id}"
	cfg.Pipeline("orders").RedriveTopic = "order-redrive"
	cfg.Pipelines = append(cfg.Pipelines, config.Pipeline{
		Name: "shipping", Topic: "shipping-event", Group: "shipping-consumer", Partitioner: "fnv1a", MessageKey: "ship-{biz_id}",
		State: &config.State{Table: "shipment_state", Key: "order_id", Status: "status", Version: "version",
			Initial: []string{"NEW"}, Terminal: []string{"SHIPPED"}, Failed: []string{"FAILED"}},
		Steps: []config.Step{
			{Name: "reserve", Kind: "local", DoneStatus: "RESERVED", Evidence: "SELECT id, sku, qty FROM reservation WHERE order_id = ?",
				Reverse: []string{"DELETE FROM reservation WHERE id = :id AND order_id = :biz_id", "UPDATE stock SET qty = qty + :qty WHERE sku = :sku"}},
			{Name: "carrier", Kind: "remote", DoneStatus: "SHIPPED", Intent: "SELECT request_id FROM carrier_intent WHERE order_id = ?",
				Probe:      "https://carrier.test/shipments/count?order={biz_id}",
				Compensate: "https://" + fuzzCredentials + "carrier.test/shipments/cancel?order={biz_id}"},
		},
	})
	// Seed 003's shape: no state, records without a biz_id, a consumer
	// that ignores opctl's headers, the points grant redriven.
	cfg.Pipelines = append(cfg.Pipelines, config.Pipeline{
		Name: "points", Topic: "order-event", Group: "order-consumer", Partitioner: "murmur2", MessageKey: "{biz_id}",
		Steps: []config.Step{{Name: "points", Kind: "remote", Probe: "https://points.test/grants?order_id={biz_id}",
			Redrive: "https://" + fuzzCredentials + "points.test/grant?order_id={biz_id}"}},
		Idempotency: &config.Idempotency{Table: "idempotent", Key: "msg_id", Action: "action", CreatedAt: "created_at", MsgIDPath: "$.msgId"},
		Entity:      &config.Entity{Query: "SELECT status, updated_at FROM orders WHERE order_id = ?", Lifecycle: []string{"PAID", "SHIPPED"}, Cancels: []string{"REFUNDED"}, EffectStep: "points"},
	})
	return cfg
}

// fuzzPlan is a plan Build makes for the fuzzers' seeds.
type fuzzPlan struct {
	name string
	plan *Plan
}

// fuzzPlans builds real plans, one per rule of docs/repair.md it can reach
// with fuzzConfig. A seed that no longer builds is reported, not skipped
// silently: the corpus would lose that shape.
func fuzzPlans(tb testing.TB) []fuzzPlan {
	tb.Helper()
	cfg := fuzzConfig()
	settlement := func(status string, version int64, debits, ledgers int, notify []sources.Intent) sources.Evidence {
		ev := settlementEvidence(status, version, debits, ledgers, notify)
		ev.Pipeline = cfg.Pipeline("settlement")
		return ev
	}
	unacked := func(id string) sources.Intent { return sources.Intent{RequestID: id, SentAt: &t0} }
	leased := settlement("DEBIT_DONE", 2, 2, 0, nil)
	until := t0.Add(time.Hour)
	leased.DB.State.Owner, leased.DB.State.LeaseUntil = "c-1", &until
	noMessage := settlement("LEDGER_DONE", 3, 1, 1, nil)
	noMessage.Kafka.Message = nil
	noState := settlement("", 0, 1, 1, []sources.Intent{acked("a")})
	noState.DB.State = sources.StateRow{}

	orders := sources.Evidence{BizID: "ORD-7", Pipeline: cfg.Pipeline("orders"), Sources: map[string]string{"mysql": "ok", "kafka": "ok"}}
	orders.DB.Now = t0
	orders.DB.Steps = []sources.StepEvidence{{Name: "points"}}
	orders.DB.Idempotency = []sources.IdempotencyRow{{Key: "m-70", Action: "DONE", BizID: "ORD-7", CreatedAt: &t0},
		{Key: "m-71", Action: "SKIPPED", BizID: "ORD-7", CreatedAt: &until}}
	orders.DB.Entity = &sources.EntityRow{Found: true, Status: "SHIPPED"}
	orders.Kafka = sources.KafkaEvidence{Partition: -1, Offset: -1, Located: sources.LocatedUnknown, SearchDetail: "not found in the search window",
		Group: sources.GroupView{Topic: "order-event", Partitions: map[int32]sources.PartitionView{}}}

	zero := 0
	points := sources.Evidence{BizID: "8821", Pipeline: cfg.Pipeline("points"), Sources: map[string]string{"mysql": "ok", "kafka": "ok"}}
	points.DB.Now = t0
	points.DB.Steps = []sources.StepEvidence{{Name: "points", BizProbe: &sources.ProbeResult{Outcome: sources.ProbeAbsent, Count: &zero}}}
	points.DB.Idempotency = []sources.IdempotencyRow{{Key: "msg-7391", Action: "SKIPPED", CreatedAt: &t0}, {Key: "msg-7392", Action: "DONE", CreatedAt: &until}}
	points.DB.Entity = &sources.EntityRow{Found: true, Status: "SHIPPED", At: &t0}

	two := 2
	shipping := sources.Evidence{BizID: "SHP-3", Pipeline: cfg.Pipeline("shipping"), Sources: map[string]string{"mysql": "ok", "kafka": "ok"}}
	shipping.DB.Now = t0
	v := int64(9)
	shipping.DB.State = sources.StateRow{Found: true, Status: "SHIPPED", Version: &v, MsgID: "s-3"}
	shipping.DB.Steps = []sources.StepEvidence{
		{Name: "reserve", Rows: []sources.Row{
			{Columns: []string{"id", "sku", "qty"}, Values: []sources.Value{int64(5), "SKU-1", int64(2)}},
			{Columns: []string{"id", "sku", "qty"}, Values: []sources.Value{int64(6), "SKU-1", nil}}}},
		{Name: "carrier", Intents: []sources.Intent{acked("r-1"), acked("r-2")},
			BizProbe: &sources.ProbeResult{Outcome: sources.ProbeApplied, Count: &two}}}
	shipping.Kafka = sources.KafkaEvidence{Partition: 0, Offset: 41, Located: sources.LocatedStored,
		Message: &sources.Message{Partition: 0, Offset: 41, Key: []byte("ship-SHP-3"), Value: []byte{0, 0xff, '{', '}'},
			Headers: map[string]string{"msg_id": "s-3", "opctl-plan": "old", "trace": "t\x00é"}},
		Group: sources.GroupView{Topic: "shipping-event", Partitions: map[int32]sources.PartitionView{0: {Partition: 0, Committed: 42, LogEnd: 42}}}}

	cases := []struct {
		name string
		ev   sources.Evidence
		o    Options
	}{
		{"duplicate-reverse", settlement("DONE", 4, 3, 1, []sources.Intent{acked("a")}), Options{}},
		{"duplicate-compensate", settlement("DONE", 4, 1, 1, []sources.Intent{acked("a"), acked("b")}), Options{}},
		{"duplicate-manual", settlement("DONE", 4, 1, 1, []sources.Intent{acked("a"), acked("b")}), Options{Action: Manual, Attest: "refunded b by hand"}},
		{"stranded", settlement("LEDGER_DONE", 3, 1, 1, nil), Options{}},
		{"stranded-from-step", settlement("LEDGER_DONE", 3, 1, 1, nil), Options{FromStep: "ledger"}},
		{"stranded-replay-record", noMessage, Options{}},
		{"stranded-forced-reverse", settlement("LEDGER_DONE", 3, 1, 1, nil), Options{Action: Reverse, Force: true, FromStep: "debit"}},
		{"state-behind", settlement("DEBIT_DONE", 2, 1, 1, nil), Options{}},
		{"state-behind-to-the-end", settlement("INIT", 1, 1, 1, []sources.Intent{acked("a")}), Options{}},
		{"state-behind-no-row", noState, Options{}},
		{"missing-effect", settlement("LEDGER_DONE", 3, 1, 0, nil), Options{}},
		{"unknown-absent", settlement("DONE", 4, 1, 1, []sources.Intent{unacked("a")}), Options{Action: Manual, Attest: "they never got it", Outcome: "absent"}},
		{"unknown-applied", settlement("LEDGER_DONE", 3, 1, 1, []sources.Intent{unacked("a")}), Options{Action: Manual, Attest: "they got it", Outcome: "applied"}},
		{"forced-republish", settlement("DONE", 4, 1, 1, []sources.Intent{acked("a")}), Options{Action: Republish, Force: true, FromStep: "notify"}},
		{"release-lease", leased, Options{Action: ReleaseLease, Operator: "oncall"}},
		{"wrongly-skipped", orders, Options{}},
		{"wrongly-skipped-redrive", points, Options{}},
		{"shipping-duplicate", shipping, Options{}},
		{"shipping-duplicate-manual", shipping, Options{Action: Manual, Attest: "cancelled at the carrier", FromStep: "2"}},
	}
	var out []fuzzPlan
	for _, c := range cases {
		o := c.o
		o.Reason = "INC-" + c.name
		o.Now = t0.Add(1500 * time.Millisecond)
		p, err := Build(Input{Config: cfg, Report: inspect.Diagnose(c.ev), Evidence: &c.ev, RedrivePartitions: 8, Options: o})
		if err != nil {
			tb.Errorf("seed %s: %v", c.name, err)
			continue
		}
		out = append(out, fuzzPlan{c.name, p})
	}
	return out
}

func encodePlan(tb testing.TB, p *Plan) []byte {
	tb.Helper()
	var b bytes.Buffer
	if err := Encode(&b, p); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// fuzzSeed is one named seed input.
type fuzzSeed struct {
	name string
	data []byte
}

// planSeeds are the real plans, indented (the plan file) and compact (a
// line of --from-file --out, and shorter for the mutator), and truncated.
func planSeeds(tb testing.TB) []fuzzSeed {
	var out []fuzzSeed
	for _, fp := range fuzzPlans(tb) {
		b := encodePlan(tb, fp.plan)
		compact, err := json.Marshal(fp.plan)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, fuzzSeed{"plan-" + fp.name, b}, fuzzSeed{"compact-" + fp.name, compact},
			fuzzSeed{"truncated-" + fp.name, b[:len(b)/2]}, fuzzSeed{"truncated-end-" + fp.name, b[:len(b)-3]})
	}
	return out
}

// oddSeeds are hand-made inputs: not JSON, wrong types, huge numbers, deep
// nesting, invalid UTF-8, NUL bytes, null where a list or object goes,
// duplicated keys, trailing data, a plan with a body edited after it was
// sealed.
func oddSeeds(tb testing.TB, real *Plan) []fuzzSeed {
	b := encodePlan(tb, real)
	line, _ := json.Marshal(real)
	replace := func(old, new string) []byte {
		if !bytes.Contains(b, []byte(old)) {
			tb.Fatalf("odd seed: the plan has no %q", old)
		}
		return bytes.Replace(b, []byte(old), []byte(new), 1)
	}
	return []fuzzSeed{
		{"empty", []byte("")},
		{"space", []byte(" \n\t")},
		{"null", []byte("null")},
		{"empty-object", []byte("{}")},
		{"array", []byte("[]")},
		{"string", []byte(`"plan"`)},
		{"nul-bytes", []byte("{\x00\"plan_version\":1}\x00")},
		{"bom", append([]byte("\xef\xbb\xbf"), b...)},
		{"invalid-utf8", []byte("{\"plan_version\":1,\"reason\":\"\xff\xfe\xc3\x28\",\"id\":\"\xe2\x82\"}")},
		{"huge-numbers", []byte(`{"plan_version":1e400,"actions":[{"index":99999999999999999999999}]}`)},
		{"negative-index", []byte(`{"plan_version":1,"id":"","actions":[{"index":-9223372036854775808,"type":"reverse"}]}`)},
		{"float-version", []byte(`{"plan_version":1.0}`)},
		{"deep-nesting", []byte(`{"observed":{"steps":[{"evidence":[{"row":` + strings.Repeat(`{"a":`, 5000) + `null` + strings.Repeat(`}`, 5000) + `}]}]}}`)},
		{"deep-array", []byte(strings.Repeat("[", 20000) + strings.Repeat("]", 20000))},
		{"actions-null", replace(`"actions": [`, `"actions": null, "x": [`)},
		{"actions-null-only", []byte(`{"plan_version":1,"id":"","actions":null}`)},
		{"guards-null", []byte(`{"plan_version":1,"actions":[{"index":1,"type":"reverse","guards":null,"reverse":null}]}`)},
		{"row-not-object", []byte(`{"actions":[{"reverse":{"row":["id","1"]}}]}`)},
		{"row-number", []byte(`{"actions":[{"reverse":{"row":{"id":1}}}]}`)},
		{"row-null", []byte(`{"actions":[{"reverse":{"row":null}}]}`)},
		{"row-dup-columns", []byte(`{"actions":[{"reverse":{"row":{"id":"1","id":"2","":null}}}]}`)},
		{"duplicated-keys", replace(`"plan_version": 1,`, `"plan_version": 1, "plan_version": 2, "reason": "a",`)},
		{"unknown-field", replace(`"plan_version": 1,`, `"plan_version": 1, "signature": "x",`)},
		{"bad-time", replace(`"created_at": "`, `"created_at": "9999-99-99T`)},
		{"time-offset", replace(`.5Z"`, `.5+14:00"`)},
		{"bad-base64", []byte(`{"actions":[{"publish":{"key":"!!!","value":"====="}}]}`)},
		{"trailing-object", append(slices.Clone(b), []byte("{}")...)},
		{"trailing-brace", append(slices.Clone(line), '}')},
		{"trailing-bracket", append(slices.Clone(line), ']')},
		{"two-lines", append(append(slices.Clone(line), '\n'), line...)},
		{"edited-after-seal", replace(`"reason": "INC-`, `"reason": "edited INC-`)},
	}
}

func fuzzSeeds(tb testing.TB) []fuzzSeed {
	seeds := planSeeds(tb)
	ps := fuzzPlans(tb)
	if len(ps) == 0 {
		tb.Fatal("no plan builds")
	}
	return append(seeds, oddSeeds(tb, ps[0].plan)...)
}

// checkErr: an error is a clear message: not empty, valid UTF-8 (it is
// printed to a terminal and written to the audit), without control
// characters that a terminal would act on (C0 but newline and tab, C1;
// DEL is let through: time.ParseError leaves it unescaped, and terminals
// ignore it).
func checkErr(t *testing.T, what string, err error) {
	t.Helper()
	msg := err.Error()
	switch {
	case strings.TrimSpace(msg) == "":
		t.Fatalf("%s: empty error (%T)", what, err)
	case !utf8.ValidString(msg):
		t.Fatalf("%s: error is not valid UTF-8: %q", what, msg)
	}
	for _, r := range msg {
		if r != '\n' && r != '\t' && (r < 0x20 || (r >= 0x80 && r < 0xa0)) {
			t.Fatalf("%s: error contains the control character %U: %q", what, r, msg)
		}
	}
}

// clip is the start and end of a long input, for a failure message.
func clip(data []byte) string {
	if len(data) <= 160 {
		return string(data)
	}
	return string(data[:80]) + fmt.Sprintf(" …(%d bytes)… ", len(data)-160) + string(data[len(data)-80:])
}

// FuzzDecode: Decode and DecodeAll never panic and fail with a clear error;
// a decoded plan verifies and renders without a panic; a plan Decode and
// Verify accept encodes and decodes back to the same canonical body, and
// DecodeAll reads it as the same one plan.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(bytes.NewReader(data))
		all, allErr := DecodeAll(bytes.NewReader(data))
		if allErr != nil {
			checkErr(t, "DecodeAll", allErr)
		}
		for i, q := range all {
			if q == nil {
				t.Fatalf("DecodeAll: plan %d is nil", i+1)
			}
			if err := q.Verify(); err != nil {
				checkErr(t, "Verify (DecodeAll)", err)
			}
		}
		if err != nil {
			checkErr(t, "Decode", err)
			if p != nil {
				t.Fatalf("Decode returned a plan and an error %v", err)
			}
			return
		}
		if p == nil {
			t.Fatal("Decode returned neither a plan nor an error")
		}
		var out strings.Builder
		if err := Render(&out, p, RenderOptions{}); err != nil {
			checkErr(t, "Render", err)
		}
		h, herr := p.Hash()
		verr := p.Verify()
		if allErr != nil || len(all) != 1 {
			t.Fatalf("Decode reads one plan, DecodeAll %d (err %v): %q", len(all), allErr, clip(data))
		}
		if h2, _ := all[0].Hash(); herr == nil && h2 != h {
			t.Fatalf("Decode and DecodeAll read different plans (%s, %s)", h, h2)
		}
		if verr != nil {
			checkErr(t, "Verify", verr)
			return
		}
		if herr != nil {
			t.Fatalf("Verify accepts a plan whose Hash fails: %v", herr)
		}
		var b bytes.Buffer
		if err := Encode(&b, p); err != nil {
			t.Fatalf("Encode of a verified plan: %v", err)
		}
		q, err := Decode(bytes.NewReader(b.Bytes()))
		if err != nil {
			t.Fatalf("a verified plan does not decode after Encode: %v\n%s", err, b.Bytes())
		}
		h2, err := q.Hash()
		if err != nil || h2 != h || q.ID != p.ID {
			t.Fatalf("canonical body not stable: hash %s → %s (%v), id %q → %q\n%s", h, h2, err, p.ID, q.ID, b.Bytes())
		}
		if err := q.Verify(); err != nil {
			t.Fatalf("a verified plan does not verify after Encode/Decode: %v", err)
		}
	})
}

// FuzzRederive: for any plan file, Rederive with a real configuration never
// panics, refuses with a clear *RefusedError (tampered), and accepts only
// the plan Build makes: for an accepted plan an independent check finds
// only configured SQL, tables, topics, partitions and compensate URLs. It
// runs on the plan as decoded, and sealed (its id recomputed, as an editor
// who knows the format would: apply verifies before it rederives) under
// each pipeline of the configuration (the plan names the pipeline).
func FuzzRederive(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s.data)
	}
	cfg := fuzzConfig()
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(bytes.NewReader(data))
		if err != nil {
			return
		}
		rederive(t, cfg, p, "the plan as decoded")
		for _, name := range append([]string{p.Pipeline}, cfg.PipelineNames()...) {
			q, err := Decode(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("second Decode: %v", err)
			}
			q.Pipeline = name
			if err := q.Seal(); err != nil {
				continue
			}
			rederive(t, cfg, q, "the plan sealed for pipeline "+strconv.Quote(name))
		}
	})
}

// rederive runs Rederive and, when it accepts p, checks that p is what
// Build makes.
func rederive(t *testing.T, cfg *config.Config, p *Plan, what string) {
	t.Helper()
	err := Rederive(cfg, p)
	if err != nil {
		checkErr(t, "Rederive: "+what, err)
		var rf *RefusedError
		if !errors.As(err, &rf) || rf.Code != CodeTampered {
			t.Fatalf("Rederive (%s): %T %v, want a *RefusedError with code %s", what, err, err, CodeTampered)
		}
		return
	}
	if err := checkAccepted(cfg, p); err != nil {
		t.Fatalf("Rederive accepts %s, but %v", what, err)
	}
}

// checkAccepted is the independent check of a plan Rederive accepted: its
// id is its body's; it is byte for byte the plan rebuilt from what it
// records; every action has its one type-specific part, and every SQL
// statement, table, topic, partition and URL is the configured one.
func checkAccepted(cfg *config.Config, p *Plan) error {
	if err := p.Verify(); err != nil {
		return fmt.Errorf("it does not verify: %v", err)
	}
	o := Options{Reason: p.Reason, Operator: p.Operator, Action: p.Request.Action, FromStep: p.Request.FromStep,
		Force: p.Request.Force, Attest: p.Attest, Outcome: p.Request.Outcome, Now: p.CreatedAt}
	got, err := buildFrom(cfg, p.BizID, p.Pipeline, "", p.Observed, o)
	if err != nil {
		return fmt.Errorf("the configuration makes no plan of it: %v", err)
	}
	var want, have bytes.Buffer
	if err := Encode(&want, got); err != nil {
		return err
	}
	if err := Encode(&have, p); err != nil {
		return err
	}
	if !bytes.Equal(want.Bytes(), have.Bytes()) {
		return fmt.Errorf("it is not the plan Build makes:\n%s\nwant:\n%s", have.Bytes(), want.Bytes())
	}
	pl := cfg.Pipeline(p.Pipeline)
	if pl == nil {
		return fmt.Errorf("pipeline %q is not configured", p.Pipeline)
	}
	step := func(name string) *config.Step {
		if k := pl.StepIndex(name); k >= 0 {
			return &pl.Steps[k]
		}
		return nil
	}
	for i, a := range p.Actions {
		n := 0
		for _, set := range []bool{a.State != nil, a.Reverse != nil, a.Flip != nil, a.Publish != nil, a.Compensate != nil, a.Redrive != nil, a.Manual != nil} {
			if set {
				n++
			}
		}
		part := map[ActionType]bool{AdvanceState: a.State != nil, RewindState: a.State != nil, ReleaseLease: a.State != nil,
			Reverse: a.Reverse != nil, FlipSkipped: a.Flip != nil, Republish: a.Publish != nil, CompensateRemote: a.Compensate != nil, Redrive: a.Redrive != nil, Manual: a.Manual != nil}
		switch {
		case a.Index != i+1:
			return fmt.Errorf("action %d has index %d", i+1, a.Index)
		case n != 1 || !part[a.Type]:
			return fmt.Errorf("action %d (%s) has %d type-specific parts, or not its type's", a.Index, a.Type, n)
		case a.Step != "" && step(a.Step) == nil:
			return fmt.Errorf("action %d names step %q, which %s does not have", a.Index, a.Step, pl.Name)
		}
		if s := a.State; s != nil && (pl.State == nil || s.Table != pl.State.Table) {
			return fmt.Errorf("action %d writes state table %q", a.Index, s.Table)
		}
		if r := a.Reverse; r != nil {
			st := step(a.Step)
			if st == nil || st.Kind != config.KindLocal || len(st.Reverse) == 0 || !slices.Equal(r.Statements, st.Reverse) {
				return fmt.Errorf("action %d runs reverse statements %q, not step %q's configured ones", a.Index, r.Statements, a.Step)
			}
		}
		if fl := a.Flip; fl != nil && (pl.Idempotency == nil || fl.Table != pl.Idempotency.Table || fl.From != inspect.ActionSkipped || (fl.To != inspect.ActionPending) != (fl.Delete && fl.To == "")) {
			return fmt.Errorf("action %d flips %s.%s %s → %s", a.Index, fl.Table, fl.Key, fl.From, fl.To)
		}
		if pb := a.Publish; pb != nil {
			if err := checkPublish(pl, p, pb, step); err != nil {
				return fmt.Errorf("action %d: %v", a.Index, err)
			}
		}
		if c := a.Compensate; c != nil {
			st := step(a.Step)
			if st == nil || st.Kind != config.KindRemote || st.Compensate == "" {
				return fmt.Errorf("action %d compensates step %q, which has no compensate URL", a.Index, a.Step)
			}
			url := sources.RedactURL(sources.Expand(st.Compensate, map[string]string{"request_id": c.RequestID, "biz_id": p.BizID}, true))
			if c.URL != url || strings.Contains(c.URL, fuzzCredentials) {
				return fmt.Errorf("action %d posts to %q, not %q", a.Index, c.URL, url)
			}
		}
		if rd := a.Redrive; rd != nil {
			st := step(a.Step)
			if st == nil || st.Kind != config.KindRemote || st.Redrive == "" {
				return fmt.Errorf("action %d redrives step %q, which has no redrive URL", a.Index, a.Step)
			}
			url := sources.RedactURL(sources.Expand(st.Redrive, map[string]string{"request_id": rd.RequestID, "biz_id": p.BizID}, true))
			if rd.URL != url || strings.Contains(rd.URL, fuzzCredentials) {
				return fmt.Errorf("action %d posts to %q, not %q", a.Index, rd.URL, url)
			}
		}
	}
	return nil
}

func checkPublish(pl *config.Pipeline, p *Plan, pb *PublishSpec, step func(string) *config.Step) error {
	if pb.Topic != pl.EffectiveRedriveTopic() {
		return fmt.Errorf("republishes to topic %q, not %q", pb.Topic, pl.EffectiveRedriveTopic())
	}
	if pb.Source != nil && pb.Source.Topic != pl.Topic {
		return fmt.Errorf("copies a record of topic %q, not %q", pb.Source.Topic, pl.Topic)
	}
	if _, ok := pb.Headers[HeaderPlan]; ok {
		return fmt.Errorf("carries its own %s header", HeaderPlan)
	}
	for _, s := range []string{pb.FromStep, pb.ForceEffect} {
		if s != "" && step(s) == nil {
			return fmt.Errorf("names step %q, which %s does not have", s, pl.Name)
		}
	}
	if pl.Partitioner == config.PartitionerStored {
		if p.Observed.Kafka.Partition == nil || pb.Partition != *p.Observed.Kafka.Partition {
			return fmt.Errorf("partition %d is not the stored one", pb.Partition)
		}
		return nil
	}
	part := pl.Partitioner
	if part == "" {
		part = config.PartitionerMurmur2
	}
	n, err := sources.PartitionFor(part, pb.Key, p.Observed.Kafka.RedrivePartitions)
	if err != nil || n != pb.Partition {
		return fmt.Errorf("partition %d is not %s's of key %q over %d partitions (%d, %v)", pb.Partition, part, pb.Key, p.Observed.Kafka.RedrivePartitions, n, err)
	}
	return nil
}

// TestFuzzSeedsBuild keeps the seeds meaningful: every real plan builds,
// verifies and rederives, and together they cover every action type.
func TestFuzzSeedsBuild(t *testing.T) {
	cfg := fuzzConfig()
	seen := map[ActionType]bool{}
	for _, fp := range fuzzPlans(t) {
		if err := Rederive(cfg, fp.plan); err != nil {
			t.Errorf("%s: %v", fp.name, err)
		}
		if err := checkAccepted(cfg, fp.plan); err != nil {
			t.Errorf("%s: %v", fp.name, err)
		}
		for _, a := range fp.plan.Actions {
			seen[a.Type] = true
		}
	}
	for _, typ := range ActionTypes() {
		if !seen[typ] {
			t.Errorf("no seed plan has a %s action", typ)
		}
	}
}

// TestBuildNonUTF8Input: Kafka headers and VARBINARY columns are bytes, not
// always UTF-8; a plan built from them must still be one apply accepts, the
// plan read back from its file rebuilding to itself. Found while writing
// the fuzz seeds (a header "t\x00\xff" on the shipping record).
func TestBuildNonUTF8Input(t *testing.T) {
	cfg := fuzzConfig()
	header := settlementEvidence("LEDGER_DONE", 3, 1, 1, nil) // stranded: the republish copies the record
	header.Pipeline = cfg.Pipeline("settlement")
	header.Kafka.Message.Headers["trace"] = "t\xff"
	value := settlementEvidence("DONE", 4, 2, 1, []sources.Intent{acked("a")}) // duplicated debit: a reverse of row 11
	value.Pipeline = cfg.Pipeline("settlement")
	value.DB.Steps[0].Rows[1].Values[1] = []byte("-5.00\xff")
	for _, c := range []struct {
		name string
		ev   sources.Evidence
	}{{"record header", header}, {"evidence value", value}} {
		p, err := Build(Input{Config: cfg, Report: inspect.Diagnose(c.ev), Evidence: &c.ev, RedrivePartitions: 8, Options: Options{Reason: "r", Now: t0}})
		if err != nil {
			t.Errorf("%s not UTF-8: %v", c.name, err)
			continue
		}
		back, err := Decode(bytes.NewReader(encodePlan(t, p)))
		if err == nil {
			err = back.Verify()
		}
		if err == nil {
			err = Rederive(cfg, back)
		}
		if err != nil {
			t.Errorf("%s not UTF-8: the plan read back: %v", c.name, err)
		}
	}
}

// TestWriteFuzzCorpus writes the seeds (the real plans and the hand-made
// odd inputs; their compact and truncated variants stay f.Add only) as
// files of the `go test fuzz v1` format under testdata/fuzz, only with
// -write-fuzz-corpus. Crashers `go test -fuzz` wrote there are left alone.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*writeFuzzCorpus {
		t.Skip("run with -write-fuzz-corpus to rewrite the seed files")
	}
	for _, target := range []string{"FuzzDecode", "FuzzRederive"} {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, s := range fuzzSeeds(t) {
			if strings.HasPrefix(s.name, "compact-") || strings.HasPrefix(s.name, "truncated") {
				continue // f.Add only: variants of the plan-* files
			}
			body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s.data)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, "seed-"+s.name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
