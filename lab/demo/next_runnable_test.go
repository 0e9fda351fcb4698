package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/lab/consumer"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
)

// nextVars are the variables NEXT lines may use, set as an operator sets
// them before pasting (docs/where.md "NEXT commands").
var nextVars = map[string]string{
	"REASON": "INC-1 NEXT lines run as printed",
	"ATTEST": "the downstream team checked their journal: one effect",
}

// nextTarget is one operation whose NEXT lines are run: how to reach it
// (the environment its config reads) and the verdict it must have, so that
// the test exercises what it means to.
type nextTarget struct {
	what     string // "lab" or the seed fixture
	bizID    string
	pipeline string
	verdict  inspect.Code
	env      []string
}

// TestNextRunsAsPrinted: every NEXT line is runnable as printed. For every
// operation of the lab's scenarios and its seed scenarios on the seeds' own
// schemas (on MariaDB and kfake, as TestScenarios runs them, left
// unrepaired) and of the seed fixtures (testdata/schema +
// testdata/incidents on MariaDB, their messages on kfake, with
// testdata/config; seed 001 twice: with WMS's lock journal answering, and
// with WMS down), it runs the built `opctl where ID --pipeline P -o json`,
// then each line of verdict.next, in order, through `sh -c` in a directory
// of its own (a plan line writes plan.json, the dry run reads it), with
// opctl first on PATH, the config in OPCTL_CONFIG and REASON and ATTEST set.
//
// No line may exit 2 (usage), exit 126/127 (not runnable), or print on
// stderr a flag (--something) that the line does not contain; a line may use
// no $VAR but REASON and ATTEST. Beyond that, a `repair plan` line must make
// its plan (exit 0: NEXT prints one only when the planner will make it), the
// dry run must exit 0, explain 0, where 0, 3, 4 or 6. A curl or kcat line
// is not run only when the tool is not installed, and says so.
func TestNextRunsAsPrinted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the lab and the seed fixtures, runs opctl some 100 times")
	}
	t.Parallel()
	start := time.Now()
	testenv.MySQL(t) // MariaDB is reachable (or the test skips loudly; in CI it fails)
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	buildOpctl(t, bin)
	base := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "NO_COLOR=1"}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "OPCTL_") && name != "PATH" && nextVars[name] == "" {
			base = append(base, kv)
		}
	}
	for k, v := range nextVars {
		base = append(base, k+"="+v)
	}

	targets := labTargets(t, base)
	targets = append(targets, seedTargets(t, base)...)
	t.Logf("lab and seed fixtures up in %v", time.Since(start).Round(time.Millisecond))

	var sum nextSummary
	for _, tg := range targets {
		runNext(t, tg, &sum)
	}
	t.Logf("%d reports, %d with NEXT lines: %d lines run, %d not run (tool missing); %v",
		sum.reports, sum.withNext, sum.ran, len(sum.notRun), time.Since(start).Round(time.Millisecond))
	for _, l := range sum.notRun {
		t.Logf("NOT RUN: %s", l)
	}
	// The lines this test exists for were run: the seed 000 plan that needs
	// an attestation, the manual plan of an unknown outcome, a probe.
	for _, want := range []struct{ what, re string }{
		{"a DUPLICATE_EFFECT plan line with --attest (seed 000's PAY-1)", `^opctl repair plan .*--attest "\$ATTEST" .*-- PAY-1$`},
		{"an UNKNOWN_OUTCOME plan line with --action manual --attest (the lab's F-U-1)", `^opctl repair plan .*--action manual .*--attest "\$ATTEST" .*--outcome applied .*-- F-U-1$`},
		{"a probe (seed 001 with WMS down)", `^curl -s '?http`},
		{"a dry run", `^opctl repair apply plan.json --dry-run$`},
	} {
		re := regexp.MustCompile(want.re)
		if !slices.ContainsFunc(sum.lines, re.MatchString) {
			t.Errorf("no NEXT line run is %s (%s): the test no longer covers it", want.what, want.re)
		}
	}
	if sum.reports != len(targets) || sum.withNext < 12 || sum.ran < 40 {
		t.Errorf("%d reports of %d operations, %d with NEXT lines, %d lines run: the lab or the fixtures lost operations", sum.reports, len(targets), sum.withNext, sum.ran)
	}
}

// nextSummary counts what runNext did.
type nextSummary struct {
	reports, withNext, ran int
	lines                  []string // every line run
	notRun                 []string
}

