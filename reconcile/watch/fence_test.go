package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// The fence a row change offers (fence.go): only a change that moves a
// column that only grows, of the operation's own row, tells that its
// transaction is visible when read back.
func TestFenceCandidate(t *testing.T) {
	up := func(before, after map[string]string, missing ...string) sources.RowChange {
		return sources.RowChange{Schema: "app", Table: "st", Kind: sources.ChangeUpdate, Values: after, Before: before, Missing: missing}
	}
	for _, tc := range []struct {
		name string
		c    sources.RowChange
		col  string
		kind fenceKind
		want string // "" no fence, else before->after
	}{
		{"version bumped", up(map[string]string{"version": "3"}, map[string]string{"version": "4"}), "version", fenceVersion, "3->4"},
		{"version named in another case", up(map[string]string{"VERSION": "3"}, map[string]string{"Version": "4"}), "version", fenceVersion, "3->4"},
		{"version not bumped (a consumer that does not)", up(map[string]string{"version": "4"}, map[string]string{"version": "4"}), "version", fenceVersion, ""},
		{"version set back", up(map[string]string{"version": "4"}, map[string]string{"version": "1"}), "version", fenceVersion, ""},
		{"version beyond int64", up(map[string]string{"version": "99999999999999999999"}, map[string]string{"version": "100000000000000000000"}), "version", fenceVersion, "99999999999999999999->100000000000000000000"},
		{"version not a number", up(map[string]string{"version": "a"}, map[string]string{"version": "b"}), "version", fenceVersion, ""},
		{"NULL before (no value)", up(map[string]string{}, map[string]string{"version": "1"}), "version", fenceVersion, ""},
		{"MINIMAL image: the column missing", up(nil, map[string]string{"biz_id": "a"}, "version"), "version", fenceVersion, ""},
		{"updated_at, milliseconds apart", up(map[string]string{"updated_at": "2026-12-02 04:00:00.120"}, map[string]string{"updated_at": "2026-12-02 04:00:00.121"}), "updated_at", fenceTime, "2026-12-02 04:00:00.120->2026-12-02 04:00:00.121"},
		{"DATETIME(0): two versions in one second", up(map[string]string{"updated_at": "2026-12-02 04:00:00"}, map[string]string{"updated_at": "2026-12-02 04:00:00"}), "updated_at", fenceTime, ""},
		{"DATETIME(0): the next second", up(map[string]string{"updated_at": "2026-12-02 04:00:00"}, map[string]string{"updated_at": "2026-12-02 04:00:01"}), "updated_at", fenceTime, "2026-12-02 04:00:00->2026-12-02 04:00:01"},
		{"updated_at a TIMESTAMP (binlog text in the process's zone)", sources.RowChange{Kind: sources.ChangeUpdate, Before: map[string]string{"updated_at": "2026-12-02 04:00:00.120"}, Values: map[string]string{"updated_at": "2026-12-02 04:00:00.121"}, Zoned: []string{"UPDATED_AT"}}, "updated_at", fenceTime, ""},
		{"version beside a TIMESTAMP column", sources.RowChange{Kind: sources.ChangeUpdate, Before: map[string]string{"version": "3"}, Values: map[string]string{"version": "4"}, Zoned: []string{"updated_at"}}, "version", fenceVersion, "3->4"},
		{"updated_at set back", up(map[string]string{"updated_at": "2026-12-02 04:00:01"}, map[string]string{"updated_at": "2026-12-02 04:00:00"}), "updated_at", fenceTime, ""},
		{"insert", sources.RowChange{Kind: sources.ChangeInsert, Values: map[string]string{"version": "0"}}, "version", fenceVersion, "->0"},
		{"insert without the column", sources.RowChange{Kind: sources.ChangeInsert, Values: map[string]string{"biz_id": "a"}}, "version", fenceVersion, ""},
		{"delete", sources.RowChange{Kind: sources.ChangeDelete, Values: map[string]string{"version": "4"}}, "version", fenceVersion, ""},
		{"no column configured", up(map[string]string{"version": "3"}, map[string]string{"version": "4"}), "", fenceVersion, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fenceCandidate(tc.c, "st", "biz_id", "a", tc.col, tc.kind)
			got := ""
			if f != nil {
				got = f.Before + "->" + f.After
				if f.Table != "st" || f.KeyCol != "biz_id" || f.Key != "a" || f.Kind != tc.kind {
					t.Errorf("fence %+v", f)
				}
			}
			if got != tc.want {
				t.Errorf("fence %q, want %q", got, tc.want)
			}
		})
	}
}

