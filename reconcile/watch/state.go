package watch

import (
	"encoding/json"
	"errors"
	"time"
)

// ErrPositionGone is what a ChangeSource's Changes wraps when the source
// no longer holds the position (a purged binlog): the watch then sweeps
// --since again and says so.
var ErrPositionGone = errors.New("the source no longer holds the saved position")

// StateVersion is the version of the state file's format.
const StateVersion = 1

// State is what the state file holds (docs/watch.md#state-file): the
// source's position, the flagged operations and the pending deadlines, so
// that a restart loses no flag and no deadline.
type State struct {
	Version   int             `json:"version"`
	Source    string          `json:"source"`
	Position  string          `json:"position"`
	Flags     []SavedFlag     `json:"flags"`
	Deadlines []SavedDeadline `json:"deadlines"`
}

// SavedFlag is one flagged operation: its last flagged or changed line and
// when it was first flagged.
type SavedFlag struct {
	Event Event     `json:"event"`
	Since time.Time `json:"since"`
}

// SavedDeadline is one pending deadline.
type SavedDeadline struct {
	Pipeline string    `json:"pipeline"`
	BizID    string    `json:"biz_id"`
	At       time.Time `json:"at"`
}

// savedEvent is Event as the state file stores it (at included).
type savedEvent struct {
	Event
	At time.Time `json:"at"`
}

// MarshalJSON keeps at (Event's own MarshalJSON is the event line).
func (f SavedFlag) MarshalJSON() ([]byte, error) {
	type plain struct {
		Event savedEvent `json:"event"`
		Since time.Time  `json:"since"`
	}
	return json.Marshal(plain{savedEvent{f.Event, f.Event.At}, f.Since})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (f *SavedFlag) UnmarshalJSON(b []byte) error {
	// Event.UnmarshalJSON reads at (eventjson.go).
	var p struct {
		Event Event     `json:"event"`
		Since time.Time `json:"since"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	f.Event, f.Since = p.Event, p.Since
	return nil
}

// snapshot is the state now (w.mu held).
func (w *Watcher) snapshot(pos string) State {
	st := State{Version: StateVersion, Position: pos}
	if w.Source != nil {
		st.Source = w.Source.Name()
	}
	for _, f := range w.tracker.Targets() {
		st.Flags = append(st.Flags, SavedFlag{Event: f.Event, Since: f.Since})
	}
	for _, d := range w.deadlines.items {
		st.Deadlines = append(st.Deadlines, SavedDeadline{Pipeline: d.key.Pipeline, BizID: d.key.BizID, At: d.at})
	}
	// An operation waiting for a retry of its triage is saved as a
	// deadline already passed: a restart during an outage triages it at
	// once instead of forgetting it (health.go).
	for _, k := range w.retryKeys() {
		if _, ok := w.deadlines.index[k]; !ok {
			st.Deadlines = append(st.Deadlines, SavedDeadline{Pipeline: k.Pipeline, BizID: k.BizID, At: w.now()})
		}
	}
	return st
}

// restore puts a saved state's flags and deadlines back (w.mu held).
func (w *Watcher) restore(st *State) {
	for _, f := range st.Flags {
		w.tracker.flags[Key{f.Event.Pipeline, f.Event.BizID}] = Flag{Event: f.Event, Since: f.Since}
	}
	for _, d := range st.Deadlines {
		w.deadlines.Set(Key{d.Pipeline, d.BizID}, d.At)
	}
}