// labOnMariaDB starts the lab on MariaDB and kfake (stopped when the test
// ends) and runs the scenarios without repairing anything.
func labOnMariaDB(ctx context.Context, t *testing.T, scenarios []lab.Scenario) (*lab.Env, []lab.Result) {
	t.Helper()
	env, err := lab.Start(ctx, lab.Options{MySQLDSN: testenv.RootDSN(), Timings: consumer.FastTimings()})
	if err != nil {
		t.Fatalf("lab: %v", err)
	}
	t.Cleanup(env.Close)
	results, err := env.Run(ctx, scenarios, nil)
	if err != nil {
		t.Fatalf("lab scenarios: %v", err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("scenario %s: %v", r.Scenario.Name, r.Err)
		}
	}
	return env, results
}

// labTargets starts the lab on MariaDB and kfake, runs every scenario
// (the seeds' own schemas' too, but seed 000's, which needs a binlog)
// without repairing anything, and returns each operation (affected or not)
// with the verdict the lab expects.
func labTargets(t *testing.T, base []string) []nextTarget {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, results := labOnMariaDB(ctx, t, append(lab.Scenarios(), lab.SeedScenarios()...))
	checks, err := env.Check(ctx, results)
	if err != nil {
		t.Fatalf("lab triage: %v", err)
	}
	var out []nextTarget
	for _, c := range checks {
		out = append(out, nextTarget{what: "lab " + c.Scenario, bizID: c.BizID, pipeline: c.Pipeline, verdict: c.Expectation.Verdict,
			env: append(slices.Clone(base), "OPCTL_CONFIG="+env.ConfigPath)})
	}
	return out
}

