package cmd

import (
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// seedPreset loads a seed's preset (sources/config/presets), unmodified
// but for the addresses.
func seedPreset(t *testing.T, name string) *config.Config {
	t.Helper()
	b, err := config.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseWithEnv(name+".yaml", b, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestSeedWhereGolden is `opctl where`'s human output, piped, for each
// seed's incident and healthy operation on its own schema, through its
// preset (pure evidence: the golden output depends on nothing but
// inspect, the planner's NEXT and the renderer).
func TestSeedWhereGolden(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 3, 12, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	count := func(n int) *sources.ProbeResult {
		return &sources.ProbeResult{Outcome: map[bool]string{true: sources.ProbeApplied, false: sources.ProbeAbsent}[n > 0], Count: &n}
	}
	group := func(topic string, p int32, committed int64) sources.GroupView {
		return sources.GroupView{Topic: topic, GroupState: "Stable", GroupExists: true,
			Partitions: map[int32]sources.PartitionView{p: {Partition: p, Committed: committed, LogStart: 0, LogEnd: 2000}}}
	}
	change := func(id string, d time.Duration, before, after string) sources.Row {
		return sources.Row{Columns: sources.BinlogColumns, Values: []sources.Value{id, int64(3001), "-30.00", before, after, *at(d), sources.AttributedMessage}}
	}
	ledger := sources.Row{Columns: []string{"id", "direction", "amount", "created_at"}, Values: []sources.Value{int64(7), "OUT", "30.00", *at(2 * time.Second)}}
	msg := func(key string, p int32, off int64) *sources.Message {
		return &sources.Message{Partition: p, Offset: off, Timestamp: *at(0), Key: []byte(key), Value: []byte(`{"account_id":3001,"amount":"30.00"}`)}
	}

	seed000 := seedPreset(t, "seed000")
	seed001 := seedPreset(t, "seed001")
	seed003 := seedPreset(t, "seed003")
	cases := []struct {
		name string
		cfg  *config.Config
		ev   sources.Evidence
		want inspect.Code
	}{
		{"seed000_double_debit", seed000, sources.Evidence{BizID: "PAY-BL-1", Pipeline: seed000.Pipeline("settlement"),
			DB: sources.DBEvidence{Now: *at(time.Hour), Steps: []sources.StepEvidence{
				{Name: "debit", Rows: []sources.Row{change("0-1-41#0", time.Second, "500.00", "470.00"), change("0-1-57#0", 40*time.Second, "470.00", "440.00")}},
				{Name: "ledger", Rows: []sources.Row{ledger}}, {Name: "notify"}}},
			Kafka:   sources.KafkaEvidence{Partition: 3, Offset: 900, Located: sources.LocatedSearched, Message: msg("PAY-BL-1", 3, 900), Group: group("settlement-event", 3, 901)},
			Sources: map[string]string{"mysql": "ok", "kafka": "ok", "binlog": "ok"}}, inspect.DuplicateEffect},
		{"seed000_healthy", seed000, sources.Evidence{BizID: "PAY-BL-2", Pipeline: seed000.Pipeline("settlement"),
			DB: sources.DBEvidence{Now: *at(time.Hour), Steps: []sources.StepEvidence{
				{Name: "debit", Rows: []sources.Row{change("0-1-44#0", time.Second, "500.00", "470.00")}},
				{Name: "ledger", Rows: []sources.Row{ledger}}, {Name: "notify"}}},
			Kafka:   sources.KafkaEvidence{Partition: 3, Offset: 901, Located: sources.LocatedSearched, Message: msg("PAY-BL-2", 3, 901), Group: group("settlement-event", 3, 902)},
			Sources: map[string]string{"mysql": "ok", "kafka": "ok", "binlog": "ok"}}, inspect.Complete},
		{"seed000_will_redeliver", seed000, sources.Evidence{BizID: "PAY-BL-3", Pipeline: seed000.Pipeline("settlement"),
			DB: sources.DBEvidence{Now: *at(time.Hour), Steps: []sources.StepEvidence{
				{Name: "debit", Rows: []sources.Row{change("0-1-45#0", time.Second, "500.00", "470.00")}},
				{Name: "ledger", Rows: []sources.Row{ledger}}, {Name: "notify"}}},
			Kafka:   sources.KafkaEvidence{Partition: 3, Offset: 903, Located: sources.LocatedSearched, Message: msg("PAY-BL-3", 3, 903), Group: group("settlement-event", 3, 903)},
			Sources: map[string]string{"mysql": "ok", "kafka": "ok", "binlog": "ok"}}, inspect.WillRedeliver},
		{"seed001_double_lock", seed001, sources.Evidence{BizID: "O-1001:FULFIL", Pipeline: seed001.Pipeline("fulfilment"),
			DB: sources.DBEvidence{Now: *at(time.Hour), State: sources.StateRow{Found: true, Key: "O-1001:FULFIL", Status: "DONE", CreatedAt: at(0), UpdatedAt: at(5 * time.Second)},
				Steps: []sources.StepEvidence{
					{Name: "order_row", Rows: []sources.Row{{Columns: []string{"id", "order_status", "created_at"}, Values: []sources.Value{int64(1), "PAID", *at(0)}}}},
					{Name: "wms_lock", BizProbe: count(2)}, {Name: "logistics", BizProbe: count(1)},
					{Name: "notice", Rows: []sources.Row{{Columns: []string{"id", "kind", "created_at"}, Values: []sources.Value{int64(4), "notice", *at(5 * time.Second)}}}}}},
			Kafka:   sources.KafkaEvidence{Partition: 1, Offset: 77, Located: sources.LocatedSearched, Message: msg("O-1001:FULFIL", 1, 77), Group: group("order-fulfilment", 1, 78)},
			Sources: map[string]string{"mysql": "ok", "kafka": "ok"}}, inspect.DuplicateEffect},
		{"seed003_wrongly_skipped", seed003, sources.Evidence{BizID: "8821", Pipeline: seed003.Pipeline("orders"),
			DB: sources.DBEvidence{Now: *at(time.Hour), Steps: []sources.StepEvidence{{Name: "points", BizProbe: count(0)}},
				Idempotency: []sources.IdempotencyRow{{Key: "msg-7391", Action: "SKIPPED", CreatedAt: at(time.Second)}, {Key: "msg-7392", Action: "DONE", CreatedAt: at(2 * time.Second)}},
				Entity:      &sources.EntityRow{Found: true, Status: "SHIPPED", At: at(2 * time.Second)}},
			Kafka:   sources.KafkaEvidence{Partition: 0, Offset: 12, Located: sources.LocatedSearched, Message: msg("8821", 0, 12), Group: group("order-event", 0, 14)},
			Sources: map[string]string{"mysql": "ok", "kafka": "ok"}}, inspect.WronglySkipped},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := inspect.Diagnose(tc.ev)
			if r.Verdict.Code != tc.want {
				t.Fatalf("verdict %s (%s), want %s", r.Verdict.Code, r.Verdict.Summary, tc.want)
			}
			r.Verdict.Next = NextFlags{}.Lines(plans.Next(plans.Input{Config: tc.cfg, Report: r, Evidence: &tc.ev, RedrivePartitions: 8}))
			ios, _, out, _ := iostreams.Test()
			ios.SetStdoutTTY(false)
			if err := newWhereView(ios, "table").Render([]inspect.Report{r}); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, "where_"+tc.name+".golden", out.String())
		})
	}
}
