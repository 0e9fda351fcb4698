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
	// the timer and the next sweep see them. A read of it that fails
	// holds the records for the next polls (HoldFor, HoldMax).
	Topics *Topics
	// Log, when set, is told what the source cannot map: once per
	// pipeline and kind of failure, not per row nor per poll, until a
	// poll maps that pipeline's records again.
	Log func(format string, a ...any)
	// HoldFor and HoldMax bound how long and how many SKIPPED records the
	// poll holds while the topic cannot be read (docs/watch.md#polling):
	// a record older than HoldFor by the database's clock, or past the
	// HoldMax newest held, is given up to the next sweep, and said.
	// Defaults: the search window (the topic read when Kafka answers
	// again then covers at most twice that), and 10000 records.
	HoldFor time.Duration
	HoldMax int

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
	// holds are the records tables whose watermark is held back because
	// the topic could not be read, by "pipeline/table".
	holds map[string]*hold
}

// hold is a records table's wait for Kafka: how many records were given
// up meanwhile (past HoldFor or HoldMax).
type hold struct {
	gaveUp int
}

// defaultHoldMax is HoldMax's default: the held records are read again at
// every poll, and their topic read spans them all.
const defaultHoldMax = 10000

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

// Changes reads every polled table from its watermark (less Overlap), then
// maps the records only the topic maps; a records table whose topic could
// not be read keeps its watermark at the first record held (hold).
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
	// Every table is walked first, and the records only the topic maps
	// (t.rule) mapped after: a read of the topic that runs out of the
	// poll's time leaves those records waiting (hold), never a walk of
	// MySQL failed for it (docs/watch.md#polling).
	tbls := s.tables()
	direct := make([][]Change, len(tbls))
	pends := make([][]pendingChange, len(tbls))
	for i, t := range tbls {
		name := t.p.Name + "/" + t.table
		mark := pos[name]
		w := sources.Walk{Table: t.table, PosCol: t.timeCol, Order: []string{t.key}, KeyCol: t.key, ExtraCol: t.bizCol, EqCol: t.eqCol, EqVal: t.eqVal}
		if !mark.IsZero() {
			w.From = mark.Add(-overlap)
		}
		var cur sources.Cursor
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
					pends[i] = append(pends[i], pendingChange{rule: *t.rule, value: r.Key, at: ts, table: t.table, pos: c.Position})
				case t.rule != nil:
					// A NULL created_at: no time to look for its message from.
				case biz != "":
					direct[i] = append(direct[i], c)
				}
			}
			if len(rows) < page {
				break
			}
			cur = rows[len(rows)-1].After()
		}
	}
	for i, t := range tbls {
		// In the tables' order: a record and its order row read by one
		// poll are triaged with the record as the cause.
		out = append(out, direct[i]...)
		if len(pends[i]) > 0 {
			name := t.p.Name + "/" + t.table
			mapped, held := s.resolve(ctx, t.p, name, pends[i])
			out = append(out, mapped...)
			if len(held) > 0 {
				// The records wait for Kafka: the table's watermark stays
				// at the first, and they are not seen, so the next polls
				// read them again (docs/watch.md#polling).
				next[name] = held[0].at
				for _, pc := range held {
					delete(seen, pc.pos)
				}
			}
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
	unmappedClaimants = "claimants"
	unmappedNotFound  = "not found"
)

// resolve maps p's SKIPPED records to their operations through the topic
// (Topics.resolve, as binlog mode: the same index, each topic record read
// once). What it cannot map for good (a msg id no message has within the
// search window, a record too many operations claim) is left to the timer
// and the next sweep, counted in Unmapped and said once (tell). A failed
// read of the topic does not fail the poll (the records of other tables
// are still changes, and Kafka's own state is the triage's to report:
// opctl_watch_up), nor does it leave the records: they are returned as
// held, the oldest first, for the next polls to read again, within
// HoldFor and HoldMax (hold). name is the table's "pipeline/table".
func (s *PollSource) resolve(ctx context.Context, p *config.Pipeline, name string, pend []pendingChange) (mapped []Change, held []pendingChange) {
	before := s.Topics.records
	changes, skipped, rerr := s.Topics.resolve(ctx, p, pend)
	s.rows += s.Topics.records - before
	table := pend[0].table
	if rerr != nil {
		return nil, s.hold(ctx, p, name, table, pend, rerr)
	}
	s.release(p.Name, name, table, len(pend))
	found := map[string]bool{}
	for _, c := range changes {
		found[c.Position] = true
	}
	notFound := len(pend) - len(found) - skipped
	s.unmapped += skipped + notFound
	s.tell(p.Name, unmappedClaimants, skipped > 0, "pipeline %s: %d SKIPPED record(s) of %s are claimed by more than %d operations each: not triaged now (the timer and the next sweep see them; later ones are not said again)", p.Name, skipped, table, maxClaimants)
	s.tell(p.Name, unmappedNotFound, notFound > 0, "pipeline %s: %d SKIPPED record(s) of %s name a msg id no message of %s has within the search window before the record (a record another program wrote, or a message older than --search-window): not triaged now (the timer and the next sweep see them; later ones are not said again)", p.Name, notFound, table, p.Topic)
	return changes, nil
}

// hold keeps the records pend (p's table, name its "pipeline/table") that
// could not be mapped because the topic could not be read (rerr), for the
// next polls to read again: all of them but those older than HoldFor by
// the database's clock and those past the HoldMax newest, which are given
// up (counted in Unmapped and said, once per wait: the --older-than timer
// cannot see a record that names no operation, only a sweep does). It
// says once that the records wait for Kafka. The database's clock
// unread (the poll out of time), nothing is given up this poll: the next
// one bounds them, and MySQL's state is its walks' to tell.
func (s *PollSource) hold(ctx context.Context, p *config.Pipeline, name, table string, pend []pendingChange, rerr error) []pendingChange {
	holdFor, holdMax := s.HoldFor, s.HoldMax
	if holdFor <= 0 {
		holdFor = s.Topics.window()
	}
	if holdMax <= 0 {
		holdMax = defaultHoldMax
	}
	keep := pend
	if now, err := s.DBFor(p).Now(ctx); err == nil {
		cut := now.Add(-holdFor)
		i := 0
		for i < len(keep) && keep[i].at.Before(cut) {
			i++
		}
		keep = keep[i:]
	}
	if len(keep) > holdMax {
		keep = keep[len(keep)-holdMax:]
	}
	gone := pend[:len(pend)-len(keep)]
	h := s.holds[name]
	if h == nil {
		if s.holds == nil {
			s.holds = map[string]*hold{}
		}
		h = &hold{}
		s.holds[name] = h
		first := pend[0].at.UTC().Format(TimeFormat)
		s.say("pipeline %s: %d SKIPPED record(s) of %s (the first written at %s) wait for Kafka: only their messages name their operations, and %v; the table's watermark is held at the first and the next polls read them again until the topic answers (a record held longer than %s, or past the %d newest held, is given up to the next sweep, and said)",
			p.Name, len(pend), table, first, rerr, holdFor, holdMax)
	}
	if len(gone) > 0 {
		if h.gaveUp == 0 {
			s.say("pipeline %s: GIVING UP %d SKIPPED record(s) of %s written from %s to %s: Kafka has not answered for longer than %s (or more than %d records wait): they are not triaged, and no --older-than timer sees them (they name no operation); only a sweep does: run `opctl reconcile --pipeline %s`, or restart the watch (its first sweep) once Kafka answers (later ones are counted when it does)",
				p.Name, len(gone), table, gone[0].at.UTC().Format(TimeFormat), gone[len(gone)-1].at.UTC().Format(TimeFormat), holdFor, holdMax, p.Name)
		}
		h.gaveUp += len(gone)
		s.unmapped += len(gone)
	}
	return keep
}

// release ends the wait of name's records, if any, when the topic was read
// again: n records are mapped (as far as their messages are found).
func (s *PollSource) release(pipeline, name, table string, n int) {
	h := s.holds[name]
	if h == nil {
		return
	}
	delete(s.holds, name)
	gaveUp := ""
	if h.gaveUp > 0 {
		gaveUp = fmt.Sprintf("; %d were given up while it did not (run `opctl reconcile --pipeline %s` for them)", h.gaveUp, pipeline)
	}
	s.say("pipeline %s: Kafka answers again: the %d SKIPPED record(s) of %s that waited are read and mapped to their operations%s", pipeline, n, table, gaveUp)
}

// say tells Log, when set.
func (s *PollSource) say(format string, a ...any) {
	if s.Log != nil {
		s.Log(format, a...)
	}
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
