package cmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/schema"
)

func TestNewCmdRepairPlanFlags(t *testing.T) {
	var got *RepairPlanOptions
	runners := &RepairRunners{Plan: func(_ context.Context, o *RepairPlanOptions) error { got = o; return nil }}
	run := func(args ...string) int {
		ios, _, _, _ := iostreams.Test()
		f := NewFactory(ios, "test")
		root := NewCmdRoot(f)
		// Replace the real repair command with one whose runners are fakes.
		for _, c := range root.Commands() {
			if c.Name() == "repair" {
				root.RemoveCommand(c)
			}
		}
		root.AddCommand(NewCmdRepair(f, runners))
		root.SetArgs(args)
		root.SetOut(ios.Out)
		root.SetErr(ios.ErrOut)
		return exitCode(root.Execute(), false)
	}
	cases := []struct {
		args []string
		code int
	}{
		{[]string{"repair", "plan", "PAY-1"}, ExitUsage},                                      // no --reason
		{[]string{"repair", "plan", "PAY-1", "--reason", "  "}, ExitUsage},                    // blank --reason
		{[]string{"repair", "plan", "PAY-1", "--reason", "r", "--action", "nuke"}, ExitUsage}, // bad --action
		{[]string{"repair", "plan", "PAY-1", "--reason", "r", "--force"}, ExitUsage},          // --force alone
		{[]string{"repair", "plan", "--from-file", "t.jsonl", "--reason", "r"}, ExitUsage},    // no --out
		{[]string{"repair", "plan", "PAY-1", "--from-file", "t", "--reason", "r"}, ExitUsage}, // both
		{[]string{"repair", "plan", "", "--reason", "r"}, ExitUsage},                          // empty id
		{[]string{"repair", "plan", "PAY-1", "--reason", "r", "--action", "reverse"}, ExitOK}, // ok
		{[]string{"repair", "plan", "PAY-1", "--reason", "r", "--out", "p.json", "--force", "--action", "republish", "--from-step", "2"}, ExitOK},
	}
	for _, c := range cases {
		got = nil
		if code := run(c.args...); code != c.code {
			t.Errorf("%v: exit %d, want %d", c.args, code, c.code)
		}
	}
	if got == nil || got.Action != "republish" || !got.Force || got.FromStep != "2" || got.Out != "p.json" || got.Operator == "" {
		t.Errorf("options %+v", got)
	}
}

// repairFixture is the settlement seed plus the repair operations and the
// audit tables.
func repairFixture(t *testing.T, replace ...string) *fixture {
	t.Helper()
	f := newFixture(t, "settlement", "settlement-event", replace...)
	f.db.ExecFile(t, filepath.Join("..", "testdata", "repair", "settlement_ops.sql"))
	for _, s := range schema.AuditDDL("") {
		f.db.Exec(t, s)
	}
	return f
}

// runIn runs opctl with stdin and a TTY flag.
func (f *fixture) runIn(stdin string, tty bool, args ...string) (int, string, string) {
	f.t.Helper()
	all := append([]string{"--config", f.cfg, "--mysql-dsn", f.db.DSN, "--brokers", strings.Join(f.k.Brokers, ","), "--timeout", "5s"}, args...)
	ios, in, out, errOut := iostreams.Test()
	in.WriteString(stdin)
	ios.SetStdinTTY(tty)
	code := Run(context.Background(), ios, all)
	return code, out.String(), errOut.String()
}

