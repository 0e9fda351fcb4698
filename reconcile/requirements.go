package reconcile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/schema"
)

// Check names, as given to --check and written in the `check` field of a
// target (docs/reconcile.md).
const (
	CheckStuck       = "stuck"
	CheckSkipped     = "skipped"
	CheckDuplicates  = "duplicates"
	CheckOrphans     = "orphans"
	CheckUncommitted = "uncommitted"
)

// Checks lists every check in the order a run performs them.
func Checks() []string {
	return []string{CheckStuck, CheckSkipped, CheckDuplicates, CheckOrphans, CheckUncommitted}
}

// IsCheck reports whether name is a check.
func IsCheck(name string) bool {
	for _, c := range Checks() {
		if c == name {
			return true
		}
	}
	return false
}

// Requirement is one index a check needs: an index of Table whose leading
// columns are Columns. A walk (Walk) continues its keyset on the columns the
// index carries after them, which in InnoDB always end with the primary key
// (appended to every secondary index), and reads Key (and Reads) from the
// row: (created_at) serves the walk of a scan table by created_at when the
// table has a primary key (docs/reconcile.md#the-usable-index-rule). A
// lookup needs only the leading columns.
type Requirement struct {
	Pipeline string
	Check    string
	Table    string
	Columns  []string
	// Purpose says what the check does with the index.
	Purpose string
	// Step is the step whose scan table this is, when any.
	Step string
	// Walk is true for the index a check walks (the others serve lookups).
	Walk bool
	// Key is the key column a walk yields (read from each row).
	Key string
	// Reads are further columns of Table the check reads (not indexed):
	// a walk's extra column, the entity's status.
	Reads []string
	// Entity is true for the entity lookup of the skipped check.
	Entity bool
	// Cover is true for the walk that covers the steps without a scan
	// block: every operation whose state row changed in the window is a
	// candidate (docs/reconcile.md#steps-without-a-scan-block).
	Cover bool
	// Alt, when set, is the walk used instead when the table has no index
	// for this one but has one for it (seed 003's idempotent table: a
	// (created_at) index read for its action, no (action, created_at)).
	Alt *Requirement
}

// IndexName is the name opctl proposes for the index: ix_opctl_ + the
// columns of DDL, at most 64 characters.
func (r Requirement) IndexName() string {
	n := "ix_opctl_" + strings.ToLower(strings.Join(r.DDLColumns(), "_"))
	n = strings.ReplaceAll(n, "$", "_")
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}

// DDLColumns are the columns of the index opctl proposes: the leading
// columns, and for a walk its key after them, so that the walk reads its
// keys from the index alone (and a table without a primary key can be
// walked at all).
func (r Requirement) DDLColumns() []string {
	cols := slices.Clone(r.Columns)
	if r.Walk && r.Key != "" && !slices.ContainsFunc(cols, func(c string) bool { return strings.EqualFold(c, r.Key) }) {
		cols = append(cols, r.Key)
	}
	return cols
}

// DDL is the statement that adds the index.
func (r Requirement) DDL() string {
	dc := r.DDLColumns()
	cols := make([]string, len(dc))
	for i, c := range dc {
		cols[i] = config.QuoteIdent(c)
	}
	return fmt.Sprintf("ALTER TABLE %s ADD INDEX %s (%s);", config.QuoteIdent(r.Table),
		config.QuoteIdent(r.IndexName()), strings.Join(cols, ", "))
}

// String reads "biz_operation (status, updated_at)".
func (r Requirement) String() string {
	return fmt.Sprintf("%s (%s)", r.Table, strings.Join(r.Columns, ", "))
}

