package tui

import (
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile/watch"
)

// The console on a running `opctl watch` (docs/tui.md#the-console-on-a-watch):
// its list is the watch's /targets, read by Options.Targets (the HTTP
// client is the wiring's, cmd/tui.go: the console links no driver).
const (
	// DefaultWatchRefresh is how often the list reads /targets again
	// when --refresh is not given.
	DefaultWatchRefresh = 2 * time.Second
)

// itemOfEvent is the row of one flagged operation of a watch: its last
// flagged or changed line. Age is the time since that line; the watch
// reads no Kafka position or owner for its list (the detail does).
func itemOfEvent(e watch.Event, now time.Time) Item {
	it := Item{BizID: e.BizID, Pipeline: e.Pipeline, Verdict: inspect.Code(e.Verdict), Severity: inspect.Severity(e.Severity),
		Checks: "watch:" + e.Cause.Source, Age: -1, Partition: -1, Offset: -1, Summary: e.Summary}
	if !e.At.IsZero() {
		it.Age = max(0, now.Sub(e.At))
	}
	return it
}

// watchItems are the list's items of a watch's flagged operations (one row
// per operation; only pipeline's when it is set).
func watchItems(evs []watch.Event, pipeline string, now time.Time) []Item {
	var c collector
	c.index = map[string]int{}
	for _, e := range evs {
		k := e.Pipeline + "\x00" + e.BizID
		if _, ok := c.index[k]; ok || (pipeline != "" && e.Pipeline != pipeline) {
			continue
		}
		c.index[k] = len(c.items)
		c.items = append(c.items, itemOfEvent(e, now))
	}
	items := c.done()
	if items == nil {
		items = []Item{}
	}
	return items
}
