package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Walker is the keyset page read the poller needs (sources/mysql.Reader's
// WalkPage: identifiers validated and quoted, values bound).
type Walker interface {
	WalkPage(ctx context.Context, w sources.Walk, after sources.Cursor, limit int) ([]sources.WalkRow, error)
	Now(ctx context.Context) (time.Time, error)
}

// PollSource is the ChangeSource of polling mode (docs/watch.md#polling):
// at each call it reads, per pipeline, the state rows whose updated_at is
// at or after its watermark and the idempotency records whose created_at
// is, keyset-paginated on (time column, key), and maps each row to its
// operation; and the entity table by entity.updated_at when it is set. The
// SKIPPED records of an idempotency table without biz_id (seed 003's) are
// mapped through their messages as binlog mode maps them (Topics). It
// sees inserts and updates that move the time column; it cannot see
// deletes, updates that leave the time column as it was, nor tables
// without a time column (evidence, intents, scan tables: a change there
// is seen when the state row moves, or by the timer).
type PollSource struct {
	Pipelines []*config.Pipeline
	// DBFor is the read path of a pipeline.
	DBFor func(p *config.Pipeline) Walker
	// Lookback is how far before the head the first poll starts (the
	// watch passes --older-than, so that the operations updated shortly
	// before it started get their deadlines); Overlap is how far before the
	// newest time seen each poll starts again, so that a transaction that
	// commits a little after its row's time is still seen (default 2s).
	Lookback, Overlap time.Duration
	// Page is the rows per page (default 1000).
	Page int
	// Topics maps the SKIPPED records of an idempotency table without a
	// biz_id column to their operations through their messages, the same
	// index binlog mode uses (docs/watch.md#binlog-mode); nil or without
	// Kafka, such records are not polled (the watch says so at start) and
	// the timer and the next sweep see them.
	Topics *Topics
	// Log, when set, is told what the source cannot map: once per
	// pipeline and kind of failure, not per row nor per poll, until a
	// poll maps that pipeline's records again.
	Log func(format string, a ...any)

	once sync.Once
	tbls []pollTable
	// said are the failures told (Log) and not cleared since, by
	// pipeline and kind.
	said map[[2]string]bool
	// unmapped counts the records left unmapped.
	unmapped int
	// seen are the positions the previous poll returned: the overlap
	// reads them again, and they are not changes again.
	seen map[string]bool
	// rows read by the last Changes (overlap included).
	rows int
}

// RowsRead is the rows the last Changes read, the overlap's included
// (opctl_watch_rows_read_total).
func (s *PollSource) RowsRead() int { return s.rows }

// Name is the cause.source of polled changes.
func (s *PollSource) Name() string { return SourcePoll }

// pollPos is the position: per "pipeline/table", the newest time seen.
type pollPos map[string]time.Time

type pollTable struct {
	p                   *config.Pipeline
	table, key, timeCol string
	bizCol              string // "" when the key is the biz id
	eqCol               string
	eqVal               any
	// rule, when set, maps the rows through the topic: a SKIPPED record
	// of an idempotency table without biz_id, keyed by its msg id.
	rule *mapRule
}

// topicsReady reports whether the topic can be read to map records.
func (s *PollSource) topicsReady() bool { return s.Topics != nil && s.Topics.Kafka != nil }

// recordRule is the rule by which binlog mode maps p's idempotency records
// through their messages (planFollow's byMsgID: no biz_id column, a key,
// an action, messages keyed by the biz_id), with its time column.
func recordRule(p *config.Pipeline) (mapRule, bool) {
	fp := planFollow([]*config.Pipeline{p}, "")
	for _, ft := range fp.tables {
		for _, r := range fp.rules[ft.Schema+"."+ft.Table] {
			if r.kind == byMsgID && r.timeCol != "" {
				return r, true
			}
		}
	}
	return mapRule{}, false
}

// RecordsUnmapped names the pipelines whose idempotency records only the
// topic can map (no biz_id column) while the source has no Kafka to read:
// those records are not polled (docs/watch.md#polling).
func (s *PollSource) RecordsUnmapped() []string {
	if s.topicsReady() {
		return nil
	}
	var out []string
	for _, p := range s.Pipelines {
		if _, ok := recordRule(p); ok {
			out = append(out, p.Name)
		}
	}
	return out
}

func (s *PollSource) tables() []pollTable {
	s.once.Do(func() { s.tbls = s.plan() })
	return s.tbls
}

func (s *PollSource) plan() []pollTable {
	var out []pollTable
	for _, p := range s.Pipelines {
		if st := p.State; st != nil && st.Table != "" && st.UpdatedAt != "" && st.Key != "" {
			out = append(out, pollTable{p: p, table: st.Table, key: st.Key, timeCol: st.UpdatedAt})
		}
		if id := p.Idempotency; id != nil && id.Table != "" && id.CreatedAt != "" && id.BizID != "" && id.Key != "" {
			out = append(out, pollTable{p: p, table: id.Table, key: id.Key, timeCol: id.CreatedAt, bizCol: id.BizID})
		} else if r, ok := recordRule(p); ok && s.topicsReady() {
			// Only SKIPPED records, as binlog mode: a DONE one decides no
			// target by itself.
			out = append(out, pollTable{p: p, table: r.table, key: r.col, timeCol: r.timeCol, eqCol: r.action, eqVal: inspect.ActionSkipped, rule: &r})
		}
		// An entity's status change (entity.updated_at): its key is the
		// biz_id, so the operation is triaged again and its SKIPPED
		// records re-reviewed (seed 003's question 2).
		if e := p.Entity; e != nil && e.Table != "" && e.Key != "" && e.UpdatedAt != "" {
			out = append(out, pollTable{p: p, table: e.Table, key: e.Key, timeCol: e.UpdatedAt})
		}
	}
	return out
}

// Unfollowed names the pipelines of which polling reads no table: no state
// table with updated_at, no idempotency table with created_at and a biz_id
// column (or records the topic maps, with Kafka to read), no entity table
// with updated_at (seed 000's own schema has none). Only the first sweep and the timer see them: the watch
// says so on stderr instead of looking as if it followed them
// (docs/watch.md#polling).
func (s *PollSource) Unfollowed() []string {
	polled := map[*config.Pipeline]bool{}
	for _, t := range s.tables() {
		polled[t.p] = true
	}
	var out []string
	for _, p := range s.Pipelines {
		if !polled[p] {
			out = append(out, p.Name)
		}
	}
	return out
}

// Head is the database clock minus Lookback for every polled table, and
// the clock itself for the records the topic maps: those written before
// the watch started are the first sweep's (a record gives no deadline),
// and the first poll's read of the topic stays within the search window
// of the records after it.
func (s *PollSource) Head(ctx context.Context) (string, error) {
	pos := pollPos{}
	for _, t := range s.tables() {
		now, err := s.DBFor(t.p).Now(ctx)
		if err != nil {
			return "", err
		}
		if t.rule == nil {
			now = now.Add(-s.Lookback)
		}
		pos[t.p.Name+"/"+t.table] = now
	}
	b, err := json.Marshal(pos)
	return string(b), err
}

// Changes reads every polled table from its watermark (less Overlap).
func (s *PollSource) Changes(ctx context.Context, from string) ([]Change, string, error) {
	pos := pollPos{}
	if from != "" {
		if err := json.Unmarshal([]byte(from), &pos); err != nil {
			return nil, from, fmt.Errorf("poll position %q: %w", from, err)
		}
	}
	overlap, page := s.Overlap, s.Page
	if overlap <= 0 {
		overlap = 2 * time.Second
	}
	if page <= 0 {
		page = 1000
	}
	var out []Change
	s.rows = 0
	seen := map[string]bool{}
	next := pollPos{}
	for k, v := range pos {
		next[k] = v
	}
	for _, t := range s.tables() {
		name := t.p.Name + "/" + t.table
		mark := pos[name]
		w := sources.Walk{Table: t.table, PosCol: t.timeCol, Order: []string{t.key}, KeyCol: t.key, ExtraCol: t.bizCol, EqCol: t.eqCol, EqVal: t.eqVal}
		if !mark.IsZero() {
			w.From = mark.Add(-overlap)
		}
		var cur sources.Cursor
		// The records only the topic maps (t.rule): mapped after the walk.
		var pend []pendingChange
		for {
			rows, err := s.DBFor(t.p).WalkPage(ctx, w, cur, page)
			if err != nil {
				return nil, from, fmt.Errorf("polling %s: %w", name, err)
			}
			s.rows += len(rows)
			for _, r := range rows {
				biz := r.Key
				if t.bizCol != "" {
					biz = r.Extra
				}
				c := Change{Pipeline: t.p.Name, BizID: biz, Table: t.table}
				ts, ok := r.Pos.(time.Time)
				if ok {
					c.CommittedAt = &ts
					c.Position = ts.UTC().Format(TimeFormat) + "/" + r.Key
					if ts.After(next[name]) {
						next[name] = ts
					}
				}
				if c.Position != "" {
					seen[c.Position] = true
					if s.seen[c.Position] {
						continue
					}
				}
				switch {
				case t.rule != nil && ok && r.Key != "":
					pend = append(pend, pendingChange{rule: *t.rule, value: r.Key, at: ts, table: t.table, pos: c.Position})
				case t.rule != nil:
					// A NULL created_at: no time to look for its message from.
				case biz != "":
					out = append(out, c)
				}
			}
			if len(rows) < page {
				break
			}
			cur = rows[len(rows)-1].After()
		}
		if len(pend) > 0 {
			// In the tables' order: a record and its order row read by one
			// poll are triaged with the record as the cause.
			out = append(out, s.resolve(ctx, t.p, pend)...)
		}
	}
	b, err := json.Marshal(next)
	if err != nil {
		return nil, from, err
	}
	s.seen = seen
	return out, string(b), nil
}

// Kinds of records the source could not map (said once each: tell).
const (
	unmappedRead      = "read"
	unmappedClaimants = "claimants"
	unmappedNotFound  = "not found"
)

// resolve maps p's SKIPPED records to their operations through the topic
// (Topics.resolve, as binlog mode: the same index, each topic record read
// once). What it cannot map is left to the timer and the next sweep,
// counted in Unmapped and said once (tell); a failed read of the topic
// does not fail the poll: the records of other tables are still changes,
// and Kafka's own state is the triage's to report (opctl_watch_up).
func (s *PollSource) resolve(ctx context.Context, p *config.Pipeline, pend []pendingChange) []Change {
	before := s.Topics.records
	mapped, skipped, err := s.Topics.resolve(ctx, p, pend)
	s.rows += s.Topics.records - before
	table := pend[0].table
	if err != nil {
		s.unmapped += len(pend)
		s.tell(p.Name, unmappedRead, true, "pipeline %s: %d SKIPPED record(s) of %s and those after them are not mapped to their operations until the topic can be read (the --older-than timer and the next sweep see them): %v", p.Name, len(pend), table, err)
		return nil
	}
	s.tell(p.Name, unmappedRead, false, "")
	found := map[string]bool{}
	for _, c := range mapped {
		found[c.Position] = true
	}
	notFound := len(pend) - len(found) - skipped
	s.unmapped += skipped + notFound
	s.tell(p.Name, unmappedClaimants, skipped > 0, "pipeline %s: %d SKIPPED record(s) of %s are claimed by more than %d operations each: not triaged now (the timer and the next sweep see them; later ones are not said again)", p.Name, skipped, table, maxClaimants)
	s.tell(p.Name, unmappedNotFound, notFound > 0, "pipeline %s: %d SKIPPED record(s) of %s name a msg id no message of %s has within the search window before the record (a record another program wrote, or a message older than --search-window): not triaged now (the timer and the next sweep see them; later ones are not said again)", p.Name, notFound, table, p.Topic)
	return mapped
}

// tell says a failure of one kind for one pipeline when it happens and is
// not said already (on, Log); a poll where it does not happen (!on) clears
// it, so that it is said again when it comes back.
func (s *PollSource) tell(pipeline, kind string, on bool, format string, a ...any) {
	k := [2]string{pipeline, kind}
	if !on {
		delete(s.said, k)
		return
	}
	if s.said[k] {
		return
	}
	if s.said == nil {
		s.said = map[[2]string]bool{}
	}
	s.said[k] = true
	if s.Log != nil {
		s.Log(format, a...)
	}
}

// Unmapped is how many polled records the source could not map to
// operations (left to the timer and the next sweep).
func (s *PollSource) Unmapped() int { return s.unmapped }
