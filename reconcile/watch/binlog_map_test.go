package watch

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// The pipelines of the mapping tests: the lab's shapes and the seeds'.
func mapPipelines() []*config.Pipeline {
	pay := &config.Pipeline{Name: "pay", MessageKey: "{biz_id}",
		State:       &config.State{Table: "op_state", Key: "biz_id", UpdatedAt: "updated_at"},
		Idempotency: &config.Idempotency{Table: "consumer_idempotency", Key: "msg_id", BizID: "biz_id", Action: "action"},
		Steps:       []config.Step{{Name: "debit", Scan: &config.Scan{Table: "balance_journal", Key: "biz_id", Time: "created_at"}}}}
	// Seed 003: records without biz_id, an entity table.
	orders := &config.Pipeline{Name: "orders", Topic: "order-event", MessageKey: "{biz_id}",
		Idempotency: &config.Idempotency{Table: "s3.idempotent", Key: "msg_id", Action: "action", CreatedAt: "created_at", MsgIDPath: "$.msgId"},
		Entity:      &config.Entity{Table: "s3.orders", Key: "order_id", Status: "status"}}
	// Seed 000: a binlog step without a transaction tie, a scan step; and
	// a step tied by its transaction.
	settle := &config.Pipeline{Name: "settle", Topic: "settlement", MessageKey: "{biz_id}",
		Steps: []config.Step{
			{Name: "debit", Binlog: &config.Binlog{Table: "s0.account_balance", Key: "account_id", Delta: "balance", MessageKey: "$.account_id", MessageDelta: "-$.amount"}},
			{Name: "ledger", Scan: &config.Scan{Table: "s0.ledger_entry", Key: "biz_order_id"}},
			{Name: "fee", Binlog: &config.Binlog{Table: "s0.fees", Key: "account_id", Delta: "total", MessageKey: "$.account_id", MessageDelta: "$.fee", Transaction: "s0.fee_tx.biz_id"}},
		}}
	return []*config.Pipeline{pay, orders, settle}
}

func TestPlanFollow(t *testing.T) {
	fp := planFollow(mapPipelines(), "app")
	var got []string
	for _, ft := range fp.tables {
		got = append(got, ft.Schema+"."+ft.Table+"("+strings.Join(ft.Columns, ",")+")")
	}
	// Only the columns a rule reads: the key columns, the action of
	// records without biz_id, and the time column that refines the commit
	// time.
	want := []string{"app.op_state(biz_id,updated_at)", "app.consumer_idempotency(biz_id)", "app.balance_journal(biz_id,created_at)",
		"s3.idempotent(msg_id,action,created_at)", "s3.orders(order_id)",
		"s0.account_balance(account_id)", "s0.ledger_entry(biz_order_id)", "s0.fee_tx(biz_id)", "s0.fees(account_id)"}
	if !slices.Equal(got, want) {
		t.Fatalf("followed tables\n got %v\nwant %v", got, want)
	}
}

// A row image without the column a rule maps by (MINIMAL for one
// session) is not guessed at: the watch sweeps again.
func TestMapTxMissingColumn(t *testing.T) {
	fp := planFollow(mapPipelines(), "app")
	tx := sources.BinlogTx{Changes: []sources.RowChange{{Schema: "s3", Table: "idempotent", Kind: sources.ChangeUpdate,
		Values: map[string]string{"msg_id": "m"}, Missing: []string{"action"}}}}
	if _, _, unknown := fp.mapTx(tx, nil); !strings.Contains(unknown, "s3.idempotent") || !strings.Contains(unknown, "MINIMAL") {
		t.Fatalf("unknown %q", unknown)
	}
}

