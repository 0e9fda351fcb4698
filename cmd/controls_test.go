package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/schema"
)

// The human views show every value read from the database, Kafka, a
// downstream or a file by one rule (ui.Safe, docs/where.md#values-in-human-output):
// a value with a rune that is not printable is shown as a quoted Go string.
// These values each hold one such rune behind a recognisable prefix.
const (
	hESC  = "PAY-1\x1b[2J"          // clears the screen
	hCR   = "DONE\rOK"              // hides what precedes it
	hBEL  = "c-1\a"                 // rings
	hTAB  = "R\t1"                  // breaks a TSV column
	hNL   = "line1\nline2"          // breaks a line
	hLS   = "m-1\u2028x"            // LINE SEPARATOR
	hBad  = "k\xffk"                // invalid UTF-8
	hRTL  = "txt\u202eevil"         // RIGHT-TO-LEFT OVERRIDE
	hCSI  = "\u009b31mred"          // C1 CSI
	hOSC  = "w-1\x1b]0;pwned\a"     // sets the window title
	hQuot = `"looks quoted\x1b[2J"` // printable, but starts with a double quote
)

var hostileValues = []string{hESC, hCR, hBEL, hTAB, hNL, hLS, hBad, hRTL, hCSI, hOSC}

// sgr matches the colour sequences the styles write (lipgloss on a
// terminal); none of the hostile values is one.
var sgr = regexp.MustCompile("\x1b\\[[0-9;]*m")

// assertNoRawControls fails when out holds a rune a terminal would act on:
// after the styles' own colour codes, only newlines (and, piped, the tabs
// between columns) may remain; out must be valid UTF-8.
func assertNoRawControls(t *testing.T, what, out string, tabs bool) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: output is not valid UTF-8:\n%q", what, out)
	}
	for i, r := range sgr.ReplaceAllString(out, "") {
		if r == '\n' || (tabs && r == '\t') || strconv.IsPrint(r) {
			continue
		}
		t.Errorf("%s: raw %U at byte %d:\n%q", what, r, i, out)
		return
	}
}

// assertShown fails unless each value is recognisable in out: written
// with Go escapes (inside a quoted value, or a quoted text that holds it).
func assertShown(t *testing.T, what, out string, values ...string) {
	t.Helper()
	for _, v := range values {
		q := strconv.Quote(v)
		if !strings.Contains(out, q[1:len(q)-1]) {
			t.Errorf("%s: lacks %s:\n%s", what, q, out)
		}
	}
}

// assertColumns fails unless every line of each tab-separated table of out
// (a header, then its rows, up to a blank line) has as many cells as the
// header.
func assertColumns(t *testing.T, what, out string) {
	t.Helper()
	want := -1
	for _, l := range strings.Split(out, "\n") {
		switch {
		case l == "" || !strings.Contains(l, "\t") && want < 0:
			want = -1
		case want < 0:
			want = strings.Count(l, "\t")
		case strings.Count(l, "\t") != want:
			t.Errorf("%s: %d tabs, the header has %d: %q", what, strings.Count(l, "\t"), want, l)
		}
	}
}

