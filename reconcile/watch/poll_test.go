package watch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/reconcile/watch"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
)

// TestPollSource polls a state table and an idempotency table on MariaDB:
// inserts and updates that move the time column are changes (across
// pages), once each even though every poll reads its overlap again;
// deletes and updates that leave the time column alone are not seen
// (docs/watch.md#polling).
func TestPollSource(t *testing.T) {
	db := testenv.MySQL(t)
	db.Exec(t, "CREATE TABLE st (biz_id VARCHAR(64) PRIMARY KEY, status VARCHAR(16), updated_at DATETIME(3) NOT NULL, KEY (updated_at))")
	db.Exec(t, "CREATE TABLE idem (id BIGINT PRIMARY KEY, biz_id VARCHAR(64), action VARCHAR(16), created_at DATETIME(3) NOT NULL, KEY (created_at))")
	db.Exec(t, "CREATE TABLE ent (order_id BIGINT PRIMARY KEY, status VARCHAR(16), updated_at DATETIME(3) NOT NULL, KEY (updated_at))")
	r, err := mysqlsrc.Open(db.DSN, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := &config.Pipeline{Name: "pay",
		State:       &config.State{Table: "st", Key: "biz_id", Status: "status", UpdatedAt: "updated_at"},
		Idempotency: &config.Idempotency{Table: "idem", Key: "id", BizID: "biz_id", Action: "action", CreatedAt: "created_at"},
		Entity:      &config.Entity{Table: "ent", Key: "order_id", Status: "status", UpdatedAt: "updated_at"}}
	src := &watch.PollSource{Pipelines: []*config.Pipeline{p}, DBFor: func(*config.Pipeline) watch.Walker { return r }, Page: 2}
	ctx := context.Background()
	db.Exec(t, "INSERT INTO st VALUES ('old', 'DONE', NOW(3) - INTERVAL 1 HOUR)")
	pos, err := src.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	poll := func() map[string]int {
		t.Helper()
		changes, np, err := src.Changes(ctx, pos)
		if err != nil {
			t.Fatal(err)
		}
		pos = np
		got := map[string]int{}
		for _, c := range changes {
			if c.Pipeline != "pay" || c.CommittedAt == nil || c.Position == "" {
				t.Fatalf("change %+v", c)
			}
			got[c.Table+":"+c.BizID]++
		}
		return got
	}
	if got := poll(); len(got) != 0 {
		t.Fatalf("first poll: %v; want nothing (the old row is before the head)", got)
	}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		db.Exec(t, "INSERT INTO st VALUES (?, 'NEW', NOW(3))", id)
	}
	db.Exec(t, "INSERT INTO idem VALUES (1, 'x', 'SKIPPED', NOW(3))")
	db.Exec(t, "INSERT INTO ent VALUES (8822, 'REFUNDED', NOW(3))")
	got := poll()
	want := map[string]int{"st:a": 1, "st:b": 1, "st:c": 1, "st:d": 1, "st:e": 1, "idem:x": 1, "ent:8822": 1}
	if len(got) != len(want) {
		t.Fatalf("poll after inserts: %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("poll after inserts: %v, want %v", got, want)
		}
	}
	if src.RowsRead() < 6 {
		t.Fatalf("rows read %d", src.RowsRead())
	}
	// The overlap reads them again; they are not changes again.
	if got := poll(); len(got) != 0 {
		t.Fatalf("poll with nothing new: %v", got)
	}
	time.Sleep(5 * time.Millisecond)
	db.Exec(t, "UPDATE st SET status = 'DONE', updated_at = NOW(3) WHERE biz_id = 'b'")
	db.Exec(t, "UPDATE st SET status = 'DONE' WHERE biz_id = 'c'") // time column unchanged: unseen
	db.Exec(t, "DELETE FROM st WHERE biz_id = 'd'")                // deletes: unseen
	// An entity's status change that moves its time column: the
	// operation (the entity's key) is a change.
	db.Exec(t, "UPDATE ent SET status = 'PAID', updated_at = NOW(3) WHERE order_id = 8822")
	if got := poll(); len(got) != 2 || got["st:b"] != 1 || got["ent:8822"] != 1 {
		t.Fatalf("poll after an update, a silent update, a delete and an entity's change: %v; want b and 8822", got)
	}
}