// Requirements lists the indexes check needs on pipeline p, or says why the
// check does not apply to p (no state table, no scan block, ...). The
// choices (docs/reconcile.md#the-checks):
//
//   - stuck walks the state table by (status, updated_at), one range per
//     non-terminal status;
//   - skipped walks the idempotency table by (action, created_at) for
//     action = 'SKIPPED' (and looks the effect step's scan key up, when
//     it has a scan block, through an index starting with that key, and
//     the entity's status, when the entity block names its table, key and
//     status, through an index starting with entity.key);
//   - duplicates walks each scan table by (time) and counts the keys of
//     each chunk through an index starting with key;
//   - orphans walks each scan table by (time) and looks each chunk's keys
//     up in the state table (key) and the idempotency table (biz_id);
//   - uncommitted walks the state table by (partition, offset) from the
//     group's committed offset to the log end of each partition.
//
// Each walk reads its key from the row and continues its keyset on what
// the index carries after those columns (mysql.TableInfo.WalkIndex). A scan
// block without a time column cannot be bounded by --since: its walk is by
// (key) and is a full scan (refused without --allow-full-scan); the same
// holds for a state table without updated_at (by (status)) and an
// idempotency table without created_at (by (action)).
func Requirements(p *config.Pipeline, check string) ([]Requirement, string) {
	req := func(table, purpose string, cols ...string) Requirement {
		return Requirement{Pipeline: p.Name, Check: check, Table: table, Columns: cols, Purpose: purpose}
	}
	// walk: a keyset walk over the leading columns cols, yielding key and
	// reading extra (when set) from each row.
	walk := func(table, purpose, key, extra string, cols ...string) Requirement {
		r := req(table, purpose, cols...)
		r.Walk, r.Key = true, key
		if extra != "" {
			r.Reads = []string{extra}
		}
		return r
	}
	switch check {
	case CheckStuck:
		st := p.State
		if st == nil {
			return stuckByMessages(p, req)
		}
		if st.UpdatedAt == "" {
			return []Requirement{walk(st.Table, "walk non-terminal rows (no updated_at: unbounded by --since)", st.Key, "", st.Status)}, ""
		}
		return []Requirement{walk(st.Table, "walk non-terminal rows by updated_at", st.Key, "", st.Status, st.UpdatedAt)}, ""
	case CheckSkipped:
		id := p.Idempotency
		if id == nil {
			return nil, "the pipeline has no idempotency table"
		}
		if p.Entity == nil {
			return nil, "the pipeline has no entity block: a skip cannot be judged"
		}
		var out []Requirement
		if id.CreatedAt == "" {
			out = append(out, walk(id.Table, "walk SKIPPED records (no created_at: unbounded by --since)", id.Key, id.BizID, id.Action))
		} else {
			w := walk(id.Table, "walk SKIPPED records by created_at", id.Key, id.BizID, id.Action, id.CreatedAt)
			if id.BizID == "" {
				// The action is read from each row of a (created_at)
				// walk when that is the index there is.
				alt := walk(id.Table, "walk the records by created_at, reading their action", id.Key, id.Action, id.CreatedAt)
				w.Alt = &alt
			}
			out = append(out, w)
		}
		if i := p.StepIndex(p.Entity.EffectStep); i >= 0 && p.Steps[i].Scan != nil {
			sc := p.Steps[i].Scan
			r := req(sc.Table, "look up the effect of each SKIPPED record", sc.Key)
			r.Step = p.Steps[i].Name
			out = append(out, r)
		}
		if e := p.Entity; e.Table != "" && e.Key != "" && e.Status != "" {
			r := req(e.Table, "look up the entity status of each SKIPPED record", e.Key)
			r.Reads, r.Entity = []string{e.Status}, true
			out = append(out, r)
		}
		return out, ""
	case CheckDuplicates, CheckOrphans:
		var out []Requirement
		if check == CheckDuplicates && p.State != nil && len(Unscanned(p)) > 0 {
			st := p.State
			why := "walk every operation updated in the window, to cover the steps without a scan block (" + strings.Join(Unscanned(p), ", ") + ")"
			var w Requirement
			if st.UpdatedAt == "" {
				w = walk(st.Table, why+" (no updated_at: unbounded by --since)", st.Key, "", st.Status)
			} else {
				w = walk(st.Table, why, st.Key, "", st.Status, st.UpdatedAt)
			}
			w.Cover = true
			out = append(out, w)
		}
		for _, s := range p.Steps {
			if s.Scan == nil {
				continue
			}
			sc := s.Scan
			var w Requirement
			if sc.Time == "" {
				w = walk(sc.Table, "walk the scan table by key (no scan.time: unbounded by --since)", sc.Key, "", sc.Key)
			} else {
				w = walk(sc.Table, "walk the scan table by time", sc.Key, "", sc.Time)
			}
			w.Step = s.Name
			out = append(out, w)
			if check == CheckDuplicates && sc.Time != "" {
				r := req(sc.Table, "count the rows of each key", sc.Key)
				r.Step = s.Name
				out = append(out, r)
			}
		}
		if len(out) == 0 && (check == CheckOrphans || !p.UsesBinlog()) {
			return nil, "no step has a scan block"
		}
		if check == CheckOrphans {
			if p.State == nil && p.Idempotency == nil {
				return nil, "the pipeline has neither a state table nor an idempotency table"
			}
			if p.State != nil {
				out = append(out, req(p.State.Table, "look up state rows of scanned keys", p.State.Key))
			}
			if p.Idempotency != nil {
				out = append(out, req(p.Idempotency.Table, "look up idempotency records of scanned keys", p.Idempotency.BizID))
			}
		}
		return out, ""
	case CheckUncommitted:
		st := p.State
		if st == nil {
			return nil, "the pipeline has no state table"
		}
		if st.Partition == "" || st.Offset == "" {
			return nil, "the state table stores no partition/offset (state.partition, state.offset): the message position of a terminal row is unknown"
		}
		return []Requirement{walk(st.Table, "walk each partition from the committed offset", st.Key, st.Status, st.Partition, st.Offset)}, ""
	}
	return nil, fmt.Sprintf("unknown check %q", check)
}

