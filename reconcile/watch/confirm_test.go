package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// snapDB is a DB whose batch read (ReadOperation) and snapshot read
// disagree as a read that tears a consumer's transaction and one that
// does not: "torn" is WORKING, an hour old, to ReadOperation (a stuck
// target) and DONE in a snapshot; "stuck" is WORKING to both; "done" is
// DONE to both; "young" is WORKING for a minute; ids from "nf" on have no
// row. fail makes every snapshot read fail as a server that cannot start
// one; partial makes those of the ids in it partial.
type snapDB struct {
	now     time.Time
	mu      sync.Mutex
	snaps   []string
	fail    error
	partial map[string]bool
}

func (d *snapDB) row(id string, snapshot bool) sources.DBEvidence {
	ev := sources.DBEvidence{Now: d.now}
	age := time.Hour
	status := ""
	switch id {
	case "torn":
		status = "WORKING"
		if snapshot {
			status = "DONE"
		}
	case "stuck":
		status = "WORKING"
	case "young":
		status, age = "WORKING", time.Minute
	case "done":
		status = "DONE"
	}
	if status != "" {
		upd := d.now.Add(-age)
		ev.State = sources.StateRow{Found: true, Key: id, Status: status, UpdatedAt: &upd, CreatedAt: &upd}
	}
	return ev
}

func (d *snapDB) ReadOperation(_ context.Context, _ *config.Pipeline, _ string, id string) (sources.DBEvidence, error) {
	return d.row(id, false), nil
}

func (d *snapDB) ReadOperationSnapshot(_ context.Context, _ *config.Pipeline, _ string, id string) (sources.DBEvidence, error) {
	d.mu.Lock()
	d.snaps = append(d.snaps, id)
	fail, partial := d.fail, d.partial[id]
	d.mu.Unlock()
	switch {
	case fail != nil:
		return sources.DBEvidence{}, fail
	case partial:
		return d.row(id, true), partialErr{}
	}
	return d.row(id, true), nil
}

func (d *snapDB) read() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := slices.Clone(d.snaps)
	slices.Sort(out)
	d.snaps = nil
	return out
}

// partialErr is a read that answered in part (sources/mysql's
// *PartialError says so the same way).
type partialErr struct{}

func (partialErr) Error() string { return "mysql test: partial read: audit query: boom" }
func (partialErr) Partial() bool { return true }

// TestBatchTriageConfirms: of a batch, only the operations whose report is
// a target (here stuck by --older-than) are read again, each in one
// snapshot, and the snapshot's report replaces the batch's (the torn
// read's target is no target); a non-target is never read again; a
// snapshot that cannot be read, or reads partially, leaves the batch's
// target as it was, and says so once until a confirm is read again.
func TestBatchTriageConfirms(t *testing.T) {
	p := &config.Pipeline{Name: "pay", State: &config.State{Table: "ops", Key: "id", Status: "status", UpdatedAt: "updated_at", CreatedAt: "created_at",
		Initial: []string{"NEW"}, Terminal: []string{"DONE"}}}
	ids := []string{"torn", "done", "stuck", "young", "nf1"}
	cases := []struct {
		name string
		opts []BatchOptions
		// olderThan is the --older-than a report is judged a target by.
		olderThan time.Duration
		fail      error
		partial   map[string]bool
		// reread are the ids read again in a snapshot; targets those
		// whose returned report is a target.
		reread, targets []string
		said            string
	}{
		{name: "targets confirmed", opts: []BatchOptions{{OlderThan: 5 * time.Minute}}, olderThan: 5 * time.Minute,
			reread: []string{"stuck", "torn"}, targets: []string{"stuck"}},
		{name: "no options: the default --older-than", olderThan: reconcile.DefaultOlderThan,
			reread: []string{"stuck", "torn"}, targets: []string{"stuck"}},
		{name: "older-than 30s: young is stuck too", opts: []BatchOptions{{OlderThan: 30 * time.Second}}, olderThan: 30 * time.Second,
			reread: []string{"stuck", "torn", "young"}, targets: []string{"stuck", "young"}},
		{name: "older-than 2h: no target, nothing read again", opts: []BatchOptions{{OlderThan: 2 * time.Hour}}, olderThan: 2 * time.Hour},
		{name: "confirm off", opts: []BatchOptions{{OlderThan: 5 * time.Minute, NoConfirm: true}}, olderThan: 5 * time.Minute,
			targets: []string{"stuck", "torn"}},
		{name: "snapshot fails: the batch's verdicts stand", opts: []BatchOptions{{OlderThan: 5 * time.Minute}}, olderThan: 5 * time.Minute,
			fail:   errors.New("mysql 127.0.0.1:3306: START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY: refused"),
			reread: []string{"stuck", "torn"}, targets: []string{"stuck", "torn"}, said: "refused"},
		{name: "a partial confirm keeps the batch's report", opts: []BatchOptions{{OlderThan: 5 * time.Minute}}, olderThan: 5 * time.Minute,
			partial: map[string]bool{"torn": true},
			reread:  []string{"stuck", "torn"}, targets: []string{"stuck", "torn"}, said: "torn: read partially (mysql: mysql test: partial read: audit query: boom)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := &snapDB{now: time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC), fail: c.fail, partial: c.partial}
			col := &sources.Collector{DB: db, KafkaMissing: "not configured", Timeout: time.Second}
			logs := &syncBuf{}
			opts := c.opts
			if len(opts) > 0 {
				opts[0].Log = logs
			}
			tb := BatchTriage(col, []*config.Pipeline{p}, opts...)
			for round := range 2 {
				reps, err := tb(context.Background(), "pay", ids)
				if err != nil {
					t.Fatal(err)
				}
				if got := db.read(); !slices.Equal(got, c.reread) {
					t.Errorf("round %d: read again in a snapshot %v, want %v", round, got, c.reread)
				}
				var targets []string
				for i, rep := range reps {
					if rep.BizID != ids[i] {
						t.Fatalf("report %d is %s's, want %s's", i, rep.BizID, ids[i])
					}
					if o, _ := Judge(p, rep, *rep.DBNow, c.olderThan); o.Target {
						targets = append(targets, rep.BizID)
					}
				}
				slices.Sort(targets)
				if !slices.Equal(targets, c.targets) {
					t.Errorf("round %d: targets %v, want %v", round, targets, c.targets)
				}
			}
			out := textOf(logs)
			switch {
			case c.said == "" && out != "":
				t.Errorf("said %q, want nothing", out)
			case c.said != "" && (strings.Count(out, "watch: confirm") != 1 || !strings.Contains(out, c.said) || !strings.Contains(out, "the batch's verdicts stand")):
				t.Errorf("said %q, want it once, with %q", out, c.said)
			}
		})
	}
}

