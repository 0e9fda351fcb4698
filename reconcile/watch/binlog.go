package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Follower is the binlog follower the BinlogSource reads
// (sources/binlog.Reader).
type Follower interface {
	Head(ctx context.Context) (sources.BinlogPosition, error)
	Follow(ctx context.Context, from sources.BinlogPosition, tables []sources.FollowTable, emit func(sources.BinlogTx) error) error
}

// BinlogSource is the ChangeSource of binlog mode (docs/watch.md#binlog-mode):
// the follower runs in the background from the position and each Changes
// call takes the transactions it has read since, mapped to the operations
// they touch (planFollow: the state, idempotency, scan, entity and
// binlog-step tables). A change whose rows are unknown (Statement set) and
// a purged position are ErrPositionGone: the watch sweeps again.
type BinlogSource struct {
	Pipelines []*config.Pipeline
	Follower  Follower
	// Schema is the database of the table names that name none.
	Schema string
	// Topics maps the changes only a message can name (seed 003's SKIPPED
	// records without biz_id, seed 000's binlog step); nil: they are
	// counted in Unmapped and left to the timer and the next sweep.
	Topics *Topics
	// Notify, when set, receives a value (without blocking) when the
	// follower delivered a transaction with changes: the watch reads it at
	// once instead of at its next --interval.
	Notify chan struct{}
	// Log, when set, is told what the source cannot map.
	Log func(format string, a ...any)
	// Behind, when set, is told after each Changes how far the follow is
	// behind the server: 0 when its last delivery was a progress mark
	// (it had read everything), else the time since the commit of the
	// last transaction it delivered (opctl_watch_binlog_behind_seconds).
	Behind func(time.Duration)
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Location is the time zone the tables' DATETIMEs are written in
	// (mysql.time_zone; nil: UTC): a row's time column inside its commit's
	// second is its finer commit time (commitTime).
	Location *time.Location

	mu      sync.Mutex
	txs     []sources.BinlogTx
	err     error
	cancel  context.CancelFunc
	running bool
	plan    *followPlan
	rows    int
	// unmapped counts the changes left unmapped (no Topics, or too many
	// claimants).
	unmapped int
	// failed is the error that ended the last follow, until a follow
	// started after it delivers something: a restarted follow has not
	// regained the source before it reads from the server.
	failed error
}

// Name is the cause.source of binlog changes.
func (s *BinlogSource) Name() string { return SourceBinlog }

// Wake is Notify (the Watcher reads the source when it fires).
func (s *BinlogSource) Wake() <-chan struct{} { return s.Notify }

// RowsRead is the row changes of the followed tables the last Changes
// took, and the topic records it read to map them
// (opctl_watch_rows_read_total).
func (s *BinlogSource) RowsRead() int { return s.rows }

// Tables are the tables the follow reads, with the columns it keeps.
func (s *BinlogSource) Tables() []sources.FollowTable { return s.followPlan().tables }