// hostileReport is a where report whose every value from the database,
// Kafka and the probes holds an unprintable rune: the id, the state row's
// status and owner, evidence rows (identity and columns, in the timeline),
// request ids and results of intents, a probe's answer, a failed query,
// idempotency records, the entity, the group's state and partition owner,
// the search detail, a source's error. The notify probe's URL carries
// credentials.
func hostileReport(t *testing.T) inspect.Report {
	t.Helper()
	cfg, err := config.Load(filepath.Join("..", "testdata", "config", "settlement.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Pipeline("settlement")
	p.Steps[2].Probe = "http://ops:s3cret@127.0.0.1:8081/notify/status?request_id={request_id}"
	t0 := time.Date(2026, 11, 29, 3, 12, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	v := int64(3)
	ev := sources.Evidence{
		BizID: hESC, Pipeline: p,
		DB: sources.DBEvidence{
			Now: *at(10 * time.Minute),
			State: sources.StateRow{Found: true, Key: hESC, Status: "LEDGER_DONE", Version: &v, Owner: hBEL, LeaseUntil: at(time.Minute),
				MsgID: hLS, CreatedAt: at(0), UpdatedAt: at(40 * time.Second)},
			Steps: []sources.StepEvidence{
				{Name: "debit", Rows: []sources.Row{{Columns: []string{"id", "account_id", "delta", "created_at"}, Values: []sources.Value{hBad, hRTL, "-30.00", *at(time.Second)}}}},
				{Name: "ledger", Err: "ledger: evidence query: Error 1054: Unknown column '" + hOSC + "'"},
				{Name: "notify", Intents: []sources.Intent{
					{RequestID: hTAB, SentAt: at(3 * time.Second), AckedAt: at(4 * time.Second), Result: hCR},
					{RequestID: hNL, SentAt: at(33 * time.Second), Probe: &sources.ProbeResult{Outcome: sources.ProbeInconclusive, Status: hCSI,
						URL: "http://127.0.0.1:8081/notify/status?request_id=line1%0Aline2"}},
				}},
			},
		},
		Kafka: sources.KafkaEvidence{Partition: 5, Offset: 1234, Located: sources.LocatedStored, SearchDetail: "key " + hCR + " does not match",
			Group: sources.GroupView{Topic: "settlement-event", GroupState: "Stable" + "\r",
				Partitions: map[int32]sources.PartitionView{5: {Partition: 5, Committed: 1235, LogStart: 0, LogEnd: 1500, Owner: hOSC}}}},
		Sources: map[string]string{"mysql": "ok", "kafka": "ok"},
	}
	r := inspect.Diagnose(ev)
	r.Verdict.Next = NextFlags{}.Lines(plans.Next(plans.Input{Config: cfg, Report: r, Evidence: &ev, RedrivePartitions: 8}))
	// What the settlement pipeline does not read, set on the report.
	r.Idempotency = []inspect.IdempotencyView{{Key: hLS, Action: hRTL}}
	r.Entity = &inspect.EntityView{Found: true, Status: hCSI}
	r.Sources["probe"] = "inconclusive: " + hESC
	r.Partial = true
	return r
}

// TestWhereHumanControlsGolden: where's human view shows every value of a
// hostile report quoted, piped and on a terminal; no raw control character,
// no invalid UTF-8, no broken column; NEXT's curl line has no credentials.
func TestWhereHumanControlsGolden(t *testing.T) {
	r := hostileReport(t)
	for _, tc := range []struct {
		name          string
		tty, noColour bool
	}{
		{"where_controls_piped.golden", false, false},
		{"where_controls_tty.golden", true, true},
		{"", true, false}, // colour: checked, not kept
	} {
		ios, _, out, _ := iostreams.Test()
		ios.SetStdoutTTY(tc.tty)
		ios.SetNoColor(tc.noColour)
		// -o wide: on a terminal every value whole, to be seen quoted (the
		// fitting is where_tty.golden's); piped, the same as table.
		if err := newWhereView(ios, FormatWide).Render([]inspect.Report{r}); err != nil {
			t.Fatal(err)
		}
		s := out.String()
		assertNoRawControls(t, tc.name, s, !tc.tty)
		assertShown(t, tc.name, s, hostileValues...)
		for _, want := range []string{`"PAY-1\x1b[2J"  settlement`, `owner "c-1\a", lease expired`, `id "k\xffk"`, `"R\t1" acked`,
			`idempotency: "m-1\u2028x" "txt\u202eevil"`, `entity: "\u009b31mred"`, `group "Stable\r" · owner "w-1\x1b]0;pwned\a"`} {
			if !strings.Contains(sgr.ReplaceAllString(s, ""), want) {
				t.Errorf("%s: lacks %s", tc.name, want)
			}
		}
		if strings.Contains(s, "s3cret") {
			t.Errorf("%s: the probe's password is shown:\n%s", tc.name, s)
		}
		if !tc.tty {
			assertColumns(t, tc.name, s)
		}
		if tc.name != "" {
			checkGolden(t, tc.name, s)
		}
	}
}

// TestWhereJSONRedactsProbeURL: -o json's verdict.next has the curl line
// without the probe URL's credentials, and says they were removed.
func TestWhereJSONRedactsProbeURL(t *testing.T) {
	r := hostileReport(t)
	ios, _, out, _ := iostreams.Test()
	if err := newWhereView(ios, FormatJSON).Render([]inspect.Report{r}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Verdict struct {
			Next []string `json:"next"`
		} `json:"verdict"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "s3cret") || strings.Contains(out.String(), "ops@") {
		t.Errorf("the probe's credentials are in the JSON:\n%s", out)
	}
	want := "curl -s 'http://127.0.0.1:8081/notify/status?request_id=line1%0Aline2'   # probe the downstream; the credentials of the configured URL were removed"
	found := false
	for _, n := range got.Verdict.Next {
		found = found || strings.HasPrefix(n, want)
	}
	if !found {
		t.Errorf("verdict.next lacks %q:\n%s", want, strings.Join(got.Verdict.Next, "\n"))
	}
}

// TestReconcileHumanControls: reconcile's targets and checks, piped (one
// line per target, the columns kept) and on a terminal, show the values of
// the tables quoted.
func TestReconcileHumanControls(t *testing.T) {
	results := []reconcile.Result{
		{Target: reconcile.Target{BizID: hESC, Pipeline: "settlement", Check: "stuck", Verdict: inspect.Stranded, Step: hBEL, Detail: "status " + hCR}, Severity: inspect.SeverityAction},
		{Target: reconcile.Target{BizID: hTAB, Pipeline: "settlement", Check: "stuck", Verdict: inspect.Stranded, Detail: hNL}, Severity: inspect.SeverityAction},
		{Target: reconcile.Target{BizID: hLS, Pipeline: "settlement", Check: "duplicates", Verdict: inspect.DuplicateEffect, Detail: hBad}, Severity: inspect.SeverityAction},
		{Target: reconcile.Target{BizID: hRTL, Pipeline: "settlement", Check: "duplicates", Verdict: inspect.DuplicateEffect, Detail: hCSI, Partial: true}, Severity: inspect.SeverityAction},
	}
	sum := &reconcile.Summary{Targets: 4, Candidates: 4, Partial: true, PartialWhy: []string{"kafka: " + hOSC},
		Checks: []reconcile.CheckStats{
			{Pipeline: "settlement", Check: "stuck", Status: reconcile.StatusOK, Targets: 2, Notes: []string{"skipped key " + hTAB}},
			{Pipeline: "settlement", Check: "duplicates", Status: reconcile.StatusFailed, Reason: "Error 1146: Table '" + hESC + "' doesn't exist"},
		}}
	for _, tty := range []bool{false, true} {
		ios, _, out, _ := iostreams.Test()
		ios.SetStdoutTTY(tty)
		ios.SetNoColor(true)
		v := newReconcileView(ios, FormatTable)
		for _, r := range results {
			if err := v.Result(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := v.Finish(sum); err != nil {
			t.Fatal(err)
		}
		s := out.String()
		what := "reconcile piped"
		if tty {
			what = "reconcile tty"
		}
		assertNoRawControls(t, what, s, !tty)
		if tty {
			// A terminal's cells are cut to fit its width; the notes are
			// below the table, whole.
			assertShown(t, what, s, hTAB, hESC, hOSC)
			if !strings.Contains(s, `"PAY-1\x1b`) {
				t.Errorf("%s: the id is not shown quoted:\n%s", what, s)
			}
		} else {
			assertShown(t, what, s, hESC, hBEL, hCR, hTAB, hNL, hLS, hBad, hRTL, hCSI, hOSC)
		}
		if !tty {
			assertColumns(t, what, s)
			if !strings.Contains(s, "settlement\tstuck\t\"R\\t1\"\tSTRANDED\t-\t\"line1\\nline2\"\n") {
				t.Errorf("%s: the target with a TAB in its id and a newline in its detail is not one line of 6 cells:\n%s", what, s)
			}
		}
	}
}

// hostilePlan is a sealed plan with one action of each kind whose values
// hold unprintable runes: what a plan file (or the rows and the record it
// observed) can carry.
func hostilePlan(t *testing.T) *plans.Plan {
	t.Helper()
	val := func(s string) *string { return &s }
	one, two := int64(1), int64(2)
	count := 2
	p := &plans.Plan{PlanVersion: plans.PlanVersion, Pipeline: "settlement", BizID: hESC, Verdict: inspect.DuplicateEffect,
		Reason: "INC-1 " + hCR, Operator: hBEL, CreatedAt: time.Date(2026, 11, 29, 3, 12, 0, 0, time.UTC),
		Notes: []string{"note " + hLS},
		Observed: plans.Observed{Verdict: inspect.DuplicateEffect, Redelivery: inspect.RedeliveryNo,
			State:       plans.ObservedState{Found: true, Status: hTAB, Version: &one, Owner: hOSC},
			Idempotency: []plans.ObservedRecord{{Key: hNL, Action: hRTL}},
			Entity:      &plans.ObservedEntity{Found: true, Status: hCSI},
			Steps:       []plans.ObservedStep{{Name: "debit", Status: "duplicated"}}},
		Actions: []plans.Action{
			{Index: 1, Type: plans.AdvanceState, Summary: "advance the state " + hTAB + " → DONE",
				Guards: []plans.Guard{{Check: plans.CheckStateStatus, Op: "==", Value: hTAB}, {Check: plans.CheckOwnerMember, Key: hOSC, Op: "not_member", Value: "g"}},
				State:  &plans.StateChange{Table: "biz_operation", FromStatus: hTAB, ToStatus: "DONE", FromVersion: &one, ToVersion: &two}},
			{Index: 2, Type: plans.Reverse, Step: "debit", Summary: "reverse debit row " + hBad,
				Guards: []plans.Guard{{Check: plans.CheckEvidenceRow, Step: "debit", Key: hBad, Op: "live"}},
				Reverse: &plans.ReverseSpec{Identity: hBad, Row: plans.Image{{Name: "id", Value: val(hBad)}, {Name: "account_id", Value: val(hRTL)}, {Name: "delta", Value: nil}},
					Statements: []string{"UPDATE account_balance SET balance = balance - :delta WHERE account_id = :account_id AND biz_id = :biz_id"}}},
			{Index: 3, Type: plans.FlipSkipped, Summary: "flip " + hNL, Flip: &plans.FlipSpec{Table: "consumer_idem", Key: hNL, From: "SKIPPED", To: hCR}},
			{Index: 4, Type: plans.Republish, Summary: "republish " + hESC,
				Publish: &plans.PublishSpec{Topic: "settlement-redrive", Partition: 3, PartitionRule: "murmur2 of the key over 8 partitions",
					Key: []byte(hESC), Value: []byte(`{"memo":"` + hRTL + `"}`), Headers: map[string]string{"msg_id": hTAB, hCSI: hBEL}, Copy: true,
					Source: &plans.Position{Topic: "settlement-event", Partition: 3, Offset: 7}}},
			{Index: 5, Type: plans.CompensateRemote, Step: "notify", Summary: "compensate " + hNL,
				Compensate: &plans.CompensateSpec{URL: "http://ops:s3cret@127.0.0.1:8081/notify/undo?request_id=line1%0Aline2", RequestID: hNL, ProbeCount: &count}},
			{Index: 6, Type: plans.Manual, Step: "notify", Summary: "by hand " + hOSC,
				Manual: &plans.ManualSpec{Instructions: "undo call " + hTAB + " by hand", Attest: "done " + hBEL}, Attested: map[string]string{hTAB: "compensated", hLS: "applied"}},
		}}
	if err := p.Seal(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRepairShowControlsGolden: repair show renders a plan's values quoted:
// the id, reason, operator, what it observed, guards, statuses, evidence
// rows and their bindings, the key, value and headers of a republish, a
// compensation's request id (its URL without credentials), manual
// instructions and attested ids. Tampered, the error is shown the same way.
func TestRepairShowControlsGolden(t *testing.T) {
	p := hostilePlan(t)
	ios, _, out, _ := iostreams.Test()
	v := newRepairPlanView(ios, FormatTable)
	if err := v.Show(p, nil); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	assertNoRawControls(t, "repair show", s, false)
	assertShown(t, "repair show", s, hESC, hBEL, hCR, hTAB, hNL, hLS, hBad, hRTL, hCSI, hOSC)
	if strings.Contains(s, "s3cret") {
		t.Errorf("repair show prints the compensate URL's password:\n%s", s)
	}
	for _, want := range []string{`Plan ` + p.Short() + ` for "PAY-1\x1b[2J" in pipeline settlement`, `status:     "R\t1" → 'DONE'`,
		`{id "k\xffk", account_id "txt\u202eevil", delta NULL}`, `:biz_id = "PAY-1\x1b[2J"`, `headers: msg_id="R\t1", "\u009b31mred"="c-1\a"`, `key:     "PAY-1\x1b[2J"`, `value:   "{\"memo\":\"txt\u202eevil\"}"`} {
		if !strings.Contains(s, want) {
			t.Errorf("repair show lacks %s", want)
		}
	}
	checkGolden(t, "repair_show_controls.golden", s)

	out.Reset()
	if err := v.Show(p, errors.New("id does not match: field reason is "+hCR+"\nsecond line "+hESC)); err != nil {
		t.Fatal(err)
	}
	s = out.String()
	assertNoRawControls(t, "repair show, tampered", s, false)
	if !strings.HasPrefix(s, "TAMPERED: \"id does not match: field reason is DONE\\rOK\"\n\"second line PAY-1\\x1b[2J\"\n\n") {
		t.Errorf("repair show, tampered: the error is not shown line by line, quoted:\n%s", s)
	}
}

// TestRepairApplyHumanControls: apply's plan, progress and result lines
// show the values quoted; the per-plan error line of a plans file too.
func TestRepairApplyHumanControls(t *testing.T) {
	ios, _, out, _ := iostreams.Test()
	v := newRepairApplyView(ios, FormatTable, false)
	if err := v.Plan(hostilePlan(t)); err != nil {
		t.Fatal(err)
	}
	v.Progress(repair.ActionResult{Index: 1, Type: plans.Reverse, Outcome: repair.OutcomeApplied,
		Statements: []sources.Statement{{SQL: "UPDATE t SET memo = '" + hESC + "'", Rows: 1}}, Detail: "re-read " + hCR})
	v.Progress(repair.ActionResult{Index: 2, Type: plans.Republish, Outcome: repair.OutcomePublished,
		Published: &plans.Position{Topic: "redrive" + hBEL, Partition: 1, Offset: 9}, Detail: hTAB})
	if err := v.Result(&repair.Result{BizID: hESC, Pipeline: "settlement", Outcome: repair.OutcomeApplied, Total: 2, Applied: 2}, nil); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	assertNoRawControls(t, "repair apply", s, false)
	assertShown(t, "repair apply", s, hESC, hCR, hBEL, hTAB)
	if !strings.Contains(s, `Check it: "opctl where --pipeline settlement -- 'PAY-1\x1b[2J'"`) {
		t.Errorf("repair apply: the where line is not quoted:\n%s", s)
	}

	// A plans file: the error of one plan is a line on stderr.
	dir := t.TempDir()
	var lines []byte
	for _, biz := range []string{hESC, hLS} {
		b, _ := json.Marshal(testPlan(t, biz))
		lines = append(append(lines, b...), '\n')
	}
	file := filepath.Join(dir, "plans.jsonl")
	if err := os.WriteFile(file, lines, 0o600); err != nil {
		t.Fatal(err)
	}
	fake := &fakeRepairer{results: map[string]*repair.Result{}, errs: map[string]error{hESC: errors.New("mysql: Error 1146: Table '" + hOSC + "'")}}
	ios, _, out, errOut := iostreams.Test()
	err := runRepairApply(context.Background(), &RepairApplyOptions{IO: ios, Format: FormatTable, File: file, Yes: true,
		Operator: "tester", Repairer: func() (Repairer, error) { return fake, nil }})
	printError(errOut, err, exitCode(err, false))
	assertNoRawControls(t, "repair apply stdout", out.String(), false)
	assertNoRawControls(t, "repair apply stderr", errOut.String(), false)
	assertShown(t, "repair apply stderr", errOut.String(), hESC, hOSC)
	if !strings.Contains(errOut.String(), `("PAY-1\x1b[2J"): "mysql: Error 1146`) {
		t.Errorf("repair apply: the failed plan's line:\n%s", errOut)
	}
}

// TestAuditHumanControls: the audit table, piped and on a terminal, shows
// the values of the audit rows quoted.
func TestAuditHumanControls(t *testing.T) {
	log := &sources.AuditLog{
		Actions: []sources.AuditRow{{PlanID: strings.Repeat("a", 64), ActionIndex: 1, BizID: hESC, Pipeline: "settlement", Action: "reverse", Operator: hBEL,
			Reason: "INC-1 " + hCR, Outcome: "applied", AfterImage: json.RawMessage(`{"step":"debit","reversed_id":"` + "R\\t1" + `","attest":"` + hRTL + `","attested":{"x\u001b":"applied"}}`)}},
		Attempts: []sources.AttemptRow{{PlanID: hLS, BizID: hNL, Operator: hCSI, Outcome: "stale" + hOSC, Detail: json.RawMessage(`{"error":"stale plan: ` + hRTL + ` \u001b[2J"}`)}},
	}
	for _, tty := range []bool{false, true} {
		ios, _, out, _ := iostreams.Test()
		ios.SetStdoutTTY(tty)
		ios.SetNoColor(true)
		// On a terminal -o wide: every value whole, to be found quoted
		// (the table's fitting is TestFitTable's).
		format := FormatTable
		if tty {
			format = FormatWide
		}
		if err := runAudit(context.Background(), &AuditOptions{IO: ios, Format: format, Timeout: 1e9, Limit: 5,
			Auditor: func() (Auditor, error) { return &fakeAuditor{log: log}, nil }}); err != nil {
			t.Fatal(err)
		}
		s := out.String()
		assertNoRawControls(t, "audit", s, !tty)
		assertShown(t, "audit", s, hESC, hBEL, hCR, hTAB, hNL, hLS, hRTL, hCSI, hOSC)
		if !tty {
			assertColumns(t, "audit", s)
		}
	}
}

// TestSchemaCheckHumanControls: an index name read from the database is
// shown quoted.
func TestSchemaCheckHumanControls(t *testing.T) {
	rep := &schema.Report{Items: []schema.Item{
		{Pipeline: "settlement", Kind: schema.KindIndex, Table: "ledger_entry", What: "(created_at)", Status: schema.StatusOK, Index: hESC, Why: "walk"},
		{Pipeline: "settlement", Kind: schema.KindColumn, Table: "ledger_entry", What: hTAB, Status: schema.StatusMissing, Why: "named " + hCR},
	}}
	for _, tty := range []bool{false, true} {
		ios, _, out, _ := iostreams.Test()
		ios.SetStdoutTTY(tty)
		ios.SetNoColor(true)
		format := FormatTable
		if tty {
			format = FormatWide // every value whole, to be found quoted
		}
		if err := newSchemaView(ios, format).Check(rep); err != nil {
			t.Fatal(err)
		}
		s := out.String()
		assertNoRawControls(t, "schema check", s, !tty)
		assertShown(t, "schema check", s, hESC, hTAB, hCR)
	}
	// The write database's address, in schema apply's lines and errors.
	cfg := &config.Config{MySQL: config.MySQL{WriteDSN: "root:s3cret@tcp(db" + hESC + ":3306)/x"}}
	if got := writeAddr(cfg); got != `"root:***@tcp(dbPAY-1\x1b[2J:3306)/x"` {
		t.Errorf("writeAddr: %s", got)
	}
}

// TestErrorsShownSafely: the error a command ends with is printed line by
// line: a line with a control character quoted, the newlines of a stale
// plan's diff kept.
func TestErrorsShownSafely(t *testing.T) {
	stale := &plans.RefusedError{Code: plans.CodeStale, Diff: []plans.Change{{Field: "state.status", From: "A", To: "B"}, {Field: "state.version", From: "1", To: "2"}}}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"a value from the database", errors.New("mysql: Error 1146: Table '" + hESC + "' doesn't exist"), `opctl: "mysql: Error 1146: Table 'PAY-1\x1b[2J' doesn't exist"` + "\n"},
		{"a stale plan's diff", stale, "opctl: stale plan: what it observed changed\n  state.status: A → B\n  state.version: 1 → 2\nmake a new plan (opctl repair plan)\n"},
		{"a multi-line error, one line hostile", errors.New("config errors:\nopctl.yaml:3: " + hCR + "\nopctl.yaml:4: fine"), "opctl: config errors:\n\"opctl.yaml:3: DONE\\rOK\"\nopctl.yaml:4: fine\n"},
	} {
		var b strings.Builder
		printError(&b, tc.err, exitCode(tc.err, false))
		if b.String() != tc.want {
			t.Errorf("%s:\n%q\nwant\n%q", tc.name, b.String(), tc.want)
		}
	}

	// Through Run: a --config path, an unknown verdict, an unknown flag.
	for _, args := range [][]string{
		{"--config", "/nonexistent/" + hESC + ".yaml", "where", "PAY-1"},
		{"explain", hOSC},
		{"where", "PAY-1", "--" + hBEL},
	} {
		ios, _, out, errOut := iostreams.Test()
		Run(context.Background(), ios, args)
		assertNoRawControls(t, strings.Join(args, " "), out.String()+errOut.String(), false)
		if errOut.Len() == 0 {
			t.Errorf("%q: no error printed", args)
		}
	}
}
