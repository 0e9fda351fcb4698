package watch

import (
	"container/heap"
	"time"
)

// Deadlines is the heap of non-terminal operations by the time at which
// they cross --older-than (or their lease ends): the watch re-triages each
// when its deadline passes (cause "timer"), so a stuck operation is found
// on time without rescanning. One deadline per operation; setting it again
// moves it.
type Deadlines struct {
	items []deadline
	index map[Key]int
}

type deadline struct {
	key Key
	at  time.Time
}

// NewDeadlines returns an empty heap.
func NewDeadlines() *Deadlines { return &Deadlines{index: map[Key]int{}} }

// Set puts (or moves) k's deadline.
func (d *Deadlines) Set(k Key, at time.Time) {
	if i, ok := d.index[k]; ok {
		d.items[i].at = at
		heap.Fix((*deadlineHeap)(d), i)
		return
	}
	heap.Push((*deadlineHeap)(d), deadline{k, at})
}

// Remove drops k's deadline, if any.
func (d *Deadlines) Remove(k Key) {
	if i, ok := d.index[k]; ok {
		heap.Remove((*deadlineHeap)(d), i)
	}
}

// Len is the number of deadlines held.
func (d *Deadlines) Len() int { return len(d.items) }

// Next returns the earliest deadline; ok is false when the heap is empty.
func (d *Deadlines) Next() (time.Time, bool) {
	if len(d.items) == 0 {
		return time.Time{}, false
	}
	return d.items[0].at, true
}

// Due removes and returns the operations whose deadline is at or before
// now, earliest first, with their deadlines.
func (d *Deadlines) Due(now time.Time) (keys []Key, ats []time.Time) {
	for len(d.items) > 0 && !d.items[0].at.After(now) {
		x := heap.Pop((*deadlineHeap)(d)).(deadline)
		keys, ats = append(keys, x.key), append(ats, x.at)
	}
	return keys, ats
}

// DueAtMost is Due bounded: at most n operations (n <= 0: all), earliest
// first, leaving in the heap, where they were, those keep reports true
// (an operation a round is about to look at anyway).
func (d *Deadlines) DueAtMost(now time.Time, n int, keep func(Key) bool) (keys []Key, ats []time.Time) {
	var kept []deadline
	for len(d.items) > 0 && !d.items[0].at.After(now) && (n <= 0 || len(keys) < n) {
		x := heap.Pop((*deadlineHeap)(d)).(deadline)
		if keep != nil && keep(x.key) {
			kept = append(kept, x)
			continue
		}
		keys, ats = append(keys, x.key), append(ats, x.at)
	}
	for _, x := range kept {
		heap.Push((*deadlineHeap)(d), x)
	}
	return keys, ats
}

// deadlineHeap is container/heap's view of Deadlines.
type deadlineHeap Deadlines

func (h *deadlineHeap) Len() int { return len(h.items) }
func (h *deadlineHeap) Less(i, j int) bool {
	if !h.items[i].at.Equal(h.items[j].at) {
		return h.items[i].at.Before(h.items[j].at)
	}
	a, b := h.items[i].key, h.items[j].key
	if a.Pipeline != b.Pipeline {
		return a.Pipeline < b.Pipeline
	}
	return a.BizID < b.BizID
}
func (h *deadlineHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.index[h.items[i].key], h.index[h.items[j].key] = i, j
}
func (h *deadlineHeap) Push(x any) {
	d := x.(deadline)
	h.index[d.key] = len(h.items)
	h.items = append(h.items, d)
}
func (h *deadlineHeap) Pop() any {
	n := len(h.items) - 1
	x := h.items[n]
	h.items = h.items[:n]
	delete(h.index, x.key)
	return x
}
