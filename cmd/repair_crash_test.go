package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	kafkasrc "github.com/opctl-dev/opctl/sources/kafka"
	"github.com/opctl-dev/opctl/sources/schema"
)

// failpointEnv is the variable a binary built with -tags failpoint reads:
// repair.FailpointEnv, which only a failpoint build has (repair/failpoint.go),
// so this test, built without the tag, spells it out.
const failpointEnv = "OPCTL_TEST_FAILPOINT"

var (
	opctlBinMu sync.Mutex
	opctlBins  = map[string]string{}
)

// buildOpctl builds the opctl binary once per test run and build tags, for
// tests that need a real process to kill (tags "failpoint") or the shipped
// binary itself (tags "": BenchmarkWhere's process run).
func buildOpctl(t testing.TB, tags string) string {
	t.Helper()
	opctlBinMu.Lock()
	defer opctlBinMu.Unlock()
	if bin, ok := opctlBins[tags]; ok {
		return bin
	}
	dir, err := os.MkdirTemp("", "opctl-bin-") // removed by TestMain
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "opctl")
	args := []string{"build", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, "github.com/opctl-dev/opctl")...)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", tags, err, out)
	}
	opctlBins[tags] = bin
	return bin
}

// execOpctl runs the built binary with extra environment; it returns the
// exit code (-1 when killed by a signal), stdout and stderr.
func execOpctl(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	c := exec.Command(bin, args...)
	c.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errOut.String()
	}
	t.Fatalf("run %s: %v", bin, err)
	return 0, "", ""
}

// crashCase is one plan and how to check its end state.
type crashCase struct {
	name  string
	biz   string
	kill  []string
	setup func(t *testing.T, f *fixture, wms *testenv.WMS)
	// snapshot is compared between an uninterrupted apply and every
	// killed-then-reapplied one.
	snapshot func(t *testing.T, f *fixture, wms *testenv.WMS) string
	config   string
	topic    string
}

func settlementSnapshot(biz string) func(*testing.T, *fixture, *testenv.WMS) string {
	return func(t *testing.T, f *fixture, _ *testenv.WMS) string {
		q := func(query string) string {
			rows, err := f.db.SQL.Query(query, biz)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var b strings.Builder
			cols, _ := rows.Columns()
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			for rows.Next() {
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				for _, v := range vals {
					if bb, ok := v.([]byte); ok {
						v = string(bb)
					}
					fmt.Fprintf(&b, "%v|", v)
				}
				b.WriteString("\n")
			}
			return b.String()
		}
		return q("SELECT status, version, IFNULL(owner,'') FROM biz_operation WHERE biz_id = ?") +
			q("SELECT account_id, delta, kind, reverses_id FROM balance_journal WHERE biz_id = ? ORDER BY kind, reverses_id, id") +
			q("SELECT b.balance FROM account_balance b JOIN balance_journal j ON j.account_id = b.account_id WHERE j.biz_id = ? LIMIT 1") +
			q("SELECT direction, amount FROM ledger_entry WHERE biz_order_id = ?") +
			q("SELECT action_index, action, outcome FROM opctl_audit WHERE biz_id = ? ORDER BY action_index")
	}
}

func TestRepairApplyCrashSafety(t *testing.T) {
	t.Parallel()
	bin := buildOpctl(t, "failpoint")
	cases := []crashCase{
		{
			name: "two reversals", biz: "PAY-6", config: "settlement", topic: "settlement-event",
			kill:     []string{"before-commit:1", "after-commit:1", "before-commit:2", "after-commit:2"},
			snapshot: settlementSnapshot("PAY-6"),
		},
		{
			name: "advance and republish", biz: "PAY-4", config: "settlement", topic: "settlement-event",
			kill: []string{"before-commit:1", "after-commit:1", "before-commit:2", "after-commit:2", "before-publish:2", "after-publish:2"},
			setup: func(t *testing.T, f *fixture, _ *testenv.WMS) {
				ts := f.createdAt("SELECT created_at FROM biz_operation WHERE biz_id = 'PAY-4'")
				p, off := f.produce("PAY-4", "m-4", ts)
				f.db.Exec(t, "UPDATE biz_operation SET src_partition = ?, src_offset = ? WHERE biz_id = 'PAY-4'", p, off)
				f.k.Commit(t, "settlement-consumer", "settlement-event", p, off+1)
			},
			snapshot: settlementSnapshot("PAY-4"),
		},
		{
			name: "compensate", biz: "F-1", config: "fulfilment", topic: "order-fulfilment",
			kill: []string{"before-commit:1", "after-commit:1", "before-call:1", "after-call:1"},
			snapshot: func(t *testing.T, f *fixture, w *testenv.WMS) string {
				var audit string
				_ = f.db.SQL.QueryRow("SELECT IFNULL(GROUP_CONCAT(CONCAT(action_index, action, outcome)), '') FROM opctl_audit").Scan(&audit)
				locks, posts, _ := w.Counts()
				return fmt.Sprintf("locks %d posts %d audit %s", locks, posts, audit)
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// The uninterrupted apply is the reference.
			ref, refEnd := runCrashCase(t, bin, c, "")
			for _, kill := range c.kill {
				got, end := runCrashCase(t, bin, c, kill)
				if got != ref {
					t.Errorf("%s: killed at %s then re-applied:\n%s\nuninterrupted:\n%s", c.name, kill, got, ref)
				}
				// No duplicate publish, even when the kill fell between the
				// send and its 'published' record: the re-apply looks the
				// record up in the partition before sending it again.
				if extra := end - refEnd; extra != 0 {
					t.Errorf("%s: killed at %s: %d more record(s) published than without the kill", c.name, kill, extra)
				}
				t.Logf("killed at %-16s → same end state; %d duplicate record(s)", kill, end-refEnd)
			}
		})
	}
}

