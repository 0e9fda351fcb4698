package binlog

import (
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
)

func TestParseLabels(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		v    any
		want string
		ok   bool
	}{
		{"enum('DONE','SKIPPED')", int64(2), "SKIPPED", true},
		{"enum('DONE','SKIPPED')", int64(1), "DONE", true},
		{"enum('DONE','SKIPPED')", int64(0), "", true},
		{"ENUM('it''s','a,b')", int64(1), "it's", true},
		{"enum('it''s','a,b')", int64(2), "a,b", true},
		{"set('x','y','z')", int64(5), "x,z", true},
		{"set('x','y','z')", int64(0), "", true},
		{"enum('a')", "a", "", false}, // not an index: kept as it is
		{"varchar(10)", int64(1), "", false},
		{"enum('a'", int64(1), "", false},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			l, ok := parseLabels(tc.typ)
			var got string
			if ok {
				got, ok = l.label(tc.v)
			}
			if ok != tc.ok || got != tc.want {
				t.Fatalf("%s %v: %q %v, want %q %v", tc.typ, tc.v, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// A follow gives ENUM and SET columns as their values, not the row
// image's index and mask (seed 003's action ENUM('DONE','SKIPPED')).
func TestFollowEnum(t *testing.T) {
	f := newFixture(t)
	f.db.Exec(t, "CREATE TABLE idem (msg_id VARCHAR(64) PRIMARY KEY, action ENUM('DONE','SKIPPED') NOT NULL, tags SET('a','b','c'))")
	start := head(t, f.reader)
	f.db.Exec(t, "INSERT INTO idem VALUES ('m1', 'SKIPPED', 'a,c'), ('m2', 'DONE', NULL)")
	got, err := follow(t, f.reader, start, []sources.FollowTable{{Schema: f.db.Name, Table: "idem", Columns: []string{"msg_id", "action", "tags"}}}, 10*time.Second, count(2))
	testenv.Must(t, err, "follow")
	cs := changesOf(got)
	if cs[0].Values["action"] != "SKIPPED" || cs[0].Values["tags"] != "a,c" || cs[1].Values["action"] != "DONE" {
		t.Fatalf("changes %+v", cs)
	}
	if _, ok := cs[1].Values["tags"]; ok {
		t.Errorf("a NULL SET is in Values: %+v", cs[1])
	}
}