func (s *BinlogSource) followPlan() *followPlan {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.plan == nil {
		fp := planFollow(s.Pipelines, s.Schema)
		s.plan = &fp
	}
	return s.plan
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
// returns what it read since the last call. On an error the changes read
// before it and the position after them are returned too: the follow
// restarts from that position.
func (s *BinlogSource) Changes(ctx context.Context, from string) ([]Change, string, error) {
	plan := s.followPlan()
	s.mu.Lock()
	if !s.running {
		var pos sources.BinlogPosition
		if err := json.Unmarshal([]byte(from), &pos); err != nil {
			s.mu.Unlock()
			return nil, from, fmt.Errorf("binlog position %q: %w", from, err)
		}
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		s.cancel, s.running, s.err, s.txs = cancel, true, nil, nil
		go s.follow(fctx, pos, plan.tables)
	}
	txs, ferr := s.txs, s.err
	s.txs = nil
	if len(txs) > 0 {
		s.failed = nil
	}
	var pe *sources.PurgedError
	if ferr != nil && !errors.As(ferr, &pe) {
		s.failed = ferr
	}
	failed := s.failed
	s.mu.Unlock()
	var out []Change
	byPipeline := map[string][]pendingChange{}
	var order []*config.Pipeline
	pos := from
	s.rows = 0
	for seq, tx := range txs {
		for _, c := range tx.Changes {
			if c.Statement != "" {
				s.stop()
				return out, pos, fmt.Errorf("%s.%s changed by a statement whose rows are unknown (%.80q): %w", c.Schema, c.Table, c.Statement, ErrPositionGone)
			}
		}
		s.rows += len(tx.Changes)
		direct, pending, unknown := plan.mapTx(tx, s.Location)
		if unknown != "" {
			s.stop()
			return out, pos, fmt.Errorf("%s: %w", unknown, ErrPositionGone)
		}
		for i := range direct {
			direct[i].seq = seq + 1
		}
		out = append(out, direct...)
		for _, pc := range pending {
			pc.seq = seq + 1
			if byPipeline[pc.rule.p.Name] == nil {
				order = append(order, pc.rule.p)
			}
			byPipeline[pc.rule.p.Name] = append(byPipeline[pc.rule.p.Name], pc)
		}
		if !tx.More {
			b, err := json.Marshal(tx.End)
			if err != nil {
				return out, pos, err
			}
			pos = string(b)
		}
	}
	if n := len(txs); n > 0 && s.Behind != nil {
		if last := txs[n-1]; len(last.Changes) == 0 && !last.More {
			s.Behind(0)
		} else {
			now := time.Now
			if s.Now != nil {
				now = s.Now
			}
			// The binlog's times are whole seconds.
			s.Behind(max(0, now().Sub(last.CommittedAt)-time.Second))
		}
	}
	for _, p := range order {
		pend := byPipeline[p.Name]
		if s.Topics == nil || s.Topics.Kafka == nil {
			s.unmap(len(pend), "pipeline %s: %d change(s) of %s name no operation and Kafka cannot be read to map them through their messages: the --older-than timer and the next sweep see them", p.Name, len(pend), pend[0].table)
			continue
		}
		before := s.Topics.records
		mapped, skipped, err := s.Topics.resolve(ctx, p, pend)
		s.rows += s.Topics.records - before
		if err != nil {
			// The follow goes on; these changes are left to the timer and
			// the next sweep, and the source reads as lost until a read
			// of the topic succeeds.
			s.unmap(len(pend), "pipeline %s: %v", p.Name, err)
			return out, pos, err
		}
		if skipped > 0 {
			s.unmap(skipped, "pipeline %s: %d change(s) of %s are claimed by more than %d operations each: not triaged now (the timer and the next sweep see them)", p.Name, skipped, pend[0].table, maxClaimants)
		}
		out = append(out, mapped...)
	}
	// Each operation's round fence: what proves, read back before its
	// triage, that the triage sees the round's changes (fence.go). A
	// return above leaves every fence nil: the second look stays.
	markFences(out)
	if ferr != nil {
		s.stop()
		if errors.As(ferr, &pe) {
			return out, pos, fmt.Errorf("%v: %w", ferr, ErrPositionGone)
		}
		return out, pos, ferr
	}
	if failed != nil {
		return out, pos, fmt.Errorf("reconnecting after: %w", failed)
	}
	return out, pos, nil
}

// follow runs the follower until ctx ends, keeping what it delivers.
func (s *BinlogSource) follow(ctx context.Context, pos sources.BinlogPosition, tables []sources.FollowTable) {
	err := s.Follower.Follow(ctx, pos, tables, func(tx sources.BinlogTx) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if ctx.Err() != nil {
			// Stopped: a later follow must not see this one's rows.
			return ctx.Err()
		}
		s.txs = append(s.txs, tx)
		if len(tx.Changes) > 0 && s.Notify != nil {
			select {
			case s.Notify <- struct{}{}:
			default:
			}
		}
		return nil
	})
	s.mu.Lock()
	if ctx.Err() == nil {
		s.err = err
		if err == nil {
			s.err = errors.New("the binlog follow ended")
		}
	}
	s.mu.Unlock()
}

func (s *BinlogSource) unmap(n int, format string, a ...any) {
	s.unmapped += n
	if s.Log != nil {
		s.Log(format, a...)
	}
}

// Unmapped is how many changes the source could not map to operations.
func (s *BinlogSource) Unmapped() int { return s.unmapped }

// Close ends the follow.
func (s *BinlogSource) Close() { s.stop() }

// stop ends the follow; the next Changes starts it again.
func (s *BinlogSource) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
	s.running, s.txs = false, nil
}
