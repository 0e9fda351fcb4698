package cmd

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

var update = flag.Bool("update", false, "rewrite golden files")

// goldenReport is seed 000's PAY-1 as read: two debits, one ledger row,
// two acked notify calls, uncommitted offset. Built from plain structs so
// the golden output depends on nothing but the renderer, inspect and the
// planner's NEXT (plans.Next, as repair.Service.Triage sets it).
func goldenReport(t *testing.T) inspect.Report {
	t.Helper()
	_, _, r := goldenOp(t)
	return r
}

// goldenOp is goldenReport with the configuration and evidence it was
// diagnosed from.
func goldenOp(t *testing.T) (*config.Config, sources.Evidence, inspect.Report) {
	t.Helper()
	cfg, err := config.Load(filepath.Join("..", "testdata", "config", "settlement.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Pipeline("settlement")
	t0 := time.Date(2026, 11, 29, 3, 12, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	v := int64(4)
	debit := func(id int64, d time.Duration) sources.Row {
		return sources.Row{Columns: []string{"id", "account_id", "delta", "created_at"}, Values: []sources.Value{id, int64(1001), "-30.00", *at(d)}}
	}
	ev := sources.Evidence{
		BizID: "PAY-1", Pipeline: p,
		DB: sources.DBEvidence{
			Now:   *at(10 * time.Minute),
			State: sources.StateRow{Found: true, Status: "DONE", Version: &v, MsgID: "m-1", CreatedAt: at(0), UpdatedAt: at(40 * time.Second)},
			Steps: []sources.StepEvidence{
				{Name: "debit", Rows: []sources.Row{debit(11, time.Second), debit(13, 31*time.Second)}},
				{Name: "ledger", Rows: []sources.Row{{Columns: []string{"id", "direction", "amount", "created_at"}, Values: []sources.Value{int64(5), "OUT", "30.00", *at(2 * time.Second)}}}},
				{Name: "notify", Intents: []sources.Intent{
					{RequestID: "PAY-1:notify:1", SentAt: at(3 * time.Second), AckedAt: at(4 * time.Second), Result: "OK"},
					{RequestID: "PAY-1:notify:2", SentAt: at(33 * time.Second), AckedAt: at(34 * time.Second), Result: "OK"},
				}},
			},
		},
		Kafka: sources.KafkaEvidence{Partition: 5, Offset: 1234, Located: sources.LocatedSearched,
			Message: &sources.Message{Partition: 5, Offset: 1234, Timestamp: *at(0), Key: []byte("PAY-1")},
			Group: sources.GroupView{Topic: "settlement-event", GroupState: "Stable",
				Partitions: map[int32]sources.PartitionView{5: {Partition: 5, Committed: 1234, LogStart: 0, LogEnd: 1500, Owner: "settlement-c-3"}}}},
		Sources: map[string]string{"mysql": "ok", "kafka": "ok"},
	}
	r := inspect.Diagnose(ev)
	r.Verdict.Next = NextFlags{}.Lines(plans.Next(plans.Input{Config: cfg, Report: r, Evidence: &ev, RedrivePartitions: 8}))
	return cfg, ev, r
}

// goldenTriage is the read side's triage of goldenReport (its
// configuration, evidence and redrive partitions: what the planner makes
// NEXT of), then the operations of more.
func goldenTriage(t *testing.T, more ...inspect.Report) *triage.Result {
	t.Helper()
	cfg, ev, r := goldenOp(t)
	tr := triageOf(append([]inspect.Report{r}, more...)...)
	tr.Config = cfg
	tr.Ops[0].Pipeline, tr.Ops[0].Evidence, tr.Ops[0].RedrivePartitions = ev.Pipeline, ev, 8
	return tr
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd -run Golden -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test ./cmd -run Golden -update to accept):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestWhereHumanGolden(t *testing.T) {
	r := goldenReport(t)
	for _, tc := range []struct {
		name        string
		tty, noColo bool
	}{
		{"where_piped.golden", false, false},
		{"where_tty.golden", true, false},
		{"where_tty_nocolor.golden", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ios, _, out, _ := iostreams.Test()
			ios.SetStdoutTTY(tc.tty)
			ios.SetNoColor(tc.noColo)
			if err := newWhereView(ios, "table").Render([]inspect.Report{r}); err != nil {
				t.Fatal(err)
			}
			s := out.String()
			if !tc.tty && (strings.Contains(s, "\x1b[") || strings.Contains(s, "│")) {
				t.Errorf("piped output has colour or box art")
			}
			if tc.noColo && strings.Contains(s, "\x1b[") {
				t.Errorf("NO_COLOR output has escape codes")
			}
			checkGolden(t, tc.name, s)
		})
	}
}

func TestExplainRunsWithoutConfig(t *testing.T) {
	ios, _, out, _ := iostreams.Test()
	code := Run(context.Background(), ios, []string{"explain", "IN_FLIGHT", "--config", "/nonexistent.yaml"})
	if code != ExitOK || !strings.Contains(out.String(), "--force") {
		t.Fatalf("exit %d: %s", code, out)
	}
}
