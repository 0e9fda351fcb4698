package tui

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
)

// Every screen, at every size and after a resize, is exactly the window:
// as many lines as it is high, none wider than it is wide.
func TestScreensFitTheWindow(t *testing.T) {
	screens := map[string][]tea.KeyPressMsg{
		"list":    nil,
		"help":    keys("?"),
		"filter":  keys("/", "pay"),
		"goto":    keys(":", "PAY-1"),
		"detail":  keys("j", keyEnter),
		"plan":    keys("j", keyEnter, "p"),
		"dry run": keys("j", keyEnter, "p", "d"),
		"confirm": keys("j", keyEnter, "p", "a"),
		"result":  keys("j", keyEnter, "p", "a", "PAY-1", keyEnter, "x", keyEnter),
		"audit":   keys("j", keyEnter, "p", "a", "PAY-1", keyEnter, "x", keyEnter, "A"),
		"attest":  keys("jj", keyEnter, "p", "t"),
	}
	for name, ks := range screens {
		for _, size := range [][2]int{{80, 24}, {120, 40}, {200, 60}, {60, 16}} {
			t.Run(fmt.Sprintf("%s/%dx%d", name, size[0], size[1]), func(t *testing.T) {
				f := newFake(t)
				m := press(t, newModel(t, f, f.options(), 120, 40), ks...)
				m = step(t, m, tea.WindowSizeMsg{Width: size[0], Height: size[1]}) // a resize after the keys
				lines := strings.Split(m.View().Content, "\n")
				if len(lines) != size[1] {
					t.Errorf("%d lines, want %d", len(lines), size[1])
				}
				for i, l := range lines {
					if w := ansi.StringWidth(l); w > size[0] {
						t.Errorf("line %d is %d wide: %q", i+1, w, l)
					}
				}
			})
		}
	}
}

// Colour on: the verdicts are styled; off (NO_COLOR, --no-color): not one
// escape sequence.
func TestColor(t *testing.T) {
	for _, color := range []bool{true, false} {
		t.Run(fmt.Sprint("color=", color), func(t *testing.T) {
			f := newFake(t)
			m := New(context.Background(), f.options(), NewStyles(color))
			m = step(t, m, tea.WindowSizeMsg{Width: 120, Height: 40})
			m = step(t, m, m.reconcileCmd(m.list.gen)())
			for _, v := range []string{m.View().Content, press(t, m, keys("j", keyEnter)...).View().Content} {
				if has := strings.Contains(v, "\x1b["); has != color {
					t.Fatalf("escape sequences %v, want %v:\n%q", has, color, v)
				}
			}
		})
	}
}

// A value read from the database reaches the screen by the rule of human
// output: an id or owner holding a terminal escape is shown quoted, never
// raw.
func TestValuesAreShownSafely(t *testing.T) {
	f := newFake(t)
	o := f.options()
	evil := "PAY\x1b[2J"
	o.Reconcile = func() (reconcile.Func, error) {
		return func(_ context.Context, _ reconcile.Options, emit func(reconcile.Result) error) (*reconcile.Summary, error) {
			return &reconcile.Summary{PartialWhy: []string{"kafka: broker \x1b]0;owned\x07 down"}, Partial: true},
				emit(reconcile.Result{Target: reconcile.Target{BizID: evil, Pipeline: "settlement", Check: "stuck", Verdict: inspect.Stranded, Step: "de\rbit"},
					Severity: inspect.SeverityAction, Seen: reconcile.Seen{Owner: "c\x1b[31m"}})
		}, nil
	}
	m := newModel(t, f, o, 120, 40)
	v := m.View().Content
	if strings.ContainsAny(v, "\x1b\r\x07") {
		t.Fatalf("a raw control character reached the screen: %q", v)
	}
	for _, want := range []string{`"PAY\x1b[2J"`, `"c\x1b[31m"`, `"de\rbit"`, "PARTIAL:"} {
		if !strings.Contains(v, want) {
			t.Errorf("screen lacks %s:\n%s", want, v)
		}
	}
	// The detail of that id: the id typed back as it is.
	m = press(t, m, keyEnter)
	if v := m.View().Content; strings.ContainsAny(v, "\x1b\r\x07") || !bytes.Contains([]byte(v), []byte(`"PAY\x1b[2J"`)) {
		t.Fatalf("detail: %q", v)
	}
}

// The header names the steps no check could reach (a pipeline whose WMS
// step has no scan block and no state table), so an empty list is not read
// as "nothing wrong" where nothing was looked at.
func TestHeaderNamesUncoveredSteps(t *testing.T) {
	f := newFake(t)
	m := New(context.Background(), f.options(), NewStyles(false))
	m.list.width = 200
	m.list.summary = &reconcile.Summary{Checks: []reconcile.CheckStats{
		{Pipeline: "fulfilment", Check: reconcile.CheckDuplicates, Uncovered: []string{"wms_lock: no scan block, and no state table"}},
		{Pipeline: "fulfilment", Check: reconcile.CheckOrphans, Uncovered: []string{"wms_lock: no scan block", "notice: no scan block"}},
		{Pipeline: "fulfilment", Check: reconcile.CheckSkipped, Uncovered: []string{"wms_lock: 3 SKIPPED record(s) whose message was not found"}},
	}}
	if got := m.list.counts(); !strings.Contains(got, "not covered: fulfilment/wms_lock") || strings.Count(got, "wms_lock") != 1 || strings.Contains(got, "notice") {
		t.Errorf("header %q", got)
	}
	if got := m.list.title(""); !strings.Contains(got, "older than") || !strings.Contains(got, "since 1h") {
		t.Errorf("title %q does not name --since and --older-than", got)
	}
}