func TestMapTx(t *testing.T) {
	fp := planFollow(mapPipelines(), "app")
	at := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	ch := func(schema, table string, kind sources.ChangeKind, kv ...string) sources.RowChange {
		c := sources.RowChange{Schema: schema, Table: table, Kind: kind, Values: map[string]string{}}
		for i := 0; i+1 < len(kv); i += 2 {
			c.Values[kv[i]] = kv[i+1]
		}
		return c
	}
	for _, tc := range []struct {
		name    string
		changes []sources.RowChange
		direct  []string // pipeline/biz@table
		pending []string // pipeline/value@table
	}{
		{"state row", []sources.RowChange{ch("app", "op_state", sources.ChangeUpdate, "biz_id", "b1")}, []string{"pay/b1@op_state"}, nil},
		{"state row deleted", []sources.RowChange{ch("app", "op_state", sources.ChangeDelete, "biz_id", "b1")}, []string{"pay/b1@op_state"}, nil},
		{"record with biz_id", []sources.RowChange{ch("app", "consumer_idempotency", sources.ChangeInsert, "biz_id", "b2")}, []string{"pay/b2@consumer_idempotency"}, nil},
		{"scan table", []sources.RowChange{ch("app", "balance_journal", sources.ChangeInsert, "biz_id", "b3")}, []string{"pay/b3@balance_journal"}, nil},
		{"column named in another case", []sources.RowChange{ch("app", "op_state", sources.ChangeUpdate, "BIZ_ID", "b4")}, []string{"pay/b4@op_state"}, nil},
		{"NULL key", []sources.RowChange{ch("app", "op_state", sources.ChangeUpdate)}, nil, nil},
		{"unfollowed table", []sources.RowChange{ch("app", "other", sources.ChangeInsert, "biz_id", "z")}, nil, nil},
		{"same name, other schema", []sources.RowChange{ch("s3", "op_state", sources.ChangeInsert, "biz_id", "z")}, nil, nil},
		{"entity status change", []sources.RowChange{ch("s3", "orders", sources.ChangeUpdate, "order_id", "8822")}, []string{"orders/8822@s3.orders"}, nil},
		{"SKIPPED record without biz_id", []sources.RowChange{ch("s3", "idempotent", sources.ChangeInsert, "msg_id", "msg-7391", "action", "SKIPPED")}, nil, []string{"orders/msg-7391@s3.idempotent"}},
		{"DONE record without biz_id", []sources.RowChange{ch("s3", "idempotent", sources.ChangeInsert, "msg_id", "msg-7392", "action", "DONE")}, nil, nil},
		{"SKIPPED record deleted (reopened)", []sources.RowChange{ch("s3", "idempotent", sources.ChangeDelete, "msg_id", "msg-7391", "action", "SKIPPED")}, nil, nil},
		{"binlog step row", []sources.RowChange{ch("s0", "account_balance", sources.ChangeUpdate, "account_id", "3001")}, nil, []string{"settle/3001@s0.account_balance"}},
		{"binlog step tied by its transaction", []sources.RowChange{ch("s0", "fees", sources.ChangeUpdate, "account_id", "3001"), ch("s0", "fee_tx", sources.ChangeInsert, "biz_id", "PAY-9")},
			[]string{"settle/PAY-9@s0.fee_tx"}, []string{"settle/3001@s0.fees"}},
		{"scan step of seed 000", []sources.RowChange{ch("s0", "ledger_entry", sources.ChangeInsert, "biz_order_id", "PAY-BL-1")}, []string{"settle/PAY-BL-1@s0.ledger_entry"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx := sources.BinlogTx{Changes: tc.changes, End: sources.BinlogPosition{File: "bin.000002", Pos: 900}, CommittedAt: at}
			direct, pending, unknown := fp.mapTx(tx, nil)
			if unknown != "" {
				t.Fatalf("unknown: %s", unknown)
			}
			var gd, gp []string
			for _, c := range direct {
				gd = append(gd, c.Pipeline+"/"+c.BizID+"@"+c.Table)
				if c.Position != "bin.000002:900" || c.CommittedAt == nil || !c.CommittedAt.Equal(at) {
					t.Errorf("change %+v: want position bin.000002:900 and the commit time", c)
				}
			}
			for _, p := range pending {
				gp = append(gp, p.rule.p.Name+"/"+p.value+"@"+p.table)
			}
			if !slices.Equal(gd, tc.direct) || !slices.Equal(gp, tc.pending) {
				t.Fatalf("direct %v pending %v, want %v and %v", gd, gp, tc.direct, tc.pending)
			}
		})
	}
}

// fakeTopic is a topic of messages; it counts the reads.
type fakeTopic struct {
	msgs  []sources.Message
	reads [][2]time.Time
}

func (f *fakeTopic) Records(_ context.Context, _ string, from, to time.Time, _ int, each func(*sources.Message)) (sources.RecordsRead, error) {
	f.reads = append(f.reads, [2]time.Time{from, to})
	n := 0
	for i := range f.msgs {
		if m := f.msgs[i]; !m.Timestamp.Before(from) && !m.Timestamp.After(to) {
			each(&m)
			n++
		}
	}
	return sources.RecordsRead{Records: n}, nil
}

