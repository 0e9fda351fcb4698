package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/lab/testenv"
)

// tmuxPane is one tmux session on a server of its own (-L): the other
// sessions of the machine are never touched.
type tmuxPane struct {
	t      *testing.T
	socket string
}

func (p *tmuxPane) tmux(args ...string) string {
	p.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", p.socket}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (p *tmuxPane) screen() string { return p.tmux("capture-pane", "-p", "-t", "console") }

// keys sends tmux key names (Enter, Escape, ...); text sends text as it is.
func (p *tmuxPane) keys(k ...string) { p.tmux(append([]string{"send-keys", "-t", "console"}, k...)...) }
func (p *tmuxPane) text(s string)    { p.tmux("send-keys", "-t", "console", "-l", s) }

// waitFor waits until the screen shows every text, and returns it; the
// deadline only ends a test that would otherwise hang.
func (p *tmuxPane) waitFor(texts ...string) string {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := p.screen()
		missing := ""
		for _, x := range texts {
			if !strings.Contains(s, x) {
				missing = x
				break
			}
		}
		if missing == "" {
			return s
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the screen does not show %q:\n%s", missing, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestConsoleUnderTmux drives the real opctl binary's console in a
// 120×40 tmux pane on the lab (MariaDB, kfake, real consumers): the list,
// ':' and an id, its detail, the plan, the dry run and the apply; then it
// checks the database: the reversal written, the audit rows tagged with
// the incident and the reason typed.
func TestConsoleUnderTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the lab and opctl tui under tmux")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		if testenv.InCI() {
			t.Fatal("tmux is not installed (.ci/run installs it)")
		}
		t.Skip("SKIP: tmux is not installed: apt-get install tmux")
	}
	testenv.MySQL(t) // MariaDB is reachable (or the test skips loudly; in CI it fails)
	dir := t.TempDir()
	buildOpctl(t, dir)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	scenarios, err := lab.Select([]string{"settlement-double-debit", "stranded-early-commit", "unknown-outcome", "in-flight-lease"})
	if err != nil {
		t.Fatal(err)
	}
	env, _ := labOnMariaDB(ctx, t, scenarios)

	p := &tmuxPane{t: t, socket: fmt.Sprintf("opctl-tui-test-%d", os.Getpid())}
	shell := fmt.Sprintf("cd %s && TERM=xterm-256color NO_COLOR=1 ./opctl --config %s tui --older-than 0s --incident INC-TMUX --operator tmux-test; echo CONSOLE-EXITED-$?; sleep 600",
		dir, env.ConfigPath)
	p.tmux("new-session", "-d", "-s", "console", "-x", "120", "-y", "40", shell)
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", p.socket, "kill-server").Run() })

	// The list: the lab's incidents, counted per verdict.
	s := p.waitFor("opctl tui · every pipeline", "PAY-D-1", "DUPLICATE_EFFECT", "PAY-E-1", "STRANDED", "read ")
	t.Logf("list:\n%s", s)

	// ':' and the id: its detail, drawn as panels.
	p.keys(":")
	p.waitFor("go to biz_id:")
	p.text("PAY-D-1")
	p.keys("Enter")
	s = p.waitFor("PAY-D-1  settlement  DUPLICATE_EFFECT (action)", "STEPS", "◉ DUPLICATED", "KAFKA  settlement-event", "lag ")
	t.Logf("detail:\n%s", s)

	// The plan, then the dry run (what it saw), then the apply.
	p.keys("p")
	p.waitFor("opctl will perform 2 actions", "[reverse]", "[compensate_remote]", "incident  INC-TMUX")
	p.keys("d")
	s = p.waitFor("DRY RUN", "would apply, 2/2 action(s)", "1 row(s): INSERT INTO debit_log")
	t.Logf("dry run:\n%s", s)
	if n := count(t, env, "SELECT COUNT(*) FROM debit_log WHERE biz_id = 'PAY-D-1' AND kind = 'REVERSAL'"); n != 0 {
		t.Fatalf("the dry run wrote %d reversal(s)", n)
	}
	p.keys("a")
	p.waitFor("type the biz_id to confirm:")
	p.text("PAY-D-1")
	p.keys("Enter")
	p.text(" double debit")
	p.keys("Enter")
	s = p.waitFor("applied, 2/2 action(s)", "NOW  COMPLETE", "PAY-D-1  settlement  COMPLETE (ok)")
	t.Logf("after apply:\n%s", s)

	rss := consoleRSS(t, p)
	t.Logf("opctl tui peak RSS (VmHWM): %d KiB", rss)
	if rss > 64<<10 {
		t.Errorf("opctl tui peak RSS %d KiB, over 64 MiB", rss)
	}

	// The database: the reversal, and the audit rows of the plan tagged.
	if n := count(t, env, "SELECT COUNT(*) FROM debit_log WHERE biz_id = 'PAY-D-1' AND kind = 'REVERSAL'"); n != 1 {
		t.Errorf("%d reversal rows, want 1", n)
	}
	audit := env.Config.Audit.AuditTable()
	if n := count(t, env, "SELECT COUNT(*) FROM "+audit+" WHERE biz_id = 'PAY-D-1' AND outcome = 'applied' AND operator = 'tmux-test' AND reason = 'INC-TMUX double debit' AND JSON_VALUE(after_image, '$.incident') = 'INC-TMUX'"); n != 2 {
		t.Errorf("%d tagged audit rows for PAY-D-1, want 2", n)
	}
	if n := count(t, env, "SELECT COUNT(*) FROM "+env.Config.Audit.AttemptTable()+" WHERE biz_id = 'PAY-D-1' AND outcome = 'dry_run' AND JSON_VALUE(detail, '$.incident') = 'INC-TMUX'"); n != 1 {
		t.Errorf("%d tagged dry_run attempts, want 1", n)
	}

	// A: the audit of the operation.
	p.keys("A")
	p.waitFor("AUDIT  PAY-D-1", "reverse", "INC-TMUX double debit")

	// A live lease disables apply, and says why.
	p.keys(":")
	p.waitFor("go to biz_id:")
	p.text("F-L-1")
	p.keys("Enter")
	p.waitFor("F-L-1  fulfilment_anchored  IN_FLIGHT (watch)")
	p.keys("a")
	p.waitFor("apply disabled: ", "holds a live lease until")

	// An unknown outcome with no probe: the plan needs the downstream's
	// answer; t enters it, then the plan is made and applied.
	p.keys(":")
	p.waitFor("go to biz_id:")
	p.text("F-U-1")
	p.keys("Enter")
	p.waitFor("F-U-1  fulfilment_anchored  UNKNOWN_OUTCOME (action)", "? UNKNOWN")
	p.keys("p")
	p.waitFor("no plan: ", "Press t to enter the attestation")
	p.keys("a")
	p.waitFor("apply disabled: needs an attestation and the outcome")
	p.keys("t")
	p.waitFor("ATTEST", "outcome (applied|absent):")
	p.text("logistics team: shipment exists")
	p.keys("Enter")
	p.text("applied")
	p.keys("Enter")
	p.waitFor("[manual] attest that the unknown logistics call(s) took effect", `attest    "logistics team: shipment exists"`)
	p.keys("a")
	p.waitFor("type the biz_id to confirm:")
	p.text("F-U-1")
	p.keys("Enter")
	p.text(" logistics attested")
	p.keys("Enter")
	s = p.waitFor("applied, 3/3 action(s)", "NOW  ")
	t.Logf("after the attested apply:\n%s", s)
	if n := count(t, env, "SELECT COUNT(*) FROM "+audit+" WHERE biz_id = 'F-U-1' AND action = 'manual' AND reason = 'INC-TMUX logistics attested' AND JSON_VALUE(after_image, '$.attest') = 'logistics team: shipment exists'"); n != 1 {
		t.Errorf("%d manual audit rows for F-U-1 with the attestation, want 1", n)
	}

	// Back to the list, then 80×24: a verdict and a pipeline are never cut
	// (docs/tui.md#terminal), and nothing is wider than the window.
	p.keys("Escape")
	time.Sleep(200 * time.Millisecond) // two quick escapes read as alt+esc
	p.keys("Escape")
	p.waitFor("opctl tui · every pipeline", "BIZ_ID")
	p.tmux("resize-window", "-t", "console", "-x", "80", "-y", "24")
	s = p.waitFor("PAY-E-1", "F-L-1")
	t.Logf("list at 80x24:\n%s", s)
	for _, want := range []*regexp.Regexp{regexp.MustCompile(`F-L-1 +fulfilment_anchored +IN_FLIGHT `), regexp.MustCompile(`PAY-E-1 +settlement +STRANDED `)} {
		if !want.MatchString(s) {
			t.Errorf("at 80x24 no row matches %s:\n%s", want, s)
		}
	}
	for _, l := range strings.Split(s, "\n") {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("a line of %d characters at 80 columns: %q", n, l)
		}
	}

	// q: the console quits and the shell is back.
	p.keys("q")
	p.waitFor("CONSOLE-EXITED-0")

	// SIGTERM: the console ends, the terminal restored (the shell's line
	// is on the normal screen), exit 130.
	p.tmux("new-window", "-t", "console", shell)
	p.waitFor("opctl tui · every pipeline", "read ")
	pid := consolePID(t, p)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	s = p.waitFor("CONSOLE-EXITED-130")
	if strings.Contains(s, "opctl tui · every pipeline") {
		t.Fatalf("the console's screen is still shown after SIGTERM:\n%s", s)
	}
}

