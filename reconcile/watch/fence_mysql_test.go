package watch

import (
	"context"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
)

// The MySQL reader is the fence read's KeyReader.
var _ KeyReader = (*mysqlsrc.Reader)(nil)

// The fence read on MariaDB, through BatchTriage as the watch calls it:
// the row read back before the triage proves a change visible when it
// holds the change's version or updated_at, or a later one, and not when
// it holds the one before (the commit not visible yet) or no row.
func TestBatchTriageReadsTheFencesFirst(t *testing.T) {
	db := testenv.MySQL(t)
	db.Exec(t, "CREATE TABLE st (biz_id VARCHAR(64) PRIMARY KEY, status VARCHAR(16), version BIGINT NOT NULL, updated_at DATETIME(3) NOT NULL)")
	db.Exec(t, "CREATE TABLE ent (order_id BIGINT PRIMARY KEY, status VARCHAR(16), updated_at DATETIME(3) NOT NULL)")
	db.Exec(t, "INSERT INTO st VALUES ('a', 'DONE', 4, '2026-12-02 04:00:00.250'), ('b', 'DONE', 3, '2026-12-02 04:00:00.100')")
	db.Exec(t, "INSERT INTO ent VALUES (8822, 'PAID', '2026-12-02 04:00:00.900')")
	r, err := mysqlsrc.Open(db.DSN, 10*time.Second)
	testenv.Must(t, err, "open")
	defer r.Close()
	p := &config.Pipeline{Name: "pay", Topic: "t", Group: "g",
		State: &config.State{Table: "st", Key: "biz_id", Status: "status", Version: "version", UpdatedAt: "updated_at", Terminal: []string{"DONE"}}}
	col := &sources.Collector{DB: r, Timeout: 10 * time.Second, KafkaMissing: "not configured"}
	triage := BatchTriage(col, []*config.Pipeline{p})
	ver := func(key, after string) *fence {
		return &fence{Table: "st", KeyCol: "biz_id", Key: key, Col: "version", Kind: fenceVersion, After: after}
	}
	for _, tc := range []struct {
		name  string
		f     *fence
		proof bool
	}{
		{"the change's version", ver("a", "4"), true},
		{"an older change's version (a later one is read)", ver("a", "3"), true},
		{"the version before the change", ver("b", "4"), false},
		{"no row (an insert not visible yet)", ver("c", "0"), false},
		{"the change's updated_at", &fence{Table: "st", KeyCol: "biz_id", Key: "a", Col: "updated_at", Kind: fenceTime, After: "2026-12-02 04:00:00.250"}, true},
		{"updated_at a millisecond later", &fence{Table: "st", KeyCol: "biz_id", Key: "a", Col: "updated_at", Kind: fenceTime, After: "2026-12-02 04:00:00.251"}, false},
		{"the entity's updated_at (a BIGINT key)", &fence{Table: "ent", KeyCol: "order_id", Key: "8822", Col: "updated_at", Kind: fenceTime, After: "2026-12-02 04:00:00.9"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr := &fenceRequest{fences: map[string]*fence{tc.f.Key: tc.f}}
			reps, err := triage(withFences(context.Background(), fr), "pay", []string{tc.f.Key})
			testenv.Must(t, err, "triage")
			if len(reps) != 1 {
				t.Fatalf("%d reports", len(reps))
			}
			if fr.proven[tc.f.Key] != tc.proof {
				t.Errorf("proven %v, want %v", fr.proven[tc.f.Key], tc.proof)
			}
		})
	}
}

