package doctor

import (
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

const baseYAML = `mysql:
  dsn: "u@tcp(127.0.0.1:3306)/pay"
  time_zone: "+00:00"
kafka:
  brokers: ["127.0.0.1:9092"]
  isolation_level: read_committed
pipelines:
  - name: settlement
    topic: settlement-event
    group: settlement-consumer
    partitioner: murmur2
    offset_reset: latest
    retention: 8d
    state:
      table: biz_operation
      key: biz_id
      status: status
      partition: src_partition
      created_at: created_at
      updated_at: updated_at
      initial: [INIT]
      terminal: [DONE]
    steps:
      - name: debit
        kind: local
        done_status: DONE
        evidence: "SELECT id, delta FROM balance_journal WHERE biz_id = ?"
        reverse:
          - "DELETE FROM balance_journal WHERE id = :id"
`

func parse(t *testing.T, text string) *config.Config {
	t.Helper()
	c, err := config.Parse("opctl.yaml", []byte(text))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return c
}

// goodFacts are the facts of a deployment that passes every check but
// binlog (skip: no binlog evidence).
func goodFacts(t *testing.T, cfg *config.Config) sources.DoctorFacts {
	var samples []sources.PartitionSample
	for _, id := range []string{"PAY-1", "PAY-2", "PAY-3", "PAY-4"} {
		p, err := sources.PartitionFor("murmur2", []byte(id), 8)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, sources.PartitionSample{BizID: id, Partition: p})
	}
	return sources.DoctorFacts{
		Database: "pay",
		Tables:   map[string]sources.TableFacts{"biz_operation": {Exists: true, Columns: []string{"biz_id", "status"}}},
		Schema: []sources.SchemaFact{
			{Pipeline: "settlement", Kind: "table", Table: "biz_operation", OK: true},
			{Pipeline: "settlement", Kind: "column", Table: "biz_operation", What: "biz_id", OK: true},
			{Pipeline: "settlement", Kind: "index", Table: "biz_operation", What: "(status, updated_at)", OK: true, Index: "ix_status_updated", Checks: []string{"stuck"}},
		},
		Snippets:         []sources.SnippetFact{{Pipeline: "settlement", What: "step debit evidence"}},
		ReadGrants:       sources.GrantFacts{User: "ro@%", Lines: []string{"GRANT USAGE ON *.* TO `ro`@`%`", "GRANT SELECT ON `pay`.* TO `ro`@`%`"}},
		WriteGrants:      &sources.GrantFacts{User: "rw@%", Lines: []string{"GRANT USAGE ON *.* TO `rw`@`%`", "GRANT SELECT, INSERT, UPDATE, DELETE ON `pay`.* TO `rw`@`%`"}},
		Server:           sources.ServerFacts{TimeZone: "SYSTEM", SystemTimeZone: "UTC"},
		OffsetsRetention: 7 * 24 * time.Hour,
		Pipelines: map[string]sources.PipelineFacts{"settlement": {TopicExists: true, Partitions: 8, Retention: 7 * 24 * time.Hour,
			GroupState: "Stable", GroupMembers: 3, Samples: samples}},
	}
}

