package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// MultiSource follows the pipelines of several servers, one ChangeSource
// per server (a binlog follower where the server has a binlog the watch
// can read, polling elsewhere: docs/watch.md#sources). Its position is a
// JSON object of the parts' positions by label; each change's
// cause.source is its part's.
type MultiSource struct {
	// Parts are the sources by label (a server's address); Labels their
	// order.
	Parts  map[string]ChangeSource
	Labels []string
	// Notify is the wake of the parts that have one (shared with them).
	Notify chan struct{}

	rows int
}

// Name is the parts' names, sorted and joined by "+" ("binlog",
// "binlog+poll"): the state file's source, so that a restart with the
// same modes resumes.
func (m *MultiSource) Name() string {
	var names []string
	for _, l := range m.Labels {
		if n := m.Parts[l].Name(); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return strings.Join(names, "+")
}

// Wake is Notify.
func (m *MultiSource) Wake() <-chan struct{} { return m.Notify }

// RowsRead sums the parts'.
func (m *MultiSource) RowsRead() int { return m.rows }

// Head is every part's head.
func (m *MultiSource) Head(ctx context.Context) (string, error) {
	pos := map[string]string{}
	for _, l := range m.Labels {
		h, err := m.Parts[l].Head(ctx)
		if err != nil {
			return "", fmt.Errorf("%s: %w", l, err)
		}
		pos[l] = h
	}
	b, err := json.Marshal(pos)
	return string(b), err
}

// Changes reads every part from its position. A part that fails does not
// hold the others back: their changes and positions are returned with the
// first error; a part that lost its position (ErrPositionGone) makes the
// whole watch sweep again.
func (m *MultiSource) Changes(ctx context.Context, from string) ([]Change, string, error) {
	pos := map[string]string{}
	if err := json.Unmarshal([]byte(from), &pos); err != nil {
		return nil, from, fmt.Errorf("position %q: %w", from, err)
	}
	next := map[string]string{}
	var out []Change
	var first error
	m.rows = 0
	for _, l := range m.Labels {
		p := m.Parts[l]
		pf, ok := pos[l]
		if !ok {
			// A server the saved state does not know: the watch sweeps.
			return nil, from, fmt.Errorf("%s: no saved position: %w", l, ErrPositionGone)
		}
		cs, np, err := p.Changes(ctx, pf)
		if errors.Is(err, ErrPositionGone) {
			return nil, from, fmt.Errorf("%s: %w", l, err)
		}
		if err != nil && first == nil {
			first = fmt.Errorf("%s: %w", l, err)
		}
		if rr, ok := p.(interface{ RowsRead() int }); ok {
			m.rows += rr.RowsRead()
		} else {
			m.rows += len(cs)
		}
		for i := range cs {
			if cs[i].Source == "" {
				cs[i].Source = p.Name()
			}
		}
		out = append(out, cs...)
		next[l] = np
	}
	b, err := json.Marshal(next)
	if err != nil {
		return nil, from, err
	}
	return out, string(b), first
}

// Close closes the parts that hold a connection.
func (m *MultiSource) Close() {
	for _, p := range m.Parts {
		if c, ok := p.(interface{ Close() }); ok {
			c.Close()
		}
	}
}
