// Package schema holds opctl's recommended DDL as data (the anchored
// consumer's tables and opctl's audit tables), and compares a database with
// a configuration: the tables and columns the config names, and the indexes
// `opctl reconcile` needs (given as data: reconcile.IndexNeeds lists them).
package schema

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Dialects of the recommended DDL.
const (
	MySQL8  = "mysql8"
	MariaDB = "mariadb"
)

// Recommended returns the anchored design's tables (docs/design.md) for dialect
// (mysql8 or mariadb), one CREATE TABLE IF NOT EXISTS per statement, with
// the indexes reconcile walks:
//   - op_state: (status, updated_at) for stuck, (src_partition, src_offset)
//     for uncommitted;
//   - consumer_idempotency: (action, created_at) for skipped, (biz_id) for
//     orphans and the per-operation read;
//   - balance_journal: (created_at, biz_id) for the duplicates/orphans walk,
//     and reverses_id NOT NULL DEFAULT 0 so that the unique key stops a
//     second DEBIT (NULLs are distinct in a unique key).
//
// The two dialects take the same statements; they differ only in the
// header comment (both accept DATETIME(3); MariaDB ≥ 10.6 is required).
func Recommended(dialect string) ([]string, error) {
	switch dialect {
	case MySQL8, MariaDB, "":
	default:
		return nil, fmt.Errorf("schema: unknown dialect %q (mysql8, mariadb)", dialect)
	}
	return slices.Clone(recommended), nil
}

var recommended = []string{
	`-- One row per operation: the anchor.
CREATE TABLE IF NOT EXISTS op_state (
  biz_id        VARCHAR(64)  NOT NULL PRIMARY KEY,
  status        VARCHAR(32)  NOT NULL,             -- INIT, then each step's done_status, DONE / FAILED
  version       INT UNSIGNED NOT NULL DEFAULT 0,   -- every transition is a CAS on it
  owner         VARCHAR(128) NULL,                 -- consumer instance holding the lease
  lease_until   DATETIME(3)  NULL,                 -- database clock; renewed while working
  msg_id        VARCHAR(64)  NOT NULL,
  src_partition INT          NOT NULL,
  src_offset    BIGINT       NOT NULL,
  attempts      INT          NOT NULL DEFAULT 0,
  last_error    VARCHAR(512) NULL,
  created_at    DATETIME(3)  NOT NULL,
  updated_at    DATETIME(3)  NOT NULL,
  expires_at    DATETIME(3)  NOT NULL,             -- created_at + retention
  KEY ix_status_updated (status, updated_at),      -- reconcile --check stuck
  KEY ix_src (src_partition, src_offset),          -- reconcile --check uncommitted
  KEY ix_expires (expires_at)
)`,
	`-- Written BEFORE each remote call, acked AFTER it: an unacked intent is an unknown outcome.
CREATE TABLE IF NOT EXISTS step_intent (
  request_id VARCHAR(96) NOT NULL PRIMARY KEY,     -- biz_id:step, sent as the downstream's idempotency key
  biz_id     VARCHAR(64) NOT NULL,
  step       VARCHAR(32) NOT NULL,
  attempt    INT         NOT NULL,
  sent_at    DATETIME(3) NOT NULL,
  acked_at   DATETIME(3) NULL,
  result     VARCHAR(32) NULL,
  KEY ix_biz_step (biz_id, step)
)`,
	`-- Per-message decisions, including skips that can be reviewed and undone.
CREATE TABLE IF NOT EXISTS consumer_idempotency (
  msg_id             VARCHAR(64)  NOT NULL PRIMARY KEY,
  biz_id             VARCHAR(64)  NOT NULL,
  action             VARCHAR(24)  NOT NULL,        -- DONE | SKIPPED | SKIPPED_PENDING_REVIEW | PENDING
  reason             VARCHAR(255) NULL,            -- "order SHIPPED, event expects PAID"
  entity_status_seen VARCHAR(32)  NULL,
  review_after       DATETIME(3)  NULL,
  created_at         DATETIME(3)  NOT NULL,
  updated_at         DATETIME(3)  NOT NULL,
  KEY ix_action_created (action, created_at),      -- reconcile --check skipped
  KEY ix_biz (biz_id)
)`,
	`-- Money moves through a journal whose unique key makes the debit itself idempotent.
CREATE TABLE IF NOT EXISTS balance_journal (
  id          BIGINT AUTO_INCREMENT PRIMARY KEY,
  biz_id      VARCHAR(64)   NOT NULL,
  account_id  BIGINT        NOT NULL,
  delta       DECIMAL(18,2) NOT NULL,
  kind        VARCHAR(16)   NOT NULL,              -- DEBIT | REVERSAL
  reverses_id BIGINT        NOT NULL DEFAULT 0,    -- 0, not NULL: NULLs would not collide in the unique key
  created_at  DATETIME(3)   NOT NULL,
  UNIQUE KEY uk_biz_kind_rev (biz_id, kind, reverses_id),
  KEY ix_created_biz (created_at, biz_id)          -- reconcile --check duplicates,orphans (scan.time, scan.key)
)`,
}

