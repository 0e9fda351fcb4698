package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

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
// operation; and the entity table by entity.updated_at when it is set. It
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
}

func (s *PollSource) tables() []pollTable {
	var out []pollTable
	for _, p := range s.Pipelines {
		if st := p.State; st != nil && st.Table != "" && st.UpdatedAt != "" && st.Key != "" {
			out = append(out, pollTable{p: p, table: st.Table, key: st.Key, timeCol: st.UpdatedAt})
		}
		if id := p.Idempotency; id != nil && id.Table != "" && id.CreatedAt != "" && id.BizID != "" && id.Key != "" {
			out = append(out, pollTable{p: p, table: id.Table, key: id.Key, timeCol: id.CreatedAt, bizCol: id.BizID})
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
// column, no entity table with updated_at (seed 000's own schema has
// none). Only the first sweep and the timer see them: the watch
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

// Head is the database clock minus Lookback for every polled table.
func (s *PollSource) Head(ctx context.Context) (string, error) {
	pos := pollPos{}
	for _, t := range s.tables() {
		now, err := s.DBFor(t.p).Now(ctx)
		if err != nil {
			return "", err
		}
		pos[t.p.Name+"/"+t.table] = now.Add(-s.Lookback)
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
		w := sources.Walk{Table: t.table, PosCol: t.timeCol, Order: []string{t.key}, KeyCol: t.key, ExtraCol: t.bizCol}
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
				if ts, ok := r.Pos.(time.Time); ok {
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
				if biz != "" {
					out = append(out, c)
				}
			}
			if len(rows) < page {
				break
			}
			cur = rows[len(rows)-1].After()
		}
	}
	b, err := json.Marshal(next)
	if err != nil {
		return nil, from, err
	}
	s.seen = seen
	return out, string(b), nil
}