// The rule over a round's changes of an operation (markFences), through
// the mapping of a followed pipeline's row changes: the newest transaction
// that touched the operation must offer the fence.
func TestMarkFences(t *testing.T) {
	anchored := &config.Pipeline{Name: "pay",
		State: &config.State{Table: "st", Key: "biz_id", Status: "status", Version: "version", UpdatedAt: "updated_at"},
		Steps: []config.Step{{Name: "debit", Scan: &config.Scan{Table: "journal", Key: "biz_id", Time: "created_at"}}}}
	noVersion := &config.Pipeline{Name: "ful", State: &config.State{Table: "fst", Key: "biz_id", Status: "status", UpdatedAt: "updated_at"}}
	seed003 := &config.Pipeline{Name: "orders", MessageKey: config.DefaultMessageKey,
		Idempotency: &config.Idempotency{Table: "idem", Key: "msg_id", BizID: "biz_id", Action: "action", CreatedAt: "created_at"},
		Entity:      &config.Entity{Table: "orders", Key: "order_id", Status: "status", UpdatedAt: "updated_at"}}
	noCreated := &config.Pipeline{Name: "nocreated", Idempotency: &config.Idempotency{Table: "idem2", Key: "msg_id", BizID: "biz_id", Action: "action"}}
	plan := planFollow([]*config.Pipeline{anchored, noVersion, seed003, noCreated}, "app")
	rec := func(kind sources.ChangeKind, biz, msg, created string) sources.RowChange {
		c := sources.RowChange{Schema: "app", Table: "idem", Kind: kind, Values: map[string]string{"biz_id": biz, "msg_id": msg, "action": "DONE", "created_at": created}}
		if kind == sources.ChangeUpdate {
			c.Before = c.Values
		}
		return c
	}
	state := func(kind sources.ChangeKind, biz string, before, after int) sources.RowChange {
		c := sources.RowChange{Schema: "app", Table: "st", Kind: kind, Values: map[string]string{"biz_id": biz, "version": fmt.Sprint(after)}}
		if kind == sources.ChangeUpdate {
			c.Before = map[string]string{"biz_id": biz, "version": fmt.Sprint(before)}
		}
		return c
	}
	journal := sources.RowChange{Schema: "app", Table: "journal", Kind: sources.ChangeInsert, Values: map[string]string{"biz_id": "a", "created_at": "2026-12-02 04:00:00.100"}}
	ts := func(table, keyCol, key, before, after string) sources.RowChange {
		return sources.RowChange{Schema: "app", Table: table, Kind: sources.ChangeUpdate,
			Values: map[string]string{keyCol: key, "updated_at": after}, Before: map[string]string{keyCol: key, "updated_at": before}}
	}
	for _, tc := range []struct {
		name string
		txs  [][]sources.RowChange
		want map[string]string // key -> "col>=after", "" none
	}{
		{"a state update that bumps the version", [][]sources.RowChange{{state(sources.ChangeUpdate, "a", 3, 4)}}, map[string]string{"pay/a": "version>=4"}},
		{"the version not bumped", [][]sources.RowChange{{state(sources.ChangeUpdate, "a", 4, 4)}}, map[string]string{"pay/a": ""}},
		{"the state row inserted", [][]sources.RowChange{{state(sources.ChangeInsert, "a", 0, 0)}}, map[string]string{"pay/a": "version>=0"}},
		{"the effect and the state in one transaction", [][]sources.RowChange{{journal, state(sources.ChangeUpdate, "a", 1, 2)}}, map[string]string{"pay/a": "version>=2"}},
		{"an evidence-only change", [][]sources.RowChange{{journal}}, map[string]string{"pay/a": ""}},
		{"merged: the newest is not the state row", [][]sources.RowChange{{state(sources.ChangeUpdate, "a", 1, 2)}, {journal}}, map[string]string{"pay/a": ""}},
		{"merged: the newest is the state row", [][]sources.RowChange{{journal}, {state(sources.ChangeUpdate, "a", 1, 2)}, {state(sources.ChangeUpdate, "a", 2, 3)}}, map[string]string{"pay/a": "version>=3"}},
		{"merged: the newest did not bump", [][]sources.RowChange{{state(sources.ChangeUpdate, "a", 1, 2)}, {state(sources.ChangeUpdate, "a", 2, 2)}}, map[string]string{"pay/a": ""}},
		{"merged with a delete of the row", [][]sources.RowChange{{state(sources.ChangeDelete, "a", 0, 7)}, {state(sources.ChangeInsert, "a", 0, 0)}}, map[string]string{"pay/a": ""}},
		{"two operations, each its own", [][]sources.RowChange{{state(sources.ChangeUpdate, "a", 1, 2)}, {state(sources.ChangeUpdate, "b", 5, 6)}, {journal}},
			map[string]string{"pay/a": "", "pay/b": "version>=6"}},
		{"no version: updated_at moved", [][]sources.RowChange{{ts("fst", "biz_id", "f", "2026-12-02 04:00:00.100", "2026-12-02 04:00:00.250")}}, map[string]string{"ful/f": "updated_at>=2026-12-02 04:00:00.250"}},
		{"no version: DATETIME(0) in one second", [][]sources.RowChange{{ts("fst", "biz_id", "f", "2026-12-02 04:00:00", "2026-12-02 04:00:00")}}, map[string]string{"ful/f": ""}},
		{"no state row: the entity's status change", [][]sources.RowChange{{ts("orders", "order_id", "8822", "2026-12-02 04:00:00.100", "2026-12-02 04:00:00.900")}}, map[string]string{"orders/8822": "orders.order_id=8822 updated_at>=2026-12-02 04:00:00.900"}},
		{"no state row: an idempotency record inserted", [][]sources.RowChange{{rec(sources.ChangeInsert, "8822", "m1", "2026-12-02 04:00:00.100")}},
			map[string]string{"orders/8822": "idem.msg_id=m1 created_at>=2026-12-02 04:00:00.100"}},
		{"an idempotency record updated (no column grows)", [][]sources.RowChange{{rec(sources.ChangeUpdate, "8822", "m1", "2026-12-02 04:00:00.100")}},
			map[string]string{"orders/8822": ""}},
		{"an idempotency record deleted", [][]sources.RowChange{{rec(sources.ChangeDelete, "8822", "m1", "2026-12-02 04:00:00.100")}},
			map[string]string{"orders/8822": ""}},
		{"an idempotency record deleted and inserted again in the round", [][]sources.RowChange{{rec(sources.ChangeDelete, "8822", "m1", "2026-12-02 04:00:00.100")}, {rec(sources.ChangeInsert, "8822", "m1", "2026-12-02 04:00:00.300")}},
			map[string]string{"orders/8822": ""}},
		{"an idempotency record without its key in the image", [][]sources.RowChange{{{Schema: "app", Table: "idem", Kind: sources.ChangeInsert, Values: map[string]string{"biz_id": "8822", "created_at": "2026-12-02 04:00:00.100"}, Missing: []string{"msg_id"}}}},
			map[string]string{"orders/8822": ""}},
		{"an idempotency record with a TIMESTAMP created_at", [][]sources.RowChange{{{Schema: "app", Table: "idem", Kind: sources.ChangeInsert, Values: map[string]string{"biz_id": "8822", "msg_id": "m1", "created_at": "2026-12-02 04:00:00.100"}, Zoned: []string{"created_at"}}}},
			map[string]string{"orders/8822": ""}},
		{"the entity updated, then the record inserted: the record", [][]sources.RowChange{{ts("orders", "order_id", "8822", "2026-12-02 04:00:00.100", "2026-12-02 04:00:00.900")}, {rec(sources.ChangeInsert, "8822", "m1", "2026-12-02 04:00:01.000")}},
			map[string]string{"orders/8822": "idem.msg_id=m1 created_at>=2026-12-02 04:00:01.000"}},
		{"the record inserted, then the entity updated: the entity", [][]sources.RowChange{{rec(sources.ChangeInsert, "8822", "m1", "2026-12-02 04:00:00.100")}, {ts("orders", "order_id", "8822", "2026-12-02 04:00:00.100", "2026-12-02 04:00:00.900")}},
			map[string]string{"orders/8822": "orders.order_id=8822 updated_at>=2026-12-02 04:00:00.900"}},
		{"two records in one transaction: either proves it", [][]sources.RowChange{{rec(sources.ChangeInsert, "8822", "m1", "2026-12-02 04:00:00.100"), rec(sources.ChangeInsert, "8822", "m2", "2026-12-02 04:00:00.100")}},
			map[string]string{"orders/8822": "idem.msg_id=m1 created_at>=2026-12-02 04:00:00.100"}},
		{"a record inserted, then one updated: none", [][]sources.RowChange{{rec(sources.ChangeInsert, "8822", "m1", "2026-12-02 04:00:00.100")}, {rec(sources.ChangeUpdate, "8822", "m2", "2026-12-02 04:00:00.100")}},
			map[string]string{"orders/8822": ""}},
		{"a record of a table without created_at", [][]sources.RowChange{{{Schema: "app", Table: "idem2", Kind: sources.ChangeInsert, Values: map[string]string{"biz_id": "x", "msg_id": "m1"}}}},
			map[string]string{"nocreated/x": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out []Change
			for i, changes := range tc.txs {
				direct, pending, unknown := plan.mapTx(sources.BinlogTx{Changes: changes}, nil)
				if len(pending) > 0 || unknown != "" {
					t.Fatalf("tx %d: pending %v, unknown %q", i, pending, unknown)
				}
				for j := range direct {
					direct[j].seq = i + 1
				}
				out = append(out, direct...)
			}
			markFences(out)
			got := map[string]string{}
			for _, c := range out {
				s := ""
				if f := c.fence; f != nil {
					s = f.Col + ">=" + f.After
					if f.Table != "st" && f.Table != "fst" {
						s = f.Table + "." + f.KeyCol + "=" + f.Key + " " + s
					}
				}
				k := c.Pipeline + "/" + c.BizID
				if prev, ok := got[k]; ok && prev != s {
					t.Errorf("%s: changes with fences %q and %q; want one per operation", k, prev, s)
				}
				got[k] = s
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("fences %v, want %v", got, tc.want)
			}
		})
	}
}

