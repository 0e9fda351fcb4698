package testenv

import (
	"testing"

	"github.com/opctl-dev/opctl/sources/schema"
)

// Seeded is a fresh database (MySQL) with sqlFiles loaded and opctl's
// audit tables created, and a kfake cluster (NewKafka) whose topics have
// parts partitions each: the fixture of the repair and runbook tests.
func Seeded(t testing.TB, sqlFiles, topics []string, parts int32) (*DB, *Kafka) {
	t.Helper()
	db := MySQL(t)
	for _, f := range sqlFiles {
		db.ExecFile(t, f)
	}
	for _, s := range schema.AuditDDL("") {
		db.Exec(t, s)
	}
	tm := map[string]int32{}
	for _, tp := range topics {
		tm[tp] = parts
	}
	return db, NewKafka(t, tm)
}
