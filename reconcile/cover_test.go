package reconcile

import "testing"

// TestSnippetKey: the queries whose rows for an id are rows of one table
// under that key (a cover sweep may count that table's keys), and those it
// cannot tell, which keep the cover walk.
func TestSnippetKey(t *testing.T) {
	for _, c := range []struct {
		q          string
		table, col string // "": not readable
	}{
		{"SELECT request_id, sent_at, acked_at, result FROM step_intent WHERE biz_id = ? AND step = 'notify'", "step_intent", "biz_id"},
		{"select id from t where k = ?", "t", "k"},
		{"SELECT i.request_id FROM step_intent i WHERE i.step = 'notify' AND i.biz_id = ?", "step_intent", "biz_id"},
		{"SELECT i.request_id FROM step_intent AS i WHERE ? = i.biz_id", "step_intent", "biz_id"},
		{"SELECT `id` FROM `wms_lock` WHERE `order_id` = ? ORDER BY id LIMIT 5", "wms_lock", "order_id"},
		{"SELECT id, (SELECT COUNT(*) FROM y WHERE y.a = t.id) FROM t WHERE k = ? AND (a OR b) AND s NOT IN ('X') -- or", "t", "k"},
		{"SELECT id FROM t /* a, b */ WHERE k = ? AND note = 'a OR b, BETWEEN'", "t", "k"},
		{"SELECT id FROM t WHERE k = ? && kind = 'DEBIT'", "t", "k"},
		// Rows of another table, or more rows than the table's.
		{"SELECT j.id FROM balance_journal j JOIN x ON x.id = j.id WHERE j.biz_id = ?", "", ""},
		{"SELECT j.id FROM balance_journal j, x WHERE j.biz_id = ?", "", ""},
		{"SELECT id FROM db.t WHERE k = ?", "", ""},
		{"SELECT id FROM t WHERE k = ? UNION ALL SELECT id FROM u WHERE 1", "", ""},
		{"SELECT k, COUNT(*) FROM t WHERE k = ? GROUP BY k WITH ROLLUP", "", ""},
		{"SELECT id FROM t FORCE INDEX (ix) WHERE k = ?", "", ""},
		// Not a conjunct of the WHERE.
		{"SELECT id FROM t WHERE k = ? OR other = 1", "", ""},
		{"SELECT id FROM t WHERE a = 1 || k = ?", "", ""},
		{"SELECT id FROM t WHERE a BETWEEN 1 AND k = ?", "", ""},
		{"SELECT id FROM t WHERE CASE WHEN x AND k = ? THEN 1 END", "", ""},
		{"SELECT id FROM t WHERE k + 1 = ?", "", ""},
		{"SELECT id FROM t WHERE k = ? + 1", "", ""},
		{"SELECT id FROM t WHERE (k = ? AND a = 1)", "", ""},
		{"SELECT id FROM t WHERE k IN (?)", "", ""},
		{"SELECT id FROM t WHERE k = ? COLLATE utf8mb4_bin", "", ""},
		{"SELECT id FROM t WHERE other.k = ?", "", ""},
		{"SELECT id FROM t WHERE k LIKE ?", "", ""},
		{"SELECT id FROM t WHERE k = 'unterminated ?", "", ""},
		{"SELECT id FROM t", "", ""},
	} {
		table, col, ok := snippetKey(c.q)
		if ok != (c.table != "") || table != c.table || col != c.col {
			t.Errorf("%s: got %q %q %v, want %q %q", c.q, table, col, ok, c.table, c.col)
		}
	}
}

// TestSweepCover: the cover sweeps the steps' tables only when it can
// derive them and they hold at most CoverSweepFactor entries per operation
// of the window, by the optimizer's estimates; --access decides instead.
func TestSweepCover(t *testing.T) {
	base := coverFacts{Mode: AccessAuto, Derived: true, Window: 1000, WindowKnown: true, Tables: 1000}
	with := func(f func(*coverFacts)) coverFacts {
		c := base
		f(&c)
		return c
	}
	for _, c := range []struct {
		name  string
		facts coverFacts
		sweep bool
	}{
		{"whole window", base, true},
		{"tables twice the window", with(func(f *coverFacts) { f.Tables = 2000 }), true},
		{"tables more than twice the window", with(func(f *coverFacts) { f.Tables = 2001 }), false},
		{"a day of a long history", with(func(f *coverFacts) { f.Window, f.Tables = 14000, 1000000 }), false},
		{"no estimate", with(func(f *coverFacts) { f.WindowKnown = false }), false},
		{"empty window", with(func(f *coverFacts) { f.Window = 0 }), false},
		{"not derived", with(func(f *coverFacts) { f.Derived = false }), false},
		{"--access walk", with(func(f *coverFacts) { f.Mode = AccessWalk }), false},
		{"--access range", with(func(f *coverFacts) { f.Mode = AccessRange }), false},
		{"--access sweep, narrow window", with(func(f *coverFacts) { f.Mode, f.Window, f.Tables = AccessSweep, 10, 1000000 }), true},
		{"--access sweep, not derived", with(func(f *coverFacts) { f.Mode, f.Derived = AccessSweep, false }), false},
	} {
		if got := sweepCover(c.facts); got != c.sweep {
			t.Errorf("%s (%+v): sweep %v, want %v", c.name, c.facts, got, c.sweep)
		}
	}
}