// AuditDDL returns the statements that create opctl's audit tables
// (docs/repair.md) named table and table + "_attempt" (config audit.table; "" means
// opctl_audit). They are CREATE TABLE IF NOT EXISTS, so running them again
// changes nothing. It panics on a table name that is not a valid
// identifier (config validation guarantees one).
func AuditDDL(table string) []string {
	if table == "" {
		table = config.Audit{}.AuditTable()
	}
	a := config.QuoteIdent(table)
	at := config.QuoteIdent(table + "_attempt")
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + a + ` (            -- one row per action that took effect; never updated but
  id BIGINT AUTO_INCREMENT PRIMARY KEY, -- for a republish's outcome publishing -> published
  plan_id CHAR(64) NOT NULL, action_index INT NOT NULL,
  biz_id VARCHAR(512) NOT NULL, pipeline VARCHAR(64) NOT NULL, action VARCHAR(32) NOT NULL,
  operator VARCHAR(128) NOT NULL, reason VARCHAR(1024) NOT NULL,
  outcome VARCHAR(16) NOT NULL,         -- applied | publishing | published
  before_image JSON NULL, after_image JSON NULL,
  created_at DATETIME(6) NOT NULL, updated_at DATETIME(6) NOT NULL,
  UNIQUE KEY uk_plan_action (plan_id, action_index), KEY ix_biz (biz_id, created_at))`,
		`CREATE TABLE IF NOT EXISTS ` + at + ` (    -- every attempt that changed nothing
  id BIGINT AUTO_INCREMENT PRIMARY KEY, plan_id CHAR(64) NOT NULL, action_index INT NOT NULL,
  biz_id VARCHAR(512) NOT NULL, operator VARCHAR(128) NOT NULL,
  outcome VARCHAR(16) NOT NULL,         -- dry_run | guard_failed | stale | error
  detail JSON NULL, created_at DATETIME(6) NOT NULL, KEY ix_plan (plan_id), KEY ix_biz (biz_id))`,
	}
}

// Script joins statements into a SQL script (";" and a blank line after each).
func Script(stmts []string) string {
	var b strings.Builder
	for _, s := range stmts {
		b.WriteString(strings.TrimRight(s, "; \n"))
		b.WriteString(";\n\n")
	}
	return b.String()
}

// Inspector reads table metadata; *mysql.Reader implements it.
type Inspector interface {
	TableInfo(ctx context.Context, table string) (sources.TableInfo, error)
}

// Item kinds and statuses of a Report.
const (
	KindTable  = "table"
	KindColumn = "column"
	KindIndex  = "index"

	StatusOK      = "ok"
	StatusMissing = "missing"
	// StatusAbsent is an optional table that does not exist (the audit
	// tables before `opctl schema apply --audit`).
	StatusAbsent = "absent"
)

