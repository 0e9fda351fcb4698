package watch_test

import (
	"context"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/reconcile/watch"
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