func TestRepairPlanApplyAuditCLI(t *testing.T) {
	t.Parallel()
	f := repairFixture(t)
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.json")

	code, out, errOut := f.run("repair", "plan", "PAY-6", "--reason", "INC-7 triple debit", "--out", plan)
	if code != ExitOK || !strings.Contains(out, "1. [reverse]") || !strings.Contains(out, "2. [reverse]") || !strings.Contains(out, "Saved the plan to") {
		t.Fatalf("plan: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, _ := f.run("repair", "show", plan); code != ExitOK || !strings.Contains(out, "matches the plan's body") {
		t.Fatalf("show: exit %d\n%s", code, out)
	}
	code, out, _ = f.run("repair", "apply", plan, "--dry-run")
	if code != ExitOK || !strings.Contains(out, "would apply 2/2") || !strings.Contains(out, "1 row(s): INSERT INTO balance_journal") {
		t.Fatalf("dry run: exit %d\n%s", code, out)
	}
	// Not a terminal and no --yes: refused, nothing changed.
	code, _, errOut = f.run("repair", "apply", plan)
	if code != ExitRefused || !strings.Contains(errOut, "--yes") {
		t.Fatalf("apply without --yes: exit %d %s", code, errOut)
	}
	// On a terminal, only "yes" goes on.
	if code, _, errOut := f.runIn("no\n", true, "repair", "apply", plan); code != ExitRefused || !strings.Contains(errOut, "not confirmed") {
		t.Fatalf("answer no: exit %d %s", code, errOut)
	}
	code, out, errOut = f.runIn("yes\n", true, "repair", "apply", plan, "--operator", "alice")
	if code != ExitOK || !strings.Contains(out, "applied 2/2") || !strings.Contains(errOut, "Only 'yes' will be accepted") {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = f.run("repair", "apply", plan, "--yes")
	if code != ExitOK || !strings.Contains(out, "already applied") {
		t.Fatalf("second apply: exit %d\n%s", code, out)
	}
	code, out, _ = f.run("where", "PAY-6", "-o", "json")
	if r := decode(t, out); r.Verdict.Code != "COMPLETE" || code != ExitOK {
		t.Fatalf("where after: exit %d %s", code, r.Verdict.Code)
	}
	// Nothing to repair now: exit 0 and no file.
	again := filepath.Join(dir, "again.json")
	code, out, _ = f.run("repair", "plan", "PAY-6", "--reason", "again", "--out", again)
	if _, err := os.Stat(again); code != ExitOK || !strings.Contains(out, "nothing to repair: COMPLETE") || err == nil {
		t.Fatalf("plan after: exit %d %s (file: %v)", code, out, err)
	}

	code, out, _ = f.run("audit", "--biz-id", "PAY-6")
	if code != ExitOK || strings.Count(out, "\treverse\tapplied\t") != 2 || !strings.Contains(out, "dry_run") || !strings.Contains(out, "alice") {
		t.Fatalf("audit: exit %d\n%s", code, out)
	}
	code, out, _ = f.run("audit", "--plan", "PAY-6"[:0]+readPlanID(t, plan)[:12], "-o", "json")
	var log sources.AuditLog
	if err := json.Unmarshal([]byte(out), &log); err != nil || code != ExitOK || len(log.Actions) != 2 {
		t.Fatalf("audit json: exit %d %v\n%s", code, err, out)
	}
	var img struct {
		Step       string `json:"step"`
		ReversedID string `json:"reversed_id"`
	}
	if err := json.Unmarshal(log.Actions[0].AfterImage, &img); err != nil || img.Step != "debit" || img.ReversedID != "9" || log.Actions[0].Operator != "alice" {
		t.Fatalf("after_image %s operator %s", log.Actions[0].AfterImage, log.Actions[0].Operator)
	}
}

func readPlanID(t *testing.T, path string) string {
	t.Helper()
	ps, err := readPlans(path)
	if err != nil || len(ps) != 1 {
		t.Fatalf("%s: %d plans, %v", path, len(ps), err)
	}
	return ps[0].ID
}

func TestRepairExitCodes(t *testing.T) {
	t.Parallel()
	f := repairFixture(t)
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"not found", []string{"repair", "plan", "NOPE", "--reason", "r"}, ExitNotFound, "not known"},
		{"in flight", []string{"repair", "plan", "PAY-8", "--reason", "r"}, ExitRefused, "IN_FLIGHT"},
		{"in flight forced", []string{"repair", "plan", "PAY-8", "--reason", "r", "--action", "reverse", "--from-step", "debit", "--force"}, ExitRefused, "never bypasses"},
		{"not called for", []string{"repair", "plan", "PAY-6", "--reason", "r", "--action", "republish"}, ExitRefused, "--force"},
		{"nothing", []string{"repair", "plan", "PAY-2", "--reason", "r", "--out", filepath.Join(dir, "x.json")}, ExitOK, "nothing to repair: COMPLETE"},
		{"manual needs attest", []string{"repair", "plan", "PAY-1", "--reason", "r"}, ExitUsage, "--attest"},
		{"unknown without probe", []string{"repair", "plan", "PAY-7", "--reason", "r"}, ExitRefused, "--action manual"},
		{"bad from-step", []string{"repair", "plan", "PAY-6", "--reason", "r", "--from-step", "nine"}, ExitUsage, "has steps"},
	}
	for _, c := range cases {
		code, out, errOut := f.run(c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("%s: exit %d (want %d), output lacks %q:\n%s\n%s", c.name, code, c.code, c.want, out, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.json")); err == nil {
		t.Error("a plan file was written for COMPLETE")
	}

	// A tampered file: show and apply refuse it (exit 5), apply records it.
	plan := filepath.Join(dir, "plan.json")
	if code, _, errOut := f.run("repair", "plan", "PAY-6", "--reason", "r", "--out", plan); code != ExitOK {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	b, _ := os.ReadFile(plan)
	_ = os.WriteFile(plan, []byte(strings.Replace(string(b), `"identity": "9"`, `"identity": "8"`, 1)), 0o644)
	if code, out, _ := f.run("repair", "show", plan); code != ExitRefused || !strings.Contains(out, "TAMPERED") {
		t.Errorf("show tampered: exit %d\n%s", code, out)
	}
	if code, _, errOut := f.run("repair", "apply", plan, "--yes"); code != ExitRefused || !strings.Contains(errOut, "tampered") {
		t.Errorf("apply tampered: exit %d %s", code, errOut)
	}
	_ = os.WriteFile(plan, []byte(strings.Replace(string(b), `"plan_version": 1,`, `"plan_version": 1, "extra": 1,`, 1)), 0o644)
	if code, _, errOut := f.run("repair", "apply", plan, "--yes"); code != ExitRefused || !strings.Contains(errOut, "tampered") {
		t.Errorf("apply with an added field: exit %d %s", code, errOut)
	}
	if n := countRows(t, f, "SELECT COUNT(*) FROM balance_journal WHERE kind = 'REVERSAL'"); n != 0 {
		t.Errorf("%d reversals", n)
	}
	// A stale plan: exit 5 with the diff.
	if code, _, errOut := f.run("repair", "plan", "PAY-6", "--reason", "r", "--out", plan); code != ExitOK {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	f.db.Exec(t, "UPDATE biz_operation SET version = 5 WHERE biz_id = 'PAY-6'")
	if code, _, errOut := f.run("repair", "apply", plan, "--yes"); code != ExitRefused || !strings.Contains(errOut, "state.version: 4 → 5") {
		t.Errorf("stale: exit %d %s", code, errOut)
	}
}

func countRows(t *testing.T, f *fixture, q string) int {
	t.Helper()
	var n int
	if err := f.db.SQL.QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLeastPrivilege: where, repair plan and audit work with a user that
// has only SELECT; apply writes through write_dsn.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	f := repairFixture(t, `dsn: "${OPCTL_MYSQL_DSN}"`, `dsn: "${OPCTL_MYSQL_DSN}"`+"\n  write_dsn: \"WRITE_DSN\"")
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	user, pass := "opctl_ro_"+hex.EncodeToString(b), "ro-"+hex.EncodeToString(b)
	hosts := []string{"%", "localhost", "127.0.0.1"}
	for _, host := range hosts {
		f.db.Exec(t, "CREATE USER '"+user+"'@'"+host+"' IDENTIFIED BY '"+pass+"'")
		f.db.Exec(t, "GRANT SELECT ON `"+f.db.Name+"`.* TO '"+user+"'@'"+host+"'")
	}
	t.Cleanup(func() {
		for _, host := range hosts {
			_, _ = f.db.SQL.Exec("DROP USER IF EXISTS '" + user + "'@'" + host + "'")
		}
	})
	rc, err := mysql.ParseDSN(f.db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	rc.User, rc.Passwd = user, pass
	roDSN := rc.FormatDSN()
	raw, err := os.ReadFile(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Two configs: write_dsn as root, and write_dsn as the read-only user.
	writeCfg := func(dsn string) string {
		p := filepath.Join(t.TempDir(), "opctl.yaml")
		if err := os.WriteFile(p, []byte(strings.Replace(string(raw), "WRITE_DSN", dsn, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rootCfg, roCfg := writeCfg(f.db.DSN), writeCfg(roDSN)
	ro := func(cfg string, args ...string) (int, string, string) {
		all := append([]string{"--config", cfg, "--mysql-dsn", roDSN, "--brokers", strings.Join(f.k.Brokers, ","), "--timeout", "5s"}, args...)
		return runOpctl(t, all...)
	}
	if code, out, errOut := ro(rootCfg, "where", "PAY-6", "-o", "json"); code != ExitAttention || decode(t, out).Verdict.Code != "DUPLICATE_EFFECT" {
		t.Fatalf("where as read-only: exit %d %s", code, errOut)
	}
	plan := filepath.Join(t.TempDir(), "plan.json")
	if code, _, errOut := ro(rootCfg, "repair", "plan", "PAY-6", "--reason", "least privilege", "--out", plan); code != ExitOK {
		t.Fatalf("plan as read-only: exit %d %s", code, errOut)
	}
	if code, out, errOut := ro(rootCfg, "repair", "apply", plan, "--yes"); code != ExitOK || !strings.Contains(out, "applied 2/2") {
		t.Fatalf("apply through write_dsn: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := ro(rootCfg, "audit", "--biz-id", "PAY-6"); code != ExitOK || strings.Count(out, "applied") < 2 {
		t.Fatalf("audit as read-only: exit %d\n%s\n%s", code, out, errOut)
	}
	// With write_dsn pointing at the read-only user, apply cannot write:
	// the server refuses, nothing is half done, no password is printed.
	f.db.Exec(t, "INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES ('PAY-3', 1003, -10.00, 'DEBIT', NOW(3))")
	plan2 := filepath.Join(t.TempDir(), "plan2.json")
	if code, _, errOut := ro(roCfg, "repair", "plan", "PAY-3", "--reason", "least privilege", "--out", plan2); code != ExitOK {
		t.Fatalf("plan PAY-3: exit %d %s", code, errOut)
	}
	code, _, errOut := ro(roCfg, "repair", "apply", plan2, "--yes")
	if code != ExitError || !strings.Contains(errOut, "denied") || strings.Contains(errOut, pass) {
		t.Fatalf("apply with a read-only write_dsn: exit %d %s", code, errOut)
	}
	if n := countRows(t, f, "SELECT COUNT(*) FROM balance_journal WHERE biz_id = 'PAY-3' AND kind = 'REVERSAL'"); n != 0 {
		t.Fatalf("%d reversals", n)
	}
}

func TestRepairPlanFromFileAndAuditMirror(t *testing.T) {
	t.Parallel()
	mirror := filepath.Join(t.TempDir(), "audit.jsonl")
	f := repairFixture(t, "\nmysql:", "\naudit:\n  file: \""+mirror+"\"\nmysql:")
	dir := t.TempDir()
	targets := filepath.Join(dir, "targets.jsonl")
	// PAY-1 needs an attestation (a manual action) and the id of line 6
	// holds an ESC: both are skipped, and the batch goes on.
	lines := `{"biz_id":"PAY-6","pipeline":"settlement","check":"duplicates","verdict":"DUPLICATE_EFFECT","step":"debit"}
{"biz_id":"PAY-2","pipeline":"settlement","check":"duplicates","verdict":"DUPLICATE_EFFECT"}
{"biz_id":"NOPE","pipeline":"settlement","check":"orphans"}
{"biz_id":"PAY-8","pipeline":"settlement","check":"stuck"}
{"biz_id":"PAY-1","pipeline":"settlement","check":"duplicates"}
{"biz_id":"PAY\u001b[2J","pipeline":"settlement","check":"stuck"}
`
	if err := os.WriteFile(targets, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	plans := filepath.Join(dir, "plans.jsonl")
	code, out, errOut := f.run("repair", "plan", "--from-file", targets, "--reason", "nightly reconcile", "--out", plans)
	for _, want := range []string{
		"skipped PAY-2 (settlement): " + targets + ":2: nothing to repair: COMPLETE\n",
		"skipped NOPE (settlement): " + targets + ":3: ",
		"skipped PAY-8 (settlement): " + targets + ":4: ", "IN_FLIGHT",
		"skipped PAY-1 (settlement): " + targets + ":5: this plan has a manual action", "--attest",
		`skipped "PAY\x1b[2J" (settlement): ` + targets + ":6: biz_id contains a control character (U+001B)\n",
		"1 plan(s) written to " + plans + ", 5 target(s) skipped.",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if code != ExitAttention || !strings.Contains(out, "planned  ") || !strings.Contains(out, "PAY-6") || strings.Contains(out, "skipped") ||
		strings.Contains(out+errOut, "\x1b") {
		t.Fatalf("plan --from-file: exit %d (want 3), stdout:\n%s\nstderr:\n%q", code, out, errOut)
	}
	if code, out, _ := f.run("repair", "show", plans); code != ExitOK || !strings.Contains(out, "PAY-6") {
		t.Fatalf("show: exit %d\n%s", code, out)
	}
	code, out, errOut = f.run("repair", "apply", plans, "--yes")
	if code != ExitOK || !strings.Contains(out, "applied 2/2") {
		t.Fatalf("apply plans: exit %d\n%s\n%s", code, out, errOut)
	}
	b, err := os.ReadFile(mirror)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 2 || !strings.Contains(string(b), `"reversed_id":"9"`) || strings.Contains(string(b), "password") {
		t.Fatalf("audit mirror (%d lines):\n%s", n, b)
	}
}