// Item is one thing the configuration needs from the database.
type Item struct {
	Pipeline string `json:"pipeline,omitempty"`
	Kind     string `json:"kind"`
	Table    string `json:"table"`
	// What is the column, or the index's columns "(a, b)", or "".
	What   string `json:"what,omitempty"`
	Status string `json:"status"`
	// Index is the existing index that serves a requirement.
	Index string `json:"index,omitempty"`
	// Checks are the reconcile checks that need an index.
	Checks []string `json:"checks,omitempty"`
	Why    string   `json:"why,omitempty"`
	// DDL adds what is missing, when opctl can say how.
	DDL string `json:"ddl,omitempty"`
}

// Report is the comparison of a database with a configuration.
type Report struct {
	Items []Item `json:"items"`
}

// Missing returns the items whose status is missing.
func (r *Report) Missing() []Item {
	var out []Item
	for _, it := range r.Items {
		if it.Status == StatusMissing {
			out = append(out, it)
		}
	}
	return out
}

// DDL returns the statements that add the missing indexes, once each.
func (r *Report) DDL() []string {
	var out []string
	for _, it := range r.Missing() {
		if it.DDL != "" && !slices.Contains(out, it.DDL) {
			out = append(out, it.DDL)
		}
	}
	return out
}

// Need is one index a reconcile check needs: an index of Table whose
// leading columns are Columns (reconcile.IndexNeeds lists them, merged
// across checks). A walk's index must also let the keyset continue after
// them (mysql.TableInfo.WalkIndex): any usable index starting with Columns
// does when the table has a primary key.
type Need struct {
	Pipeline string
	Table    string
	Columns  []string
	// Walk is true for an index a check walks; Key is the column the walk
	// yields and Reads the others it reads from each row.
	Walk  bool
	Key   string
	Reads []string
	// Checks are the reconcile checks that need the index.
	Checks []string
	// Purpose says what the checks do with the index.
	Purpose string
	// DDL is the statement that adds the index, named IndexName.
	DDL       string
	IndexName string
	// Alt, when set, is a walk that serves the checks as well when no
	// index serves this one (reconcile's Requirement.Alt).
	Alt *Need
}

// Check compares the database with the pipelines: every configured table
// and column exists, and every index of needs is there. auditTable ("" to
// skip) is reported as ok or absent, never missing: it is created by
// `schema apply --audit`.
func Check(ctx context.Context, db Inspector, pipelines []*config.Pipeline, needs []Need, auditTable string) (*Report, error) {
	rep := &Report{}
	infos := map[string]sources.TableInfo{}
	info := func(t string) (sources.TableInfo, error) {
		if ti, ok := infos[t]; ok {
			return ti, nil
		}
		ti, err := db.TableInfo(ctx, t)
		if err != nil {
			return ti, err
		}
		infos[t] = ti
		return ti, nil
	}
	seen := map[string]bool{}
	add := func(it Item) {
		k := it.Kind + "\x00" + it.Table + "\x00" + it.What
		if seen[k] {
			return
		}
		seen[k] = true
		rep.Items = append(rep.Items, it)
	}
	for _, p := range pipelines {
		// Tables and the columns the config names.
		for _, tc := range configuredColumns(p) {
			ti, err := info(tc.table)
			if err != nil {
				return nil, err
			}
			if !ti.Exists {
				add(Item{Pipeline: p.Name, Kind: KindTable, Table: tc.table, Status: StatusMissing, Why: tc.why})
				continue
			}
			add(Item{Pipeline: p.Name, Kind: KindTable, Table: tc.table, Status: StatusOK, Why: tc.why})
			for _, c := range tc.cols {
				st := StatusOK
				if !ti.HasColumn(c) {
					st = StatusMissing
				}
				add(Item{Pipeline: p.Name, Kind: KindColumn, Table: tc.table, What: c, Status: st,
					Why: "named by the config (" + tc.why + ")"})
			}
		}
		for _, q := range needs {
			if q.Pipeline != p.Name {
				continue
			}
			ti, err := info(q.Table)
			if err != nil {
				return nil, err
			}
			if !ti.Exists {
				continue // the table is already reported missing
			}
			item := Item{Pipeline: p.Name, Kind: KindIndex, Table: q.Table,
				What: "(" + strings.Join(q.Columns, ", ") + ")", Checks: q.Checks, Why: q.Purpose}
			if name, holdsKey, ok := serving(ti, q); ok {
				item.Status, item.Index = StatusOK, name
				if !holdsKey {
					// Served, so not missing; but each entry costs a row read
					// (docs/performance.md#walking-an-index-that-does-not-hold-the-key).
					item.Why += fmt.Sprintf("; %s does not hold %s: the walk reads it from the row (an index on (%s) would not)",
						name, q.Key, strings.Join(append(slices.Clone(q.Columns), q.Key), ", "))
				}
			} else {
				item.Status, item.DDL = StatusMissing, q.DDL
				if why := ti.WhyNoIndex(q.Columns, q.Walk, q.Key); why != "" {
					item.Why += "; " + why
				}
				for _, ix := range ti.DisabledFor(q.Columns...) {
					if strings.EqualFold(ix.Name, q.IndexName) {
						// opctl's own index, disabled: enable it (adding it
						// again would collide with its name).
						item.DDL = ix.EnableDDL(q.Table)
					}
				}
				for _, c := range append(slices.Clone(q.Columns), q.Key) {
					if c != "" && !ti.HasColumn(c) {
						item.DDL = "" // the column is reported missing first
					}
				}
			}
			add(item)
		}
	}
	if auditTable != "" {
		for _, t := range []string{auditTable, auditTable + "_attempt"} {
			ti, err := info(t)
			if err != nil {
				return nil, err
			}
			st := StatusOK
			if !ti.Exists {
				st = StatusAbsent
			}
			add(Item{Kind: KindTable, Table: t, Status: st, Why: "opctl's audit (create it with `opctl schema apply --audit`)"})
		}
	}
	return rep, nil
}