// On the seeds' own schemas (SPEC's seeds as they are, presets
// unmodified) polling follows seed 001's order table and seed 003's
// orders (entity.updated_at: a status change re-reviews the skips), and
// nothing of seed 000 (no state, no idempotency table): it is named,
// never silently unwatched.
func TestUnfollowedOnTheSeedsSchemas(t *testing.T) {
	var pipes []*config.Pipeline
	for _, preset := range []string{"seed000", "seed001", "seed003"} {
		b, err := config.Preset(preset)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse(preset+".yaml", b)
		if err != nil {
			t.Fatalf("%s: %v", preset, err)
		}
		for i := range cfg.Pipelines {
			pipes = append(pipes, &cfg.Pipelines[i])
		}
	}
	got := (&watch.PollSource{Pipelines: pipes}).Unfollowed()
	names := map[string]bool{}
	for _, n := range got {
		names[n] = true
	}
	for _, p := range pipes {
		followed := (p.State != nil && p.State.UpdatedAt != "") || (p.Entity != nil && p.Entity.UpdatedAt != "")
		if names[p.Name] == followed {
			t.Errorf("pipeline %s: unfollowed %v, but its state block is %+v and idempotency %+v", p.Name, names[p.Name], p.State, p.Idempotency)
		}
	}
	if len(got) == 0 || len(got) == len(pipes) {
		t.Errorf("unfollowed %v of %d seed pipelines: want seed 000's only", got, len(pipes))
	}
	t.Logf("unfollowed: %v", got)
}

// fakeWalker is a database of tables of rows for the poller: each row has
// a time, a key, an extra column's value and the EqCol's value. It keeps
// the walks it was asked for.
type fakeWalker struct {
	now    time.Time
	tables map[string][]fakeRow
	walks  []sources.Walk
}

type fakeRow struct {
	at         time.Time
	key, extra string
	eq         any
}

// Now and WalkPage fail once ctx is done, as the database's reads do.
func (f *fakeWalker) Now(ctx context.Context) (time.Time, error) { return f.now, ctx.Err() }

