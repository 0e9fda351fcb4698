package watch

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// fenceWatch is a Watcher driven round by round without Run (no timers):
// its batch triage reads the fences from db first, as BatchTriage does
// (the unproven ones again after fenceWaits),
// then answers verdict(bizID, look) and counts the triages.
type fenceWatch struct {
	w       *Watcher
	events  *syncBuf
	mu      sync.Mutex
	triages map[string]int
	// second counts Hooks.SecondLook by result.
	second map[string]int
}

func newFenceWatch(p *config.Pipeline, db KeyReader, verdict func(bizID string, look int) inspect.Verdict) *fenceWatch {
	fw := &fenceWatch{events: &syncBuf{}, triages: map[string]int{}, second: map[string]int{}}
	fw.w = &Watcher{Pipelines: []*config.Pipeline{p}, Events: fw.events,
		Hooks: Hooks{SecondLook: func(r string) { fw.mu.Lock(); fw.second[r]++; fw.mu.Unlock() }},
		TriageBatch: func(ctx context.Context, _ string, ids []string) ([]inspect.Report, error) {
			if fr := fencesFrom(ctx); fr != nil {
				_ = fr.proveAll(ctx, db, fenceWaits)
			}
			reps := make([]inspect.Report, len(ids))
			fw.mu.Lock()
			defer fw.mu.Unlock()
			for i, id := range ids {
				fw.triages[id]++
				reps[i] = inspect.Report{BizID: id, Verdict: verdict(id, fw.triages[id])}
			}
			return reps, nil
		}}
	fw.w.tracker, fw.w.deadlines, fw.w.unsettled = NewTracker(), NewDeadlines(), map[Key]Cause{}
	return fw
}

// round looks at a round's changes as Run does.
func (fw *fenceWatch) round(cs []Change) {
	fw.w.lookAll(context.Background(), roundLookups(SourceBinlog, cs))
}

// secondLooks takes the second looks due (as Run's timer does, without
// waiting for binlogRecheck) and returns how many there were.
func (fw *fenceWatch) secondLooks() int {
	var ls []lookup
	fw.w.mu.Lock()
	for k, c := range fw.w.unsettled {
		ls = append(ls, lookup{k, c})
		delete(fw.w.unsettled, k)
	}
	fw.w.mu.Unlock()
	fw.w.lookAll(context.Background(), ls)
	return len(ls)
}

func (fw *fenceWatch) total() int {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	n := 0
	for _, v := range fw.triages {
		n += v
	}
	return n
}

var (
	ok       = inspect.Verdict{Code: "COMPLETE", Severity: inspect.SeverityOK}
	skipOK   = inspect.Verdict{Code: "SKIPPED_OK", Severity: inspect.SeverityOK}
	wrongly  = inspect.Verdict{Code: "WRONGLY_SKIPPED", Severity: inspect.SeverityAction}
	verFence = &fence{Table: "st", KeyCol: "biz_id", Key: "8822", Col: "version", Kind: fenceVersion, Before: "3", After: "4"}
)

