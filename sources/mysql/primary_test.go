package mysql

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
)

// TestTableInfoPrimaryKeyMariaDB: on MariaDB the primary key comes from
// STATISTICS (the index PRIMARY), in key order, not column order, and a
// UNIQUE NOT NULL index (which COLUMNS marks PRI on a table without a
// primary key) is not taken for one. lab/demo's TestEmbeddedPrimaryKey
// asserts the same of the demo's go-mysql-server.
func TestTableInfoPrimaryKeyMariaDB(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	db.Exec(t, "CREATE TABLE c (x INT NOT NULL, y VARCHAR(20) NOT NULL, z INT, PRIMARY KEY (y, x), KEY ix_z (z))")
	db.Exec(t, "CREATE TABLE u (a INT NOT NULL, b INT, UNIQUE KEY uk (a), KEY ix_b (b))")
	r, err := Open(db.DSN, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()

	c, err := r.TableInfo(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.PrimaryKey(); !reflect.DeepEqual(got, []string{"y", "x"}) {
		t.Errorf("c: primary key %q, want [y x]", got)
	}
	if ix, ok := c.IndexFor("y"); !ok || ix.Name != "PRIMARY" || !ix.Primary || !ix.Unique {
		t.Errorf("c: IndexFor(y) = %+v %v, want the unique index PRIMARY", ix, ok)
	}
	if ix, ok := c.IndexFor("z", "y", "x"); !ok || ix.Name != "ix_z" {
		t.Errorf("c: IndexFor(z, y, x) = %+v %v, want ix_z (the primary key appended)", ix, ok)
	}

	u, err := r.TableInfo(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	if got := u.PrimaryKey(); got != nil {
		t.Errorf("u: primary key %q, want none (uk is UNIQUE NOT NULL, COLUMNS shows it as PRI)", got)
	}
	for _, ix := range u.Indexes {
		if ix.Name == "PRIMARY" {
			t.Errorf("u: an index PRIMARY was made up: %+v", u.Indexes)
		}
	}
	if n, why := r.BatchLimit(ctx); n != 0 {
		t.Errorf("BatchLimit on MariaDB = %d (%s), want 0", n, why)
	}
}