// runCrashCase builds the fixture, plans, applies with the failpoint (the
// process must die), applies again without it, and returns the snapshot and
// the log end of the redrive partition. An empty kill applies once.
func runCrashCase(t *testing.T, bin string, c crashCase, kill string) (string, int64) {
	t.Helper()
	var w *testenv.WMS
	var f *fixture
	switch c.config {
	case "fulfilment":
		w = testenv.NewWMS(t, 0)
		f = newFixture(t, "fulfilment", c.topic, "${OPCTL_WMS_URL:-http://127.0.0.1:8082}", w.URL,
			"/wms/locks?biz_id={biz_id}\"", "/wms/locks?biz_id={biz_id}\"\n        compensate: \""+w.URL+"/wms/compensate?biz_id={biz_id}\"")
		for _, s := range schema.AuditDDL("") {
			f.db.Exec(t, s)
		}
	default:
		f = repairFixture(t)
	}
	if c.setup != nil {
		c.setup(t, f, w)
	}
	args := []string{"--config", f.cfg, "--mysql-dsn", f.db.DSN, "--brokers", strings.Join(f.k.Brokers, ","), "--timeout", "5s"}
	plan := filepath.Join(t.TempDir(), "plan.json")
	if code, _, errOut := execOpctl(t, bin, nil, append(args, "repair", "plan", c.biz, "--reason", "crash test", "--out", plan)...); code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	if kill != "" {
		code, _, errOut := execOpctl(t, bin, []string{failpointEnv + "=" + kill}, append(args, "repair", "apply", plan, "--yes")...)
		if code != -1 || !strings.Contains(errOut, "TEST FAILPOINT "+kill) {
			t.Fatalf("%s: the apply was not killed: exit %d %s", kill, code, errOut)
		}
	}
	code, out, errOut := execOpctl(t, bin, nil, append(args, "repair", "apply", plan, "--yes")...)
	if code != 0 || !strings.Contains(out, "applied") {
		t.Fatalf("%s: re-apply: exit %d\n%s\n%s", kill, code, out, errOut)
	}
	// Once more: nothing left to do.
	if code, out, _ := execOpctl(t, bin, nil, append(args, "repair", "apply", plan, "--yes")...); code != 0 || !strings.Contains(out, "already applied") {
		t.Fatalf("%s: third apply: exit %d %s", kill, code, out)
	}
	end := redriveEnd(t, f, c.topic, c.biz)
	if kill == "after-publish:2" {
		// The record the killed apply sent is the one the plan's audit
		// row names: found, not sent again.
		if last := readRecord(t, f, c.topic, c.biz, end-1); last.Headers[plans.HeaderPlan] == "" {
			t.Errorf("the last record is not the republish: %v", last.Headers)
		}
	}
	return c.snapshot(t, f, w), end
}

func readRecord(t *testing.T, f *fixture, topic, biz string, off int64) *sources.Message {
	t.Helper()
	p, _ := sources.PartitionFor("murmur2", []byte(biz), f.parts)
	kr := kafkasrc.New(config.Kafka{Brokers: f.k.Brokers, Version: "3.5.0"}, 5*time.Second)
	defer kr.Close()
	loc, err := kr.Locate(context.Background(), sources.LocateRequest{Topic: topic, Partition: p, Offset: off})
	if err != nil || loc.Message == nil {
		t.Fatalf("read %s/%d@%d: %v %+v", topic, p, off, err, loc)
	}
	return loc.Message
}

// redriveEnd is the log end offset of the partition a biz id's records go
// to.
func redriveEnd(t *testing.T, f *fixture, topic, biz string) int64 {
	t.Helper()
	p, err := sources.PartitionFor("murmur2", []byte(biz), f.parts)
	if err != nil {
		t.Fatal(err)
	}
	kr := kafkasrc.New(config.Kafka{Brokers: f.k.Brokers, Version: "3.5.0"}, 5*time.Second)
	defer kr.Close()
	g, err := kr.Group(context.Background(), topic, "nobody")
	if err != nil {
		t.Fatal(err)
	}
	return g.Partitions[p].LogEnd
}