// seedTargets loads each seed fixture into a database of its own, produces
// its messages to kfake and commits the group offsets as the incident left
// them (as cmd's TestWhere*Seed* do), and writes its config.
func seedTargets(t *testing.T, base []string) []nextTarget {
	t.Helper()
	k := testenv.NewKafka(t, map[string]int32{"settlement-event": 8, "order-fulfilment": 8, "order-event": 8})
	brokers := "OPCTL_BROKERS=" + strings.Join(k.Brokers, ",")
	seed := func(name string) *testenv.DB {
		db := testenv.MySQL(t)
		db.ExecFile(t, filepath.Join("..", "..", "testdata", "schema", name+".sql"))
		db.ExecFile(t, filepath.Join("..", "..", "testdata", "incidents", name+".sql"))
		return db
	}
	cfg := func(name string) string {
		p, err := filepath.Abs(filepath.Join("..", "..", "testdata", "config", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// opctl's audit tables, created once as docs/repair.md asks before the
	// first apply (a dry run too); the lab creates its own. The report cannot
	// tell whether they exist, so NEXT's dry run assumes they do.
	audited := map[*testenv.DB]bool{}
	envOf := func(db *testenv.DB, config string, extra ...string) []string {
		env := append(append(slices.Clone(base), "OPCTL_CONFIG="+config, "OPCTL_MYSQL_DSN="+db.DSN, brokers), extra...)
		if !audited[db] {
			sh := &labShell{dir: t.TempDir(), env: env}
			if r := sh.exec(t, "opctl schema apply --audit"); r.code != 0 {
				t.Fatalf("setup: opctl schema apply --audit on %s: exit %d\n%s%s", db.Name, r.code, r.out, r.err)
			}
			audited[db] = true
		}
		return env
	}
	var out []nextTarget

	// Seed 000: PAY-1 was read twice (debit and notify twice), its offset
	// never committed past; PAY-2 is healthy.
	db := seed("settlement")
	p1, off1 := produceSeed(t, k, db, "settlement-event", "PAY-1", "m-1", "SELECT created_at FROM biz_operation WHERE biz_id = 'PAY-1'")
	p2, off2 := produceSeed(t, k, db, "settlement-event", "PAY-2", "m-2", "SELECT created_at FROM biz_operation WHERE biz_id = 'PAY-2'")
	k.Commit(t, "settlement-consumer", "settlement-event", p1, off1)
	if p2 != p1 {
		k.Commit(t, "settlement-consumer", "settlement-event", p2, off2+1)
	}
	set := envOf(db, cfg("settlement"))
	out = append(out,
		nextTarget{what: "seed 000", bizID: "PAY-1", pipeline: "settlement", verdict: inspect.DuplicateEffect, env: set},
		nextTarget{what: "seed 000", bizID: "PAY-2", pipeline: "settlement", verdict: inspect.Complete, env: set})

	// Seed 001: F-1 was locked twice at WMS (only WMS's journal knows); both
	// offsets are committed past.
	db = seed("fulfilment")
	for _, id := range []string{"F-1", "F-2"} {
		p, off := produceSeed(t, k, db, "order-fulfilment", id, "fm-"+id[2:], "SELECT created_at FROM fulfil_state WHERE biz_id = '"+id+"'")
		k.Commit(t, "fulfilment-consumer", "order-fulfilment", p, off+1)
	}
	wms := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"count": %d}`, map[string]int{"F-1": 2, "F-2": 1}[r.URL.Query().Get("biz_id")])
	}))
	t.Cleanup(wms.Close)
	up := envOf(db, cfg("fulfilment"), "OPCTL_WMS_URL="+wms.URL)
	down := envOf(db, cfg("fulfilment"), "OPCTL_WMS_URL=http://"+closedAddr(t))
	out = append(out,
		nextTarget{what: "seed 001, WMS up", bizID: "F-1", pipeline: "fulfilment", verdict: inspect.DuplicateEffect, env: up},
		nextTarget{what: "seed 001, WMS up", bizID: "F-2", pipeline: "fulfilment", verdict: inspect.Complete, env: up},
		nextTarget{what: "seed 001, WMS down", bizID: "F-1", pipeline: "fulfilment", verdict: inspect.UnknownOutcome, env: down},
		nextTarget{what: "seed 001, WMS down", bizID: "F-2", pipeline: "fulfilment", verdict: inspect.UnknownOutcome, env: down})

	// Seed 003: order 8821's PAID event was SKIPPED after SHIPPED was handled.
	db = seed("skip")
	var ts time.Time
	if err := db.SQL.QueryRow("SELECT created_at FROM consumer_idempotency WHERE msg_id = 'm-7391'").Scan(&ts); err != nil {
		t.Fatal(err)
	}
	p0, err := sources.PartitionFor("murmur2", []byte("8821"), 8)
	if err != nil {
		t.Fatal(err)
	}
	k.Produce(t, "order-event", p0, "8821", `{"event":"SHIPPED"}`, map[string]string{"msg_id": "m-7392"}, ts.Add(-time.Second))
	off := k.Produce(t, "order-event", p0, "8821", `{"event":"PAID"}`, map[string]string{"msg_id": "m-7391"}, ts)
	k.Commit(t, "order-consumer", "order-event", p0, off+1)
	skip := envOf(db, cfg("skip"))
	out = append(out,
		nextTarget{what: "seed 003", bizID: "8821", pipeline: "orders", verdict: inspect.WronglySkipped, env: skip},
		nextTarget{what: "seed 003", bizID: "8822", pipeline: "orders", verdict: inspect.SkippedOK, env: skip},
		nextTarget{what: "seed 003", bizID: "8823", pipeline: "orders", verdict: inspect.Complete, env: skip})
	return out
}

// produceSeed produces an operation's message (key = biz_id, a msg_id
// header) timestamped at its row's created_at, between other keys'
// messages, and returns its partition and offset.
func produceSeed(t *testing.T, k *testenv.Kafka, db *testenv.DB, topic, key, msgID, createdAt string) (int32, int64) {
	t.Helper()
	var ts time.Time
	if err := db.SQL.QueryRow(createdAt).Scan(&ts); err != nil {
		t.Fatalf("%s: %v", createdAt, err)
	}
	p, err := sources.PartitionFor("murmur2", []byte(key), 8)
	if err != nil {
		t.Fatal(err)
	}
	k.Produce(t, topic, p, "noise-before-"+key, "{}", nil, ts.Add(-time.Second))
	off := k.Produce(t, topic, p, key, fmt.Sprintf(`{"biz_id":%q}`, key), map[string]string{"msg_id": msgID}, ts)
	k.Produce(t, topic, p, "noise-after-"+key, "{}", nil, ts.Add(time.Second))
	return p, off
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

var (
	// flagRE finds the flags an error message asks for.
	flagRE = regexp.MustCompile(`--[a-z][a-z0-9-]*`)
	// varRE finds the shell variables a line uses.
	varRE = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)
)

// runNext runs `opctl where` for one target and then each NEXT line of its
// report, in order, in a fresh directory.
func runNext(t *testing.T, tg nextTarget, sum *nextSummary) {
	t.Helper()
	name := tg.what + " " + tg.bizID
	sh := &labShell{dir: t.TempDir(), env: tg.env}
	where := "opctl where " + inspect.ShellQuote(tg.bizID) + " --pipeline " + tg.pipeline + " -o json"
	w := sh.exec(t, where)
	var r inspect.Report
	if err := json.Unmarshal([]byte(w.out), &r); err != nil {
		t.Errorf("%s: $ %s\nexit %d, not one JSON report (%v)\nstdout:\n%s\nstderr:\n%s", name, where, w.code, err, clip(w.out), w.err)
		return
	}
	sum.reports++
	if !slices.Contains([]int{0, 3, 4, 6}, w.code) {
		t.Errorf("%s: $ %s\nexit %d, want 0, 3, 4 or 6\nstderr:\n%s", name, where, w.code, w.err)
	}
	if r.Verdict.Code != tg.verdict {
		t.Errorf("%s: where says %s, the fixture expects %s (findings %v, sources %v): its NEXT lines are not the ones this test means to run",
			name, r.Verdict.Code, tg.verdict, r.Findings, r.Sources)
	}
	if len(r.Verdict.Next) == 0 {
		return
	}
	sum.withNext++
	var log []string
	for _, line := range r.Verdict.Next {
		cmd := withoutComment(line)
		var unset []string
		for _, m := range varRE.FindAllStringSubmatch(cmd, -1) {
			if _, ok := nextVars[m[1]]; !ok {
				unset = append(unset, "$"+m[1])
			}
		}
		if len(unset) > 0 {
			t.Errorf("%s: NEXT line uses %s, which an operator is not told to set (docs/where.md names REASON and ATTEST); not run:\n  %s", name, strings.Join(unset, ", "), line)
			continue
		}
		tool := strings.Fields(cmd + " #")[0]
		if tool == "curl" || tool == "kcat" {
			if _, err := exec.LookPath(tool); err != nil {
				if tool == "kcat" && testenv.InCI() {
					t.Errorf("%s: kcat is not installed; .ci/run installs it (apt-get install kcat): not run:\n  %s", name, line)
					continue
				}
				sum.notRun = append(sum.notRun, fmt.Sprintf("%s: %s is not installed: %s", name, tool, line))
				continue
			}
		}
		res := sh.exec(t, line)
		sum.ran++
		sum.lines = append(sum.lines, cmd)
		log = append(log, fmt.Sprintf("  exit %d  %s", res.code, line))
		show := fmt.Sprintf("%s (%s): $ %s\nexit %d\nstdout:\n%s\nstderr:\n%s", name, r.Verdict.Code, line, res.code, clip(res.out), res.err)
		switch res.code {
		case 2:
			t.Errorf("%s\nexit 2 (usage): the line does not run as printed", show)
		case 126, 127:
			t.Errorf("%s\nexit %d: the shell could not run it", show, res.code)
		}
		var asked []string
		for _, f := range flagRE.FindAllString(res.err, -1) {
			if !slices.Contains(strings.Fields(cmd), f) && !slices.Contains(asked, f) {
				asked = append(asked, f)
			}
		}
		if len(asked) > 0 {
			sort.Strings(asked)
			t.Errorf("%s\nstderr asks for %s, which the line does not have", show, strings.Join(asked, ", "))
		}
		if want := expectedExits(cmd); want != nil && !slices.Contains(want, res.code) {
			t.Errorf("%s\nexit %d, want %v", show, res.code, want)
		}
		if strings.HasPrefix(cmd, "opctl repair plan ") && res.code == 0 {
			if _, err := os.Stat(filepath.Join(sh.dir, "plan.json")); err != nil {
				t.Errorf("%s\nwrote no plan.json, which the next line (the dry run) reads", show)
			}
		}
	}
	t.Logf("%s: %s, NEXT:\n%s", name, r.Verdict.Code, strings.Join(log, "\n"))
}

// withoutComment is line without its trailing comment: from the first #
// outside quotes that starts a word, as sh reads it.
func withoutComment(line string) string {
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return strings.TrimSpace(line[:i])
		}
	}
	return strings.TrimSpace(line)
}

// expectedExits are the exit codes a NEXT line of this kind has when it
// works (docs/exit-codes.md); nil for another program (curl, kcat) or a
// comment, which are held only to the rules every line is.
func expectedExits(cmd string) []int {
	switch {
	case cmd == "" || strings.HasPrefix(cmd, "#"):
		return []int{0}
	case strings.HasPrefix(cmd, "opctl repair plan "):
		return []int{0}
	case strings.HasPrefix(cmd, "opctl repair apply ") && strings.HasSuffix(cmd, " --dry-run"):
		return []int{0}
	case strings.HasPrefix(cmd, "opctl explain "):
		return []int{0}
	case strings.HasPrefix(cmd, "opctl where "):
		return []int{0, 3, 4, 6}
	case strings.HasPrefix(cmd, "opctl "):
		return []int{0, 3}
	}
	return nil
}
