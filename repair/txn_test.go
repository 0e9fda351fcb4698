package repair

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// A transactional producer (not opctl's) aborted PAY-3's message and then
// committed it again; PAY-3 has no stored position, so where searches. The
// operation's message is the committed record whatever the consumers'
// isolation level: its position decides the verdict, and a republish copies
// it, never the aborted one (docs/where.md "Finding the message").
func TestAbortedThenCommittedMessage(t *testing.T) {
	for _, level := range []string{"", config.ReadCommitted} {
		name := level
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			cfg := settlementConfig(t, level)
			e := newTenv(t, cfg,
				[]string{td("schema", "settlement.sql"), td("incidents", "settlement.sql"), td("repair", "settlement_ops.sql")},
				[]string{"settlement-event"}, nil)
			var ts time.Time
			if err := e.db.SQL.QueryRow("SELECT created_at FROM biz_operation WHERE biz_id = 'PAY-3'").Scan(&ts); err != nil {
				t.Fatal(err)
			}
			const topic = "settlement-event"
			p, err := sources.PartitionFor("murmur2", []byte("PAY-3"), e.parts)
			if err != nil {
				t.Fatal(err)
			}
			e.k.Produce(t, topic, p, "noise-PAY-3", "{}", nil, ts.Add(-time.Second))
			tx := e.k.Transactional(t, "settlement-producer")
			tx.Begin()
			abortedOff := tx.Produce(topic, p, "PAY-3", `{"biz_id":"PAY-3","attempt":"aborted"}`, map[string]string{"msg_id": "m-3"}, ts)
			tx.End(false)
			tx.Begin()
			committedOff := tx.Produce(topic, p, "PAY-3", `{"biz_id":"PAY-3","attempt":"committed"}`, map[string]string{"msg_id": "m-3"}, ts.Add(time.Second))
			tx.End(true)
			e.k.Produce(t, topic, p, "noise-after", "{}", nil, ts.Add(2*time.Second))
			position := func(rep inspect.Report) {
				t.Helper()
				if rep.Kafka.Located != sources.LocatedSearched || rep.Kafka.Offset == nil || *rep.Kafka.Offset != committedOff {
					t.Fatalf("kafka %+v (aborted at %d, committed at %d)", rep.Kafka, abortedOff, committedOff)
				}
			}

			// The group committed up to the committed record: the consumer
			// reads it next.
			e.k.Commit(t, "settlement-consumer", topic, p, committedOff)
			rep := e.where("settlement", "PAY-3")
			wantVerdict(t, rep, inspect.WillRedeliver)
			position(rep)

			// Committed past it: stranded, and the republish copies the
			// committed record.
			e.k.Commit(t, "settlement-consumer", topic, p, committedOff+1)
			pl, rep, err := e.plan("settlement", "PAY-3", plans.Options{})
			if err != nil {
				t.Fatalf("plan (verdict %s): %v", rep.Verdict.Code, err)
			}
			wantVerdict(t, rep, inspect.Stranded)
			position(rep)
			if len(pl.Actions) != 1 || pl.Actions[0].Publish == nil {
				t.Fatalf("actions: %+v", pl.Actions)
			}
			ps := pl.Actions[0].Publish
			if !ps.Copy || ps.Source == nil || ps.Source.Offset != committedOff || ps.Source.Partition != p ||
				!strings.Contains(string(ps.Value), `"attempt":"committed"`) {
				t.Fatalf("publish spec: %+v, value %s (aborted at %d, committed at %d)", ps, ps.Value, abortedOff, committedOff)
			}

			// The consumer finished the operation; until the group commits
			// past the committed record, it will be read again.
			e.db.Exec(t, "INSERT INTO step_intent (request_id, biz_id, step, attempt, sent_at, acked_at, result) VALUES ('PAY-3:notify:1', 'PAY-3', 'notify', 1, NOW(3), NOW(3), 'OK')")
			e.db.Exec(t, "UPDATE biz_operation SET status = 'DONE', version = version + 1 WHERE biz_id = 'PAY-3'")
			e.k.Commit(t, "settlement-consumer", topic, p, committedOff)
			wantVerdict(t, e.where("settlement", "PAY-3"), inspect.CompleteUncommitted)
			e.k.Commit(t, "settlement-consumer", topic, p, committedOff+1)
			wantVerdict(t, e.where("settlement", "PAY-3"), inspect.Complete)
		})
	}
}

// settlementConfig is testdata/config/settlement.yaml with
// kafka.isolation_level set to level (unchanged when level is "").
func settlementConfig(t *testing.T, level string) string {
	t.Helper()
	src := td("config", "settlement.yaml")
	if level == "" {
		return src
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	const anchor = "  version: \"3.5.0\"\n"
	if !strings.Contains(string(data), anchor) {
		t.Fatalf("%s has no line %q", src, anchor)
	}
	out := strings.Replace(string(data), anchor, anchor+"  isolation_level: "+level+"\n", 1)
	path := filepath.Join(t.TempDir(), "settlement.yaml")
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A producer whose clock runs 30 minutes ahead wrote another event of
// PAY-3's key right before PAY-3's message: where still finds the message
// (the window's end is not the first record stamped after it).
func TestFutureStampedRecordBeforeTheMessage(t *testing.T) {
	e := settlementEnv(t)
	var ts time.Time
	if err := e.db.SQL.QueryRow("SELECT created_at FROM biz_operation WHERE biz_id = 'PAY-3'").Scan(&ts); err != nil {
		t.Fatal(err)
	}
	const topic = "settlement-event"
	p, err := sources.PartitionFor("murmur2", []byte("PAY-3"), e.parts)
	if err != nil {
		t.Fatal(err)
	}
	e.k.Produce(t, topic, p, "PAY-3", `{"event":"refund"}`, map[string]string{"msg_id": "m-3-refund"}, ts.Add(30*time.Minute))
	off := e.k.Produce(t, topic, p, "PAY-3", `{"event":"debit"}`, map[string]string{"msg_id": "m-3"}, ts)
	e.k.Produce(t, topic, p, "noise-after", "{}", nil, ts.Add(time.Second))
	e.k.Commit(t, "settlement-consumer", topic, p, off)
	rep := e.where("settlement", "PAY-3")
	wantVerdict(t, rep, inspect.WillRedeliver)
	if rep.Kafka.Located != sources.LocatedSearched || rep.Kafka.Offset == nil || *rep.Kafka.Offset != off {
		t.Fatalf("kafka %+v (message at %d)", rep.Kafka, off)
	}
}