// TestConfirmSaidOnceUntilRead: a confirm that fails is said once however
// many fail after it; one read whole says so, and the next failure is
// said again.
func TestConfirmSaidOnceUntilRead(t *testing.T) {
	p := &config.Pipeline{Name: "pay", State: &config.State{Table: "ops", Key: "id", Status: "status", UpdatedAt: "updated_at", Terminal: []string{"DONE"}}}
	db := &snapDB{now: time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)}
	col := &sources.Collector{DB: db, KafkaMissing: "not configured", Timeout: time.Second}
	logs := &syncBuf{}
	tb := BatchTriage(col, []*config.Pipeline{p}, BatchOptions{OlderThan: time.Minute, Log: logs})
	down := errors.New("mysql down")
	for i, fail := range []error{down, down, down, nil, nil, down} {
		db.mu.Lock()
		db.fail = fail
		db.mu.Unlock()
		if _, err := tb(context.Background(), "pay", []string{"stuck"}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	out := textOf(logs)
	if got := strings.Count(out, "the batch's verdicts stand"); got != 2 {
		t.Errorf("a failed confirm said %d times, want 2 (once, then again after one read):\n%s", got, out)
	}
	if got := strings.Count(out, "read again"); got != 1 {
		t.Errorf("confirm read again said %d times, want 1:\n%s", got, out)
	}
}

// TestWatchNeverFlagsATornRead: a watch whose batch triage reads an
// operation torn (a target) and its snapshot whole (none) never flags it,
// and flags one that is a target in the snapshot too.
func TestWatchNeverFlagsATornRead(t *testing.T) {
	p := &config.Pipeline{Name: "pay", State: &config.State{Table: "ops", Key: "id", Status: "status", UpdatedAt: "updated_at", Terminal: []string{"DONE"}}}
	db := &snapDB{now: time.Now()}
	col := &sources.Collector{DB: db, KafkaMissing: "not configured", Timeout: time.Second}
	src := &fakeSource{}
	src.push(Change{Pipeline: "pay", BizID: "torn"}, Change{Pipeline: "pay", BizID: "stuck"}, Change{Pipeline: "pay", BizID: "done"})
	events, logs := &syncBuf{}, &syncBuf{}
	w := &Watcher{Pipelines: []*config.Pipeline{p}, Source: src, Interval: 10 * time.Millisecond, Settle: -1, Events: events, Log: logs,
		OlderThan:   5 * time.Minute,
		TriageBatch: BatchTriage(col, []*config.Pipeline{p}, BatchOptions{OlderThan: 5 * time.Minute, Log: logs})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	// torn comes first in the round's one batch: once stuck is flagged,
	// torn's report was applied.
	eventually(t, "stuck flagged", func() bool { return len(events.lines()) >= 1 })
	cancel()
	<-done
	lines := events.lines()
	if len(lines) != 1 || lines[0].Event != "flagged" || lines[0].BizID != "stuck" {
		t.Errorf("events %+v: want stuck flagged, and torn never", lines)
	}
	if got := fmt.Sprint(w.Targets()); strings.Contains(got, "torn") {
		t.Errorf("targets %s: torn is flagged", got)
	}
	if got := db.read(); !slices.Equal(got, []string{"stuck", "torn"}) {
		t.Errorf("read again in a snapshot: %v, want the two targets of the batch", got)
	}
}

// textOf is what was written to b.
func textOf(b *syncBuf) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