func count(t *testing.T, env *lab.Env, q string) int {
	t.Helper()
	var n int
	if err := env.DB.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// consolePID is the opctl process in the pane: the shell's child.
func consolePID(t *testing.T, p *tmuxPane) int {
	t.Helper()
	shell := strings.TrimSpace(p.tmux("list-panes", "-t", "console", "-F", "#{pane_pid}"))
	kids, err := os.ReadFile("/proc/" + shell + "/task/" + shell + "/children")
	if err != nil {
		t.Fatalf("children of the pane's shell %s: %v", shell, err)
	}
	f := strings.Fields(string(kids))
	if len(f) == 0 {
		t.Fatalf("the pane's shell %s has no child", shell)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// consoleRSS is the peak RSS (VmHWM, KiB) of the console in the pane: the
// opctl process itself, the console inside it (docs/tui.md).
func consoleRSS(t *testing.T, p *tmuxPane) int {
	t.Helper()
	pid := consolePID(t, p)
	if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); strings.TrimSpace(string(comm)) != "opctl" {
		t.Fatalf("the pane's shell runs %q, not opctl", comm)
	}
	kib, err := testenv.PeakRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	return kib
}

// TestDemoTUI: --tui is for a person (not with -o json), and it runs
// opctl tui itself, after the triage: without a terminal the console says
// so and the demo fails with its status.
func TestDemoTUI(t *testing.T) {
	ios, _, out, errOut := iostreams.Test()
	if code := run(context.Background(), ios, []string{"--tui", "-o", "json"}); code != 2 || !strings.Contains(errOut.String(), "--tui and -o") {
		t.Fatalf("--tui -o json: exit %d, stderr %q", code, errOut)
	}
	testenv.MySQL(t) // MariaDB is reachable (or the test skips loudly; in CI it fails)
	ios, _, out, errOut = iostreams.Test()
	code := run(context.Background(), ios, []string{"--tui", "--mysql-dsn", testenv.RootDSN(), "--scenario", "settlement-double-debit"})
	if code != 1 || !strings.Contains(errOut.String(), "opctl tui needs a terminal") || !strings.Contains(errOut.String(), "the console exited with status 2") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	// The triage was shown first, and nothing was repaired (the console repairs).
	if !strings.Contains(out.String(), "PAY-D-1") || strings.Contains(out.String(), "REPAIRS") {
		t.Fatalf("stdout:\n%s", out)
	}
}