func TestJudge(t *testing.T) {
	cases := []struct {
		name string
		yaml func(string) string
		edit func(*sources.DoctorFacts)
		// want: check → status and a piece of its detail.
		check, status, detail string
	}{
		{name: "all good", check: CheckRetention, status: Pass, detail: "retention 8d ≥ retention.ms 7d, offsets.retention.minutes 7d"},
		{name: "missing table", edit: func(f *sources.DoctorFacts) {
			f.Schema[0].OK, f.Schema[0].Why = false, "state table"
		}, check: CheckTables, status: Fail, detail: "missing: biz_operation (state table)"},
		{name: "no audit tables", edit: func(f *sources.DoctorFacts) {
			f.Schema = append(f.Schema, sources.SchemaFact{Kind: "table", Table: "opctl_audit"}, sources.SchemaFact{Kind: "table", Table: "opctl_audit_attempt"})
		}, check: CheckTables, status: Warn, detail: "the audit tables opctl_audit, opctl_audit_attempt do not exist"},
		{name: "snippet does not prepare", edit: func(f *sources.DoctorFacts) {
			f.Snippets[0].Err = "Error 1146: Table 'pay.balance_journal' doesn't exist"
		}, check: CheckTables, status: Fail, detail: "step debit evidence: Error 1146"},
		{name: "missing column lists the table's", edit: func(f *sources.DoctorFacts) {
			f.Schema[1].OK, f.Schema[1].What, f.Schema[1].Why = false, "biz_key", "state table"
		}, check: CheckColumns, status: Fail, detail: "biz_operation.biz_key (state table; the table has biz_id, status)"},
		{name: "missing index gives the DDL", edit: func(f *sources.DoctorFacts) {
			f.Schema[2].OK, f.Schema[2].DDL = false, "ALTER TABLE `biz_operation` ADD INDEX `ix` (`status`, `updated_at`);"
		}, check: CheckIndexes, status: Fail, detail: "biz_operation(status, updated_at) for reconcile stuck"},
		{name: "write grant on the read user", edit: func(f *sources.DoctorFacts) {
			f.ReadGrants.Lines = append(f.ReadGrants.Lines, "GRANT UPDATE (`status`) ON `pay`.`biz_operation` TO `ro`@`%`")
		}, check: CheckGrants, status: Warn, detail: "has write grants (UPDATE ON pay.biz_operation)"},
		{name: "all privileges on the read user", edit: func(f *sources.DoctorFacts) {
			f.ReadGrants.Lines = []string{"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION", "GRANT PROXY ON ''@'%' TO 'root'@'localhost' WITH GRANT OPTION"}
		}, check: CheckGrants, status: Warn, detail: "ALL PRIVILEGES ON *.*"},
		{name: "read user cannot select", edit: func(f *sources.DoctorFacts) {
			f.ReadGrants.Lines = []string{"GRANT USAGE ON *.* TO `ro`@`%`", "GRANT SELECT ON `other`.* TO `ro`@`%`"}
		}, check: CheckGrants, status: Fail, detail: "cannot SELECT biz_operation, opctl_audit"},
		{name: "table-level select is enough", edit: func(f *sources.DoctorFacts) {
			f.ReadGrants.Lines = []string{"GRANT SELECT ON `pay`.`biz_operation` TO `ro`@`%`", "GRANT SELECT ON `pay`.`opctl_audit` TO `ro`@`%`"}
		}, check: CheckGrants, status: Pass, detail: "can SELECT every configured table"},
		{name: "write user lacks DELETE", edit: func(f *sources.DoctorFacts) {
			f.WriteGrants.Lines = []string{"GRANT SELECT, INSERT, UPDATE ON `pay`.* TO `rw`@`%`"}
		}, check: CheckGrants, status: Fail, detail: "lacks DELETE on pay"},
		{name: "write user with DROP", edit: func(f *sources.DoctorFacts) {
			f.WriteGrants.Lines = append(f.WriteGrants.Lines, "GRANT DROP, ALTER ON `pay`.* TO `rw`@`%`")
		}, check: CheckGrants, status: Warn, detail: "more than apply needs (DROP ON pay.*, ALTER ON pay.*)"},
		{name: "write_dsn on a read-only server", edit: func(f *sources.DoctorFacts) {
			f.WriteGrants.ReadOnly = []string{"read_only", "super_read_only"}
		}, check: CheckGrants, status: Fail, detail: "the server of mysql.write_dsn is read-only (@@read_only=ON, @@super_read_only=ON): repair apply would fail"},
		{name: "innodb_read_only too", edit: func(f *sources.DoctorFacts) {
			f.WriteGrants.ReadOnly = []string{"innodb_read_only"}
		}, check: CheckGrants, status: Fail, detail: "(@@innodb_read_only=ON)"},
		{name: "a read-only read server is fine", edit: func(f *sources.DoctorFacts) {
			f.ReadGrants.ReadOnly = []string{"read_only"}
		}, check: CheckGrants, status: Pass, detail: "can SELECT every configured table"},
		{name: "no write_dsn and a read-only server", edit: func(f *sources.DoctorFacts) {
			f.WriteGrants = nil
			f.ReadGrants.ReadOnly = []string{"read_only"}
		}, check: CheckGrants, status: Warn, detail: "the server of mysql.dsn (no mysql.write_dsn is set: repair apply writes there) is read-only"},
		{name: "no topic", edit: func(f *sources.DoctorFacts) {
			pf := f.Pipelines["settlement"]
			pf.TopicExists = false
			f.Pipelines["settlement"] = pf
		}, check: CheckTopic, status: Fail, detail: "does not exist"},
		{name: "kafka unreachable skips its checks", edit: func(f *sources.DoctorFacts) { f.KafkaErr = "cannot connect" },
			check: CheckTopic, status: Skip, detail: "Kafka could not be read: cannot connect"},
		{name: "mysql unreachable skips its checks", edit: func(f *sources.DoctorFacts) { f.MySQLErr = "access denied" },
			check: CheckColumns, status: Skip, detail: "MySQL could not be read: access denied"},
		{name: "empty group", edit: func(f *sources.DoctorFacts) {
			pf := f.Pipelines["settlement"]
			pf.GroupState, pf.GroupMembers = "Empty", 0
			f.Pipelines["settlement"] = pf
		}, check: CheckGroup, status: Warn, detail: "Empty with no member"},
		{name: "stable group", check: CheckGroup, status: Pass, detail: "Stable with 3 member(s)"},
		{name: "wrong partitioner names the right one",
			yaml:  func(s string) string { return strings.Replace(s, "partitioner: murmur2", "partitioner: crc32", 1) },
			check: CheckPartitioner, status: Fail, detail: "murmur2 matches all of them"},
		{name: "no partitioner matches", edit: func(f *sources.DoctorFacts) {
			pf := f.Pipelines["settlement"]
			pf.Samples = []sources.PartitionSample{{BizID: "a", Partition: 0}, {BizID: "b", Partition: 1}, {BizID: "c", Partition: 2}, {BizID: "d", Partition: 3}, {BizID: "e", Partition: 4}}
			f.Pipelines["settlement"] = pf
		}, check: CheckPartitioner, status: Fail, detail: "no known partitioner matches"},
		{name: "stored partitioner", yaml: func(s string) string {
			return strings.NewReplacer("partitioner: murmur2", "partitioner: stored", "partition: src_partition", "partition: src_partition\n      offset: src_offset").Replace(s)
		},
			check: CheckPartitioner, status: Skip, detail: "stored"},
		{name: "retention shorter than the topic's", yaml: func(s string) string { return strings.Replace(s, "retention: 8d", "retention: 3d", 1) },
			check: CheckRetention, status: Fail, detail: "retention 3d < the topic's retention.ms 7d"},
		{name: "retention shorter than the offsets'", edit: func(f *sources.DoctorFacts) { f.OffsetsRetention = 30 * 24 * time.Hour },
			check: CheckRetention, status: Fail, detail: "retention 8d < the broker's offsets.retention.minutes 30d"},
		{name: "topic keeps forever", edit: func(f *sources.DoctorFacts) {
			pf := f.Pipelines["settlement"]
			pf.Retention = -1
			f.Pipelines["settlement"] = pf
		}, check: CheckRetention, status: Fail, detail: "forever"},
		{name: "retention unset", yaml: func(s string) string { return strings.Replace(s, "    retention: 8d\n", "", 1) },
			check: CheckRetention, status: Warn, detail: "not stated"},
		{name: "retention not a duration", yaml: func(s string) string { return strings.Replace(s, "retention: 8d", "retention: a month", 1) },
			check: CheckRetention, status: Fail, detail: `"a month" is not a duration`},
		{name: "offset_reset defaulted", yaml: func(s string) string { return strings.Replace(s, "    offset_reset: latest\n", "", 1) },
			check: CheckOffsetReset, status: Warn, detail: "not stated"},
		{name: "isolation level unset", yaml: func(s string) string { return strings.Replace(s, "  isolation_level: read_committed\n", "", 1) },
			check: CheckIsolationLevel, status: Warn, detail: "read_uncommitted"},
		{name: "time zone differs", edit: func(f *sources.DoctorFacts) { f.Server.TimeZone = "+08:00" },
			check: CheckTimeZone, status: Warn, detail: "differs from the server's global time zone +08:00"},
		{name: "time zone unset", yaml: func(s string) string { return strings.Replace(s, "  time_zone: \"+00:00\"\n", "", 1) },
			check: CheckTimeZone, status: Warn, detail: "SYSTEM (UTC)"},
		{name: "binlog without binlog evidence", check: CheckBinlog, status: Skip, detail: "no step has binlog evidence"},
		{name: "commit auto", yaml: func(s string) string {
			return strings.Replace(s, "    retention: 8d\n", "    retention: 8d\n    commit: auto\n", 1)
		},
			check: CheckCommit, status: Warn, detail: "a commit proves nothing"},
		{name: "commit default with a state table", check: CheckCommit, status: Pass, detail: "commit: after_steps (the default)"},
		{name: "an unverified remote step", yaml: func(s string) string {
			return strings.Replace(s, "done_status: DONE", "done_status: DEBIT_DONE", 1) + "      - name: notify\n        kind: remote\n        done_status: DONE\n"
		},
			check: CheckUnverified, status: Warn, detail: "remote step(s) notify have neither intent nor probe"},
		{name: "reopen without idempotency", check: CheckReopen, status: Skip, detail: "no idempotency table"},
		{name: "reopen by delete on an ENUM without PENDING", yaml: func(s string) string {
			return strings.Replace(s, "    retention: 8d\n", "    retention: 8d\n    honours_opctl_headers: true\n", 1) + `    idempotency:
      table: idem
      key: msg_id
      action: action
    entity:
      query: "SELECT status FROM orders WHERE order_id = ?"
      lifecycle: [PAID]
      cancels: [REFUNDED]
      effect_step: debit
`
		}, edit: func(f *sources.DoctorFacts) {
			f.Tables["idem"] = sources.TableFacts{Exists: true, Columns: []string{"msg_id", "action"}, Types: []string{"varchar(64)", "enum('DONE','SKIPPED')"}}
		}, check: CheckReopen, status: Pass, detail: "idem.action is enum('DONE','SKIPPED'): a SKIPPED record is reopened by flip_skipped as deleted, its whole row kept in opctl's audit (reopen: delete)"},
		{name: "reopen: pending on an ENUM without PENDING", yaml: func(s string) string {
			return strings.Replace(s, "    retention: 8d\n", "    retention: 8d\n    honours_opctl_headers: true\n", 1) + `    idempotency:
      table: idem
      key: msg_id
      action: action
      reopen: pending
    entity:
      query: "SELECT status FROM orders WHERE order_id = ?"
      lifecycle: [PAID]
      cancels: [REFUNDED]
      effect_step: debit
`
		}, edit: func(f *sources.DoctorFacts) {
			f.Tables["idem"] = sources.TableFacts{Exists: true, Columns: []string{"msg_id", "action"}, Types: []string{"varchar(64)", "enum('DONE','SKIPPED')"}}
		}, check: CheckReopen, status: Fail, detail: "which cannot hold PENDING"},
		{name: "reopen to PENDING on a VARCHAR", yaml: func(s string) string {
			return strings.Replace(s, "    retention: 8d\n", "    retention: 8d\n    honours_opctl_headers: true\n", 1) + `    idempotency:
      table: idem
      key: msg_id
      action: action
    entity:
      query: "SELECT status FROM orders WHERE order_id = ?"
      lifecycle: [PAID]
      cancels: [REFUNDED]
      effect_step: debit
`
		}, edit: func(f *sources.DoctorFacts) {
			f.Tables["idem"] = sources.TableFacts{Exists: true, Columns: []string{"msg_id", "action"}, Types: []string{"varchar(64)", "varchar(24)"}}
		}, check: CheckReopen, status: Pass, detail: "set to PENDING (reopen: pending)"},
		{name: "headers not declared", check: CheckHeaders, status: Pass, detail: "honours_opctl_headers is not declared"},
		// A step with a binlog block is judged on the server's binlog facts.
		{name: "binlog evidence, log_bin off", yaml: func(s string) string {
			return strings.Replace(s, `        evidence: "SELECT id, delta FROM balance_journal WHERE biz_id = ?"
        reverse:
          - "DELETE FROM balance_journal WHERE id = :id"`, `        binlog:
          table: account_balance
          key: account_id
          delta: balance
          message_key: "$.account_id"
          message_delta: "-$.amount"
        reverse:
          - "UPDATE account_balance SET balance = balance - :delta WHERE account_id = :key"`, 1)
		}, check: CheckBinlog, status: Fail, detail: "log_bin is OFF"},
		// Seed 000's autocommit consumer: no transaction ties a debit.
		{name: "binlog evidence without binlog.transaction", yaml: func(s string) string {
			return strings.Replace(s, `        evidence: "SELECT id, delta FROM balance_journal WHERE biz_id = ?"
        reverse:
          - "DELETE FROM balance_journal WHERE id = :id"`, `        binlog:
          table: account_balance
          key: account_id
          delta: balance
          message_key: "$.account_id"
          message_delta: "-$.amount"
        reverse:
          - "UPDATE account_balance SET balance = balance - :delta WHERE account_id = :key"`, 1)
		}, edit: func(f *sources.DoctorFacts) {
			f.Server.LogBin, f.Server.BinlogFormat, f.Server.BinlogRowImage = true, "ROW", "FULL"
			f.Server.BinaryLogs, f.Server.OldestBinlog = []string{"bin.000001"}, time.Now().Add(-30*24*time.Hour)
		}, check: CheckBinlog, status: Warn, detail: "step debit has no binlog.transaction"},
		{name: "binlog evidence with binlog.transaction", yaml: func(s string) string {
			return strings.Replace(s, `        evidence: "SELECT id, delta FROM balance_journal WHERE biz_id = ?"
        reverse:
          - "DELETE FROM balance_journal WHERE id = :id"`, `        binlog:
          table: account_balance
          key: account_id
          delta: balance
          message_key: "$.account_id"
          message_delta: "-$.amount"
          transaction: ledger_entry.biz_order_id
        reverse:
          - "UPDATE account_balance SET balance = balance - :delta WHERE account_id = :key"`, 1)
		}, edit: func(f *sources.DoctorFacts) {
			f.Server.LogBin, f.Server.BinlogFormat, f.Server.BinlogRowImage = true, "ROW", "FULL"
			f.Server.BinaryLogs, f.Server.OldestBinlog = []string{"bin.000001"}, time.Now().Add(-30*24*time.Hour)
		}, check: CheckBinlog, status: Pass, detail: "log_bin ON, ROW, FULL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := baseYAML
			if c.yaml != nil {
				text = c.yaml(text)
			}
			cfg := parse(t, text)
			f := goodFacts(t, cfg)
			if c.edit != nil {
				c.edit(&f)
			}
			ps, _ := cfg.Select("")
			rep := Judge(cfg, ps, f)
			if len(rep.Checks) != len(Checks()) {
				t.Fatalf("%d checks", len(rep.Checks))
			}
			for i, r := range rep.Checks {
				if r.Check != Checks()[i] || r.Pipeline != "settlement" {
					t.Fatalf("check %d is %s/%s", i, r.Pipeline, r.Check)
				}
				if r.Status != Pass && r.Status != Skip && r.Fix == "" {
					t.Errorf("%s is %s without a fix", r.Check, r.Status)
				}
				if c.name == "all good" && r.Status != Pass && r.Check != CheckBinlog && r.Check != CheckReopen {
					t.Errorf("all good: %s is %s: %s", r.Check, r.Status, r.Detail)
				}
			}
			var got Result
			for _, r := range rep.Checks {
				if r.Check == c.check {
					got = r
				}
			}
			if got.Status != c.status || !strings.Contains(got.Detail, c.detail) {
				t.Fatalf("%s: %s %q, want %s with %q", c.check, got.Status, got.Detail, c.status, c.detail)
			}
			wantExit := 0
			for _, r := range rep.Checks {
				if r.Status == Fail {
					wantExit = 3
				}
			}
			if rep.ExitCode() != wantExit {
				t.Fatalf("exit %d", rep.ExitCode())
			}
		})
	}
}