// A binlog change that triaged to no target is looked at again only when
// the fence read before its triage did not prove the change visible; the
// second look still flags what the first read before the commit missed.
func TestWatcherFencedSecondLook(t *testing.T) {
	p := &config.Pipeline{Name: "orders"}
	change := func(f *fence) Change {
		return Change{Pipeline: "orders", BizID: "8822", Table: "st", fence: f}
	}
	for _, tc := range []struct {
		name string
		// rows is what the fence read finds (version by key); later,
		// when set, what the reads after the first find.
		rows, later map[string][]string
		// rounds are the rounds' changes before the second looks.
		rounds [][]Change
		// verdict by look: the first read before the commit or not.
		verdicts    []inspect.Verdict
		wantSecond  int
		wantTriages int
		wantEvents  []string
		// wantCounted is Hooks.SecondLook's count by result: each binlog
		// look (not a second look) whose triage found no target.
		wantCounted map[string]int
	}{
		{"seen: the change's version read back", map[string][]string{"8822": {"4"}}, nil, [][]Change{{change(verFence)}},
			[]inspect.Verdict{ok}, 0, 1, nil, map[string]int{SecondLookFenced: 1}},
		{"seen: the first triage finds the target", map[string][]string{"8822": {"4"}}, nil, [][]Change{{change(verFence)}},
			[]inspect.Verdict{wrongly}, 0, 1, []string{"flagged WRONGLY_SKIPPED"}, map[string]int{}},
		{"older version read back: the commit not visible, second look flags", map[string][]string{"8822": {"3"}}, nil, [][]Change{{change(verFence)}},
			[]inspect.Verdict{skipOK, wrongly}, 1, 2, []string{"flagged WRONGLY_SKIPPED"}, map[string]int{SecondLookLooked: 1}},
		{"no fence (an evidence-only change): second look", map[string][]string{"8822": {"4"}}, nil, [][]Change{{change(nil)}},
			[]inspect.Verdict{skipOK, wrongly}, 1, 2, []string{"flagged WRONGLY_SKIPPED"}, map[string]int{SecondLookLooked: 1}},
		{"fenced, but an earlier round's second look is pending: kept", map[string][]string{"8822": {"4"}}, nil, [][]Change{{change(nil)}, {change(verFence)}},
			[]inspect.Verdict{skipOK, skipOK, wrongly}, 1, 3, []string{"flagged WRONGLY_SKIPPED"}, map[string]int{SecondLookLooked: 2}},
		{"fenced in two rounds, nothing pending: no second look, counted twice", map[string][]string{"8822": {"4"}}, nil, [][]Change{{change(verFence)}, {change(verFence)}},
			[]inspect.Verdict{skipOK, skipOK}, 0, 2, nil, map[string]int{SecondLookFenced: 2}},
		{"the fence read fails: second look", nil, nil, [][]Change{{change(verFence)}},
			[]inspect.Verdict{skipOK, wrongly}, 1, 2, []string{"flagged WRONGLY_SKIPPED"}, map[string]int{SecondLookLooked: 1}},
		{"the commit visible at the fence's second read: no second look", map[string][]string{"8822": {"3"}}, map[string][]string{"8822": {"4"}}, [][]Change{{change(verFence)}},
			[]inspect.Verdict{ok}, 0, 1, nil, map[string]int{SecondLookFenced: 1}},
		{"never visible in the fence's reads: second look", map[string][]string{"8822": {"3"}}, map[string][]string{"8822": {"3"}}, [][]Change{{change(verFence)}},
			[]inspect.Verdict{skipOK, wrongly}, 1, 2, []string{"flagged WRONGLY_SKIPPED"}, map[string]int{SecondLookLooked: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var db KeyReader = &fakeKeys{rows: tc.rows}
			switch {
			case tc.rows == nil:
				db = &fakeKeys{err: fmt.Errorf("mysql down")}
			case tc.later != nil:
				db = &seqKeys{reads: [][]map[string][]string{{tc.rows}, {tc.later}}}
			}
			fw := newFenceWatch(p, db, func(_ string, look int) inspect.Verdict { return tc.verdicts[min(look, len(tc.verdicts))-1] })
			for _, r := range tc.rounds {
				fw.round(r)
			}
			if n := fw.secondLooks(); n != tc.wantSecond {
				t.Errorf("%d second looks, want %d", n, tc.wantSecond)
			}
			if n := fw.secondLooks(); n != 0 {
				t.Errorf("%d third looks", n)
			}
			if n := fw.total(); n != tc.wantTriages {
				t.Errorf("%d triages, want %d", n, tc.wantTriages)
			}
			fw.mu.Lock()
			if fmt.Sprint(fw.second) != fmt.Sprint(tc.wantCounted) {
				t.Errorf("second looks counted %v, want %v", fw.second, tc.wantCounted)
			}
			fw.mu.Unlock()
			var got []string
			for _, ev := range fw.events.lines() {
				got = append(got, ev.Event+" "+ev.Verdict)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.wantEvents) {
				t.Errorf("events %v, want %v", got, tc.wantEvents)
			}
		})
	}
}

// anchoredTxs are n operations of the anchored consumers' shape
// (lab/consumer/anchor.go) as the binlog holds them: the state row
// inserted, the lease taken, the debit and its state CAS in one
// transaction, the ledger's CAS (its pay_ledger row is not followed), the
// last CAS (DONE); each CAS bumps the version.
func anchoredTxs(n int) [][]sources.BinlogTx {
	at := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	pos := uint32(4)
	tx := func(cs ...sources.RowChange) sources.BinlogTx {
		pos += 100
		return sources.BinlogTx{Changes: cs, End: sources.BinlogPosition{File: "bin.000001", Pos: pos}, CommittedAt: at}
	}
	st := func(kind sources.ChangeKind, biz string, v int) sources.RowChange {
		c := sources.RowChange{Schema: "app", Table: "pay_state", Kind: kind, Values: map[string]string{"biz_id": biz, "version": fmt.Sprint(v), "updated_at": "2026-12-02 04:00:00.100"}}
		if kind == sources.ChangeUpdate {
			c.Before = map[string]string{"biz_id": biz, "version": fmt.Sprint(v - 1), "updated_at": "2026-12-02 04:00:00.100"}
		}
		return c
	}
	var ops [][]sources.BinlogTx
	for i := range n {
		biz := fmt.Sprintf("PAY-L-%d", i)
		journal := sources.RowChange{Schema: "app", Table: "balance_journal", Kind: sources.ChangeInsert, Values: map[string]string{"biz_id": biz, "created_at": "2026-12-02 04:00:00.100"}}
		ops = append(ops, []sources.BinlogTx{
			tx(st(sources.ChangeInsert, biz, 0)),
			tx(st(sources.ChangeUpdate, biz, 1)),
			tx(journal, st(sources.ChangeUpdate, biz, 2)),
			tx(st(sources.ChangeUpdate, biz, 3)),
			tx(st(sources.ChangeUpdate, biz, 4)),
		})
	}
	return ops
}

