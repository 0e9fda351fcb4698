package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/lab/gen"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/reconcile"
)

func TestNewCmdReconcile(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want func(*ReconcileOptions) bool
	}{
		{[]string{"--since", "8d", "--older-than", "90s", "--check", "stuck, skipped", "--shard", "1/4", "-o", "prometheus", "--rate", "500", "--chunk", "200"}, 0,
			func(o *ReconcileOptions) bool {
				return o.Since == 8*24*time.Hour && o.OlderThan == 90*time.Second && strings.Join(o.Checks, ",") == "stuck,skipped" &&
					o.Shard == 1 && o.Shards == 4 && o.Output == "prometheus" && o.Rate == 500 && o.Chunk == 200
			}},
		{[]string{}, 0, func(o *ReconcileOptions) bool {
			return o.Since == 7*24*time.Hour && o.OlderThan == 5*time.Minute && o.Checks == nil && o.Shards == 0 && o.Output == "table" && o.Chunk == 1000
		}},
		{[]string{"--since", "1d12h", "--out", "t.jsonl", "-o", "jsonl"}, 0, func(o *ReconcileOptions) bool {
			return o.Since == 36*time.Hour && o.Out == "t.jsonl" && o.Output == "jsonl"
		}},
		{[]string{"--check", "bogus"}, ExitUsage, nil},
		{[]string{"--shard", "4/4"}, ExitUsage, nil},
		{[]string{"--shard", "x"}, ExitUsage, nil},
		{[]string{"-o", "yaml"}, ExitUsage, nil},
		{[]string{"--since", "7 days"}, ExitUsage, nil},
		{[]string{"--chunk", "0"}, ExitUsage, nil},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			io, _, _, _ := iostreams.Test()
			f := NewFactory(io, "test")
			var got *ReconcileOptions
			c := NewCmdReconcile(f, func(_ context.Context, o *ReconcileOptions) error { got = o; return nil })
			c.SetFlagErrorFunc(func(_ *cobraCommand, err error) error { return &UsageError{Err: err} })
			c.SetArgs(tc.args)
			c.SetOut(io.Out)
			c.SetErr(io.ErrOut)
			err := c.Execute()
			if code := exitCode(err, false); code != tc.code {
				t.Fatalf("exit %d (%v), want %d", code, err, tc.code)
			}
			if tc.want != nil && (got == nil || !tc.want(got)) {
				t.Errorf("options %+v", got)
			}
		})
	}
}