// serving returns the name of the usable index that serves q: for a walk,
// one whose leading columns are q.Columns and after which the keyset can
// continue (the primary key, or q.Key), and whether it holds the key the
// walk reads; for a lookup, one whose leading columns are q.Columns.
func serving(ti sources.TableInfo, q Need) (string, bool, bool) {
	if q.Alt != nil {
		if name, holds, ok := serving(ti, Need{Walk: q.Walk, Columns: q.Columns, Key: q.Key, Reads: q.Reads}); ok {
			return name, holds, ok
		}
		if name, holds, ok := serving(ti, *q.Alt); ok {
			return name, holds, ok
		}
	}
	if q.Walk {
		use, ok := ti.WalkIndex(q.Columns, q.Key, q.Reads...)
		return use.Index.Name, use.Holds(q.Key), ok
	}
	ix, ok := ti.IndexFor(q.Columns...)
	return ix.Name, true, ok
}

type tableCols struct {
	table string
	cols  []string
	why   string
}

// configuredColumns lists the tables and columns a pipeline names outside
// its SQL snippets.
func configuredColumns(p *config.Pipeline) []tableCols {
	var out []tableCols
	nonEmpty := func(cols ...string) []string {
		var o []string
		for _, c := range cols {
			if c != "" {
				o = append(o, c)
			}
		}
		return o
	}
	if st := p.State; st != nil {
		out = append(out, tableCols{st.Table, nonEmpty(st.Key, st.Status, st.Version, st.Owner, st.LeaseUntil,
			st.Partition, st.Offset, st.MsgID, st.CreatedAt, st.UpdatedAt), "state table"})
	}
	if id := p.Idempotency; id != nil {
		out = append(out, tableCols{id.Table, nonEmpty(id.Key, id.BizID, id.Action, id.CreatedAt), "idempotency table"})
	}
	for _, s := range p.Steps {
		if s.Scan != nil {
			out = append(out, tableCols{s.Scan.Table, nonEmpty(s.Scan.Key, s.Scan.Time), "scan table of step " + s.Name})
		}
	}
	if e := p.Entity; e != nil && e.Table != "" {
		out = append(out, tableCols{e.Table, nonEmpty(e.Key, e.Status, e.UpdatedAt), "entity table"})
	}
	return out
}