// At 80 columns the counts wrap between their pieces: every verdict's name
// and every uncovered step stays whole (the lab's console showed
// "WRONGLY_SK…" and would have hidden what was not covered), and the list
// gives up the lines the counts take.
func TestCountsWrapAtEightyColumns(t *testing.T) {
	f := newFake(t)
	m := New(context.Background(), f.options(), NewStyles(false))
	m.list.width, m.list.height = 80, 24
	m.list.items = make([]Item, 9)
	codes := []inspect.Code{"IN_FLIGHT", "DUPLICATE_EFFECT", "UNKNOWN_OUTCOME", "WRONGLY_SKIPPED", "STATE_BEHIND", "STRANDED"}
	m.list.perVerdict = map[inspect.Code]int{}
	for i, c := range codes {
		m.list.perVerdict[c] = i + 1
	}
	m.list.summary = &reconcile.Summary{Checks: []reconcile.CheckStats{
		{Pipeline: "fulfilment_anchored", Check: reconcile.CheckDuplicates, Uncovered: []string{"wms_lock: no scan block"}},
		{Pipeline: "settlement_seed", Check: reconcile.CheckStuck, Uncovered: []string{"notify: unverified"}},
	}}
	lines := m.list.countLines()
	if len(lines) < 2 || len(lines) > maxCountLines {
		t.Fatalf("%d count lines: %q", len(lines), lines)
	}
	all := strings.Join(lines, "\n")
	for _, l := range lines {
		if w := ansi.StringWidth(l); w > 80 {
			t.Errorf("line of %d cells: %q", w, l)
		}
	}
	for _, c := range codes {
		if !strings.Contains(all, string(c)+" ") {
			t.Errorf("%s cut or missing in %q", c, all)
		}
	}
	for _, s := range []string{"fulfilment_anchored/wms_lock", "settlement_seed/notify"} {
		if !strings.Contains(all, s) {
			t.Errorf("%s not named in %q", s, all)
		}
	}
	if got, want := m.list.listRows(), 24-4-len(lines); got != want {
		t.Errorf("list rows %d, want %d", got, want)
	}
	// With room, one line as before.
	m.list.width = 300
	if n := len(m.list.countLines()); n != 1 {
		t.Errorf("%d count lines at 300 columns", n)
	}
}

// Columns get their width by what they must show: at 80 columns and on a
// resize a verdict and a pipeline are never cut (two pipelines that share
// a prefix stay apart), an id may be, with …; with room, nothing is.
func TestColumnsShowWhatTheyMust(t *testing.T) {
	long := "ORD-20261201-000000000042-EU"
	items := []Item{
		{BizID: long, Pipeline: "fulfilment_eu", Verdict: inspect.CompleteUncommitted, Severity: inspect.SeverityWatch, Partial: true,
			Step: "wms_lock", Age: 90 * 60 * 1e9, Partition: 11, Offset: 1234567, Owner: "consumer-fulfilment-eu-7"},
		{BizID: "ORD-2", Pipeline: "fulfilment_us", Verdict: inspect.DuplicateEffect, Severity: inspect.SeverityAction,
			Step: "notice", Age: -1, Partition: -1, Offset: -1},
	}
	f := newFake(t)
	m := New(context.Background(), f.options(), NewStyles(false))
	m = step(t, m, refreshMsg{gen: m.list.gen, items: items, sum: &reconcile.Summary{}})
	for _, w := range []int{200, 120, 100, 80, 72} {
		m = step(t, m, tea.WindowSizeMsg{Width: w, Height: 24})
		lines := strings.Split(m.View().Content, "\n")
		rows := make([]string, 2)
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, "ORD-2 "):
				rows[1] = l
			case strings.HasPrefix(l, "ORD-"):
				rows[0] = l
			}
			if ansi.StringWidth(l) > w {
				t.Errorf("%d columns: line %q is wider", w, l)
			}
		}
		if rows[0] == "" || rows[1] == "" {
			t.Fatalf("%d columns: rows %q", w, rows)
		}
		for _, want := range []string{"COMPLETE_UNCOMMITTED*", "fulfilment_eu ", "wms_lock"} {
			if !strings.Contains(rows[0], want) && (want != "wms_lock" || w >= 80) {
				t.Errorf("%d columns: %q is cut in %q", w, want, rows[0])
			}
		}
		if !strings.Contains(rows[1], "fulfilment_us ") || !strings.Contains(rows[1], "DUPLICATE_EFFECT ") {
			t.Errorf("%d columns: %q", w, rows[1])
		}
		if whole := strings.Contains(rows[0], long); whole != (w >= 120) {
			t.Errorf("%d columns: id whole %v in %q", w, whole, rows[0])
		}
		if id := strings.Fields(rows[0])[0]; w < 120 && (!strings.HasPrefix(id, "ORD-2026") || !strings.HasSuffix(id, "…")) {
			t.Errorf("%d columns: the id is not cut with …: %q", w, rows[0])
		}
	}
}