// doneFollower closes done once it has emitted its transactions.
type doneFollower struct {
	fakeFollower
	done chan struct{}
}

func (f *doneFollower) Follow(ctx context.Context, from sources.BinlogPosition, tables []sources.FollowTable, emit func(sources.BinlogTx) error) error {
	return f.fakeFollower.Follow(ctx, from, tables, func(tx sources.BinlogTx) error {
		err := emit(tx)
		if tx.End == f.txs[len(f.txs)-1].End {
			close(f.done)
		}
		return err
	})
}

// committed is a state table whose every commit is visible (the fence
// reads each operation's last version) or none (visible false: the read
// before the commits, the version before the first).
type committed struct {
	last    map[string]string
	visible bool
}

func (c *committed) KeyStatuses(_ context.Context, _, _, _ string, keys []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, k := range keys {
		if c.visible {
			out[k] = []string{c.last[k]}
		}
	}
	return out, nil
}

// Triages per operation of the anchored consumers' shape through the
// binlog source (its mapping and fences), in rounds as the follower
// delivers them: 1 when the fence reads the commits, 2 (today's second
// look) when it reads before them; with each transaction its own round
// (within a second look's wait), one look per round and one second look
// at the end when a round's newest transaction could not be proven.
func TestBinlogTriagesPerOperation(t *testing.T) {
	p := &config.Pipeline{Name: "pay", State: &config.State{Table: "pay_state", Key: "biz_id", Status: "status", Version: "version", UpdatedAt: "updated_at"},
		Steps: []config.Step{{Name: "debit", Scan: &config.Scan{Table: "balance_journal", Key: "biz_id", Time: "created_at"}}}}
	const n = 50
	for _, tc := range []struct {
		name     string
		visible  bool
		perRound bool // each transaction its own round
		want     float64
	}{
		{"an operation in one round, commits visible", true, false, 1},
		{"an operation in one round, read before its commits", false, false, 2},
		{"a round per transaction, commits visible", true, true, 5},
		{"a round per transaction, read before its commits", false, true, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := anchoredTxs(n)
			db := &committed{last: map[string]string{}, visible: tc.visible}
			for i := range ops {
				db.last[fmt.Sprintf("PAY-L-%d", i)] = "4"
			}
			fw := newFenceWatch(p, db, func(string, int) inspect.Verdict { return ok })
			var rounds [][]sources.BinlogTx
			if tc.perRound {
				for j := range ops[0] {
					var r []sources.BinlogTx
					for _, op := range ops {
						r = append(r, op[j])
					}
					rounds = append(rounds, r)
				}
			} else {
				var r []sources.BinlogTx
				for _, op := range ops {
					r = append(r, op...)
				}
				rounds = append(rounds, r)
			}
			for _, r := range rounds {
				f := &doneFollower{fakeFollower: fakeFollower{txs: r}, done: make(chan struct{})}
				s := &BinlogSource{Pipelines: []*config.Pipeline{p}, Follower: f, Schema: "app"}
				head, _ := s.Head(context.Background())
				// The first call starts the follow; the round is what it
				// delivered, all of it.
				first, _, err := s.Changes(context.Background(), head)
				if err != nil {
					t.Fatal(err)
				}
				<-f.done
				cs, _, err := s.Changes(context.Background(), head)
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
				if len(first) > 0 {
					cs = append(first, cs...)
					markFences(cs) // one round, as the watch would read it
				}
				fw.round(cs)
			}
			fw.secondLooks()
			got := float64(fw.total()) / n
			t.Logf("%s: %.2f triages per operation", tc.name, got)
			if got != tc.want {
				t.Errorf("%.2f triages per operation, want %.0f", got, tc.want)
			}
		})
	}
}
