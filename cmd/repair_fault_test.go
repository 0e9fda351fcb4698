package cmd

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	kafkasrc "github.com/opctl-dev/opctl/sources/kafka"
	"github.com/opctl-dev/opctl/sources/schema"
)

// The faults an incident is made of, against the shipped binary: two
// applies of one plan racing while the downstream is slow, applies killed
// (SIGINT, SIGKILL) at random points of their POST and applied again at
// once, Kafka that stops answering in the middle of a republish. Each
// test counts the effects at the downstream or the records in the
// partition: a double effect or a lost action fails it. The figures they
// log are in the note.

// faultFixture is F-1 (fulfilment, a duplicated WMS lock) compensated at
// w, with the audit tables, and the global flags of its command lines.
func faultFixture(t *testing.T, w *testenv.WMS, timeout string) (*fixture, []string) {
	f := newFixture(t, "fulfilment", "order-fulfilment", "${OPCTL_WMS_URL:-http://127.0.0.1:8082}", w.URL,
		"/wms/locks?biz_id={biz_id}\"", "/wms/locks?biz_id={biz_id}\"\n        compensate: \""+w.URL+"/wms/compensate?biz_id={biz_id}\"")
	for _, s := range schema.AuditDDL("") {
		f.db.Exec(t, s)
	}
	return f, []string{"--config", f.cfg, "--mysql-dsn", f.db.DSN, "--brokers", strings.Join(f.k.Brokers, ","), "--timeout", timeout}
}

// planF1 makes a new plan for F-1 (the audit emptied first).
func planF1(t *testing.T, f *fixture, bin string, args []string) string {
	t.Helper()
	f.db.Exec(t, "DELETE FROM opctl_audit")
	f.db.Exec(t, "DELETE FROM opctl_audit_attempt")
	plan := filepath.Join(t.TempDir(), "plan.json")
	if code, _, errOut := execOpctl(t, bin, nil, append(args, "repair", "plan", "F-1", "--reason", "fault test", "--out", plan)...); code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	return plan
}

