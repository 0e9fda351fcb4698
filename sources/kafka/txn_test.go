package kafka_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/kafka"
)

// isolationReader is a Reader whose consumers read with isolation level
// level ("" is the default, read_uncommitted).
func isolationReader(t testing.TB, k *testenv.Kafka, level string) *kafka.Reader {
	t.Helper()
	r := kafka.New(config.Kafka{Brokers: k.Brokers, Version: "3.5.0", ClientID: "opctl-test", IsolationLevel: level}, 5*time.Second)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// levels are the isolation levels every transaction test runs with.
var levels = []string{"", config.ReadUncommitted, config.ReadCommitted}

func levelName(l string) string {
	if l == "" {
		return "default"
	}
	return l
}

// noise writes a record of another key (not in a transaction) every 30s
// from a to b (b excluded).
func noise(t testing.TB, k *testenv.Kafka, p int32, a, b time.Time) {
	t.Helper()
	for ts := a; ts.Before(b); ts = ts.Add(30 * time.Second) {
		k.Produce(t, topic, p, fmt.Sprintf("OTHER-%d", ts.Unix()), "noise", map[string]string{"msg_id": fmt.Sprint("n-", ts.Unix())}, ts)
	}
}

// A transactional producer aborted a record of the operation and then
// committed the same key: the message is the committed record, whatever
// the consumers' isolation level (read_committed never sees the aborted
// one; read_uncommitted reads both, and the consumer will read the
// committed one), and the aborted record is never read back as the
// message, not even at a stored position.
func TestLocateAbortedThenCommitted(t *testing.T) {
	k := testenv.NewKafka(t, map[string]int32{topic: 1})
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	noise(t, k, 0, at.Add(-10*time.Minute), at)
	tx := k.Transactional(t, "payments-tx")
	tx.Begin()
	abortedOff := tx.Produce(topic, 0, "PAY-9", "aborted", map[string]string{"msg_id": "m-9"}, at.Add(30*time.Second))
	tx.End(false)
	noise(t, k, 0, at.Add(time.Minute), at.Add(2*time.Minute))
	tx.Begin()
	committedOff := tx.Produce(topic, 0, "PAY-9", "committed", map[string]string{"msg_id": "m-9"}, at.Add(2*time.Minute))
	tx.End(true)
	noise(t, k, 0, at.Add(3*time.Minute), at.Add(20*time.Minute))
	if committedOff <= abortedOff+1 {
		t.Fatalf("test setup: aborted at %d, committed at %d", abortedOff, committedOff)
	}

	for _, level := range levels {
		t.Run(levelName(level), func(t *testing.T) {
			r := isolationReader(t, k, level)
			ctx := context.Background()
			for _, msgID := range []string{"m-9", ""} {
				loc, err := r.Locate(ctx, sources.LocateRequest{Topic: topic, Key: []byte("PAY-9"), MsgID: msgID, Partition: 0, Offset: -1, Around: at})
				if err != nil {
					t.Fatal(err)
				}
				if loc.Located != sources.LocatedSearched || loc.Offset != committedOff || loc.Message == nil || string(loc.Message.Value) != "committed" {
					t.Fatalf("msg id %q: location = %+v (aborted at %d, committed at %d)", msgID, loc, abortedOff, committedOff)
				}
				want := "matched first, but was written in a transaction its producer aborted"
				if level == config.ReadCommitted {
					want = "1 of them in aborted transactions (invisible to read_committed consumers)"
				}
				if !strings.Contains(loc.Detail, want) {
					t.Errorf("detail = %q, want it to contain %q", loc.Detail, want)
				}
			}

			stored, err := r.Locate(ctx, sources.LocateRequest{Topic: topic, Key: []byte("PAY-9"), MsgID: "m-9", Partition: 0, Offset: abortedOff})
			if err != nil {
				t.Fatal(err)
			}
			if stored.Message != nil || stored.Offset != abortedOff || stored.Located != sources.LocatedStored ||
				!strings.Contains(stored.Detail, "was written in a transaction its producer aborted") {
				t.Errorf("stored at the aborted record: %+v", stored)
			}
			stored, err = r.Locate(ctx, sources.LocateRequest{Topic: topic, Key: []byte("PAY-9"), MsgID: "m-9", Partition: 0, Offset: committedOff})
			if err != nil || stored.Message == nil || string(stored.Message.Value) != "committed" {
				t.Errorf("stored at the committed record: %+v, %v", stored, err)
			}
		})
	}
}

// Only an aborted record of the operation: read_committed consumers never
// saw it (not found); read_uncommitted ones read it, so its position is
// the operation's, but the record is not read back (nothing to copy).
func TestLocateAbortedOnly(t *testing.T) {
	k := testenv.NewKafka(t, map[string]int32{topic: 1})
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	noise(t, k, 0, at.Add(-10*time.Minute), at)
	tx := k.Transactional(t, "payments-tx")
	tx.Begin()
	abortedOff := tx.Produce(topic, 0, "PAY-9", "aborted", map[string]string{"msg_id": "m-9"}, at.Add(30*time.Second))
	tx.End(false)
	noise(t, k, 0, at.Add(time.Minute), at.Add(20*time.Minute))

	for _, level := range levels {
		t.Run(levelName(level), func(t *testing.T) {
			r := isolationReader(t, k, level)
			loc, err := r.Locate(context.Background(), sources.LocateRequest{Topic: topic, Key: []byte("PAY-9"), MsgID: "m-9", Partition: 0, Offset: -1, Around: at})
			if err != nil {
				t.Fatal(err)
			}
			if loc.Message != nil {
				t.Fatalf("the aborted record was read back as the message: %+v", loc)
			}
			if level == config.ReadCommitted {
				if loc.Located != sources.LocatedUnknown || loc.Offset != -1 || !strings.HasPrefix(loc.Detail, "not found: ") ||
					!strings.Contains(loc.Detail, "1 of them in aborted transactions") {
					t.Errorf("location = %+v", loc)
				}
				return
			}
			if loc.Located != sources.LocatedSearched || loc.Offset != abortedOff ||
				!strings.Contains(loc.Detail, "read_uncommitted consumers read it, but it is not copied by a republish") {
				t.Errorf("location = %+v (aborted at %d)", loc, abortedOff)
			}
		})
	}
}

// A record of the operation in a transaction still open: read_committed
// consumers do not see it yet (the search ends at the last stable offset);
// read_uncommitted ones do, and it is not read back.
func TestLocateOpenTransaction(t *testing.T) {
	k := testenv.NewKafka(t, map[string]int32{topic: 1})
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	noise(t, k, 0, at.Add(-10*time.Minute), at)
	tx := k.Transactional(t, "payments-tx")
	tx.Begin()
	openOff := tx.Produce(topic, 0, "PAY-10", "open", map[string]string{"msg_id": "m-10"}, at.Add(30*time.Second))
	noise(t, k, 0, at.Add(time.Minute), at.Add(20*time.Minute))

	for _, level := range levels {
		t.Run(levelName(level), func(t *testing.T) {
			r := isolationReader(t, k, level)
			ctx := context.Background()
			loc, err := r.Locate(ctx, sources.LocateRequest{Topic: topic, Key: []byte("PAY-10"), MsgID: "m-10", Partition: 0, Offset: -1, Around: at})
			if err != nil {
				t.Fatal(err)
			}
			if loc.Message != nil {
				t.Fatalf("a record of an open transaction was read back as the message: %+v", loc)
			}
			stored, err := r.Locate(ctx, sources.LocateRequest{Topic: topic, Key: []byte("PAY-10"), MsgID: "m-10", Partition: 0, Offset: openOff})
			if err != nil || stored.Message != nil || stored.Offset != openOff {
				t.Errorf("stored: %+v, %v", stored, err)
			}
			if level == config.ReadCommitted {
				if loc.Located != sources.LocatedUnknown || !strings.HasSuffix(loc.Detail, fmt.Sprintf("stopped: reached the last stable offset %d", openOff)) {
					t.Errorf("location = %+v", loc)
				}
				if !strings.Contains(stored.Detail, "its transaction has not ended, and read_committed consumers do not see it yet") {
					t.Errorf("stored detail = %q", stored.Detail)
				}
				return
			}
			if loc.Located != sources.LocatedSearched || loc.Offset != openOff || !strings.Contains(loc.Detail, "not known to have ended") {
				t.Errorf("location = %+v (open at %d)", loc, openOff)
			}
			if !strings.Contains(stored.Detail, "not known to have ended") {
				t.Errorf("stored detail = %q", stored.Detail)
			}
		})
	}
}

// The fetch at a stored position ends before the transaction's marker (two
// batches of 600 KB, a 1 MiB fetch): how the transaction ended is asked
// with a read_committed fetch.
func TestLocateStoredMarkerPastTheFetch(t *testing.T) {
	k := testenv.NewKafka(t, map[string]int32{topic: 1})
	big := string(make([]byte, 600<<10)) // uncompressed: the helper does not compress
	tx := k.Transactional(t, "payments-tx")
	offs := map[bool]int64{}
	for _, commit := range []bool{false, true} {
		tx.Begin()
		offs[commit] = tx.Produce(topic, 0, "PAY-11", big, map[string]string{"msg_id": "m-11"}, time.Time{})
		tx.Produce(topic, 0, "PAY-11-more", big, nil, time.Time{})
		tx.End(commit)
	}
	fetches := countFetches(k)
	for _, level := range levels {
		t.Run(levelName(level), func(t *testing.T) {
			r := isolationReader(t, k, level)
			ctx := context.Background()
			// One fetch at the position; with read_uncommitted one more
			// (read_committed) to learn how the transaction ended.
			want := int64(2)
			if level == config.ReadCommitted {
				want = 1
			}
			fetches.Store(0)
			loc, err := r.Locate(ctx, sources.LocateRequest{Topic: topic, Key: []byte("PAY-11"), Partition: 0, Offset: offs[false]})
			if err != nil || loc.Message != nil || !strings.Contains(loc.Detail, "was written in a transaction its producer aborted") {
				t.Errorf("aborted: %+v, %v", loc, err)
			}
			if n := fetches.Load(); n != want {
				t.Errorf("aborted: %d fetches, want %d", n, want)
			}
			fetches.Store(0)
			loc, err = r.Locate(ctx, sources.LocateRequest{Topic: topic, Key: []byte("PAY-11"), Partition: 0, Offset: offs[true]})
			if err != nil || loc.Message == nil || loc.Offset != offs[true] {
				t.Errorf("committed: %+v, %v", loc, err)
			}
			if n := fetches.Load(); n != want {
				t.Errorf("committed: %d fetches, want %d", n, want)
			}
		})
	}
}

// A stored locate reads 4 KiB from the position (storedFetchBytes): a
// small transaction's marker, just after its record, comes in the same
// answer, and read_uncommitted learns how it ended without asking; when
// other producers wrote more than that between the record and its marker
// (a busy partition), it asks with one more fetch (settle). read_committed
// always knows from its one fetch (the aborted transactions it lists).
func TestLocateStoredTransactionFetches(t *testing.T) {
	k := testenv.NewKafka(t, map[string]int32{topic: 1})
	tx := k.Transactional(t, "payments-small-tx")
	tx.Begin()
	near := tx.Produce(topic, 0, "PAY-21", string(make([]byte, 300)), map[string]string{"msg_id": "m-21"}, time.Time{})
	tx.End(true)
	tx.Begin()
	far := tx.Produce(topic, 0, "PAY-22", string(make([]byte, 300)), map[string]string{"msg_id": "m-22"}, time.Time{})
	for i := range 40 { // 40 × 400 bytes of another producer's, before the marker
		k.Produce(t, topic, 0, fmt.Sprintf("OTHER-%d", i), string(make([]byte, 400)), nil, time.Time{})
	}
	tx.End(true)
	fetches := countFetches(k)
	for _, level := range levels {
		t.Run(levelName(level), func(t *testing.T) {
			r := isolationReader(t, k, level)
			for _, c := range []struct {
				name string
				key  string
				off  int64
				want int64
			}{
				{"marker in the answer", "PAY-21", near, 1},
				{"marker past 4 KiB", "PAY-22", far, map[bool]int64{true: 1, false: 2}[level == config.ReadCommitted]},
			} {
				fetches.Store(0)
				loc, err := r.Locate(context.Background(), sources.LocateRequest{Topic: topic, Key: []byte(c.key), Partition: 0, Offset: c.off})
				if err != nil || loc.Message == nil || loc.Offset != c.off {
					t.Errorf("%s: %+v, %v", c.name, loc, err)
				}
				if n := fetches.Load(); n != c.want {
					t.Errorf("%s: %d fetches, want %d", c.name, n, c.want)
				}
			}
		})
	}
}
