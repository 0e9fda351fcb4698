package tui

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
)

// Item is one row of the list: a target or watch item of the reconcile.
type Item struct {
	BizID, Pipeline string
	Verdict         inspect.Code
	Severity        inspect.Severity
	Step            string
	// Checks are the reconcile checks that found it ("stuck,duplicates").
	Checks string
	// Age is the database clock minus the state row's updated_at; -1 when
	// not known.
	Age       time.Duration
	Partition int32 // -1 unknown
	Offset    int64 // -1 unknown
	Owner     string
	Partial   bool
	// Summary is the verdict's summary a watch's /targets gives ("" for a
	// reconcile's row).
	Summary string
	// search is the lower-case text the filter matches.
	search string
}

// itemOf is the row of one reconcile result.
func itemOf(r reconcile.Result) Item {
	it := Item{BizID: r.BizID, Pipeline: r.Pipeline, Verdict: r.Verdict, Severity: r.Severity, Step: r.Step,
		Checks: r.Check, Age: -1, Partition: -1, Offset: -1, Owner: r.Seen.Owner, Partial: r.Partial}
	if r.Seen.UpdatedAt != nil && r.Seen.DBNow != nil {
		it.Age = r.Seen.DBNow.Sub(*r.Seen.UpdatedAt)
	}
	if r.Seen.Partition != nil {
		it.Partition = *r.Seen.Partition
	}
	if r.Seen.Offset != nil {
		it.Offset = *r.Seen.Offset
	}
	return it
}

// listed reports whether a result belongs in the list: a target, or an
// operation to watch (docs/tui.md).
func listed(r reconcile.Result) bool {
	return r.Severity == inspect.SeverityAction || r.Severity == inspect.SeverityWatch
}

// collector gathers the results of one reconcile into items, one per
// operation: an operation found by several checks is one row naming them
// all. It lives in the refresh command's goroutine only.
type collector struct {
	index map[string]int
	items []Item
}

func (c *collector) add(r reconcile.Result) {
	if !listed(r) {
		return
	}
	k := r.Pipeline + "\x00" + r.BizID
	if c.index == nil {
		c.index = map[string]int{}
	}
	if i, ok := c.index[k]; ok {
		it := &c.items[i]
		if !slices.Contains(strings.Split(it.Checks, ","), r.Check) {
			it.Checks += "," + r.Check
		}
		if r.IsTarget() && it.Severity != inspect.SeverityAction {
			checks := it.Checks
			*it = itemOf(r)
			it.Checks = checks
		}
		return
	}
	c.index[k] = len(c.items)
	c.items = append(c.items, itemOf(r))
}

// done finishes the items: their search text.
func (c *collector) done() []Item {
	for i := range c.items {
		it := &c.items[i]
		it.search = strings.ToLower(strings.Join([]string{it.BizID, it.Pipeline, string(it.Verdict), it.Step, it.Owner, it.Checks, it.Summary}, " "))
	}
	return c.items
}

// Column is a sortable column of the list.
type Column int

// The list's columns, in order.
const (
	ColVerdict Column = iota
	ColAge
	ColBizID
	ColPipeline
	ColStep
	ColPosition
	ColOwner
	numColumns
)

var columnNames = [...]string{"VERDICT", "AGE", "BIZ_ID", "PIPELINE", "STEP", "PART/OFFSET", "OWNER"}

func (c Column) String() string { return columnNames[c] }

// rank orders verdicts as inspect's precedence does: the most urgent first.
func rank() map[inspect.Code]int {
	m := map[inspect.Code]int{}
	for i, c := range inspect.Precedence() {
		m[c] = i
	}
	return m
}

// sortItems sorts items by col (ties: verdict, then oldest first, then id).
func sortItems(items []Item, col Column, ranks map[inspect.Code]int) {
	byVerdict := func(a, b Item) int { return cmp.Compare(ranks[a.Verdict], ranks[b.Verdict]) }
	tie := func(a, b Item) int {
		if c := byVerdict(a, b); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Age, a.Age); c != 0 {
			return c
		}
		if c := strings.Compare(a.Pipeline, b.Pipeline); c != 0 {
			return c
		}
		return strings.Compare(a.BizID, b.BizID)
	}
	var first func(a, b Item) int
	switch col {
	case ColAge:
		first = func(a, b Item) int { return cmp.Compare(b.Age, a.Age) }
	case ColBizID:
		first = func(a, b Item) int { return strings.Compare(a.BizID, b.BizID) }
	case ColPipeline:
		first = func(a, b Item) int { return strings.Compare(a.Pipeline, b.Pipeline) }
	case ColStep:
		first = func(a, b Item) int { return strings.Compare(a.Step, b.Step) }
	case ColPosition:
		first = func(a, b Item) int {
			if c := cmp.Compare(a.Partition, b.Partition); c != 0 {
				return c
			}
			return cmp.Compare(a.Offset, b.Offset)
		}
	case ColOwner:
		first = func(a, b Item) int { return strings.Compare(a.Owner, b.Owner) }
	default:
		first = byVerdict
	}
	slices.SortStableFunc(items, func(a, b Item) int {
		if c := first(a, b); c != 0 {
			return c
		}
		return tie(a, b)
	})
}

// filterItems returns the indexes of the items whose text holds every
// word of q (case-insensitive), into buf.
func filterItems(items []Item, q string, buf []int) []int {
	buf = buf[:0]
	words := strings.Fields(strings.ToLower(q))
	for i := range items {
		ok := true
		for _, w := range words {
			if !strings.Contains(items[i].search, w) {
				ok = false
				break
			}
		}
		if ok {
			buf = append(buf, i)
		}
	}
	return buf
}