func (f *fixture) auditOutcomes(t *testing.T) string {
	var s string
	if err := f.db.SQL.QueryRow("SELECT IFNULL(GROUP_CONCAT(outcome ORDER BY id), '') FROM opctl_audit").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Two `opctl repair apply` of one plan, the second started while the
// first waits on a downstream that takes 0.3 s or 2 s: one compensation,
// one applied audit row; the first exits 0 "applied", the second exits 0
// "already applied by another apply". Before the plan's lock: 12 of 12
// rounds compensated twice.
func TestApplyRaceProcesses(t *testing.T) {
	t.Parallel()
	bin := buildOpctl(t, "")
	for _, delay := range []time.Duration{300 * time.Millisecond, 2 * time.Second} {
		t.Run(delay.String(), func(t *testing.T) {
			w := testenv.NewWMS(t, delay)
			f, args := faultFixture(t, w, "5s")
			const rounds = 12
			var doubles, lost int
			start := time.Now()
			for round := range rounds {
				w.Reset()
				w.SetAbandon(false)
				plan := planF1(t, f, bin, args)
				p := startOpctl(t, bin, append(args, "repair", "apply", plan, "--yes")...)
				select {
				case <-w.Entered:
				case <-time.After(30 * time.Second):
					t.Fatalf("round %d: no POST:\n%s", round, p.stderr)
				}
				code2, out2, err2 := execOpctl(t, bin, nil, append(args, "repair", "apply", plan, "--yes")...)
				code1 := p.wait(t)
				_, posts, effects := w.Counts()
				switch {
				case effects > 1:
					doubles++
				case effects == 0:
					lost++
				}
				// On a loaded machine the second process may start only
				// once the first finished: it then says "already applied"
				// without "by another apply", which is as true.
				if code1 != 0 || code2 != 0 || effects != 1 || posts != 1 || f.auditOutcomes(t) != "applied" ||
					!strings.Contains(out2, "already applied") {
					t.Errorf("round %d: exits %d and %d, %d POSTs, %d effects, audit %q\nsecond:\n%s%s\nfirst:\n%s", round, code1, code2, posts, effects, f.auditOutcomes(t), out2, err2, p.stderr)
				}
			}
			t.Logf("downstream %s: %d rounds, %d double effects, %d lost, %s", delay, rounds, doubles, lost, time.Since(start).Round(time.Millisecond))
		})
	}
}

// `opctl repair apply` killed by SIGINT or SIGKILL at a random point of its
// compensation POST (the downstream takes 0.5 s; half the rounds it goes
// on after its caller left, half it gives up), then applied again at once
// until it says applied: the lock count drops exactly once in every
// round. Before: SIGINT 5 of 12, SIGKILL 11 of 20 rounds compensated twice.
func TestApplyKilledDuringPOST(t *testing.T) {
	t.Parallel()
	bin := buildOpctl(t, "")
	const delay = 500 * time.Millisecond
	const timeout = 2 * time.Second
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel() // a database, a cluster and a downstream each: mostly waits
			w := testenv.NewWMS(t, delay)
			f, args := faultFixture(t, w, timeout.String())
			const rounds = 20
			var doubles, lost, refusals, reapplies int
			var stopAfter time.Duration
			start := time.Now()
			for round := range rounds {
				w.Reset()
				w.SetAbandon(round%2 == 1)
				plan := planF1(t, f, bin, args)
				p := startOpctl(t, bin, append(args, "repair", "apply", plan, "--yes")...)
				select {
				case <-w.Entered:
				case <-time.After(30 * time.Second):
					t.Fatalf("round %d: no POST:\n%s", round, p.stderr)
				}
				time.Sleep(time.Duration(rand.Int64N(int64(delay * 6 / 5))))
				sent := time.Now()
				_ = p.cmd.Process.Signal(sig)
				code := p.wait(t)
				stopAfter = max(stopAfter, time.Since(sent))
				if sig == syscall.SIGINT && code != ExitInterrupted && code != 0 {
					t.Errorf("round %d: SIGINT: exit %d\n%s", round, code, p.stderr)
				}
				done := code == 0
				for try := 0; !done && try < 5; try++ {
					reapplies++
					c, out, errOut := execOpctl(t, bin, nil, append(args, "repair", "apply", plan, "--yes")...)
					switch {
					case c == 0 && (strings.Contains(out, "applied 1/1") || strings.Contains(out, "already applied")):
						done = true
					case c == ExitRefused && strings.Contains(errOut, "in flight"):
						refusals++
						time.Sleep(time.Second)
					default:
						t.Fatalf("round %d: re-apply: exit %d\n%s\n%s", round, c, out, errOut)
					}
				}
				time.Sleep(delay) // an abandoned request still running ends
				_, _, effects := w.Counts()
				switch {
				case effects > 1:
					doubles++
				case effects == 0:
					lost++
				}
				if !done || effects != 1 || f.auditOutcomes(t) != "applied" {
					t.Errorf("round %d (%s, downstream abandons %v): done %v, %d effects, audit %q", round, sig, round%2 == 1, done, effects, f.auditOutcomes(t))
				}
			}
			t.Logf("%s: %d rounds, %d double effects, %d lost, %d re-applies (%d refused as in flight), slowest exit after the signal %s, %s",
				sig, rounds, doubles, lost, reapplies, refusals, stopAfter.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		})
	}
}

