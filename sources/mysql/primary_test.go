package mysql

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
)

func TestPrimaryKeyOfDDL(t *testing.T) {
	cases := []struct {
		name   string
		ddl    string
		cols   []string
		prefix []bool
		ok     bool
	}{
		{"one column", "CREATE TABLE `t` (\n  `a` int NOT NULL,\n  PRIMARY KEY (`a`),\n  KEY `ix` (`b`)\n)", []string{"a"}, []bool{false}, true},
		{"key order, not column order", "CREATE TABLE `t` (\n  `x` int NOT NULL,\n  `y` varchar(20) NOT NULL,\n  PRIMARY KEY (`y`,`x`)\n)", []string{"y", "x"}, []bool{false, false}, true},
		{"prefix", "  PRIMARY KEY (`y`(5),`x`)\n", []string{"y", "x"}, []bool{true, false}, true},
		{"spaces and DESC", "PRIMARY KEY ( `a` DESC, `b` )", []string{"a", "b"}, []bool{false, false}, true},
		{"doubled backquote", "PRIMARY KEY (`we``ird`)", []string{"we`ird"}, []bool{false}, true},
		{"none", "CREATE TABLE `t` (`a` int, UNIQUE KEY `uk` (`a`))", nil, nil, false},
		{"truncated", "PRIMARY KEY (`a`", nil, nil, false},
		{"not backquoted", "PRIMARY KEY (a)", nil, nil, false},
	}
	for _, c := range cases {
		cols, prefix, ok := primaryKeyOfDDL(c.ddl)
		if ok != c.ok || !reflect.DeepEqual(cols, c.cols) || !reflect.DeepEqual(prefix, c.prefix) {
			t.Errorf("%s: got %q %v %v, want %q %v %v", c.name, cols, prefix, ok, c.cols, c.prefix, c.ok)
		}
	}
}

func TestPrimaryFromColumns(t *testing.T) {
	pk := Index{Name: "PRIMARY", Columns: []string{"id"}, Unique: true, Primary: true}
	uk := Index{Name: "uk", Columns: []string{"a"}, Unique: true}
	ix := Index{Name: "ix", Columns: []string{"a"}}
	cases := []struct {
		name    string
		indexes []Index
		pri     []string
		want    []string
	}{
		{"STATISTICS has the primary key (MySQL, MariaDB)", []Index{ix, pk}, []string{"id"}, nil},
		{"no PRI column", []Index{ix}, nil, nil},
		{"a UNIQUE NOT NULL index shown as PRI (no primary key)", []Index{uk}, []string{"a"}, nil},
		{"STATISTICS omits the primary key (go-mysql-server)", []Index{ix}, []string{"a"}, []string{"a"}},
		{"a non-unique index on the same column does not explain PRI", []Index{ix}, []string{"a"}, []string{"a"}},
		{"several columns", nil, []string{"a", "b"}, []string{"a", "b"}},
	}
	for _, c := range cases {
		got, ok := primaryFromColumns(c.indexes, c.pri)
		if ok != (c.want != nil) || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %q %v, want %q", c.name, got, ok, c.want)
		}
	}
}

func TestInsertIndex(t *testing.T) {
	got := insertIndex([]Index{{Name: "ix_a"}, {Name: "uk_z"}}, Index{Name: "PRIMARY"})
	var names []string
	for _, ix := range got {
		names = append(names, ix.Name)
	}
	if want := []string{"ix_a", "PRIMARY", "uk_z"}; !reflect.DeepEqual(names, want) {
		t.Errorf("got %q, want %q", names, want)
	}
}

// TestTableInfoPrimaryKeyMariaDB: on MariaDB the primary key comes from
// STATISTICS as before, in key order, and a UNIQUE NOT NULL index that
// COLUMNS marks PRI (a table without a primary key) is not taken for one.
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
