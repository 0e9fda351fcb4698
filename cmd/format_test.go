package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/repair"
)

func TestParseFormat(t *testing.T) {
	for _, tc := range []struct {
		in      string
		allowed []Format
		want    Format
		err     string
	}{
		{"table", []Format{FormatTable, FormatJSON, FormatJSONL}, FormatTable, ""},
		{"jsonl", []Format{FormatTable, FormatJSON, FormatJSONL}, FormatJSONL, ""},
		{"prometheus", []Format{FormatTable, FormatJSON, FormatJSONL}, "", `--output "prometheus": want table, json or jsonl`},
		{"prometheus", []Format{FormatTable, FormatJSON, FormatJSONL, FormatPrometheus}, FormatPrometheus, ""},
		{"yaml", []Format{FormatTable, FormatJSON, FormatJSONL, FormatPrometheus}, "", `--output "yaml": want table, json, jsonl or prometheus`},
		{"JSON", []Format{FormatJSON}, "", `--output "JSON": want json`},
	} {
		got, err := parseFormat(tc.in, tc.allowed...)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err || exitCode(err, false) != ExitUsage {
				t.Errorf("parseFormat(%q): %v, want usage error %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseFormat(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestRepairApplyJSONLines: `repair apply plans.jsonl -o jsonl` prints one
// result a line (JSON lines), -o json indented objects.
func TestRepairApplyJSONLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plans.jsonl")
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for _, id := range []string{"PAY-A", "PAY-B"} {
		_ = enc.Encode(testPlan(t, id))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := func(biz string) *repair.Result {
		return &repair.Result{BizID: biz, Pipeline: "settlement", Outcome: repair.OutcomeApplied, Total: 1, Applied: 1}
	}
	for _, format := range []Format{FormatJSONL, FormatJSON} {
		t.Run(string(format), func(t *testing.T) {
			ios, _, stdout, _ := iostreams.Test()
			fake := &fakeRepairer{results: map[string]*repair.Result{"PAY-A": ok("PAY-A"), "PAY-B": ok("PAY-B")}}
			err := runRepairApply(context.Background(), &RepairApplyOptions{IO: ios, Format: format, File: path, Yes: true,
				Operator: "tester", Repairer: func() (Repairer, error) { return fake, nil }})
			if err != nil {
				t.Fatal(err)
			}
			if format == FormatJSON {
				if !strings.Contains(stdout.String(), "\n  \"") {
					t.Errorf("-o json is not indented:\n%s", stdout)
				}
				return
			}
			var bizIDs []string
			sc := bufio.NewScanner(strings.NewReader(stdout.String()))
			for sc.Scan() {
				var res repair.Result
				if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
					t.Fatalf("line %q is not a JSON object: %v\n%s", sc.Text(), err, stdout)
				}
				bizIDs = append(bizIDs, res.BizID)
			}
			if strings.Join(bizIDs, ",") != "PAY-A,PAY-B" {
				t.Errorf("JSON lines of %v, want one per plan:\n%s", bizIDs, stdout)
			}
		})
	}
}

// TestReconcileStreamedRows: piped, the targets stream as tab-separated
// lines under one header, a value with a tab or newline shown quoted
// (ui.Safe): the lines ui.Table prints for the same rows.
func TestReconcileStreamedRows(t *testing.T) {
	ios, _, stdout, _ := iostreams.Test()
	v := newReconcileView(ios, FormatTable)
	results := []reconcile.Result{
		{Target: reconcile.Target{BizID: "PAY-1", Pipeline: "settlement", Check: "stuck", Verdict: inspect.Stranded, Detail: "a\tb\nc"}, Severity: inspect.SeverityAction},
		{Target: reconcile.Target{BizID: "PAY-2", Pipeline: "settlement", Check: "stuck", Verdict: inspect.WillRedeliver}, Severity: inspect.SeverityWatch},
		{Target: reconcile.Target{BizID: "PAY-3", Pipeline: "settlement", Check: "stuck", Verdict: inspect.Stranded, Step: "ledger", Partial: true}, Severity: inspect.SeverityAction},
	}
	for _, r := range results {
		if err := v.Result(r); err != nil {
			t.Fatal(err)
		}
	}
	want := "PIPELINE\tCHECK\tBIZ_ID\tVERDICT\tSTEP\tDETAIL\n" +
		"settlement\tstuck\tPAY-1\tSTRANDED\t-\t\"a\\tb\\nc\"\n" +
		"settlement\tstuck\tPAY-3\tSTRANDED (partial)\tledger\t\n"
	if stdout.String() != want {
		t.Errorf("streamed:\n%q\nwant:\n%q", stdout, want)
	}
}

// Every JSON output escapes DEL and the C1 controls (a CSI is U+009B).
func TestJSONEncoderEscapesC1(t *testing.T) {
	for _, f := range []Format{FormatJSON, FormatJSONL} {
		var b strings.Builder
		if err := jsonEncoder(&b, f).Encode(map[string]string{"biz_id": "PAY\u009b2J\x7f"}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), `PAY\u009b2J\u007f`) {
			t.Fatalf("%s: %q", f, b.String())
		}
	}
}