// fakeKeys is a table's column by key, as KeyStatuses reads it.
type fakeKeys struct {
	rows  map[string][]string
	err   error
	reads int
}

func (f *fakeKeys) KeyStatuses(_ context.Context, table, keyCol, col string, keys []string) (map[string][]string, error) {
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	out := map[string][]string{}
	for _, k := range keys {
		if v, ok := f.rows[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

// The fence read: the row read back before the triage proves the change
// visible only with one value at least the change's.
func TestFenceProve(t *testing.T) {
	v := &fence{Table: "st", KeyCol: "biz_id", Key: "a", Col: "version", Kind: fenceVersion, Before: "3", After: "4"}
	tm := &fence{Table: "st", KeyCol: "biz_id", Key: "a", Col: "updated_at", Kind: fenceTime, Before: "2026-12-02 04:00:00.100", After: "2026-12-02 04:00:00.250"}
	for _, tc := range []struct {
		name  string
		f     *fence
		rows  map[string][]string
		err   error
		proof bool
	}{
		{"the change's version: seen", v, map[string][]string{"a": {"4"}}, nil, true},
		{"a later version: seen (its writer waited for the change's row lock)", v, map[string][]string{"a": {"6"}}, nil, true},
		{"the version before the change: its commit not visible yet", v, map[string][]string{"a": {"3"}}, nil, false},
		{"no row", v, map[string][]string{}, nil, false},
		{"two rows of the key", v, map[string][]string{"a": {"4", "4"}}, nil, false},
		{"the read failed", v, nil, errors.New("mysql down"), false},
		{"updated_at as the driver writes it", tm, map[string][]string{"a": {"2026-12-02T04:00:00.25Z"}}, nil, true},
		{"updated_at before the change", tm, map[string][]string{"a": {"2026-12-02 04:00:00.1"}}, nil, false},
		{"updated_at unreadable", tm, map[string][]string{"a": {"soon"}}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := &fakeKeys{rows: tc.rows, err: tc.err}
			fr := &fenceRequest{fences: map[string]*fence{"a": tc.f}}
			err := fr.prove(context.Background(), db)
			if (err != nil) != (tc.err != nil) {
				t.Errorf("prove: %v, want %v", err, tc.err)
			}
			if fr.proven["a"] != tc.proof {
				t.Errorf("proven %v, want %v", fr.proven["a"], tc.proof)
			}
			if db.reads != 1 {
				t.Errorf("%d reads, want 1", db.reads)
			}
		})
	}
}

// seqKeys answers the n-th read with reads[n] (the last one after), and
// records the keys each read asked for.
type seqKeys struct {
	reads [][]map[string][]string // per read: rows by key (nil map: an error)
	asked [][]string
}

func (s *seqKeys) KeyStatuses(_ context.Context, _, _, _ string, keys []string) (map[string][]string, error) {
	n := min(len(s.asked), len(s.reads)-1)
	s.asked = append(s.asked, slices.Sorted(slices.Values(keys)))
	if s.reads[n] == nil {
		return nil, errors.New("mysql down")
	}
	out := map[string][]string{}
	for _, rows := range s.reads[n] {
		for _, k := range keys {
			if v, ok := rows[k]; ok {
				out[k] = v
			}
		}
	}
	return out, nil
}

// The fences not proven by a batch's first read are read again after
// each wait, only those, and a read that proves them then proves them:
// the commit became visible in between (docs/watch.md#how-it-works).
func TestFenceProveAll(t *testing.T) {
	ver := func(key, after string) *fence {
		return &fence{Table: "st", KeyCol: "biz_id", Key: key, Col: "version", Kind: fenceVersion, After: after}
	}
	rows := func(kv ...string) []map[string][]string {
		m := map[string][]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = []string{kv[i+1]}
		}
		return []map[string][]string{m}
	}
	waits := []time.Duration{5 * time.Millisecond, 20 * time.Millisecond}
	for _, tc := range []struct {
		name   string
		reads  [][]map[string][]string
		proven string   // the proven keys, sorted, comma-separated
		asked  []string // the keys of each read
		slept  int
	}{
		{"all proven at once: no wait", [][]map[string][]string{rows("a", "4", "b", "6")}, "a,b", []string{"a,b"}, 0},
		{"b visible at the second read", [][]map[string][]string{rows("a", "4", "b", "5"), rows("a", "4", "b", "6")}, "a,b", []string{"a,b", "b"}, 1},
		{"b visible at the third read", [][]map[string][]string{rows("a", "4", "b", "5"), rows("a", "4", "b", "5"), rows("a", "4", "b", "6")}, "a,b", []string{"a,b", "b", "b"}, 2},
		{"b never visible: three reads, then the second look", [][]map[string][]string{rows("a", "4", "b", "5")}, "a", []string{"a,b", "b", "b"}, 2},
		{"b inserted during the waits", [][]map[string][]string{rows("a", "4"), rows("a", "4", "b", "6")}, "a,b", []string{"a,b", "b"}, 1},
		{"the first read fails: no wait, nothing proven", [][]map[string][]string{nil}, "", []string{"a,b"}, 0},
		{"a re-read fails: no more", [][]map[string][]string{rows("a", "4"), nil, rows("a", "4", "b", "6")}, "a", []string{"a,b", "b"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := &seqKeys{reads: tc.reads}
			slept := 0
			fr := &fenceRequest{fences: map[string]*fence{"a": ver("a", "4"), "b": ver("b", "6")},
				sleep: func(_ context.Context, d time.Duration) error {
					if d != waits[slept] {
						t.Errorf("wait %d: %v, want %v", slept, d, waits[slept])
					}
					slept++
					return nil
				}}
			_ = fr.proveAll(context.Background(), db, waits)
			var proven []string
			for k, ok := range fr.proven {
				if ok {
					proven = append(proven, k)
				}
			}
			slices.Sort(proven)
			if got := strings.Join(proven, ","); got != tc.proven {
				t.Errorf("proven %q, want %q", got, tc.proven)
			}
			var asked []string
			for _, a := range db.asked {
				asked = append(asked, strings.Join(a, ","))
			}
			if fmt.Sprint(asked) != fmt.Sprint(tc.asked) {
				t.Errorf("reads %v, want %v", asked, tc.asked)
			}
			if slept != tc.slept {
				t.Errorf("%d waits, want %d", slept, tc.slept)
			}
		})
	}
}

// A watch that stops during a wait stops reading: the fences left are not
// proven.
func TestFenceProveAllStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	db := &seqKeys{reads: [][]map[string][]string{{{}}, {{"a": {"4"}}}}}
	fr := &fenceRequest{fences: map[string]*fence{"a": {Table: "st", KeyCol: "biz_id", Key: "a", Col: "version", Kind: fenceVersion, After: "4"}}}
	cancel()
	if err := fr.proveAll(ctx, db, []time.Duration{time.Hour}); !errors.Is(err, context.Canceled) {
		t.Errorf("proveAll: %v, want context.Canceled", err)
	}
	if fr.proven["a"] || len(db.asked) != 1 {
		t.Errorf("proven %v after %d reads, want not proven after 1", fr.proven, len(db.asked))
	}
}

