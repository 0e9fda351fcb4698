package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/reconcile"
)

// labShell runs opctl commands against a lab as a person would from another
// terminal: each line through `sh -c` in dir, with the opctl binary first on
// PATH, OPCTL_CONFIG pointing at the lab's config (as ./opctl-lab.yaml does
// for `--config opctl-lab.yaml`) and REASON and ATTEST set, as the NEXT sections ask.
type labShell struct {
	dir string
	env []string
	// ran counts the commands run.
	ran int
}

// res is one command's outcome.
type res struct {
	line     string
	code     int
	out, err string
}

// serverTrouble are texts no command may print: a statement the server
// rejected, a read that came back incomplete, a crash.
var serverTrouble = []string{"Error 1105", "Error 1064", "(HY000)", "(42000)", "partial read", "unexpected value", "PARTIAL", "panic:", "not supported"}

// run runs line and fails the test unless it exits with one of want and
// prints nothing of serverTrouble.
func (s *labShell) run(t *testing.T, line string, want ...int) res {
	t.Helper()
	s.ran++
	r := s.exec(t, line)
	ok := false
	for _, w := range want {
		ok = ok || r.code == w
	}
	if !ok {
		t.Errorf("$ %s\nexit %d, want %v\nstdout:\n%s\nstderr:\n%s", line, r.code, want, clip(r.out), r.err)
	}
	for _, bad := range serverTrouble {
		if strings.Contains(r.out, bad) || strings.Contains(r.err, bad) {
			t.Errorf("$ %s\nprints %q\nstdout:\n%s\nstderr:\n%s", line, bad, clip(r.out), r.err)
		}
	}
	return r
}

// exec runs line in the lab's directory and returns what it did, asserting
// nothing.
func (s *labShell) exec(t *testing.T, line string) res {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "sh", "-c", line)
	c.Dir, c.Env = s.dir, s.env
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	r := res{line: line, out: out.String(), err: errOut.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("%s: %v", line, err)
	}
	return r
}

// console runs line (a full-screen opctl command) on a terminal, as
// script(1) gives it one, waits, up to 60s, until its screen shows want,
// then types q and waits for it to quit; it fails the test unless it
// exits 0. Typing q at a fixed time races the console's first read on a
// loaded machine: q would quit before the list is drawn.
func (s *labShell) console(t *testing.T, line, want string) res {
	t.Helper()
	s.ran++
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "script", "-qec", line, "/dev/null")
	c.Dir, c.Env = s.dir, s.env
	var out syncBuf
	var errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	shown := false
	for deadline := time.Now().Add(60 * time.Second); !shown && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		shown = strings.Contains(out.String(), want)
	}
	if !shown {
		t.Errorf("$ %s: the screen does not show %q after 60s:\n%s\nstderr:\n%s", line, want, clip(out.String()), errOut.String())
	}
	_, _ = in.Write([]byte("q"))
	_ = in.Close()
	err = c.Wait()
	r := res{line: line, out: out.String(), err: errOut.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("%s: %v", line, err)
	}
	if r.code != 0 {
		t.Errorf("$ %s\nexit %d after q, want 0\nscreen:\n%s\nstderr:\n%s", line, r.code, clip(r.out), r.err)
	}
	for _, bad := range serverTrouble {
		if strings.Contains(r.out, bad) || strings.Contains(r.err, bad) {
			t.Errorf("$ %s\nprints %q\nscreen:\n%s\nstderr:\n%s", line, bad, clip(r.out), r.err)
		}
	}
	return r
}

