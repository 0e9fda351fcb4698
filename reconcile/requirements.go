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

// Requirement is one index a check needs: an index of Table whose columns
// start with Columns. InnoDB appends the primary key to every secondary
// index, so a trailing column that is the table's primary key need not be
// declared: (status, updated_at) serves (status, updated_at, biz_id) when
// biz_id is the primary key.
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
	// Reads are further columns of Table the check reads (not indexed).
	Reads []string
	// Entity is true for the entity lookup of the skipped check.
	Entity bool
}

// IndexName is the name opctl proposes for the index: ix_opctl_ + the
// columns, at most 64 characters.
func (r Requirement) IndexName() string {
	n := "ix_opctl_" + strings.ToLower(strings.Join(r.Columns, "_"))
	n = strings.ReplaceAll(n, "$", "_")
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}

// DDL is the statement that adds the index.
func (r Requirement) DDL() string {
	cols := make([]string, len(r.Columns))
	for i, c := range r.Columns {
		cols[i] = config.QuoteIdent(c)
	}
	return fmt.Sprintf("ALTER TABLE %s ADD INDEX %s (%s);", config.QuoteIdent(r.Table),
		config.QuoteIdent(r.IndexName()), strings.Join(cols, ", "))
}

// String reads "biz_operation (status, updated_at, biz_id)".
func (r Requirement) String() string {
	return fmt.Sprintf("%s (%s)", r.Table, strings.Join(r.Columns, ", "))
}

// Requirements lists the indexes check needs on pipeline p, or says why the
// check does not apply to p (no state table, no scan block, ...). The
// choices, documented in the README:
//
//   - stuck walks the state table's (status, updated_at, key) index, one
//     range per non-terminal status;
//   - skipped walks the idempotency table's (action, created_at, key) index
//     for action = 'SKIPPED' (and looks the effect step's scan key up, when
//     it has a scan block, through an index starting with that key, and
//     the entity's status, when the entity block names its table, key and
//     status, through an index starting with entity.key);
//   - duplicates walks each scan table's (time, key) index and counts the
//     keys of each chunk through an index starting with key;
//   - orphans walks each scan table's (time, key) index and looks each chunk's
//     keys up in the state table (key) and the idempotency table (biz_id);
//   - uncommitted walks the state table's (partition, offset, key) index from
//     the group's committed offset to the log end of each partition.
//
// A scan block without a time column cannot be bounded by --since: its
// requirement is the (key) index and the walk is a full scan (refused
// without --allow-full-scan); the same holds for a state table without
// updated_at and an idempotency table without created_at.
func Requirements(p *config.Pipeline, check string) ([]Requirement, string) {
	req := func(table, purpose string, cols ...string) Requirement {
		return Requirement{Pipeline: p.Name, Check: check, Table: table, Columns: cols, Purpose: purpose}
	}
	walk := func(table, purpose string, cols ...string) Requirement {
		r := req(table, purpose, cols...)
		r.Walk = true
		return r
	}
	switch check {
	case CheckStuck:
		st := p.State
		if st == nil {
			return nil, "the pipeline has no state table"
		}
		if st.UpdatedAt == "" {
			return []Requirement{walk(st.Table, "walk non-terminal rows (no updated_at: unbounded by --since)", st.Status, st.Key)}, ""
		}
		return []Requirement{walk(st.Table, "walk non-terminal rows by updated_at", st.Status, st.UpdatedAt, st.Key)}, ""
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
			out = append(out, walk(id.Table, "walk SKIPPED records (no created_at: unbounded by --since)", id.Action, id.Key))
		} else {
			out = append(out, walk(id.Table, "walk SKIPPED records by created_at", id.Action, id.CreatedAt, id.Key))
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
		for _, s := range p.Steps {
			if s.Scan == nil {
				continue
			}
			sc := s.Scan
			var w Requirement
			if sc.Time == "" {
				w = walk(sc.Table, "walk the scan table by key (no scan.time: unbounded by --since)", sc.Key)
			} else {
				w = walk(sc.Table, "walk the scan table by time", sc.Time, sc.Key)
			}
			w.Step = s.Name
			out = append(out, w)
			if check == CheckDuplicates && sc.Time != "" {
				r := req(sc.Table, "count the rows of each key", sc.Key)
				r.Step = s.Name
				out = append(out, r)
			}
		}
		if len(out) == 0 {
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
		return []Requirement{walk(st.Table, "walk each partition from the committed offset", st.Partition, st.Offset, st.Key)}, ""
	}
	return nil, fmt.Sprintf("unknown check %q", check)
}

// unbounded reports whether a requirement's walk is not bounded by --since
// (it is then a full scan of the table or of an index).
func unbounded(r Requirement) bool { return strings.Contains(r.Purpose, "unbounded") }

// IndexNeeds lists the indexes every check that applies to p needs, one
// entry per (table, columns) with the checks that need it, in the order
// the checks run: what `opctl schema check` compares the database with.
func IndexNeeds(p *config.Pipeline) []schema.Need {
	var out []schema.Need
	at := map[string]int{}
	for _, c := range Checks() {
		reqs, na := Requirements(p, c)
		if na != "" {
			continue
		}
		for _, q := range reqs {
			k := q.Table + "\x00" + strings.ToLower(strings.Join(q.Columns, ","))
			if i, ok := at[k]; ok {
				if !slices.Contains(out[i].Checks, c) {
					out[i].Checks = append(out[i].Checks, c)
				}
				continue
			}
			at[k] = len(out)
			out = append(out, schema.Need{Pipeline: p.Name, Table: q.Table, Columns: q.Columns, Checks: []string{c}, Purpose: q.Purpose, DDL: q.DDL()})
		}
	}
	return out
}