// The fence read again on MariaDB (fence.go, proveAll): a transaction
// kept open when the batch's fences are first read is not visible; one
// committed during the waits is proven by the next read, one never
// committed is not (its operation keeps the second look). The commit is
// made in the wait itself: no timing decides the outcome.
func TestBatchTriageReadsUnprovenFencesAgain(t *testing.T) {
	db := testenv.MySQL(t)
	db.Exec(t, "CREATE TABLE st (biz_id VARCHAR(64) PRIMARY KEY, status VARCHAR(16), version BIGINT NOT NULL, updated_at DATETIME(3) NOT NULL)")
	db.Exec(t, "CREATE TABLE idem (msg_id VARCHAR(64) PRIMARY KEY, biz_id VARCHAR(64) NOT NULL, action VARCHAR(16) NOT NULL, created_at DATETIME(3) NOT NULL)")
	db.Exec(t, "INSERT INTO st VALUES ('a', 'DEBIT_DONE', 3, '2026-12-02 04:00:00.100')")
	r, err := mysqlsrc.Open(db.DSN, 10*time.Second)
	testenv.Must(t, err, "open")
	defer r.Close()
	p := &config.Pipeline{Name: "pay", Topic: "t", Group: "g",
		State: &config.State{Table: "st", Key: "biz_id", Status: "status", Version: "version", UpdatedAt: "updated_at", Terminal: []string{"DONE"}}}
	col := &sources.Collector{DB: r, Timeout: 10 * time.Second, KafkaMissing: "not configured"}
	triage := BatchTriage(col, []*config.Pipeline{p})
	version := &fence{Table: "st", KeyCol: "biz_id", Key: "a", Col: "version", Kind: fenceVersion, Before: "3", After: "4"}
	record := &fence{Table: "idem", KeyCol: "msg_id", Key: "m1", Col: "created_at", Kind: fenceTime, After: "2026-12-02 04:00:00.200"}
	for _, tc := range []struct {
		name     string
		tx       string // the transaction open when the fence is first read
		f        *fence
		commitAt int // the wait in which it commits (1, 2); 0 never
		proof    bool
		waits    int
	}{
		{"the state update committed during the first wait", "UPDATE st SET status = 'DONE', version = 4, updated_at = '2026-12-02 04:00:00.200' WHERE biz_id = 'a'", version, 1, true, 1},
		{"the state update committed during the second wait", "UPDATE st SET status = 'DONE', version = 4, updated_at = '2026-12-02 04:00:00.200' WHERE biz_id = 'a'", version, 2, true, 2},
		{"the state update never committed", "UPDATE st SET status = 'DONE', version = 4, updated_at = '2026-12-02 04:00:00.200' WHERE biz_id = 'a'", version, 0, false, 2},
		{"the record inserted, committed during the first wait", "INSERT INTO idem VALUES ('m1', 'a', 'DONE', '2026-12-02 04:00:00.200')", record, 1, true, 1},
		{"the record inserted, never committed", "INSERT INTO idem VALUES ('m1', 'a', 'DONE', '2026-12-02 04:00:00.200')", record, 0, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db.Exec(t, "DELETE FROM idem")
			db.Exec(t, "UPDATE st SET status = 'DEBIT_DONE', version = 3 WHERE biz_id = 'a'")
			ctx := context.Background()
			tx, err := db.SQL.BeginTx(ctx, nil)
			testenv.Must(t, err, "begin")
			defer func() { _ = tx.Rollback() }()
			_, err = tx.ExecContext(ctx, tc.tx)
			testenv.Must(t, err, "the open transaction")
			waits := 0
			fr := &fenceRequest{fences: map[string]*fence{"a": tc.f},
				sleep: func(context.Context, time.Duration) error {
					waits++
					if waits == tc.commitAt {
						return tx.Commit()
					}
					return nil
				}}
			reps, err := triage(withFences(ctx, fr), "pay", []string{"a"})
			testenv.Must(t, err, "triage")
			if len(reps) != 1 {
				t.Fatalf("%d reports", len(reps))
			}
			if fr.proven["a"] != tc.proof {
				t.Errorf("proven %v, want %v", fr.proven["a"], tc.proof)
			}
			if waits != tc.waits {
				t.Errorf("%d waits, want %d", waits, tc.waits)
			}
			// The triage runs after the reads: it sees what they proved.
			if want := tc.f == version && tc.proof; (reps[0].State.Status == "DONE") != want {
				t.Errorf("the triage read status %q; the update visible to it: want %v", reps[0].State.Status, want)
			}
		})
	}
}
