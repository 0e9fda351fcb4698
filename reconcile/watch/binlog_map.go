package watch

import (
	"fmt"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// How a row change of a followed table names the operations it touches
// (docs/watch.md#binlog-mode). The mapping is pure: BinlogSource applies it
// to each transaction the follower delivers.

// mapKind is how a column's value leads to operations.
type mapKind int

const (
	// byBizID: the column holds the operation's biz_id (state.key,
	// idempotency.biz_id, steps[].scan.key, entity.key, the column of a
	// binlog step's transaction table).
	byBizID mapKind = iota
	// byMsgID: the column is the record key of an idempotency table without
	// a biz_id column (seed 003's msg_id): a SKIPPED record is mapped to its
	// operation through its message, read from the topic.
	byMsgID
	// byRowKey: the column is a binlog step's row key (seed 000's
	// account_id): the operations whose message names that row within the
	// step's window (its attribution's claimants) are looked at.
	byRowKey
)

// mapRule is one way a followed table leads to operations of a pipeline.
type mapRule struct {
	p *config.Pipeline
	// what names the role of the table (state, idempotency, scan, entity,
	// transaction, binlog step) for the docs and the tests; table is its
	// name as the configuration writes it (cause.table, as a poll's).
	what, table string
	col         string
	kind        mapKind
	// action is the idempotency action column (byMsgID: only SKIPPED
	// records are mapped, the only verdict a record decides alone).
	action string
	// step is the binlog step's index (byRowKey).
	step int
	// timeCol is the table's time column (state.updated_at,
	// idempotency.created_at, entity.updated_at, scan.time; "" none): a
	// finer commit time than the binlog's whole second (commitTime).
	timeCol string
	// version and updated are the operation's own row's columns that
	// only grow (state.version, state.updated_at; entity.updated_at): an
	// update that moves one offers its round a fence (fence.go).
	version, updated string
	// recordKey is an idempotency table's record key column
	// (idempotency.key): an insert of a record offers its round a fence,
	// read back by that key (fence.go, recordFence).
	recordKey string
}

// followPlan is what a binlog source follows: per schema.table the rules
// that map its changes, and the tables with only the columns those rules
// read (FollowTable.Columns kept minimal: the follower decodes every
// column but keeps only these).
type followPlan struct {
	rules  map[string][]mapRule
	tables []sources.FollowTable
}

// splitTable is schema.table; a name without a schema is in schema.
func splitTable(schema, table string) (string, string) {
	if i := strings.IndexByte(table, '.'); i >= 0 {
		return table[:i], table[i+1:]
	}
	return schema, table
}

// planFollow lists the tables of pipelines a binlog follow reads and how
// each change maps (docs/watch.md#binlog-mode).
func planFollow(pipelines []*config.Pipeline, schema string) followPlan {
	fp := followPlan{rules: map[string][]mapRule{}}
	idx := map[string]int{}
	add := func(table string, r mapRule, cols ...string) {
		s, t := splitTable(schema, table)
		k := s + "." + t
		i, ok := idx[k]
		if !ok {
			i = len(fp.tables)
			idx[k] = i
			fp.tables = append(fp.tables, sources.FollowTable{Schema: s, Table: t})
		}
		for _, c := range cols {
			if c != "" && !containsFold(fp.tables[i].Columns, c) {
				fp.tables[i].Columns = append(fp.tables[i].Columns, c)
			}
		}
		r.table = table
		fp.rules[k] = append(fp.rules[k], r)
	}
	for _, p := range pipelines {
		if st := p.State; st != nil && st.Table != "" && st.Key != "" {
			add(st.Table, mapRule{p: p, what: "state", col: st.Key, timeCol: st.UpdatedAt, version: st.Version, updated: st.UpdatedAt}, st.Key, st.UpdatedAt, st.Version)
		}
		if id := p.Idempotency; id != nil && id.Table != "" {
			switch {
			case id.BizID != "":
				// The record key only for its fence, which needs created_at.
				recordKey := ""
				if id.CreatedAt != "" {
					recordKey = id.Key
				}
				add(id.Table, mapRule{p: p, what: "idempotency", col: id.BizID, timeCol: id.CreatedAt, recordKey: recordKey}, id.BizID, id.CreatedAt, recordKey)
			case id.Key != "" && id.Action != "" && p.MessageKey == config.DefaultMessageKey:
				add(id.Table, mapRule{p: p, what: "idempotency", col: id.Key, kind: byMsgID, action: id.Action, timeCol: id.CreatedAt, recordKey: id.Key}, id.Key, id.Action, id.CreatedAt)
			}
		}
		for k, s := range p.Steps {
			if s.Scan != nil && s.Scan.Table != "" && s.Scan.Key != "" {
				add(s.Scan.Table, mapRule{p: p, what: "scan", col: s.Scan.Key, timeCol: s.Scan.Time}, s.Scan.Key, s.Scan.Time)
			}
			if b := s.Binlog; b != nil && b.Table != "" {
				if tt, tc := b.TransactionTable(); tt != "" {
					add(tt, mapRule{p: p, what: "transaction", col: tc}, tc)
				}
				if b.Key != "" && b.MessageKey != "" {
					add(b.Table, mapRule{p: p, what: "binlog step", col: b.Key, kind: byRowKey, step: k}, b.Key)
				}
			}
		}
		if e := p.Entity; e != nil && e.Table != "" && e.Key != "" {
			add(e.Table, mapRule{p: p, what: "entity", col: e.Key, timeCol: e.UpdatedAt, updated: e.UpdatedAt}, e.Key, e.UpdatedAt)
		}
	}
	return fp
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// value is a column of a change's image, the column name compared as
// MySQL compares column names (case-insensitively).
func value(c sources.RowChange, col string) (string, bool) {
	if v, ok := c.Values[col]; ok {
		return v, true
	}
	for k, v := range c.Values {
		if strings.EqualFold(k, col) {
			return v, true
		}
	}
	return "", false
}

// pendingChange is a change whose operations only the topic can name.
type pendingChange struct {
	rule  mapRule
	value string
	at    time.Time
	table string
	pos   string
	// seq is its transaction's order in the Changes call, cand the fence
	// its row offers (fence.go).
	seq  int
	cand *fence
}

// mapTx maps one transaction's row changes: the changes that name their
// operation, and those left to the topic (byMsgID, byRowKey). A change
// whose rule column is NULL maps to nothing by that rule; one whose image
// does not hold it (binlog_row_image=MINIMAL for the session) is named in
// unknown: which operation it touched cannot be told.
func (fp followPlan) mapTx(tx sources.BinlogTx, loc *time.Location) (direct []Change, pending []pendingChange, unknown string) {
	pos := tx.End.String()
	for _, c := range tx.Changes {
		for _, r := range fp.rules[c.Schema+"."+c.Table] {
			if containsFold(c.Missing, r.col) || (r.kind == byMsgID && containsFold(c.Missing, r.action)) {
				unknown = fmt.Sprintf("a row image of %s.%s at %s without its %s column (binlog_row_image=MINIMAL?)", c.Schema, c.Table, pos, r.col)
				continue
			}
			v, ok := value(c, r.col)
			if !ok || v == "" {
				continue
			}
			at := commitTime(tx.CommittedAt, c, r.timeCol, loc)
			switch r.kind {
			case byBizID:
				ch := Change{Pipeline: r.p.Name, BizID: v, Table: r.table, Position: pos, CommittedAt: &at}
				if r.what == "state" || r.what == "entity" {
					// The operation's own row: an update that moves a
					// column that only grows is its round's fence, a
					// delete ends the row's life (fence.go).
					ch.del = c.Kind == sources.ChangeDelete
					if ch.cand = fenceCandidate(c, r.table, r.col, v, r.version, fenceVersion); ch.cand == nil {
						ch.cand = fenceCandidate(c, r.table, r.col, v, r.updated, fenceTime)
					}
				}
				if r.what == "idempotency" {
					// An inserted record is its round's fence, read back
					// by its key; a deleted one keeps the second look
					// (fence.go).
					ch.del = c.Kind == sources.ChangeDelete
					ch.cand = recordFence(c, r)
				}
				direct = append(direct, ch)
			case byMsgID:
				// A deleted record (a TTL purge, a flip_skipped reopen) and
				// a DONE one decide no target by themselves.
				if a, _ := value(c, r.action); c.Kind != sources.ChangeDelete && a == inspect.ActionSkipped {
					pending = append(pending, pendingChange{rule: r, value: v, at: at, table: r.table, pos: pos, cand: recordFence(c, r)})
				}
			case byRowKey:
				pending = append(pending, pendingChange{rule: r, value: v, at: at, table: r.table, pos: pos})
			}
		}
	}
	return direct, pending, unknown
}

// commitTime is the change's commit time: the binlog's commit event is
// stamped in whole seconds, so a row's own time column (a DATETIME(3)
// written by NOW(3) in the transaction) that falls inside that second is
// the finer time, a little before the commit (latency_ms then counts a
// little more than the truth, never less). A time column outside the
// second (another time zone, a time the application chose) is not used.
// loc is the zone DATETIMEs are written in (mysql.time_zone; nil: UTC).
func commitTime(sec time.Time, c sources.RowChange, col string, loc *time.Location) time.Time {
	if col == "" {
		return sec
	}
	v, ok := value(c, col)
	if !ok || len(v) <= len("2006-01-02 15:04:05") {
		return sec // no fraction: no finer than the second
	}
	if loc == nil {
		loc = time.UTC
	}
	t, err := time.ParseInLocation("2006-01-02 15:04:05.999999", v, loc)
	if err != nil || t.Before(sec) || !t.Before(sec.Add(time.Second)) {
		return sec
	}
	return t
}