func (f *fakeWalker) WalkPage(ctx context.Context, w sources.Walk, after sources.Cursor, limit int) ([]sources.WalkRow, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.walks = append(f.walks, w)
	rows := slices.Clone(f.tables[w.Table])
	slices.SortFunc(rows, func(a, b fakeRow) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	var out []sources.WalkRow
	for _, r := range rows {
		if from, ok := w.From.(time.Time); ok && r.at.Before(from) {
			continue
		}
		if w.EqCol != "" && r.eq != w.EqVal {
			continue
		}
		if after.Set {
			at, key := after.Values[0].(time.Time), after.Values[1].(string)
			if r.at.Before(at) || (r.at.Equal(at) && r.key <= key) {
				continue
			}
		}
		extra := ""
		if w.ExtraCol != "" {
			extra = r.extra
		}
		out = append(out, sources.WalkRow{Pos: r.at, Key: r.key, Extra: extra, Keyset: []any{r.at, r.key}})
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// recordsTopic is a topic for the poller's tests: its messages, the reads
// asked of it, and an error to answer with; expire, when set, is called
// at a read, which then answers the poll's context's error (a read that
// took the poll's whole time).
type recordsTopic struct {
	msgs   []sources.Message
	reads  [][2]time.Time
	err    error
	expire func()
	// errTopic, when set, is the only topic err is the answer for; the
	// messages of every topic are msgs.
	errTopic string
}

func (f *recordsTopic) Records(ctx context.Context, topic string, from, to time.Time, _ int, each func(*sources.Message)) (sources.RecordsRead, error) {
	f.reads = append(f.reads, [2]time.Time{from, to})
	if f.expire != nil {
		f.expire()
		return sources.RecordsRead{}, ctx.Err()
	}
	if f.err != nil && (f.errTopic == "" || f.errTopic == topic) {
		return sources.RecordsRead{}, f.err
	}
	n := 0
	for i := range f.msgs {
		if m := f.msgs[i]; !m.Timestamp.Before(from) && !m.Timestamp.After(to) {
			each(&m)
			n++
		}
	}
	return sources.RecordsRead{Records: n}, nil
}

// seed003Pipeline is seed 003's pipeline as its preset configures it: an
// idempotency table without biz_id (records keyed by msg id, the msg id in
// the payload), orders as the entity table.
func seed003Pipeline() *config.Pipeline {
	return &config.Pipeline{Name: "orders", Topic: "order-event", MessageKey: config.DefaultMessageKey,
		Idempotency: &config.Idempotency{Table: "idempotent", Key: "msg_id", Action: "action", CreatedAt: "created_at", MsgIDPath: "$.msgId"},
		Entity:      &config.Entity{Table: "orders", Key: "order_id", Status: "status", UpdatedAt: "updated_at"}}
}

func ptr[T any](v T) *T { return &v }

func orderMsg(off int64, at time.Time, order, msgID string) sources.Message {
	return sources.Message{Partition: 0, Offset: off, Timestamp: at, Key: []byte(order), Value: []byte(`{"msgId":"` + msgID + `","orderId":` + order + `}`)}
}

// TestPollSourceRecordsWithoutBizID: the SKIPPED records of an idempotency
// table without biz_id (seed 003's) are polled by created_at and mapped to
// their operations through their messages, as binlog mode maps them
// (docs/watch.md#polling); DONE records are not read; what cannot be
// mapped is counted and said once, not per record nor per poll, and the
// other tables' changes are changes all the same.
func TestPollSourceRecordsWithoutBizID(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	sec := func(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Second))) }
	type poll struct {
		// records and orders added before the poll (time, key; records: action).
		records []fakeRow
		orders  []fakeRow
		// messages added to the topic before the poll.
		msgs []sources.Message
		// topicErr is the topic's answer to every read of this poll;
		// outOfTime, a read that takes the poll's whole time.
		topicErr  error
		outOfTime bool
		// readsFrom, when set, is the earliest time (seconds from t0) the
		// poll may read the topic from: its own records' search window.
		readsFrom *float64
		// dbNow, when set, is the database's clock at the poll (seconds
		// from t0; else t0).
		dbNow *float64
		// walkFrom, when set, is where each table's walk starts (seconds
		// from t0): its watermark less the overlap.
		walkFrom map[string]float64
		want     []string // table:biz_id of the changes (@msg id: a record's)
		said     int      // lines said so far
		saidHas  []string // what the lines said by this poll say
		unmapped int      // Unmapped after the poll
	}
	skipped := func(at float64, msgID string) fakeRow {
		return fakeRow{at: sec(at), key: msgID, eq: inspect.ActionSkipped}
	}
	done := func(at float64, msgID string) fakeRow {
		return fakeRow{at: sec(at), key: msgID, eq: inspect.ActionDone}
	}
	order := func(at float64, id string) fakeRow { return fakeRow{at: sec(at), key: id} }
	down := errors.New("kafka: brokers unreachable")
	for _, tc := range []struct {
		name    string
		holdMax int
		polls   []poll
	}{
		{"seed 003's incident: PAID recorded SKIPPED after the order row, mapped from the record", 0, []poll{
			{orders: []fakeRow{order(1, "8821")}, records: []fakeRow{done(0.5, "msg-7390"), skipped(1.2, "msg-7391")},
				msgs: []sources.Message{orderMsg(1, sec(0.4), "8821", "msg-7390"), orderMsg(2, sec(1.1), "8821", "msg-7391")},
				// The record first, in the tables' order: the watch triages
				// 8821 once, with the record as its cause.
				want: []string{"idempotent:8821@msg-7391", "orders:8821"}},
			// The overlap reads the record again: not a change again.
			{want: nil},
		}},
		{"before the watch started: the records are the first sweep's, the rows of the lookback polled", 0, []poll{
			{records: []fakeRow{skipped(-60, "msg-old")}, orders: []fakeRow{order(-60, "7000")}, msgs: []sources.Message{orderMsg(1, sec(-61), "7000", "msg-old")},
				want: []string{"orders:7000"}},
		}},
		{"a DONE record decides nothing: not read, not mapped", 0, []poll{
			{records: []fakeRow{done(1, "msg-1")}, msgs: []sources.Message{orderMsg(1, sec(0.9), "7001", "msg-1")}},
		}},
		{"a message not found is said once, and again only after a poll that maps", 0, []poll{
			{records: []fakeRow{skipped(1, "msg-ghost-1")}, said: 1, unmapped: 1},
			{records: []fakeRow{skipped(1.5, "msg-ghost-2"), skipped(1.6, "msg-ghost-3")}, said: 1, unmapped: 3},
			{records: []fakeRow{skipped(2, "msg-5")}, msgs: []sources.Message{orderMsg(1, sec(1.9), "7005", "msg-5")}, want: []string{"idempotent:7005@msg-5"}, said: 1, unmapped: 3},
			{records: []fakeRow{skipped(3, "msg-ghost-4")}, said: 2, unmapped: 4},
		}},
		{"Kafka down for two polls while seed 003's record arrives, then up: the record waits, then is mapped once, the record the cause; the orders advance meanwhile", 0, []poll{
			{records: []fakeRow{skipped(1, "msg-7391")}, orders: []fakeRow{order(3, "7001")}, topicErr: down,
				walkFrom: map[string]float64{"idempotent": -2, "orders": -602},
				want:     []string{"orders:7001"}, said: 1, saidHas: []string{"wait for Kafka", "brokers unreachable"}},
			// Still down: the records' watermark stays at the first held
			// (read again from 1 less the overlap), the orders' moves on.
			{records: []fakeRow{skipped(4, "msg-2")}, orders: []fakeRow{order(5, "7002")}, topicErr: down,
				walkFrom: map[string]float64{"idempotent": -1, "orders": 1},
				want:     []string{"orders:7002"}, said: 1},
			// Kafka answers: both records are read again and mapped over
			// the first one's search window, before the orders of the poll.
			{orders: []fakeRow{order(6, "7006")}, msgs: []sources.Message{orderMsg(1, sec(0.9), "8821", "msg-7391"), orderMsg(2, sec(3.9), "7004", "msg-2")},
				walkFrom: map[string]float64{"idempotent": -1, "orders": 3},
				want:     []string{"idempotent:8821@msg-7391", "idempotent:7004@msg-2", "orders:7006"}, said: 2, saidHas: []string{"Kafka answers again: the 2 SKIPPED record(s) of idempotent"}},
			// The watermark moves past them; the overlap reads the second
			// again: not a change again, nothing said.
			{walkFrom: map[string]float64{"idempotent": 2, "orders": 4}, said: 2},
		}},
		{"a read of the topic that takes the poll's whole time: the records wait, the walks of MySQL are done before it, the poll does not fail", 0, []poll{
			{records: []fakeRow{skipped(1, "msg-7391")}, orders: []fakeRow{order(1, "7001")}, outOfTime: true,
				want: []string{"orders:7001"}, said: 1, saidHas: []string{"wait for Kafka", "context canceled"}},
			{msgs: []sources.Message{orderMsg(1, sec(0.9), "8821", "msg-7391")}, walkFrom: map[string]float64{"idempotent": -1, "orders": -1},
				want: []string{"idempotent:8821@msg-7391"}, said: 2},
		}},
		{"Kafka down past the search window: the records older are given up, said loudly, counted once; those after it still wait and are mapped", 0, []poll{
			{records: []fakeRow{skipped(1, "m-a")}, topicErr: down, said: 1},
			{records: []fakeRow{skipped(301, "m-b")}, dbNow: ptr(302.0), topicErr: down,
				walkFrom: map[string]float64{"idempotent": -1},
				said:     2, saidHas: []string{"GIVING UP 1 SKIPPED record(s) of idempotent", "opctl reconcile --pipeline orders"}, unmapped: 1},
			{dbNow: ptr(303.0), msgs: []sources.Message{orderMsg(1, sec(0.9), "7001", "m-a"), orderMsg(2, sec(300.9), "7002", "m-b")},
				walkFrom: map[string]float64{"idempotent": 299},
				want:     []string{"idempotent:7002@m-b"}, said: 3, saidHas: []string{"1 were given up"}, unmapped: 1},
		}},
		{"more records wait than HoldMax: the oldest are given up, and not counted again when the overlap reads them", 1, []poll{
			{records: []fakeRow{skipped(1, "m-a"), skipped(1.5, "m-b")}, topicErr: down, said: 2, saidHas: []string{"wait for Kafka", "GIVING UP 1"}, unmapped: 1},
			{records: []fakeRow{skipped(1.6, "m-c")}, topicErr: down, walkFrom: map[string]float64{"idempotent": -0.5}, said: 2, unmapped: 2},
			{records: []fakeRow{skipped(1.7, "m-d")}, topicErr: down, walkFrom: map[string]float64{"idempotent": -0.4}, said: 2, unmapped: 3},
			{msgs: []sources.Message{orderMsg(1, sec(0.9), "7001", "m-a"), orderMsg(2, sec(1.4), "7002", "m-b"), orderMsg(3, sec(1.5), "7003", "m-c"), orderMsg(4, sec(1.6), "7004", "m-d")},
				walkFrom: map[string]float64{"idempotent": -0.3},
				want:     []string{"idempotent:7004@m-d"}, said: 3, saidHas: []string{"the 1 SKIPPED record(s) of idempotent", "3 were given up"}, unmapped: 3},
			{walkFrom: map[string]float64{"idempotent": -0.3}, said: 3, unmapped: 3},
		}},
		{"records across pages, each mapped", 0, []poll{
			{records: []fakeRow{skipped(1, "m1"), skipped(1, "m2"), skipped(1, "m3"), skipped(1.1, "m4"), skipped(1.2, "m5")},
				msgs: []sources.Message{orderMsg(1, sec(0.5), "1", "m1"), orderMsg(2, sec(0.5), "2", "m2"), orderMsg(3, sec(0.5), "3", "m3"), orderMsg(4, sec(0.5), "4", "m4"), orderMsg(5, sec(0.5), "5", "m5")},
				want: []string{"idempotent:1@m1", "idempotent:2@m2", "idempotent:3@m3", "idempotent:4@m4", "idempotent:5@m5"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := &fakeWalker{now: t0, tables: map[string][]fakeRow{}}
			topic := &recordsTopic{}
			var said []string
			src := &watch.PollSource{Pipelines: []*config.Pipeline{seed003Pipeline()}, DBFor: func(*config.Pipeline) watch.Walker { return db },
				Page: 2, Lookback: 10 * time.Minute, HoldMax: tc.holdMax, Topics: &watch.Topics{Kafka: topic}, Log: func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }}
			ctx := context.Background()
			pos, err := src.Head(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range tc.polls {
				db.tables["idempotent"] = append(db.tables["idempotent"], p.records...)
				db.tables["orders"] = append(db.tables["orders"], p.orders...)
				topic.msgs = append(topic.msgs, p.msgs...)
				topic.err = p.topicErr
				db.now = t0
				if p.dbNow != nil {
					db.now = sec(*p.dbNow)
				}
				saidBefore := len(said)
				db.walks = nil
				topic.reads = nil
				pctx, cancel := context.WithCancel(ctx)
				topic.expire = nil
				if p.outOfTime {
					topic.expire = cancel
				}
				changes, np, err := src.Changes(pctx, pos)
				cancel()
				if err != nil {
					t.Fatalf("poll %d: %v", i, err)
				}
				pos = np
				var got []string
				for _, c := range changes {
					g := c.Table + ":" + c.BizID
					if c.Table == "idempotent" {
						g += "@" + c.Position[strings.LastIndex(c.Position, "/")+1:]
					}
					got = append(got, g)
					if c.Pipeline != "orders" || c.CommittedAt == nil || c.Position == "" {
						t.Errorf("poll %d: change %+v: want the pipeline, the row's time and its position", i, c)
					}
				}
				if !slices.Equal(got, p.want) {
					t.Errorf("poll %d: changes %v, want %v", i, got, p.want)
				}
				if len(said) != p.said || src.Unmapped() != p.unmapped {
					t.Errorf("poll %d: said %d line(s) %q and %d unmapped, want %d and %d", i, len(said), said, src.Unmapped(), p.said, p.unmapped)
				}
				for _, want := range p.saidHas {
					if !strings.Contains(strings.Join(said[saidBefore:], "\n"), want) {
						t.Errorf("poll %d said %q: want %q in it", i, said[saidBefore:], want)
					}
				}
				for table, from := range p.walkFrom {
					var froms []any
					for _, w := range db.walks {
						if w.Table == table {
							froms = append(froms, w.From)
						}
					}
					if len(froms) == 0 || froms[0] != any(sec(from)) {
						t.Errorf("poll %d walked %s from %v, want from %v", i, table, froms, sec(from))
					}
				}
				for _, r := range topic.reads {
					if p.readsFrom != nil && r[0].Before(sec(*p.readsFrom)) {
						t.Errorf("poll %d: read the topic from %v to %v: want nothing before %v", i, r[0], r[1], sec(*p.readsFrom))
					}
				}
				for _, w := range db.walks {
					if w.Table == "idempotent" && (w.EqCol != "action" || w.EqVal != inspect.ActionSkipped || w.PosCol != "created_at" || w.KeyCol != "msg_id") {
						t.Errorf("poll %d: the records' walk %+v: want the SKIPPED ones by created_at, keyed by msg_id", i, w)
					}
				}
			}
			for _, l := range said {
				if !strings.Contains(l, "pipeline orders: ") || !strings.Contains(l, "idempotent") || !strings.Contains(l, "sweep") && !strings.Contains(l, "Kafka answers again") {
					t.Errorf("said %q: want the pipeline, the table and who sees the records", l)
				}
			}
		})
	}
}

// Without Kafka (or a pipeline whose messages are not keyed by the biz_id)
// the records are not polled and the pipeline is named; an entity table
// is still polled, so the pipeline is followed.
func TestPollSourceRecordsWithoutTopic(t *testing.T) {
	keyedOther := seed003Pipeline()
	keyedOther.Name, keyedOther.MessageKey = "other", "order-{biz_id}"
	for _, tc := range []struct {
		name       string
		p          *config.Pipeline
		topics     *watch.Topics
		wantTables []string
		unmapped   []string
	}{
		{"with Kafka", seed003Pipeline(), &watch.Topics{Kafka: &recordsTopic{}}, []string{"idempotent", "orders"}, nil},
		{"no Kafka", seed003Pipeline(), nil, []string{"orders"}, []string{"orders"}},
		{"Kafka's reader not opened", seed003Pipeline(), &watch.Topics{}, []string{"orders"}, []string{"orders"}},
		{"messages not keyed by the biz_id: binlog mode does not map them either", keyedOther, &watch.Topics{Kafka: &recordsTopic{}}, []string{"orders"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := &fakeWalker{now: time.Now()}
			src := &watch.PollSource{Pipelines: []*config.Pipeline{tc.p}, DBFor: func(*config.Pipeline) watch.Walker { return db }, Topics: tc.topics}
			if _, _, err := src.Changes(context.Background(), ""); err != nil {
				t.Fatal(err)
			}
			var tables []string
			for _, w := range db.walks {
				tables = append(tables, w.Table)
			}
			if !slices.Equal(tables, tc.wantTables) || !slices.Equal(src.RecordsUnmapped(), tc.unmapped) || len(src.Unfollowed()) != 0 {
				t.Errorf("walked %v, records unmapped %v, unfollowed %v; want %v, %v and none", tables, src.RecordsUnmapped(), src.Unfollowed(), tc.wantTables, tc.unmapped)
			}
		})
	}
}

// steppedPoll runs its PollSource's Changes only when the test hands it a
// step (what changes in the fakes before that poll), so that a Watcher's
// rounds go in lock step with the test: a step is taken only once the
// round before it is triaged.
type steppedPoll struct {
	*watch.PollSource
	step chan func()
}

func (s *steppedPoll) Changes(ctx context.Context, from string) ([]watch.Change, string, error) {
	select {
	case f := <-s.step:
		f()
	case <-ctx.Done():
		return nil, from, ctx.Err()
	}
	return s.PollSource.Changes(ctx, from)
}

// TestWatchPollsSeed003RecordThroughKafkaOutage: a Watcher polling seed
// 003's pipeline while Kafka fails for two polls, during which the
// incident's SKIPPED record is written and an order row changes, then
// answers: the order is looked at during the outage (its table
// advances), and 8821 is looked at exactly once, after Kafka answers,
// flagged with the record as its cause; later polls read the record again
// (the overlap) and look at nothing (docs/watch.md#polling).
func TestWatchPollsSeed003RecordThroughKafkaOutage(t *testing.T) {
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	sec := func(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Second))) }
	db := &fakeWalker{now: t0, tables: map[string][]fakeRow{}}
	topic := &recordsTopic{}
	var said []string
	src := &steppedPoll{step: make(chan func()), PollSource: &watch.PollSource{Pipelines: []*config.Pipeline{seed003Pipeline()},
		DBFor: func(*config.Pipeline) watch.Walker { return db }, Lookback: time.Minute, Topics: &watch.Topics{Kafka: topic},
		Log: func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }}}
	var mu sync.Mutex
	looked := map[string]int{}
	events := &lockedLines{}
	w := &watch.Watcher{Pipelines: src.Pipelines, Source: src, Interval: time.Millisecond, OlderThan: time.Hour, Settle: -1, Events: events,
		Triage: func(_ context.Context, _, id string) (inspect.Report, error) {
			mu.Lock()
			looked[id]++
			mu.Unlock()
			now := time.Now()
			r := inspect.Report{BizID: id, DBNow: &now, Verdict: inspect.Verdict{Code: "COMPLETE", Severity: inspect.SeverityOK}}
			if id == "8821" {
				r.Verdict = inspect.Verdict{Code: "WRONGLY_SKIPPED", Severity: inspect.SeverityAction, Summary: "PAID recorded SKIPPED"}
			}
			return r, nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	down := errors.New("kafka: brokers unreachable")
	steps := []struct {
		name string
		f    func()
		// looked is every operation looked at so far, once the step's
		// round is triaged (checked at the next step).
		looked map[string]int
	}{
		{"Kafka down, the record written", func() {
			topic.err = down
			db.tables["idempotent"] = append(db.tables["idempotent"], fakeRow{at: sec(0.5), key: "msg-7391", eq: inspect.ActionSkipped})
		}, map[string]int{}},
		{"Kafka still down, an order row changes", func() {
			db.tables["orders"] = append(db.tables["orders"], fakeRow{at: sec(1), key: "8824"})
		}, map[string]int{"8824": 1}},
		{"Kafka answers", func() {
			topic.err = nil
			topic.msgs = append(topic.msgs, orderMsg(1, sec(0.4), "8821", "msg-7391"))
		}, map[string]int{"8824": 1, "8821": 1}},
		{"a poll after: the overlap reads the record again", func() {}, map[string]int{"8824": 1, "8821": 1}},
	}
	check := func(name string, want map[string]int) {
		mu.Lock()
		defer mu.Unlock()
		if !maps.Equal(looked, want) {
			t.Errorf("after %q: looked at %v, want %v", name, looked, want)
		}
	}
	// A step runs at the start of its round, in the watch's loop: the
	// round before it is triaged by then.
	send := func(name string, f func()) {
		t.Helper()
		select {
		case src.step <- f:
		case err := <-done:
			t.Fatalf("the watch ended before step %q: %v", name, err)
		}
	}
	for i, s := range steps {
		f := s.f
		if i > 0 {
			prev := steps[i-1]
			f = func() { check(prev.name, prev.looked); s.f() }
		}
		send(s.name, f)
	}
	last := steps[len(steps)-1]
	send("the check of the last", func() { check(last.name, last.looked) })
	// Taken only once that check ran.
	send("the end", func() {})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var flagged []map[string]any
	for _, l := range events.lines() {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("event %q: %v", l, err)
		}
		if e["event"] == "flagged" {
			flagged = append(flagged, e)
		}
	}
	if len(flagged) != 1 || flagged[0]["biz_id"] != "8821" {
		t.Fatalf("flagged %v, want 8821 once", flagged)
	}
	cause, _ := flagged[0]["cause"].(map[string]any)
	if cause["source"] != watch.SourcePoll || cause["table"] != "idempotent" || !strings.HasSuffix(fmt.Sprint(cause["position"]), "/msg-7391") {
		t.Errorf("8821's cause %v: want the poll of the record msg-7391", cause)
	}
	if len(said) != 2 || !strings.Contains(said[0], "wait for Kafka") || !strings.Contains(said[1], "Kafka answers again: the 1 SKIPPED record(s)") {
		t.Errorf("said %q: want the wait, once, then the records mapped", said)
	}
	if src.Unmapped() != 0 {
		t.Errorf("unmapped %d: the record waited, it was not left", src.Unmapped())
	}
}

