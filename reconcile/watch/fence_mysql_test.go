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
