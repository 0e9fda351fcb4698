package reconcile

import (
	"strings"
	"testing"
)

// The access path of duplicates and orphans, as a table of facts: no
// database (docs/reconcile.md#access-path).
func TestChoosePath(t *testing.T) {
	base := pathFacts{Mode: AccessAuto, Check: CheckDuplicates, Table: "journal", Key: "biz_id", HasTime: true,
		TimeIndex: "ix_time", KeyIndex: "ix_key", Total: 1000, WindowKnown: true}
	with := func(f func(*pathFacts)) pathFacts {
		c := base
		f(&c)
		return c
	}
	for _, c := range []struct {
		name  string
		facts pathFacts
		needs bool // needsWindow
		kind  pathKind
		note  string // a part of the note, "" for none
	}{
		{"walk asked", with(func(f *pathFacts) { f.Mode = AccessWalk; f.Window = 900 }), false, pathWalk, ""},
		{"no key index", with(func(f *pathFacts) { f.KeyIndex = ""; f.Window = 900 }), false, pathWalk, ""},
		{"sweep asked, no key index", with(func(f *pathFacts) { f.Mode = AccessSweep; f.KeyIndex = "" }), false, pathWalk, "journal: no index starting with biz_id to sweep: walked by time"},
		{"sweep asked", with(func(f *pathFacts) { f.Mode = AccessSweep }), false, pathSweep, "journal: swept ix_key in key order"},
		{"no time column", with(func(f *pathFacts) { f.HasTime = false }), false, pathSweep, "swept ix_key"},
		{"no time index (full scan allowed)", with(func(f *pathFacts) { f.TimeIndex = "" }), false, pathSweep, "swept ix_key"},
		{"range asked, duplicates", with(func(f *pathFacts) { f.Mode = AccessRange; f.Window = 900 }), true, pathWindowRange, ""},
		{"range asked, orphans", with(func(f *pathFacts) { f.Mode = AccessRange; f.Check = CheckOrphans }), false, pathWalk, ""},
		{"range asked, no time index", with(func(f *pathFacts) { f.Mode = AccessRange; f.TimeIndex = "" }), false, pathSweep, "swept ix_key"},
		{"window unknown", with(func(f *pathFacts) { f.WindowKnown = false; f.Window = 900 }), true, pathWalk, ""},
		{"empty table", with(func(f *pathFacts) { f.Total = 0; f.Window = 10 }), true, pathWalk, ""},
		{"narrow window, duplicates", with(func(f *pathFacts) { f.Window = 149 }), true, pathWindowRange, ""},
		{"narrow window, orphans", with(func(f *pathFacts) { f.Window = 149; f.Check = CheckOrphans }), true, pathWalk, ""},
		{"at the share", with(func(f *pathFacts) { f.Window = 150 }), true, pathSweep, "the window holds about 15% of its ~1000 rows (optimizer estimate): swept ix_key in key order"},
		{"wide window, orphans", with(func(f *pathFacts) { f.Window = 300; f.Check = CheckOrphans }), true, pathSweep, "about 30%"},
		{"half or more (InnoDB's cap)", with(func(f *pathFacts) { f.Window = 500 }), true, pathSweep, "holds half or more of its ~1000 rows"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := needsWindow(c.facts); got != c.needs {
				t.Errorf("needsWindow = %v, want %v", got, c.needs)
			}
			got := choosePath(c.facts)
			if got.kind != c.kind {
				t.Errorf("kind %d, want %d (note %q)", got.kind, c.kind, got.note)
			}
			if (c.note == "") != (got.note == "") || !strings.Contains(got.note, c.note) {
				t.Errorf("note %q, want %q", got.note, c.note)
			}
		})
	}
}

// A facts value that choosePath decides without the window's estimate
// decides the same whatever the estimate says: needsWindow is exact.
func TestNeedsWindowIsExact(t *testing.T) {
	for _, mode := range []string{AccessAuto, AccessSweep, AccessWalk, AccessRange} {
		for _, check := range []string{CheckDuplicates, CheckOrphans} {
			for _, hasTime := range []bool{true, false} {
				for _, ti := range []string{"", "ix_time"} {
					for _, ki := range []string{"", "ix_key"} {
						f := pathFacts{Mode: mode, Check: check, Table: "t", Key: "k", HasTime: hasTime, TimeIndex: ti, KeyIndex: ki, Total: 100}
						if needsWindow(f) {
							continue
						}
						first := choosePath(f)
						for _, w := range []int64{0, 10, 50, 100} {
							for _, known := range []bool{true, false} {
								f.Window, f.WindowKnown = w, known
								if got := choosePath(f); got != first {
									t.Errorf("%+v: %v with the window's estimate, %v without, though needsWindow is false", f, got, first)
								}
							}
						}
					}
				}
			}
		}
	}
}

func TestRangeSwept(t *testing.T) {
	for _, c := range []struct {
		mode                  string
		window, rows, entries int64
		known, want           bool
	}{
		{AccessAuto, 100, 100, 400, true, true},
		{AccessAuto, 100, 100, 401, true, false},
		{AccessAuto, 100, 200, 800, true, true}, // the rows counted beat the estimate
		{AccessAuto, 100, 100, 10, false, false},
		{AccessRange, 100, 100, 1000000, false, true},
		{AccessRange, 100, 100, 1000000, true, true},
	} {
		if got := rangeSwept(c.mode, c.window, c.rows, c.entries, c.known); got != c.want {
			t.Errorf("rangeSwept(%s, window %d, rows %d, entries %d, known %v) = %v, want %v", c.mode, c.window, c.rows, c.entries, c.known, got, c.want)
		}
	}
}