// settle waits, up to 30s, until `opctl where id` reads verdict: for an
// operation a live consumer of the kept lab is still working on. where's
// statements are not one snapshot, so a read in the middle of the
// consumer's transaction can mix before and after (noted for the
// verdict-truth issue); the commands are checked once it is done.
func (s *labShell) settle(t *testing.T, id string, verdict inspect.Code) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := s.exec(t, "opctl where "+id+" -o json")
		if strings.Contains(r.out, `"code": "`+string(verdict)+`"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("where %s: not %s after 30s (the live consumer did not finish it):\n%s", id, verdict, clip(r.out))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func clip(s string) string {
	if len(s) > 4000 {
		return s[:4000] + "\n..."
	}
	return s
}

// buildOpctl builds the opctl binary (the module's main package, the
// console inside) into dir.
func buildOpctl(t *testing.T, dir string) {
	t.Helper()
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "opctl"), "github.com/opctl-dev/opctl").CombinedOutput()
	if err != nil {
		t.Fatalf("go build opctl: %v\n%s", err, out)
	}
}

// keptLab starts the embedded server and the lab as `go run ./lab/demo
// --keep` leaves it (the incidents unrepaired, the lab's config written to
// dir/opctl-lab.yaml) and a shell with opctl built on its PATH and
// OPCTL_CONFIG, REASON and ATTEST set, as the README's tour sets them.
func keptLab(t *testing.T) (sh *labShell, env *lab.Env, rep demoReport, dir string) {
	t.Helper()
	dir = t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	buildOpctl(t, bin)
	srv, dsn, err := startEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	// As `go run ./lab/demo --keep` runs them: the lab's scenarios, then
	// the seeds' own (runLab adds them).
	opts := &options{MySQLDSN: dsn, embedded: true, Keep: true, NoRepair: true, selected: lab.Scenarios()}
	env, rep, err = startLab(context.Background(), opts, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	if !rep.OK {
		t.Fatalf("the lab's verdicts differ from its expectations: %+v", rep.Checks)
	}
	cfgPath, err := writeKeptConfig(dir, env)
	if err != nil {
		t.Fatal(err)
	}
	sh = &labShell{dir: dir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPCTL_") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "REASON=") && !strings.HasPrefix(kv, "ATTEST=") {
			sh.env = append(sh.env, kv)
		}
	}
	sh.env = append(sh.env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"OPCTL_CONFIG="+cfgPath, "REASON=INC-lab commands test", "ATTEST=the downstream team checked their journal", "NO_COLOR=1")
	return sh, env, rep, dir
}

// TestReadmeTour runs README.md's five-minute tour exactly as printed, line
// by line, on a lab as `go run ./lab/demo --keep` leaves it: each must
// exit 0, or the status its comment gives ("(exit 3)"); a line that asks to
// type "yes" runs on a terminal (script(1)) with "yes" typed.
func TestReadmeTour(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the lab")
	}
	t.Parallel()
	lines := readmeTour(t)
	sh, _, _, _ := keptLab(t)
	exitOf := regexp.MustCompile(`\(exit (\d)\)`)
	for _, line := range lines {
		cmd, comment, _ := strings.Cut(line, "#")
		cmd = strings.TrimSpace(cmd)
		want := 0
		if m := exitOf.FindStringSubmatch(comment); m != nil {
			want = int(m[1][0] - '0')
		}
		if strings.Contains(comment, `type "yes"`) {
			r := sh.run(t, "printf 'yes\\n' | script -qec '"+cmd+"' /dev/null", want)
			if !strings.Contains(r.out, "applied") {
				t.Errorf("$ %s (typing yes)\n%s", cmd, clip(r.out))
			}
			continue
		}
		sh.run(t, cmd, want)
	}
	if sh.ran < 10 {
		t.Fatalf("only %d commands in the README's tour", sh.ran)
	}
}

