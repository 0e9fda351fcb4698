package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Follower is the binlog follower the BinlogSource reads
// (sources/binlog.Reader).
type Follower interface {
	Head(ctx context.Context) (sources.BinlogPosition, error)
	Follow(ctx context.Context, from sources.BinlogPosition, tables []sources.FollowTable, emit func(sources.BinlogTx) error) error
}

// BinlogSource is the ChangeSource of binlog mode: the follower runs in
// the background from the position and each Changes call takes the
// transactions it has read since, mapped to the operations they touch
// (the state table's key, the idempotency table's biz_id). A change whose
// rows are unknown (Statement set) and a purged position are
// ErrPositionGone: the watch sweeps again. Not wired into opctl watch yet
// (docs/watch.md).
type BinlogSource struct {
	Pipelines []*config.Pipeline
	Follower  Follower
	// Schema is the database of the table names that name none.
	Schema string

	mu      sync.Mutex
	txs     []sources.BinlogTx
	err     error
	cancel  context.CancelFunc
	running bool
}

// Name is the cause.source of binlog changes.
func (s *BinlogSource) Name() string { return SourceBinlog }

type binlogCol struct{ pipeline, col string }

// tables maps schema.table to the pipelines and the column holding the
// biz id.
func (s *BinlogSource) tables() (map[string][]binlogCol, []sources.FollowTable) {
	m := map[string][]binlogCol{}
	var list []sources.FollowTable
	add := func(p *config.Pipeline, table, col string) {
		schema, name := s.Schema, table
		if i := strings.IndexByte(table, '.'); i >= 0 {
			schema, name = table[:i], table[i+1:]
		}
		k := schema + "." + name
		if _, ok := m[k]; !ok {
			list = append(list, sources.FollowTable{Schema: schema, Table: name})
		}
		m[k] = append(m[k], binlogCol{p.Name, col})
	}
	for _, p := range s.Pipelines {
		if st := p.State; st != nil && st.Table != "" && st.Key != "" {
			add(p, st.Table, st.Key)
		}
		if id := p.Idempotency; id != nil && id.Table != "" && id.BizID != "" {
			add(p, id.Table, id.BizID)
		}
	}
	return m, list
}

// Head is the server's binlog position.
func (s *BinlogSource) Head(ctx context.Context) (string, error) {
	p, err := s.Follower.Head(ctx)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(p)
	return string(b), err
}

// Changes starts the follow from `from` when it is not running and
// returns what it read since the last call.
func (s *BinlogSource) Changes(ctx context.Context, from string) ([]Change, string, error) {
	m, list := s.tables()
	s.mu.Lock()
	if !s.running {
		var pos sources.BinlogPosition
		if err := json.Unmarshal([]byte(from), &pos); err != nil {
			s.mu.Unlock()
			return nil, from, fmt.Errorf("binlog position %q: %w", from, err)
		}
		fctx, cancel := context.WithCancel(ctx)
		s.cancel, s.running, s.err, s.txs = cancel, true, nil, nil
		go func() {
			err := s.Follower.Follow(fctx, pos, list, func(tx sources.BinlogTx) error {
				s.mu.Lock()
				defer s.mu.Unlock()
				if fctx.Err() != nil {
					// Stopped: a later follow must not see this one's rows.
					return fctx.Err()
				}
				s.txs = append(s.txs, tx)
				return nil
			})
			s.mu.Lock()
			if fctx.Err() == nil {
				s.err = err
				if err == nil {
					s.err = errors.New("the binlog follow ended")
				}
			}
			s.mu.Unlock()
		}()
	}
	txs, ferr := s.txs, s.err
	s.txs = nil
	s.mu.Unlock()
	var out []Change
	pos := from
	for _, tx := range txs {
		for _, c := range tx.Changes {
			if c.Statement != "" {
				s.stop()
				return nil, pos, fmt.Errorf("%s.%s changed by a statement whose rows are unknown (%.80q): %w", c.Schema, c.Table, c.Statement, ErrPositionGone)
			}
			for _, bc := range m[c.Schema+"."+c.Table] {
				if biz := c.Values[bc.col]; biz != "" {
					at := tx.CommittedAt
					out = append(out, Change{Pipeline: bc.pipeline, BizID: biz, Table: c.Table, Position: tx.End.String(), CommittedAt: &at})
				}
			}
		}
		b, err := json.Marshal(tx.End)
		if err != nil {
			return nil, pos, err
		}
		pos = string(b)
	}
	if ferr != nil {
		s.stop()
		var pe *sources.PurgedError
		if errors.As(ferr, &pe) {
			return out, pos, fmt.Errorf("%v: %w", ferr, ErrPositionGone)
		}
		return out, pos, ferr
	}
	return out, pos, nil
}

// stop ends the follow; the next Changes starts it again.
func (s *BinlogSource) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
	s.running, s.txs = false, nil
}