func TestJudgeBinlog(t *testing.T) {
	old := time.Now().Add(-10 * 24 * time.Hour)
	for _, c := range []struct {
		name      string
		srv       sources.ServerFacts
		retention string
		status    string
		detail    string
	}{
		{"off", sources.ServerFacts{BinlogFormat: "ROW", BinlogRowImage: "FULL"}, "8d", Fail, "log_bin is OFF"},
		{"mixed, minimal", sources.ServerFacts{LogBin: true, BinlogFormat: "MIXED", BinlogRowImage: "MINIMAL"}, "8d", Fail, "binlog_format is MIXED, want ROW; binlog_row_image is MINIMAL, want FULL"},
		{"no SHOW BINARY LOGS", sources.ServerFacts{LogBin: true, BinlogFormat: "ROW", BinlogRowImage: "FULL", BinlogErr: "Access denied"}, "8d", Warn, "Access denied"},
		{"retained", sources.ServerFacts{LogBin: true, BinlogFormat: "ROW", BinlogRowImage: "FULL", BinaryLogs: []string{"b.000001", "b.000002"}, OldestBinlog: old}, "8d", Pass, "2 binary log(s)"},
		{"too short", sources.ServerFacts{LogBin: true, BinlogFormat: "ROW", BinlogRowImage: "FULL", BinaryLogs: []string{"b.000001"}, OldestBinlog: old}, "30d", Warn, "for a retention of 30d"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := judgeBinlog(c.srv, c.retention)
			if r.Status != c.status || !strings.Contains(r.Detail, c.detail) {
				t.Fatalf("%s %q, want %s with %q", r.Status, r.Detail, c.status, c.detail)
			}
		})
	}
}