// readmeTour is the second code block of README.md's "A five-minute tour"
// (terminal 2), one command per line, without the line that builds opctl
// and sets the environment (keptLab does).
func readmeTour(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, tour, ok := strings.Cut(string(b), "## A five-minute tour")
	if !ok {
		t.Fatal("README.md has no '## A five-minute tour'")
	}
	tour, _, _ = strings.Cut(tour, "\n## ")
	blocks := strings.Split(tour, "```sh\n")
	if len(blocks) < 3 {
		t.Fatalf("the tour has %d code blocks, want 2", len(blocks)-1)
	}
	block, _, _ := strings.Cut(blocks[2], "```")
	var out []string
	for _, l := range strings.Split(block, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "go build") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// TestLabCommands is the contract of `go run ./lab/demo --keep`: every
// command the docs and `opctl where`'s NEXT sections tell a person to run
// works against the lab on the embedded server, run as separate opctl
// processes. The lab is started as `--keep --no-repair` leaves it (the
// incidents as they happened, so that the NEXT commands have something to
// do; `--keep` alone differs only in that the demo repaired them with the
// same commands); then, for every affected operation, `where -o json` and
// each line of its verdict.next; then the tour: schema check/apply,
// reconcile, plans from reconcile's targets, the repairs applied for real,
// the `where` each apply suggests, audit, schema print, explain, kcat.
func TestLabCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the lab and runs opctl some 60 times")
	}
	t.Parallel()
	start := time.Now()
	sh, env, rep, dir := keptLab(t)
	t.Logf("lab up in %v", time.Since(start).Round(time.Millisecond))

	// The lab created the audit tables; creating them again changes
	// nothing (CREATE TABLE IF NOT EXISTS: exit 0).
	sh.run(t, "opctl --config opctl-lab.yaml schema apply --audit", 0)

	// Every affected operation: where -o json, then each NEXT line.
	plans := map[string]string{} // biz_id -> its plan file
	var affected []string
	for _, c := range rep.Checks {
		if !c.Affected {
			continue
		}
		affected = append(affected, c.BizID)
		where := sh.run(t, "opctl where "+c.BizID+" --pipeline "+c.Pipeline+" -o json", whereCode(t, c.Verdict))
		var w inspect.Report
		if err := json.Unmarshal([]byte(where.out), &w); err != nil {
			t.Fatalf("where %s -o json: %v\n%s", c.BizID, err, where.out)
		}
		if w.Verdict.Code != c.Verdict || w.Partial {
			t.Errorf("where %s: %s (partial %v), want %s: %v", c.BizID, w.Verdict.Code, w.Partial, c.Verdict, w.Sources)
		}
		if len(w.Verdict.Next) == 0 {
			t.Errorf("where %s (%s): no NEXT commands", c.BizID, w.Verdict.Code)
		}
		os.Remove(filepath.Join(dir, "plan.json"))
		for _, line := range w.Verdict.Next {
			cmd := strings.TrimSpace(strings.SplitN(line, "#", 2)[0])
			switch {
			case strings.HasPrefix(cmd, "opctl repair plan "):
				if w.Verdict.Code == inspect.UnknownOutcome && !strings.Contains(cmd, "--action manual --from-step ") {
					t.Errorf("%s: UNKNOWN_OUTCOME's plan line does not ask for the downstream's answer: %s", c.BizID, line)
				}
				sh.run(t, line, 0)
				if _, err := os.Stat(filepath.Join(dir, "plan.json")); err != nil {
					t.Errorf("$ %s\nwrote no plan.json", line)
					continue
				}
				sh.run(t, "opctl repair show plan.json", 0)
				if w.Verdict.Code == inspect.UnknownOutcome {
					// One plan per answer the downstream may give: both
					// are made and dry-run; the one the lab's downstream
					// gives is applied below.
					continue
				}
				plan := "plan-" + c.BizID + ".json"
				if err := os.Rename(filepath.Join(dir, "plan.json"), filepath.Join(dir, plan)); err != nil {
					t.Fatal(err)
				}
				// Keep the NEXT order: the dry run comes next, on plan.json.
				if err := os.Symlink(plan, filepath.Join(dir, "plan.json")); err != nil {
					t.Fatal(err)
				}
				plans[c.BizID] = plan
			case strings.HasPrefix(cmd, "opctl repair apply plan.json --dry-run"):
				r := sh.run(t, line, 0)
				if !strings.Contains(r.out, "would apply") {
					t.Errorf("$ %s\n%s", line, r.out)
				}
			case strings.HasPrefix(cmd, "opctl explain "):
				sh.run(t, line, 0)
			case strings.HasPrefix(cmd, "opctl where "):
				sh.run(t, line, whereCode(t, c.Verdict))
			case strings.HasPrefix(cmd, "curl "):
				sh.run(t, line, 0)
			default:
				t.Errorf("%s: NEXT line this test does not know how to check: %s", c.BizID, line)
			}
		}
		os.Remove(filepath.Join(dir, "plan.json"))
	}
	if len(affected) < 8 {
		t.Fatalf("only %d affected operations: %v", len(affected), affected)
	}

	// The tour (README, docs/lab.md, docs/reconcile.md), before the repairs.
	sh.run(t, "opctl --config opctl-lab.yaml where PAY-D-1", 3)
	sh.run(t, "opctl where PAY-D-2", 0)
	sh.run(t, "opctl where NOPE-1", 4)

	// schema check lists what the lab lacks (docs/lab.md: an index starting
	// with (src_partition, src_offset) on the state tables) and nothing an
	// existing index serves (the debit journals' (created_at) index, with
	// the id InnoDB appends to it; the primary keys; the seeds' own tables,
	// whose presets need no index they lack).
	check := sh.run(t, "opctl schema check", 3)
	for _, l := range strings.Split(check.out, "\n") {
		if f := strings.Split(l, "\t"); len(f) >= 5 && f[4] == "missing" {
			if f[3] != "(src_partition, src_offset)" {
				t.Errorf("schema check: %s %s %s missing", f[1], f[2], f[3])
			}
		}
	}
	// reconcile refuses exactly the checks that need those indexes, and
	// exits 3 for the targets the others found (docs/exit-codes.md).
	refused := sh.run(t, "opctl reconcile -o json", 3)
	var sum struct {
		Summary reconcile.Summary `json:"summary"`
	}
	if err := json.Unmarshal([]byte(refused.out), &sum); err != nil {
		t.Fatalf("reconcile -o json: %v\n%s", err, refused.out)
	}
	for _, c := range sum.Summary.Checks {
		switch c.Status {
		case reconcile.StatusRefused:
			if c.Check != reconcile.CheckUncommitted || !strings.Contains(c.Reason, "starting with (src_partition, src_offset)") {
				t.Errorf("reconcile %s/%s refused: %s", c.Pipeline, c.Check, c.Reason)
			}
		case reconcile.StatusFailed:
			t.Errorf("reconcile %s/%s failed: %s", c.Pipeline, c.Check, c.Reason)
		}
	}
	if sum.Summary.Partial {
		t.Errorf("reconcile partial: %q", sum.Summary.PartialWhy)
	}
	rec := sh.run(t, "opctl reconcile --check stuck,skipped --older-than 0s --out targets.jsonl", 3)
	for _, want := range []string{"PAY-E-1\tSTRANDED", "PAY-B-1\tSTATE_BEHIND", "F-U-1\tUNKNOWN_OUTCOME", "O-S-1\tWRONGLY_SKIPPED"} {
		if !strings.Contains(rec.out, want) {
			t.Errorf("reconcile --check stuck,skipped: no %q target:\n%s", want, rec.out)
		}
	}
	// F-U-1 (UNKNOWN_OUTCOME, no probe) gets no plan without an attestation:
	// it is skipped, the others are planned, and the exit is 3.
	batch := sh.run(t, `opctl repair plan --from-file targets.jsonl --reason "$REASON" --out plans.jsonl`, 3)
	if !strings.Contains(batch.err, "skipped F-U-1 (") || !strings.Contains(batch.err, "plan(s) written to plans.jsonl") {
		t.Errorf("repair plan --from-file: F-U-1 not reported as skipped, or no plans written:\n%s", batch.err)
	}
	sh.run(t, "opctl repair show plans.jsonl", 0)
	sh.run(t, "opctl repair apply plans.jsonl --dry-run", 0)
	sh.run(t, "opctl schema apply --indexes --dry-run", 0)
	sh.run(t, "opctl schema apply --indexes --yes", 0)
	if r := sh.run(t, "opctl schema check", 0); !strings.Contains(r.out, "nothing missing") {
		t.Errorf("schema check after schema apply --indexes:\n%s", r.out)
	}
	full := sh.run(t, "opctl reconcile", 3)
	for _, want := range []string{"PAY-D-1\tDUPLICATE_EFFECT", "O-S-1\tWRONGLY_SKIPPED"} {
		if !strings.Contains(full.out, want) {
			t.Errorf("reconcile with every index: no %q target:\n%s", want, full.out)
		}
	}
	if strings.Contains(full.out, "\trefused\t") || strings.Contains(full.out, "\tfailed\t") {
		t.Errorf("reconcile with every index refused or failed a check:\n%s", full.out)
	}
	sh.run(t, "opctl reconcile --shard 0/4 -o jsonl", 0, 3)
	sh.run(t, "opctl reconcile --since 1h -o prometheus", 3)
	sh.run(t, "opctl reconcile --allow-full-scan --check duplicates,orphans,uncommitted", 3)

	// The repairs, for real; each apply says which `where` checks it.
	checkIt := regexp.MustCompile(`Check it: (opctl where .*)`)
	apply := func(plan string) {
		r := sh.run(t, "opctl repair apply "+plan+" --yes", 0)
		m := checkIt.FindStringSubmatch(r.out)
		if m == nil {
			t.Errorf("repair apply %s: no 'Check it' line:\n%s", plan, r.out)
			return
		}
		// The lab's consumers are stopped: a redriven operation reads
		// WILL_REDELIVER (watch), a repaired one COMPLETE. All but the
		// in-flight-lease scenario's two on fulfilment_anchored, which stay
		// up holding F-L-1: they consume what opctl republishes there.
		if strings.Contains(m[1], "--pipeline fulfilment_anchored") {
			f := strings.Fields(m[1])
			sh.settle(t, f[len(f)-1], inspect.Complete)
		}
		sh.run(t, m[1], 0)
	}
	for _, id := range affected {
		if p, ok := plans[id]; ok {
			apply(p)
		}
	}
	// F-U-1, as its NEXT says: ask the downstream team, attest what it says, plan.
	sh.run(t, `opctl repair plan F-U-1 --pipeline fulfilment_anchored --reason "$REASON" --action manual --attest "logistics team: their journal has 1 effect for F-U-1" --outcome applied --out plan-F-U-1.json`, 0)
	sh.run(t, "opctl repair show plan-F-U-1.json", 0)
	sh.run(t, "opctl repair apply plan-F-U-1.json --dry-run", 0)
	apply("plan-F-U-1.json")
	if r := sh.run(t, "opctl repair apply plan-F-U-1.json --yes", 0); !strings.Contains(r.out, "already applied") {
		t.Errorf("second apply:\n%s", r.out)
	}
	for _, c := range []struct{ id, want string }{{"PAY-D-1", "COMPLETE"}, {"F-W-1", "COMPLETE"}, {"F-U-1", "COMPLETE"}} {
		if r := sh.run(t, "opctl where "+c.id+" -o json", 0); !strings.Contains(r.out, `"code": "`+c.want+`"`) {
			t.Errorf("where %s after its repair: not %s:\n%s", c.id, c.want, clip(r.out))
		}
	}
	if r := sh.run(t, "opctl audit --biz-id PAY-D-1", 0); !strings.Contains(r.out, "reverse") {
		t.Errorf("audit --biz-id PAY-D-1 shows no reverse:\n%s", r.out)
	}
	sh.run(t, "opctl audit", 0)
	sh.run(t, "opctl audit -o json", 0)

	sh.run(t, "opctl schema print", 0)
	sh.run(t, "opctl schema print --audit", 0)
	sh.run(t, "opctl explain", 0)

	// kcat (Debian's package), as the demo prints it; as lab's
	// TestKcatInterop: a missing kcat fails in CI, skips loudly elsewhere.
	t.Run("kcat", func(t *testing.T) {
		if _, err := exec.LookPath("kcat"); err != nil {
			if testenv.InCI() {
				t.Fatal("kcat is not installed; .ci/run should have installed it (apt-get install kcat)")
			}
			t.Skip("SKIPPING: kcat is not installed (apt-get install kcat): the demo's two kcat commands are not run")
		}
		b := env.Cluster.Brokers[0]
		sh.run(t, "kcat -b "+b+" -L", 0)
		if r := sh.run(t, "kcat -b "+b+" -C -t settlement-event -o beginning -e -f '%k %h %s\\n'", 0); !strings.Contains(r.out, "PAY-D-1 msg_id=m-PAY-D-1") {
			t.Errorf("kcat -C: no PAY-D-1 record:\n%s", clip(r.out))
		}
	})
	t.Logf("%d commands; done in %v", sh.ran, time.Since(start).Round(time.Millisecond))
}

