package lab_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/lab/testenv"
)

// pollSeed003 runs seed 003's incident on its own schema (the
// order-wrongly-skipped-seed scenario: 8821's SHIPPED written to the order
// row, then its PAID recorded SKIPPED in idempotent, which has no biz_id)
// under `opctl watch --source poll`, started before the incident with an
// --older-than longer than the test (no timer) and a first sweep that
// finds nothing yet, and returns 8821's flagged line. edit, when set,
// changes the lab's configuration the watch reads.
func pollSeed003(t *testing.T, edit func(t *testing.T, yaml string) string) (watchLine, *runningWatch) {
	t.Helper()
	testenv.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	env := startSeedLab(ctx, t, testenv.RootDSN())
	dir := t.TempDir()
	cfgPath := env.ConfigPath
	if edit != nil {
		b, err := os.ReadFile(env.ConfigPath)
		if err != nil {
			t.Fatal(err)
		}
		cfgPath = filepath.Join(dir, "opctl.yaml")
		if err := os.WriteFile(cfgPath, []byte(edit(t, string(b))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w := startWatch(ctx, t, cfgPath, filepath.Join(dir, "events.jsonl"), "--pipeline", "orders_seed", "--source", "poll",
		"--interval", "250ms", "--older-than", "10m", "--since", "1d", "--state", "none")
	t.Cleanup(func() { w.halt(t) })
	if strings.Contains(w.stderr.String(), "polling reads none of its tables") || strings.Contains(w.stderr.String(), "Kafka cannot be read") {
		t.Fatalf("the watch does not poll seed 003's records:\n%s", w.stderr)
	}
	for _, l := range readEvents(t, w.events) {
		if l.Event == "flagged" {
			t.Fatalf("flagged before the incident: %+v", l)
		}
	}
	scenario, err := lab.Select([]string{"order-wrongly-skipped-seed"})
	if err != nil {
		t.Fatal(err)
	}
	results, err := env.Run(ctx, scenario, nil)
	if err != nil || results[0].Err != nil {
		t.Fatalf("scenario: %v %v", err, results[0].Err)
	}
	// A poll of the record flags it within --interval and a triage; 20 s
	// leaves room for a loaded machine. Before polling read the records,
	// only a poll that read the order row after the record flagged it.
	l := waitFlagged(t, w, "orders_seed", "8821", 20*time.Second)
	t.Logf("flagged %s %s %s from %s (%s at %s, committed %s), latency_ms %v", l.Pipeline, l.BizID, l.Verdict, l.Cause.Source,
		deref(l.Cause.Table), deref(l.Cause.Position), deref(l.Cause.CommittedAt), deref64(l.LatencyMS))
	if l.Verdict != "WRONGLY_SKIPPED" || l.Cause.Source != "poll" || l.LatencyMS == nil || l.Cause.CommittedAt == nil {
		t.Errorf("8821: %+v: want WRONGLY_SKIPPED from a poll (not a sweep nor the timer), with its commit time and latency", l)
	}
	for _, l := range readEvents(t, w.events) {
		if l.Event == "flagged" && l.BizID != "8821" {
			t.Errorf("flagged %s %s: only 8821 is the incident (8822 was refunded, 8823 and 8824 are complete)", l.BizID, l.Verdict)
		}
	}
	if s := w.stderr.String(); strings.Contains(s, "watch: poll: ") {
		t.Errorf("the poll could not map a record:\n%s", s)
	}
	return l, w
}

func deref64(p *int64) any {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// TestWatchPollingSeed003Records: seed 003's preset as it is (its orders
// table polled by updated_at, its SKIPPED records by created_at and mapped
// through their messages): a polling watch flags 8821 WRONGLY_SKIPPED from
// a poll, not from a sweep, although the order row is written before the
// record (docs/watch.md#polling). Which row is the cause depends on
// whether a poll read the order row before the record was written; when
// one poll reads both, the record is.
func TestWatchPollingSeed003Records(t *testing.T) {
	l, _ := pollSeed003(t, nil)
	if tb := deref(l.Cause.Table); !strings.HasSuffix(tb, "_seed003.idempotent") && !strings.HasSuffix(tb, "_seed003.orders") {
		t.Errorf("8821 caused by %s: want seed 003's idempotent or orders table", tb)
	}
}

// TestWatchPollingSeed003RecordsOnly: the same incident with the preset's
// entity.updated_at left out, so that polling reads only the SKIPPED
// records (no order row can be the cause): 8821 is flagged from the poll
// of idempotent, its cause the record msg-7391 (its created_at), mapped to
// 8821 through its message.
func TestWatchPollingSeed003RecordsOnly(t *testing.T) {
	l, _ := pollSeed003(t, recordsOnly)
	if !strings.HasSuffix(deref(l.Cause.Table), "_seed003.idempotent") || !strings.HasSuffix(deref(l.Cause.Position), "/msg-7391") {
		t.Errorf("8821 caused by %s at %s: want the record msg-7391 of seed 003's idempotent table", deref(l.Cause.Table), deref(l.Cause.Position))
	}
}

// recordsOnly edits the lab's configuration so that polling reads only
// orders_seed's SKIPPED records: its entity.updated_at left out.
func recordsOnly(t *testing.T, yaml string) string {
	i := strings.Index(yaml, "- name: orders_seed")
	line := "\n      updated_at: updated_at\n      lifecycle:"
	j := strings.Index(yaml[i+1:], line)
	if i < 0 || j < 0 {
		t.Fatalf("no entity.updated_at in orders_seed's block of the lab's configuration:\n%s", yaml)
	}
	j += i + 1
	return yaml[:j] + "\n      lifecycle:" + yaml[j+len(line):]
}

// TestWatchPollingSeed003RecordsThroughKafkaOutage: seed 003's SKIPPED
// record written while Kafka does not answer is held by the poll (its
// table's watermark stays at it) and mapped once Kafka is back: 8821 is
// flagged from the poll of the record, once, not given up
// (docs/watch.md#polling). The incident runs first, with no watch; its
// record is taken out, and written again during the outage under a
// polling watch that reads only the records (no order row can be the
// cause, --older-than longer than the test: no timer).
func TestWatchPollingSeed003RecordsThroughKafkaOutage(t *testing.T) {
	testenv.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	env := startSeedLab(ctx, t, testenv.RootDSN())
	scenario, err := lab.Select([]string{"order-wrongly-skipped-seed"})
	if err != nil {
		t.Fatal(err)
	}
	results, err := env.Run(ctx, scenario, nil)
	if err != nil || results[0].Err != nil {
		t.Fatalf("scenario: %v %v", err, results[0].Err)
	}
	db := env.Seed003.DB
	if r, err := db.ExecContext(ctx, "DELETE FROM idempotent WHERE msg_id = 'msg-7391' AND action = 'SKIPPED'"); err != nil {
		t.Fatal(err)
	} else if n, _ := r.RowsAffected(); n != 1 {
		t.Fatalf("the incident's record msg-7391: %d SKIPPED row(s), want 1", n)
	}
	b, err := os.ReadFile(env.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "opctl.yaml")
	if err := os.WriteFile(cfgPath, []byte(recordsOnly(t, string(b))), 0o600); err != nil {
		t.Fatal(err)
	}
	w := startWatch(ctx, t, cfgPath, filepath.Join(dir, "events.jsonl"), "--pipeline", "orders_seed", "--source", "poll",
		"--interval", "250ms", "--older-than", "10m", "--since", "1d", "--state", "none", "--timeout", "2s")
	t.Cleanup(func() { w.halt(t) })
	until := func(what string, f func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if f() {
				return
			}
		}
		b, _ := os.ReadFile(w.events)
		t.Fatalf("after 60s: %s\nevents:\n%s\nstderr:\n%s", what, b, w.stderr)
	}
	flagged := func() []watchLine {
		var out []watchLine
		for _, l := range readEvents(t, w.events) {
			if l.Event == "flagged" && l.BizID == "8821" {
				out = append(out, l)
			}
		}
		return out
	}
	if f := flagged(); len(f) != 0 {
		t.Fatalf("8821 flagged without its record: %+v", f[0])
	}
	restore := env.Cluster.Outage()
	defer restore()
	if _, err := db.ExecContext(ctx, "INSERT INTO idempotent (msg_id, action, created_at) VALUES ('msg-7391', 'SKIPPED', NOW(3))"); err != nil {
		t.Fatal(err)
	}
	until("the poll says the record waits for Kafka", func() bool { return strings.Contains(w.stderr.String(), "wait for Kafka") })
	// A few more polls while Kafka is down: the record is read again at
	// each, and stays unmapped.
	polls := strings.Count(w.stderr.String(), "wait for Kafka")
	time.Sleep(time.Second)
	if f := flagged(); len(f) != 0 || strings.Count(w.stderr.String(), "wait for Kafka") != polls {
		t.Fatalf("while Kafka is down: 8821 flagged %+v; stderr (the wait said once):\n%s", f, w.stderr)
	}
	back := time.Now()
	restore()
	l := waitFlagged(t, w, "orders_seed", "8821", 30*time.Second)
	t.Logf("flagged %s %s %s from %s (%s at %s), latency_ms %v, %v after Kafka was back (within the 100ms the test reads its events at)",
		l.Pipeline, l.BizID, l.Verdict, l.Cause.Source, deref(l.Cause.Table), deref(l.Cause.Position), deref64(l.LatencyMS), time.Since(back).Round(time.Millisecond))
	if l.Verdict != "WRONGLY_SKIPPED" || l.Cause.Source != "poll" || !strings.HasSuffix(deref(l.Cause.Table), "_seed003.idempotent") || !strings.HasSuffix(deref(l.Cause.Position), "/msg-7391") {
		t.Errorf("8821: %+v (%s at %s): want WRONGLY_SKIPPED from the poll of the record msg-7391", l, deref(l.Cause.Table), deref(l.Cause.Position))
	}
	until("the poll says Kafka answers again", func() bool { return strings.Contains(w.stderr.String(), "Kafka answers again") })
	// Polls after: the overlap reads the record again, not a change again.
	time.Sleep(time.Second)
	if f := flagged(); len(f) != 1 {
		t.Errorf("8821 flagged %d times, want once: %+v", len(f), f)
	}
	if s := w.stderr.String(); strings.Contains(s, "GIVING UP") || strings.Contains(s, "no message of") {
		t.Errorf("the record was given up or not found:\n%s", s)
	}
	t.Logf("stderr:\n%s", w.stderr)
}