// reconcileFixture is a generated data set with the reconcile indexes and
// a config file pointing at it.
func reconcileFixture(t *testing.T) (string, *gen.Manifest, *testenv.DB) {
	t.Helper()
	db := testenv.MySQL(t)
	db.ExecFile(t, filepath.Join("..", "testdata", "schema", "settlement.sql"))
	db.ExecFile(t, filepath.Join("..", "testdata", "schema", "skip.sql"))
	m, err := gen.Generate(context.Background(), db.SQL, gen.Options{Ops: 1200, AnomalyRate: 0.03, Seed: 21,
		End: time.Now().UTC().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "config", "reconcile.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(raw), "${OPCTL_MYSQL_DSN}", db.DSN)
	cfg := filepath.Join(t.TempDir(), "opctl.yaml")
	if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, m, db
}

func runCLI(ctx context.Context, tty bool, args ...string) (int, string, string) {
	io, _, out, errOut := iostreams.Test()
	io.SetStdoutTTY(tty)
	code := Run(ctx, io, args)
	return code, out.String(), errOut.String()
}

// TestReconcileRun: the command end to end on generated data. The schema
// as shipped has no index on ledger_entry's created_at: settlement's
// duplicates is refused with the DDL (on stdout, and on stderr when
// piped), while the journal's and points_grant's (created_at) indexes
// serve; the run exits 6 (Kafka unreachable: partial wins over the
// refusal). After `schema apply --indexes --yes` every check runs; -o
// jsonl streams exactly the --out lines, one per seeded anomaly; Kafka
// unreachable makes the run partial (exit 6).
func TestReconcileRun(t *testing.T) {
	cfg, m, _ := reconcileFixture(t)
	ctx := context.Background()
	base := []string{"--config", cfg, "--brokers", "127.0.0.1:1", "--timeout", "3s"}

	code, out, errOut := runCLI(ctx, false, append([]string{"reconcile", "--check", "duplicates"}, base...)...)
	if code != ExitPartial || !strings.Contains(out, "ALTER TABLE `ledger_entry` ADD INDEX `ix_opctl_created_at_biz_order_id` (`created_at`, `biz_order_id`);") ||
		strings.Contains(out, "ALTER TABLE `balance_journal`") || !strings.Contains(out, "orders\tduplicates\tok\t") ||
		!strings.Contains(errOut, "settlement/duplicates refused: would need a full scan: no index on ledger_entry starting with (created_at)") {
		t.Fatalf("before the indexes: exit %d, want 6 with the ledger DDL only, orders run, the refusal on stderr:\n%s\nstderr: %s", code, out, errOut)
	}
	code, out, errOut = runCLI(ctx, false, append([]string{"schema", "check"}, base...)...)
	if code != ExitAttention || !strings.Contains(out, "missing") {
		t.Fatalf("schema check: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(ctx, false, append([]string{"schema", "apply", "--indexes"}, base...)...); code != ExitRefused {
		t.Fatalf("apply without --yes and no terminal: exit %d, want 5\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(ctx, false, append([]string{"schema", "apply", "--indexes", "--yes"}, base...)...); code != 0 {
		t.Fatalf("apply --indexes --yes: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := runCLI(ctx, false, append([]string{"schema", "check"}, base...)...); code != 0 || !strings.Contains(out, "nothing missing") {
		t.Fatalf("schema check after apply: exit %d\n%s", code, out)
	}

	file := filepath.Join(t.TempDir(), "targets.jsonl")
	code, out, errOut = runCLI(ctx, false, append([]string{"reconcile", "-o", "jsonl", "--out", file}, base...)...)
	if code != ExitPartial {
		t.Fatalf("exit %d, want 6 (Kafka unreachable)\n%s", code, errOut)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) == "" || string(b) != out {
		t.Fatalf("--out and -o jsonl differ:\n%s\n---\n%s", b, out)
	}
	var got, want []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var tg map[string]any
		if err := json.Unmarshal(sc.Bytes(), &tg); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		for _, k := range []string{"biz_id", "pipeline", "check", "verdict", "detail"} {
			if _, ok := tg[k]; !ok {
				t.Errorf("line %s has no %q", sc.Text(), k)
			}
		}
		if tg["partial"] != true {
			t.Errorf("line %s: want partial:true without Kafka", sc.Text())
		}
		step, _ := tg["step"].(string)
		got = append(got, strings.Join([]string{tg["pipeline"].(string), tg["check"].(string), tg["biz_id"].(string), tg["verdict"].(string), step}, "|"))
	}
	for _, a := range m.Anomalies {
		if a.Severity == "action" {
			want = append(want, strings.Join([]string{a.Pipeline, a.Check, a.BizID, a.Verdict, a.Step}, "|"))
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("targets differ from the manifest:\ngot  %v\nwant %v", got, want)
	}
	if !strings.Contains(errOut, "reconcile: ") || !strings.Contains(errOut, "partial") {
		t.Errorf("stderr summary: %q", errOut)
	}

	// Prometheus: one sample per pipeline and check, zeros included.
	code, out, _ = runCLI(ctx, false, append([]string{"reconcile", "-o", "prometheus", "--check", "stuck,skipped"}, base...)...)
	if code != ExitPartial {
		t.Fatalf("prometheus: exit %d", code)
	}
	for _, line := range []string{
		"# TYPE opctl_reconcile_targets gauge",
		`opctl_reconcile_targets{pipeline="settlement",check="stuck"} ` + itoa(len(m.Expected(gen.Settlement, "stuck"))),
		`opctl_reconcile_targets{pipeline="orders",check="skipped"} ` + itoa(len(m.Expected(gen.Orders, "skipped"))),
		`opctl_reconcile_targets{pipeline="orders",check="stuck"} 0`,
		`opctl_reconcile_check_ok{pipeline="orders",check="stuck",status="skipped"} 0`,
		`opctl_reconcile_check_ok{pipeline="settlement",check="stuck",status="ok"} 1`,
		`opctl_reconcile_verdicts{pipeline="settlement",check="stuck",verdict="IN_FLIGHT",severity="watch"} ` + itoa(m.Noise["in_flight"]),
		"opctl_reconcile_partial 1",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("prometheus output lacks %q:\n%s", line, out)
		}
	}

	// Piped table: tab-separated, no box art, no progress bar.
	code, out, errOut = runCLI(ctx, false, append([]string{"reconcile", "--check", "skipped"}, base...)...)
	if code != ExitPartial || !strings.HasPrefix(out, "PIPELINE\tCHECK\tBIZ_ID\tVERDICT\tSTEP\tDETAIL\n") || strings.ContainsAny(out, "┌│") || strings.Contains(errOut, "\r") {
		t.Errorf("piped table: exit %d\n%s\nstderr %q", code, out, errOut)
	}
}

// TestReconcileInterrupted: Ctrl-C (a cancelled context) exits 130 and says
// how far the scan got, on each pipeline (they are scanned in parallel).
func TestReconcileInterrupted(t *testing.T) {
	cfg, _, _ := reconcileFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code, _, errOut := runCLI(ctx, false, "reconcile", "--config", cfg, "--brokers", "127.0.0.1:1", "--timeout", "3s", "--check", "stuck")
	if code != ExitInterrupted || !strings.Contains(errOut, "interrupted after 0 rows of check stuck on pipeline settlement (none read yet), "+
		"after 0 rows of check stuck on pipeline orders (none read yet); 0 target(s) found so far") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestPrometheusTextEscapes(t *testing.T) {
	sum := &reconcile.Summary{Checks: []reconcile.CheckStats{{Pipeline: `a"b\c`, Check: "stuck", Status: "ok", Targets: 2,
		Verdicts: map[inspect.Code]int64{"STRANDED": 2}}},
		Lag: []reconcile.PipelineLag{{Pipeline: `a"b\c`, Topic: "t", Group: "g", GroupLag: 42}}}
	got := PrometheusText(sum, time.Unix(1700000000, 0))
	for _, want := range []string{
		`opctl_reconcile_group_lag{pipeline="a\"b\\c",topic="t",group="g"} 42`,
		`opctl_reconcile_targets{pipeline="a\"b\\c",check="stuck"} 2`,
		`opctl_reconcile_verdicts{pipeline="a\"b\\c",check="stuck",verdict="STRANDED",severity="action"} 2`,
		"opctl_reconcile_last_run_timestamp_seconds 1700000000",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

func TestRenderProgress(t *testing.T) {
	io, _, _, _ := iostreams.Test()
	st := newProgressBar(io.ErrOut, false).st
	got := renderProgress(reconcile.Progress{Pipeline: "settlement", Check: "duplicates", TotalRows: 5000,
		Fraction: 0.5, Elapsed: 2 * time.Second}, st, 3)
	for _, want := range []string{"50%", "settlement/duplicates", "rows 5000", "2500 rows/s", "found 3", "████████████░░░░░░░░░░░░"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

type cobraCommand = cobra.Command
