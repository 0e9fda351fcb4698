package testenv

import "testing"

// Seeded is a fresh database (MySQL) with sqlFiles loaded and then stmts
// run (the repair and runbook tests pass opctl's audit DDL,
// sources/schema.AuditDDL: testenv itself must not import it, the driver's
// own tests use testenv), and a kfake cluster (NewKafka) whose topics have
// parts partitions each.
func Seeded(t testing.TB, sqlFiles, stmts, topics []string, parts int32) (*DB, *Kafka) {
	t.Helper()
	return SeededOn(t, MySQL(t), sqlFiles, stmts, topics, parts)
}

// SeededOn is Seeded on the database db (one on the binlog test server,
// StartBinlogServer).
func SeededOn(t testing.TB, db *DB, sqlFiles, stmts, topics []string, parts int32) (*DB, *Kafka) {
	t.Helper()
	for _, f := range sqlFiles {
		db.ExecFile(t, f)
	}
	for _, s := range stmts {
		db.Exec(t, s)
	}
	tm := map[string]int32{}
	for _, tp := range topics {
		tm[tp] = parts
	}
	return db, NewKafka(t, tm)
}