// Seed 003's own schema (records without biz_id): an inserted SKIPPED
// record, mapped to its operation through its message, carries its fence
// there; an update of a record (a reopen decided again) carries none.
func TestRecordFenceThroughTheTopic(t *testing.T) {
	ps := mapPipelines()
	orders := ps[1]
	fp := planFollow(ps, "app")
	t0 := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	b, _ := json.Marshal(map[string]any{"msgId": "msg-7391", "orderId": 8821})
	tp := &Topics{Kafka: &fakeTopic{msgs: []sources.Message{{Offset: 1, Timestamp: t0.Add(-30 * time.Second), Key: []byte("8821"), Value: b}}}}
	record := func(kind sources.ChangeKind) sources.RowChange {
		c := sources.RowChange{Schema: "s3", Table: "idempotent", Kind: kind,
			Values: map[string]string{"msg_id": "msg-7391", "action": "SKIPPED", "created_at": "2026-12-02 04:00:00.120"}}
		if kind == sources.ChangeUpdate {
			c.Before = map[string]string{"msg_id": "msg-7391", "action": "PENDING", "created_at": "2026-12-02 04:00:00.120"}
		}
		return c
	}
	for _, tc := range []struct {
		name string
		c    sources.RowChange
		want string
	}{
		{"inserted", record(sources.ChangeInsert), "s3.idempotent.msg_id=msg-7391 created_at>=2026-12-02 04:00:00.120"},
		{"updated", record(sources.ChangeUpdate), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, pend, unknown := fp.mapTx(sources.BinlogTx{Changes: []sources.RowChange{tc.c}, CommittedAt: t0}, nil)
			if len(pend) != 1 || unknown != "" {
				t.Fatalf("pending %v, unknown %q", pend, unknown)
			}
			pend[0].seq = 1
			out, _, err := tp.resolve(context.Background(), orders, pend)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 1 || out[0].BizID != "8821" {
				t.Fatalf("mapped %v, want 8821", out)
			}
			markFences(out)
			got := ""
			if f := out[0].fence; f != nil {
				got = f.Table + "." + f.KeyCol + "=" + f.Key + " " + f.Col + ">=" + f.After
			}
			if got != tc.want {
				t.Errorf("fence %q, want %q", got, tc.want)
			}
		})
	}
}