// whereExit is the exit status of `opctl where` for a complete (not
// partial) report of each verdict, written out from docs/verdicts.md's
// severities and docs/exit-codes.md (ok and watch 0, action 3, NOT_FOUND
// 4), not from the table the binary uses.
var whereExit = map[inspect.Code]int{
	inspect.NotFound:            4,
	inspect.InFlight:            0,
	inspect.DuplicateEffect:     3,
	inspect.UnknownOutcome:      3,
	inspect.WronglySkipped:      3,
	inspect.MissingEffect:       3,
	inspect.StateBehind:         3,
	inspect.Stranded:            3,
	inspect.WillRedeliver:       0,
	inspect.Incomplete:          0,
	inspect.CompleteUncommitted: 0,
	inspect.Failed:              0,
	inspect.SkippedOK:           0,
	inspect.Complete:            0,
}

// whereCode is whereExit[c]; a verdict the map lacks fails the test.
func whereCode(t *testing.T, c inspect.Code) int {
	t.Helper()
	code, ok := whereExit[c]
	if !ok {
		t.Fatalf("verdict %s: no exit status in whereExit (docs/exit-codes.md)", c)
	}
	return code
}

// TestRepairedViewNext: once the demo has repaired an incident, the NEXT of
// its where view no longer offers repair commands that would find nothing
// to repair (and no plan.json to dry-run) on the kept lab.
func TestRepairedViewNext(t *testing.T) {
	r := inspect.Report{Verdict: inspect.Verdict{Code: inspect.DuplicateEffect, Next: []string{
		`opctl repair plan --pipeline settlement --reason "$REASON" --out plan.json -- PAY-D-1`,
		"opctl repair apply plan.json --dry-run",
		"opctl explain DUPLICATE_EFFECT",
	}}}
	got := repairedView(r).Verdict.Next
	if len(got) != 2 || !strings.HasPrefix(got[0], "# repaired by the demo") || got[1] != "opctl explain DUPLICATE_EFFECT" {
		t.Errorf("NEXT of a repaired incident: %q", got)
	}
	if len(r.Verdict.Next) != 3 {
		t.Errorf("the report itself changed: %q", r.Verdict.Next)
	}
	in := inspect.Report{Verdict: inspect.Verdict{Code: inspect.InFlight, Next: []string{"opctl where F-L-1 --pipeline fulfilment_anchored", "opctl explain IN_FLIGHT"}}}
	if got := repairedView(in).Verdict.Next; len(got) != 2 || got[0] != in.Verdict.Next[0] {
		t.Errorf("NEXT without repair commands changed: %q", got)
	}
}