// lockedLines keeps the lines written to it (the watch's events).
type lockedLines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLines) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}

// TestPollSourceHoldsOnlyItsPipeline: the topic of one pipeline cannot be
// read, another's can: only the first's records wait (its records
// table's watermark held), the other's are mapped and its watermark moves
// on, and the first's entity table moves on too.
func TestPollSourceHoldsOnlyItsPipeline(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	sec := func(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Second))) }
	a, b := seed003Pipeline(), seed003Pipeline()
	b.Name, b.Topic = "orders_b", "order-event-b"
	b.Idempotency.Table, b.Entity.Table = "idempotent_b", "orders_b"
	db := &fakeWalker{now: t0, tables: map[string][]fakeRow{
		"idempotent":   {{at: sec(1), key: "msg-a", eq: inspect.ActionSkipped}},
		"orders":       {{at: sec(1), key: "7001"}},
		"idempotent_b": {{at: sec(1), key: "msg-b", eq: inspect.ActionSkipped}},
	}}
	topic := &recordsTopic{err: errors.New("kafka: order-event: leader not available"), errTopic: "order-event",
		msgs: []sources.Message{orderMsg(1, sec(0.9), "7001", "msg-a"), orderMsg(2, sec(0.9), "7002", "msg-b")}}
	var said []string
	src := &watch.PollSource{Pipelines: []*config.Pipeline{a, b}, DBFor: func(*config.Pipeline) watch.Walker { return db }, Lookback: time.Minute,
		Topics: &watch.Topics{Kafka: topic}, Log: func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }}
	ctx := context.Background()
	pos, err := src.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]string{
		{"orders:7001", "orders_b:7002"},
		nil,
	} {
		changes, np, err := src.Changes(ctx, pos)
		if err != nil {
			t.Fatal(err)
		}
		pos = np
		var got []string
		for _, c := range changes {
			got = append(got, c.Pipeline+":"+c.BizID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("poll %d: changes %v, want %v", i, got, want)
		}
	}
	var marks map[string]time.Time
	if err := json.Unmarshal([]byte(pos), &marks); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]time.Time{"orders/idempotent": sec(1), "orders/orders": sec(1), "orders_b/idempotent_b": sec(1)} {
		if !marks[name].Equal(want) {
			t.Errorf("position %s: %v, want %v", name, marks[name], want)
		}
	}
	// The held table is read again from its first record at each poll;
	// the other's from its newest less the overlap, like every table.
	db.walks = nil
	db.tables["idempotent_b"] = append(db.tables["idempotent_b"], fakeRow{at: sec(5), key: "msg-b2", eq: inspect.ActionSkipped})
	db.tables["orders"] = append(db.tables["orders"], fakeRow{at: sec(5), key: "7005"})
	db.tables["idempotent"] = append(db.tables["idempotent"], fakeRow{at: sec(5), key: "msg-a2", eq: inspect.ActionSkipped})
	topic.msgs = append(topic.msgs, orderMsg(3, sec(4.9), "7006", "msg-b2"))
	changes, np, err := src.Changes(ctx, pos)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(np), &marks); err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 || !marks["orders/idempotent"].Equal(sec(1)) || !marks["orders/orders"].Equal(sec(5)) || !marks["orders_b/idempotent_b"].Equal(sec(5)) {
		t.Errorf("changes %+v, position %v: want 7005 and 7006, the held table still at 1s, the others at 5s", changes, marks)
	}
	if len(said) != 1 || !strings.Contains(said[0], "pipeline orders: 1 SKIPPED record(s) of idempotent") {
		t.Errorf("said %q: want only pipeline orders' records said to wait", said)
	}
}