// stuckByMessages is stuck on a pipeline without a state table: when no
// table can hold its progress either (no idempotency table), the consumer
// commits only after every step (commit: after_steps) and a message's key
// is its operation (message_key {biz_id}), the committed messages of the
// window are read from the topic and looked up in each step's scan table
// (seed 000's ledger_entry, by its unique key's biz_order_id): a message
// committed past whose step left no row is a candidate
// (docs/reconcile.md#steps-without-a-scan-block). One lookup requirement
// per scan step, by its key.
func stuckByMessages(p *config.Pipeline, req func(table, purpose string, cols ...string) Requirement) ([]Requirement, string) {
	switch {
	case p.Idempotency != nil:
		return nil, "the pipeline has no state table"
	case p.EffectiveCommit() != config.CommitAfterSteps:
		return nil, fmt.Sprintf("the pipeline has no state table, and its commit %q says nothing of its steps", p.EffectiveCommit())
	case p.MessageKey != config.DefaultMessageKey:
		return nil, fmt.Sprintf("the pipeline has no state table, and message_key %q is not {biz_id}: a message does not name its operation", p.MessageKey)
	}
	var out []Requirement
	for _, s := range p.Steps {
		if s.Scan == nil {
			continue
		}
		r := req(s.Scan.Table, "look up each committed message's "+s.Name+" row", s.Scan.Key)
		r.Step = s.Name
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, "the pipeline has no state table, and no step has a scan block to look its committed messages up in"
	}
	return out, ""
}

// Unscanned lists the steps of p whose effects no table-wide read can
// reach: neither a scan block nor a binlog block, and not unverified (an
// unverified step's effects are not counted at all). The duplicates check
// covers them by triaging every operation of the window
// (docs/reconcile.md#steps-without-a-scan-block).
func Unscanned(p *config.Pipeline) []string {
	var out []string
	for _, s := range p.Steps {
		if s.Scan == nil && s.Binlog == nil && !s.Unverified() {
			out = append(out, s.Name)
		}
	}
	return out
}

// unbounded reports whether a requirement's walk is not bounded by --since
// (it is then a full scan of the table or of an index).
func unbounded(r Requirement) bool { return strings.Contains(r.Purpose, "unbounded") }

// IndexNeeds lists the indexes every check that applies to p needs, one
// entry per (table, leading columns) with the checks that need it, in the
// order the checks run: what `opctl schema check` compares the database
// with.
func IndexNeeds(p *config.Pipeline) []schema.Need {
	var out []schema.Need
	at := map[string]int{}
	for _, c := range Checks() {
		reqs, na := Requirements(p, c)
		if na != "" {
			continue
		}
		for _, q := range reqs {
			need := schema.Need{Pipeline: p.Name, Table: q.Table, Columns: q.Columns, Checks: []string{c}, Purpose: q.Purpose,
				Walk: q.Walk, Key: q.Key, Reads: q.Reads, DDL: q.DDL(), IndexName: q.IndexName()}
			if a := q.Alt; a != nil {
				need.Alt = &schema.Need{Walk: a.Walk, Columns: a.Columns, Key: a.Key, Reads: a.Reads}
			}
			k := q.Table + "\x00" + strings.ToLower(strings.Join(q.Columns, ","))
			if i, ok := at[k]; ok {
				if q.Walk && !out[i].Walk {
					// A walk asks more of an index than a lookup on the same
					// columns: the need becomes the walk's.
					need.Checks = out[i].Checks
					out[i] = need
				}
				if !slices.Contains(out[i].Checks, c) {
					out[i].Checks = append(out[i].Checks, c)
				}
				continue
			}
			at[k] = len(out)
			out = append(out, need)
		}
	}
	return out
}
