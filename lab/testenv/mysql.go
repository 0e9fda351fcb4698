// Package testenv gives integration tests their real dependencies: a fresh
// MariaDB/MySQL database per test and an in-process kfake Kafka cluster
// reached over TCP. Nothing here is linked into the opctl binary.
package testenv

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// RootDSN is the server tests connect to: $OPCTL_TEST_MYSQL_DSN, else the
// machine's MariaDB as root without a password.
func RootDSN() string {
	if d := os.Getenv("OPCTL_TEST_MYSQL_DSN"); d != "" {
		return d
	}
	return "root@tcp(127.0.0.1:3306)/?parseTime=true&loc=UTC&multiStatements=true"
}

// InCI reports whether tests run in CI, where nothing may be skipped.
func InCI() bool { return os.Getenv("CI") != "" }

// DB is one throwaway database.
type DB struct {
	Name string
	// DSN reaches the database as root, with the root DSN's parameters
	// (RootDSN's: parseTime, UTC, multiStatements).
	DSN string
	SQL *sql.DB
}

// MySQL creates a database with a unique name for this test and drops it when
// the test ends. Without a reachable server it fails in CI and skips, loudly,
// elsewhere.
func MySQL(t testing.TB) *DB {
	t.Helper()
	root, err := sql.Open("mysql", RootDSN())
	if err != nil {
		t.Fatalf("testenv: bad root DSN: %v", err)
	}
	if err := root.Ping(); err != nil {
		root.Close()
		if InCI() {
			t.Fatalf("testenv: MariaDB not reachable in CI (%v); .ci/run should have started it", err)
		}
		t.Skipf("SKIPPING: MariaDB not reachable at 127.0.0.1:3306 (%v); start it with: start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd", err)
	}
	return createDB(t, root, RootDSN())
}

// MySQLAt is MySQL on the server rootDSN reaches (its database name, if
// any, is replaced; its parameters are kept), which the test has started
// itself (lab/demo's embedded server): a server that does not answer fails
// the test.
func MySQLAt(t testing.TB, rootDSN string) *DB {
	t.Helper()
	root, err := sql.Open("mysql", rootDSN)
	if err != nil {
		t.Fatalf("testenv: bad root DSN: %v", err)
	}
	if err := root.Ping(); err != nil {
		root.Close()
		t.Fatalf("testenv: MySQL server not reachable: %v", err)
	}
	return createDB(t, root, rootDSN)
}

// createDB creates the test's database on the server root reaches (by
// rootDSN), opens it and drops it when the test ends. It owns root.
func createDB(t testing.TB, root *sql.DB, rootDSN string) *DB {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "opctl_t_" + sanitize(t.Name()) + "_" + hex.EncodeToString(b)
	if len(name) > 64 {
		name = name[len(name)-64:]
		name = "t" + name[1:]
	}
	if _, err := root.Exec("CREATE DATABASE `" + name + "`"); err != nil {
		root.Close()
		t.Fatalf("testenv: create database %s: %v", name, err)
	}
	cfg, err := mysql.ParseDSN(rootDSN)
	if err != nil {
		root.Close()
		t.Fatalf("testenv: parse root DSN: %v", err)
	}
	cfg.DBName = name
	dsn := cfg.FormatDSN()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		root.Close()
		t.Fatalf("testenv: open %s: %v", name, err)
	}
	t.Cleanup(func() {
		db.Close()
		if _, err := root.Exec("DROP DATABASE IF EXISTS `" + name + "`"); err != nil {
			t.Errorf("testenv: drop database %s: %v", name, err)
		}
		root.Close()
	})
	return &DB{Name: name, DSN: dsn, SQL: db}
}

// Exec runs SQL (several statements allowed) or fails the test.
func (d *DB) Exec(t testing.TB, query string, args ...any) {
	t.Helper()
	if _, err := d.SQL.Exec(query, args...); err != nil {
		t.Fatalf("testenv: exec %.80q: %v", query, err)
	}
}

// ExecFile runs a SQL file (relative to the test's package directory).
func (d *DB) ExecFile(t testing.TB, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	d.Exec(t, string(b))
}

func sanitize(s string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			sb.WriteRune(r)
		} else {
			sb.WriteByte('_')
		}
	}
	out := sb.String()
	if len(out) > 30 {
		out = out[:30]
	}
	return out
}

// Must formats an error for a fatal helper message.
func Must(t testing.TB, err error, what string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}