func TestTopicsResolve(t *testing.T) {
	ps := mapPipelines()
	orders, settle := ps[1], ps[2]
	t0 := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	msg := func(off int64, at time.Duration, key string, v map[string]any) sources.Message {
		b, _ := json.Marshal(v)
		return sources.Message{Partition: 0, Offset: off, Timestamp: t0.Add(at), Key: []byte(key), Value: b}
	}
	topic := &fakeTopic{msgs: []sources.Message{
		msg(1, -20*time.Minute, "PAY-OLD", map[string]any{"account_id": 3001, "amount": 5}), // outside the 10m window
		msg(2, -3*time.Minute, "PAY-BL-1", map[string]any{"account_id": 3001, "amount": 5}),
		msg(3, -2*time.Minute, "PAY-BL-3", map[string]any{"account_id": 3001, "amount": 5}),
		msg(4, -1*time.Minute, "PAY-BL-2", map[string]any{"account_id": 3002, "amount": 5}),
		msg(5, -30*time.Second, "8821", map[string]any{"msgId": "msg-7391", "orderId": 8821}),
		msg(6, -10*time.Minute, "8820", map[string]any{"msgId": "msg-7000", "orderId": 8820}), // beyond the 5m search window
	}}
	fp := planFollow(ps, "app")
	rule := func(p *config.Pipeline, table string) mapRule {
		for _, r := range fp.rules[table] {
			if r.p == p {
				return r
			}
		}
		t.Fatalf("no rule for %s", table)
		return mapRule{}
	}
	tp := &Topics{Kafka: topic}
	for _, tc := range []struct {
		name string
		p    *config.Pipeline
		pend []pendingChange
		want []string
	}{
		{"a binlog step's row: every operation whose message names it in the window", settle,
			[]pendingChange{{rule: rule(settle, "s0.account_balance"), value: "3001", at: t0, table: "account_balance"}}, []string{"PAY-BL-1", "PAY-BL-3"}},
		{"a row no message names", settle,
			[]pendingChange{{rule: rule(settle, "s0.account_balance"), value: "9999", at: t0, table: "account_balance"}}, nil},
		{"a SKIPPED record's msg id", orders,
			[]pendingChange{{rule: rule(orders, "s3.idempotent"), value: "msg-7391", at: t0, table: "idempotent"}}, []string{"8821"}},
		{"a msg id before the search window", orders,
			[]pendingChange{{rule: rule(orders, "s3.idempotent"), value: "msg-7000", at: t0, table: "idempotent"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, skipped, err := tp.resolve(context.Background(), tc.p, tc.pend)
			if err != nil || skipped != 0 {
				t.Fatal(err, skipped)
			}
			var got []string
			for _, c := range out {
				got = append(got, c.BizID)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("operations %v, want %v", got, tc.want)
			}
		})
	}
	// Each record is read once: a later change reads only the topic after
	// the last read (less a second of overlap).
	n := len(topic.reads)
	if _, _, err := tp.resolve(context.Background(), settle, []pendingChange{{rule: rule(settle, "s0.account_balance"), value: "3001", at: t0.Add(5 * time.Second), table: "account_balance"}}); err != nil {
		t.Fatal(err)
	}
	if r := topic.reads[n]; len(topic.reads) != n+1 || !r[0].Equal(t0.Add(time.Second-topicOverlap)) {
		t.Errorf("reads %v after %d, want one from the first read's end less the overlap (%v)", topic.reads, n, t0.Add(time.Second-topicOverlap))
	}
	// A record whose message was appended late (stamped before the last
	// read's end, less the overlap): its window is read again, once.
	late := msg(7, -2*time.Minute, "8825", map[string]any{"msgId": "msg-late"})
	topic.msgs = append(topic.msgs, late)
	n = len(topic.reads)
	out, _, err := tp.resolve(context.Background(), orders, []pendingChange{{rule: rule(orders, "s3.idempotent"), value: "msg-late", at: t0, table: "idempotent"}})
	if err != nil || len(out) != 1 || out[0].BizID != "8825" || len(topic.reads) != n+1 {
		t.Errorf("a late message: %v %v, %d reads: %v", out, err, len(topic.reads)-n, topic.reads[n:])
	}
}

func TestMultiSource(t *testing.T) {
	at := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	a := &fakeFollower{txs: []sources.BinlogTx{{Changes: []sources.RowChange{{Schema: "app", Table: "st", Kind: sources.ChangeUpdate, Values: map[string]string{"biz_id": "a"}}},
		End: sources.BinlogPosition{File: "bin.000001", Pos: 100}, CommittedAt: at}}}
	pa := &config.Pipeline{Name: "pa", State: &config.State{Table: "st", Key: "biz_id"}}
	pb := &config.Pipeline{Name: "pb", State: &config.State{Table: "st", Key: "biz_id"}}
	notify := make(chan struct{}, 1)
	sa := &BinlogSource{Pipelines: []*config.Pipeline{pa}, Follower: a, Schema: "app", Notify: notify}
	defer sa.Close()
	m := &MultiSource{Parts: map[string]ChangeSource{"db1:3306": sa, "db2:3306": &onceSource{name: SourcePoll, changes: []Change{{Pipeline: "pb", BizID: "b"}}}},
		Labels: []string{"db1:3306", "db2:3306"}, Notify: notify}
	_ = pb
	if m.Name() != "binlog+poll" {
		t.Errorf("name %q", m.Name())
	}
	ctx := context.Background()
	head, err := m.Head(ctx)
	if err != nil || head != `{"db1:3306":"{\"file\":\"bin.000001\",\"pos\":4}","db2:3306":"p0"}` {
		t.Fatalf("head %s %v", head, err)
	}
	var got []string
	pos := head
	for i := 0; len(got) < 2; i++ {
		cs, np, err := m.Changes(ctx, pos)
		if err != nil {
			t.Fatal(err)
		}
		pos = np
		for _, c := range cs {
			got = append(got, c.Source+":"+c.Pipeline+"/"+c.BizID)
		}
		if i == 0 {
			// The follow started by the first call delivers the binlog
			// part's transaction, and that wakes the watch.
			select {
			case <-notify:
			case <-time.After(10 * time.Second):
				t.Fatal("no wake from the binlog part")
			}
		}
	}
	if !slices.Contains(got, "binlog:pa/a") || !slices.Contains(got, "poll:pb/b") {
		t.Fatalf("changes %v", got)
	}
	if !strings.Contains(pos, `bin.000001\",\"pos\":100`) {
		t.Errorf("position %s", pos)
	}
	if _, _, err := m.Changes(ctx, `{"db1:3306":"{}"}`); err == nil || !strings.Contains(err.Error(), "db2:3306: no saved position") {
		t.Errorf("a server the position does not know: %v, want ErrPositionGone", err)
	}
}

// onceSource returns its changes once per call.
type onceSource struct {
	name    string
	changes []Change
	n       int
}

func (f *onceSource) Name() string                         { return f.name }
func (f *onceSource) Head(context.Context) (string, error) { return "p0", nil }
func (f *onceSource) Changes(_ context.Context, from string) ([]Change, string, error) {
	f.n++
	if f.n == 1 {
		return f.changes, "p1", nil
	}
	return nil, "p1", nil
}

// The binlog stamps a commit in whole seconds; a row's own time column
// inside that second is the finer commit time, anything else is not.
func TestCommitTime(t *testing.T) {
	sec := time.Date(2026, 12, 2, 6, 57, 20, 0, time.UTC)
	plus8 := time.FixedZone("+08:00", 8*3600)
	row := func(v string) sources.RowChange { return sources.RowChange{Values: map[string]string{"updated_at": v}} }
	for _, tc := range []struct {
		name string
		c    sources.RowChange
		col  string
		loc  *time.Location
		want time.Time
	}{
		{"inside the second", row("2026-12-02 06:57:20.446"), "updated_at", nil, sec.Add(446 * time.Millisecond)},
		{"microseconds", row("2026-12-02 06:57:20.446123"), "updated_at", nil, sec.Add(446123 * time.Microsecond)},
		{"in the pipeline's zone", row("2026-12-02 14:57:20.500"), "updated_at", plus8, sec.Add(500 * time.Millisecond)},
		{"another zone than said: not used", row("2026-12-02 14:57:20.500"), "updated_at", nil, sec},
		{"before the second (written earlier in the transaction)", row("2026-12-02 06:57:19.900"), "updated_at", nil, sec},
		{"no fraction", row("2026-12-02 06:57:20"), "updated_at", nil, sec},
		{"no time column", row("2026-12-02 06:57:20.446"), "", nil, sec},
		{"NULL", sources.RowChange{Values: map[string]string{}}, "updated_at", nil, sec},
		{"not a time", row("soon"), "updated_at", nil, sec},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := commitTime(sec, tc.c, tc.col, tc.loc); !got.Equal(tc.want) {
				t.Fatalf("%v, want %v", got, tc.want)
			}
		})
	}
}