// Kafka that stops answering in the middle of a republish (the broker
// takes the produce request and then neither writes nor answers until it
// thaws; or writes it and its answer is lost): `repair apply --timeout 3s`
// ends within its timeout (a SIGINT within a second) with "Kafka
// unreachable" and the republish recorded unknown, not failed; once Kafka
// answers again, applying the plan again finds the record in the partition
// instead of sending it twice. Before: the apply ran 12-19 s past its last
// message and the record existed twice.
func TestRepublishKafkaFrozen(t *testing.T) {
	t.Parallel()
	bin := buildOpctl(t, "")
	const timeout = 3 * time.Second
	for _, c := range []struct {
		name   string
		held   bool // the broker holds the request (written at the thaw), else writes it at once
		signal bool // SIGINT half a second into the freeze instead of the timeout
	}{
		{"request held, timeout", true, false},
		{"answer lost, timeout", false, false},
		{"request held, SIGINT", true, true},
		{"answer lost, SIGINT", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, fz := testenv.NewFreezableKafka(t, map[string]int32{"settlement-event": 8})
			f := repairFixture(t)
			f.k = k
			ts := f.createdAt("SELECT created_at FROM biz_operation WHERE biz_id = 'PAY-4'")
			part, off := f.produce("PAY-4", "m-4", ts)
			f.db.Exec(t, "UPDATE biz_operation SET src_partition = ?, src_offset = ? WHERE biz_id = 'PAY-4'", part, off)
			k.Commit(t, "settlement-consumer", "settlement-event", part, off+1)
			args := []string{"--config", f.cfg, "--mysql-dsn", f.db.DSN, "--brokers", strings.Join(k.Brokers, ","), "--timeout", timeout.String()}
			plan := filepath.Join(t.TempDir(), "plan.json")
			if code, out, errOut := execOpctl(t, bin, nil, append(args, "repair", "plan", "PAY-4", "--reason", "frozen kafka", "--out", plan)...); code != 0 || !strings.Contains(out, "republish") {
				t.Fatalf("plan: exit %d\n%s\n%s", code, out, errOut)
			}
			before := redriveEnd(t, f, "settlement-event", "PAY-4")

			frozen := make(chan time.Time, 1)
			k.Cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				k.Cluster.DropControl() // once: the re-apply's produce (if any) goes through
				fz.Freeze()
				frozen <- time.Now()
				if c.held {
					k.Cluster.SleepControl(fz.Wait)
				}
				return nil, nil, false // then handled as usual: written
			})
			p := startOpctl(t, bin, append(args, "repair", "apply", plan, "--yes")...)
			var at time.Time
			select {
			case at = <-frozen:
			case <-p.done:
				t.Fatalf("the apply ended before its republish:\n%s", p.stderr)
			case <-time.After(30 * time.Second):
				t.Fatal("no produce within 30 s")
			}
			if c.signal {
				time.Sleep(500 * time.Millisecond)
				at = time.Now()
				_ = p.cmd.Process.Signal(syscall.SIGINT)
			}
			code := p.wait(t)
			took := time.Since(at)
			errOut := p.stderr.String()
			wantCode, bound := ExitPartial, timeout+2*time.Second
			if c.signal {
				wantCode, bound = ExitInterrupted, time.Second
			}
			if code != wantCode || took > bound {
				t.Errorf("exit %d after %s (want %d within %s):\n%s", code, took.Round(time.Millisecond), wantCode, bound, errOut)
			}
			if !c.signal && !strings.Contains(errOut, "Kafka unreachable") {
				t.Errorf("the error does not say Kafka unreachable:\n%s", errOut)
			}
			var outcome, attempt string
			_ = f.db.SQL.QueryRow("SELECT outcome FROM opctl_audit WHERE action_index = 2").Scan(&outcome)
			_ = f.db.SQL.QueryRow("SELECT IFNULL(GROUP_CONCAT(outcome), '') FROM opctl_audit_attempt").Scan(&attempt)
			if outcome != "publishing" || attempt != "unknown" {
				t.Errorf("after the frozen send: audit %q, attempts %q; want publishing, unknown", outcome, attempt)
			}

			fz.Thaw()
			time.Sleep(300 * time.Millisecond) // a held request lands
			code2, out2, err2 := execOpctl(t, bin, nil, append(args, "repair", "apply", plan, "--yes")...)
			if code2 != 0 || !strings.Contains(out2, "applied 2/2") {
				t.Fatalf("re-apply: exit %d\n%s\n%s", code2, out2, err2)
			}
			n := copies(t, f, k, part, before, plan)
			if n != 1 {
				t.Errorf("the record exists %d times", n)
			}
			t.Logf("%s: exit %d after %s (timeout %s); the record exists %d time(s); re-apply: %s", c.name, code, took.Round(time.Millisecond), timeout, n,
				lineWith(out2, "earlier apply"))
		})
	}
}

// copies counts the records carrying the plan's opctl-plan header in the
// redrive partition from offset from.
func copies(t *testing.T, f *fixture, k *testenv.Kafka, _ int32, from int64, planFile string) int {
	t.Helper()
	raw, err := os.ReadFile(planFile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plans.Decode(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	r := kafkasrc.New(config.Kafka{Brokers: k.Brokers, Version: "3.5.0"}, 5*time.Second)
	defer r.Close()
	part, _ := sources.PartitionFor("murmur2", []byte("PAY-4"), f.parts)
	n := 0
	for {
		off, found, err := r.FindPublished(context.Background(), "settlement-event", part, from, map[string]string{plans.HeaderPlan: p.ID})
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			return n
		}
		n++
		from = off + 1
	}
}

// lineWith is the first line of s containing sub ("" none).
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
