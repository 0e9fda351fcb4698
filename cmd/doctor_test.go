package cmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/sop/doctor"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/schema"
)

// doctorLab is seed 000's settlement fixture on MariaDB and kfake, with a
// read-only user for mysql.dsn and a write user for mysql.write_dsn (both
// unique to the test and dropped at its end), state rows whose stored
// partition the producers' murmur2 gave, and a config that states
// everything doctor asks for. bad breaks it in the five ways of a
// misconfigured deployment.
type doctorLab struct {
	f            *fixture
	reader, wrtr string
}

func newDoctorLab(t *testing.T, bad bool) *doctorLab {
	t.Helper()
	probe := newFixture(t, "settlement", "settlement-event") // the database, Kafka and schema
	db := probe.db
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	l := &doctorLab{reader: "opctl_r_" + hex.EncodeToString(suffix), wrtr: "opctl_w_" + hex.EncodeToString(suffix)}
	readGrant := "SELECT"
	if bad {
		readGrant = "SELECT, INSERT" // a write grant on the read DSN
	}
	for _, u := range []struct{ name, grant string }{{l.reader, readGrant}, {l.wrtr, "SELECT, INSERT, UPDATE, DELETE"}} {
		db.Exec(t, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'pw-%s'", u.name, u.name))
		t.Cleanup(func() { _, _ = db.SQL.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", u.name)) })
		db.Exec(t, fmt.Sprintf("GRANT %s ON `%s`.* TO '%s'@'%%'", u.grant, db.Name, u.name))
	}
	for _, q := range schema.AuditDDL("") {
		db.Exec(t, q)
	}
	db.Exec(t, "CREATE INDEX ix_ledger_created ON ledger_entry (created_at)")
	db.Exec(t, "CREATE INDEX ix_src ON biz_operation (src_partition, src_offset)")
	for i := range 6 {
		biz := fmt.Sprintf("S-%d", i)
		p, err := sources.PartitionFor("murmur2", []byte(biz), 8)
		if err != nil {
			t.Fatal(err)
		}
		db.Exec(t, "INSERT INTO biz_operation (biz_id, status, version, msg_id, src_partition, src_offset, created_at, updated_at) VALUES (?, 'DONE', 4, ?, ?, 0, NOW(3), NOW(3))", biz, "m-"+biz, p)
	}
	partitioner, retention := "murmur2", "8d"
	if bad {
		partitioner, retention = "fnv1a", "1d"
		db.Exec(t, "DROP INDEX ix_status_updated ON biz_operation")
		db.Exec(t, "ALTER TABLE biz_operation CHANGE lease_until lease_expires DATETIME(3) NULL")
	}
	dsn := func(user string) string {
		return strings.Replace(db.DSN, "root@", user+":pw-"+user+"@", 1)
	}
	l.f = newFixture(t, "settlement", "settlement-event",
		`dsn: "${OPCTL_MYSQL_DSN}"`, fmt.Sprintf("dsn: %q\n  write_dsn: %q\n  time_zone: \"+00:00\"", dsn(l.reader), dsn(l.wrtr)),
		`brokers: ["${OPCTL_BROKERS:-127.0.0.1:9092}"]`, fmt.Sprintf("brokers: [%q]\n  isolation_level: read_committed", probe.k.Brokers[0]),
		"partitioner: murmur2", "partitioner: "+partitioner,
		"offset_reset: latest", "offset_reset: latest\n    retention: "+retention)
	l.f.db, l.f.k = db, probe.k
	return l
}

// run runs opctl doctor with the lab's config (its own DSNs and brokers).
func (l *doctorLab) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runOpctl(t, append([]string{"--config", l.f.cfg, "--timeout", "5s", "doctor"}, args...)...)
}

// normalize replaces what differs between runs (the database and user
// names) for the golden file.
func (l *doctorLab) normalize(s string) string {
	return strings.NewReplacer(l.f.db.Name, "DB", l.reader, "READER", l.wrtr, "WRITER").Replace(s)
}

func TestDoctorLab(t *testing.T) {
	t.Run("correct", func(t *testing.T) {
		l := newDoctorLab(t, false)
		code, out, errOut := l.run(t)
		if code != 0 {
			t.Fatalf("exit %d, want 0\n%s\n%s", code, out, errOut)
		}
		checkGolden(t, "doctor_piped.golden", l.normalize(out))
		_, js, _ := l.run(t, "-o", "json")
		var rep doctor.Report
		if err := json.Unmarshal([]byte(js), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Checks) != len(doctor.Checks()) {
			t.Fatalf("%d checks, want %d", len(rep.Checks), len(doctor.Checks()))
		}
		for _, c := range rep.Checks {
			want := doctor.Pass
			switch c.Check {
			case doctor.CheckGroup: // no consumer runs in the lab
				want = doctor.Warn
			case doctor.CheckBinlog, doctor.CheckReopen: // no binlog step, no idempotency table
				want = doctor.Skip
			}
			if c.Status != want {
				t.Errorf("%s: %s (%s), want %s", c.Check, c.Status, c.Detail, want)
			}
		}
	})
	t.Run("misconfigured", func(t *testing.T) {
		l := newDoctorLab(t, true)
		code, out, errOut := l.run(t, "-o", "json")
		if code != ExitAttention {
			t.Fatalf("exit %d, want 3\n%s\n%s", code, out, errOut)
		}
		var rep doctor.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		got := map[string]doctor.Result{}
		for _, c := range rep.Checks {
			got[c.Check] = c
		}
		for _, w := range []struct{ check, status, detail string }{
			{doctor.CheckRetention, doctor.Fail, "retention 1d < the topic's retention.ms 7d"},
			{doctor.CheckIndexes, doctor.Fail, "biz_operation(status, updated_at) for reconcile stuck"},
			{doctor.CheckPartitioner, doctor.Fail, "murmur2 matches all of them"},
			{doctor.CheckGrants, doctor.Warn, "has write grants (INSERT ON " + l.f.db.Name + ".*)"},
			{doctor.CheckColumns, doctor.Fail, "biz_operation.lease_until (named by the config (state table); the table has biz_id, status, version, owner, lease_expires"},
		} {
			c := got[w.check]
			if c.Status != w.status || !strings.Contains(c.Detail, w.detail) || c.Fix == "" {
				t.Errorf("%s: %s %q fix %q; want %s with %q and a fix", w.check, c.Status, c.Detail, c.Fix, w.status, w.detail)
			}
		}
		if got[doctor.CheckIndexes].Fix == "" || !strings.Contains(got[doctor.CheckIndexes].Fix, "ADD INDEX") {
			t.Errorf("indexes fix %q: want the DDL", got[doctor.CheckIndexes].Fix)
		}
		if !strings.Contains(got[doctor.CheckPartitioner].Fix, "partitioner: murmur2") {
			t.Errorf("partitioner fix %q", got[doctor.CheckPartitioner].Fix)
		}
		// The table says the same, with the fixes; exit 3 too.
		code, table, _ := l.run(t)
		if code != ExitAttention || !strings.Contains(table, "FIX\n") || !strings.Contains(table, "partitioner (fail): set partitioner: murmur2") {
			t.Errorf("exit %d, table:\n%s", code, table)
		}
		t.Logf("doctor on the misconfigured lab:\n%s", l.normalize(table))
		// No password in anything doctor says.
		if strings.Contains(out, "pw-") || strings.Contains(errOut, "pw-") {
			t.Errorf("a password in the output:\n%s\n%s", out, errOut)
		}
	})
}

// A MySQL that cannot be reached: doctor cannot run (exit 1), and says so
// without the password.
func TestDoctorNoMySQL(t *testing.T) {
	dir := t.TempDir()
	cfg := dir + "/opctl.yaml"
	text := "mysql:\n  dsn: \"u:secret-pw@tcp(127.0.0.1:1)/pay\"\npipelines:\n  - name: p\n    topic: t\n    group: g\n    steps:\n      - name: s\n        kind: local\n        evidence: \"SELECT id FROM e WHERE biz_id = ?\"\n    idempotency: {table: ci, key: msg_id, biz_id: biz_id, action: action}\n"
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runOpctl(t, "--config", cfg, "--timeout", "2s", "doctor")
	if code != ExitError || !strings.Contains(errOut, "127.0.0.1:1") || strings.Contains(out+errOut, "secret-pw") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestDoctorRun renders a judgement on fake facts, on a terminal (box art,
// colour off) and piped; a value read from the database with a control
// character is shown escaped, and a fail exits 3.
func TestDoctorRun(t *testing.T) {
	cfg, err := config.Load(filepath.Join("..", "testdata", "config", "settlement.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	facts := sources.DoctorFacts{
		Database: "pay",
		Tables:   map[string]sources.TableFacts{"biz_operation": {Exists: true, Columns: []string{"biz_id", "status\x1b[31m"}}},
		Schema: []sources.SchemaFact{{Pipeline: "settlement", Kind: "table", Table: "biz_operation", OK: true},
			{Pipeline: "settlement", Kind: "column", Table: "biz_operation", What: "owner", Why: "state table"}},
		ReadGrants: sources.GrantFacts{User: "ro@%", Lines: []string{"GRANT SELECT ON `pay`.* TO `ro`@`%`"}},
		Server:     sources.ServerFacts{TimeZone: "SYSTEM", SystemTimeZone: "UTC"},
		KafkaErr:   "kafka (brokers 127.0.0.1:9092): cannot connect",
	}
	for _, tty := range []bool{false, true} {
		ios, _, out, _ := iostreams.Test()
		ios.SetStdoutTTY(tty)
		ios.SetNoColor(true)
		opts := &DoctorOptions{IO: ios, Format: FormatTable, Config: func() (*config.Config, error) { return cfg, nil },
			Facts: func() (DoctorFactsFunc, error) {
				return func(context.Context, *config.Config, []*config.Pipeline) (sources.DoctorFacts, error) {
					return facts, nil
				}, nil
			}}
		if code := exitCode(runDoctor(context.Background(), opts), false); code != ExitAttention {
			t.Fatalf("tty %v: exit %d, want 3", tty, code)
		}
		name := "doctor_fake_piped.golden"
		if tty {
			name = "doctor_fake_tty.golden"
		}
		if strings.Contains(out.String(), "\x1b[31m") {
			t.Fatalf("a raw escape reached the terminal:\n%s", out)
		}
		checkGolden(t, name, out.String())
	}
}
