package tui

import (
	"context"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
)

// selected is the biz_id under the cursor.
func (m Model) selected() string {
	if m.list.cursor >= len(m.list.visible) {
		return ""
	}
	return m.list.items[m.list.visible[m.list.cursor]].BizID
}

func (m Model) shownVerdict() inspect.Code {
	if m.detail.d == nil || m.detail.d.op == nil {
		return ""
	}
	return m.detail.d.op.Report.Verdict.Code
}

func keys(ks ...any) []tea.KeyPressMsg {
	var out []tea.KeyPressMsg
	for _, k := range ks {
		switch k := k.(type) {
		case tea.KeyPressMsg:
			out = append(out, k)
		case string:
			out = append(out, typeText(k)...)
		}
	}
	return out
}

// TestKeys drives the console key by key on the fake and checks what
// each key did (docs/tui.md "Keys").
func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  func(*Options)
		keys  []tea.KeyPressMsg
		check func(t *testing.T, m Model, f *fake)
	}{
		{"list is in verdict order", nil, nil, func(t *testing.T, m Model, _ *fake) {
			var ids []string
			for _, i := range m.list.visible {
				ids = append(ids, m.list.items[i].BizID+":"+string(m.list.items[i].Verdict))
			}
			if got := strings.Join(ids, " "); got != "PAY-3:IN_FLIGHT PAY-1:DUPLICATE_EFFECT PAY-4:UNKNOWN_OUTCOME PAY-2:STRANDED" {
				t.Fatalf("list %s", got)
			}
		}},
		{"j moves down", nil, keys("j"), wantSelected("PAY-1")},
		{"down arrow moves down", nil, keys(keyDown, keyDown), wantSelected("PAY-4")},
		{"k moves up", nil, keys("jjk"), wantSelected("PAY-1")},
		{"up arrow stops at the top", nil, keys(keyUp, keyUp), wantSelected("PAY-3")},
		{"G goes to the bottom, g to the top", nil, keys("G"), wantSelected("PAY-2")},
		{"g goes to the top", nil, keys("Gg"), wantSelected("PAY-3")},
		{"j stops at the bottom", nil, keys("jjjjjjj"), wantSelected("PAY-2")},
		{"/ filters as you type", nil, keys("/", "pay-2"), func(t *testing.T, m Model, _ *fake) {
			if len(m.list.visible) != 1 || m.selected() != "PAY-2" || m.input() != inputFilter {
				t.Fatalf("visible %v selected %s input %d", m.list.visible, m.selected(), m.input())
			}
		}},
		{"/ filter by verdict, enter keeps it", nil, keys("/", "stranded", keyEnter), func(t *testing.T, m Model, _ *fake) {
			if len(m.list.visible) != 1 || m.selected() != "PAY-2" || m.input() != inputNone || m.list.filter != "stranded" {
				t.Fatalf("visible %v input %d filter %q", m.list.visible, m.input(), m.list.filter)
			}
		}},
		{"/ then esc clears the filter", nil, keys("/", "zzz", keyEsc), func(t *testing.T, m Model, _ *fake) {
			if len(m.list.visible) != 4 || m.list.filter != "" {
				t.Fatalf("visible %v filter %q", m.list.visible, m.list.filter)
			}
		}},
		{"s sorts by the next column (age, oldest first)", nil, keys("s"), func(t *testing.T, m Model, _ *fake) {
			if m.list.sortCol != ColAge || m.selected() != "PAY-2" || !strings.Contains(m.statusText(), "AGE") {
				t.Fatalf("sort %v selected %s status %q", m.list.sortCol, m.selected(), m.statusText())
			}
		}},
		{"s twice sorts by biz_id", nil, keys("ss"), wantSelected("PAY-1")},
		{"r refreshes now", nil, keys("r"), func(t *testing.T, m Model, _ *fake) {
			if m.list.refreshing || m.list.gen != 1 || len(m.list.items) != 4 {
				t.Fatalf("refreshing %v gen %d items %d", m.list.refreshing, m.list.gen, len(m.list.items))
			}
		}},
		{"enter opens the selected operation", nil, keys("j", keyEnter), func(t *testing.T, m Model, _ *fake) {
			if m.screen != screenDetail || m.detail.d.bizID != "PAY-1" || m.shownVerdict() != inspect.DuplicateEffect {
				t.Fatalf("screen %d verdict %s", m.screen, m.shownVerdict())
			}
			if v := m.View().Content; !strings.Contains(v, "◉ DUPLICATED") || !strings.Contains(v, "KAFKA") {
				t.Fatalf("detail view:\n%s", v)
			}
		}},
		{"esc goes back to the list", nil, keys(keyEnter, keyEsc), func(t *testing.T, m Model, _ *fake) {
			if m.screen != screenList || m.detail.d != nil {
				t.Fatalf("screen %d", m.screen)
			}
		}},
		{": opens an id the list does not hold", nil, keys(":", "NOPE-9", keyEnter), func(t *testing.T, m Model, _ *fake) {
			if m.screen != screenDetail || m.detail.d.bizID != "NOPE-9" || m.shownVerdict() != inspect.NotFound {
				t.Fatalf("screen %d verdict %s", m.screen, m.shownVerdict())
			}
		}},
		{": opens an id the filter hides", nil, keys("/", "pay-1", keyEnter, ":", "PAY-2", keyEnter), func(t *testing.T, m Model, _ *fake) {
			if m.detail.d == nil || m.shownVerdict() != inspect.Stranded {
				t.Fatalf("verdict %s", m.shownVerdict())
			}
		}},
		{": refuses an empty id", nil, keys(":", "  ", keyEnter), func(t *testing.T, m Model, _ *fake) {
			if m.screen != screenList || m.input() != inputGoTo || m.statusText() == "" {
				t.Fatalf("screen %d input %d status %q", m.screen, m.input(), m.statusText())
			}
		}},
		{": then esc closes the prompt", nil, keys(":", "PAY-2", keyEsc), func(t *testing.T, m Model, _ *fake) {
			if m.screen != screenList || m.input() != inputNone {
				t.Fatalf("screen %d input %d", m.screen, m.input())
			}
		}},
		{"? shows the help built from the key map", nil, keys("?"), func(t *testing.T, m Model, _ *fake) {
			v := m.View().Content
			for _, k := range m.keys.FullHelp() {
				for _, b := range k {
					if !strings.Contains(v, b.Help().Desc) {
						t.Errorf("help lacks %q", b.Help().Desc)
					}
				}
			}
		}},
		{"--readonly takes apply out of the key hints", func(o *Options) { o.ReadOnly = true }, keys("j", keyEnter), func(t *testing.T, m Model, _ *fake) {
			v := m.View().Content
			if !strings.Contains(v, "READONLY") || strings.Contains(v, "a apply") || !strings.Contains(v, "d dry run") {
				t.Fatalf("foot:\n%s", v)
			}
		}},
		{"any key closes the help", nil, keys("?", "j"), func(t *testing.T, m Model, _ *fake) {
			if m.showHelp || m.selected() != "PAY-3" {
				t.Fatalf("help %v selected %s", m.showHelp, m.selected())
			}
		}},
		{"p builds the plan", nil, keys("j", keyEnter, "p"), func(t *testing.T, m Model, _ *fake) {
			d := m.detail.d
			if m.detail.pane != panePlan || d.plan == nil || d.plan.Actions[0].Type != plans.Reverse || d.plan.Incident != "INC-7" || d.plan.Operator != "alice" {
				t.Fatalf("pane %d plan %+v err %s", m.detail.pane, d.plan, d.planErr)
			}
			if !strings.Contains(m.detail.vp.View(), "reverse debit row 12") {
				t.Fatalf("plan pane:\n%s", m.detail.vp.View())
			}
		}},
		{"d dry-runs the plan, nothing applied", nil, keys("j", keyEnter, "p", "d"), func(t *testing.T, m Model, f *fake) {
			if m.detail.pane != paneDryRun || m.detail.d.dry == nil || m.detail.d.dry.Outcome != repair.OutcomeWouldApply || len(f.applied) != 0 {
				t.Fatalf("pane %d dry %+v applied %d", m.detail.pane, m.detail.d.dry, len(f.applied))
			}
		}},
		{"d before p says so", nil, keys("j", keyEnter, "d"), wantStatus("press p first")},
		{"a before p says so", nil, keys("j", keyEnter, "a"), wantStatus("press p to build and review the plan first")},
		{"a opens the confirmation", nil, keys("j", keyEnter, "p", "a"), func(t *testing.T, m Model, f *fake) {
			if m.input() != inputConfirm || !strings.Contains(m.View().Content, "type the biz_id to confirm") || len(f.applied) != 0 {
				t.Fatalf("input %d\n%s", m.input(), m.View().Content)
			}
		}},
		{"a with the wrong biz_id applies nothing", nil, keys("j", keyEnter, "p", "a", "PAY-9", keyEnter, " double debit", keyEnter), func(t *testing.T, m Model, f *fake) {
			if len(f.applied) != 0 || !strings.Contains(m.detail.formWhy, "is not PAY-1") {
				t.Fatalf("applied %d why %q", len(f.applied), m.detail.formWhy)
			}
		}},
		{"a with an empty reason applies nothing", nil, keys("j", keyEnter, "p", "a", "PAY-1", keyTab, keyClear, keyEnter), func(t *testing.T, m Model, f *fake) {
			if len(f.applied) != 0 || !strings.Contains(m.detail.formWhy, "reason is required") {
				t.Fatalf("applied %d why %q", len(f.applied), m.detail.formWhy)
			}
		}},
		{"a then esc cancels", nil, keys("j", keyEnter, "p", "a", keyEsc), func(t *testing.T, m Model, f *fake) {
			if len(f.applied) != 0 || m.input() != inputNone || !strings.Contains(m.statusText(), "nothing was changed") {
				t.Fatalf("applied %d status %q", len(f.applied), m.statusText())
			}
		}},
		{"a applies after the biz_id and a reason, re-triaged in place", nil, keys("j", keyEnter, "p", "a", "PAY-1", keyEnter, " double debit", keyEnter), func(t *testing.T, m Model, f *fake) {
			if len(f.applied) != 1 {
				t.Fatalf("applied %d, why %q", len(f.applied), m.detail.formWhy)
			}
			p := f.applied[0]
			if p.Reason != "INC-7 double debit" || p.Incident != "INC-7" || f.applyOpts[0].Operator != "alice" || f.applyOpts[0].DryRun {
				t.Fatalf("applied plan reason %q incident %q opts %+v", p.Reason, p.Incident, f.applyOpts[0])
			}
			if m.detail.pane != paneResult || m.shownVerdict() != inspect.Complete || !strings.Contains(m.detail.vp.View(), "NOW") {
				t.Fatalf("pane %d verdict %s\n%s", m.detail.pane, m.shownVerdict(), m.detail.vp.View())
			}
		}},
		{"a applies the very plan d dry-ran, under the reason typed", nil, keys("j", keyEnter, "p", "d", "a", "PAY-1", keyEnter, " double debit", keyEnter), func(t *testing.T, m Model, f *fake) {
			if len(f.dried) != 1 || len(f.applied) != 1 {
				t.Fatalf("dry-ran %d, applied %d", len(f.dried), len(f.applied))
			}
			d, a := f.dried[0], f.applied[0]
			if f.planned != 1 || !plans.Equivalent(d, a) || !a.CreatedAt.Equal(d.CreatedAt) || d.Reason != reviewReason || a.Reason != "INC-7 double debit" {
				t.Fatalf("planned %d times; dry-ran %+v\napplied %+v", f.planned, d, a)
			}
		}},
		{"a is disabled by --readonly", func(o *Options) { o.ReadOnly = true }, keys("j", keyEnter, "p", "a"), func(t *testing.T, m Model, f *fake) {
			if m.input() != inputNone || !strings.Contains(m.statusText(), "--readonly") || len(f.applied) != 0 {
				t.Fatalf("input %d status %q", m.input(), m.statusText())
			}
		}},
		{"a is disabled by a live lease", nil, keys(keyEnter, "a"), wantStatus("c-3 holds a live lease until 08:31:00.000")},
		{"p on a live lease shows the refusal", nil, keys(keyEnter, "p"), func(t *testing.T, m Model, _ *fake) {
			if m.detail.d.plan != nil || !strings.Contains(m.detail.d.planErr, "IN_FLIGHT") {
				t.Fatalf("plan %v err %q", m.detail.d.plan, m.detail.d.planErr)
			}
		}},
		{"a is disabled by a plan that needs an attestation", nil, keys("jj", keyEnter, "p", "a"), wantStatus("needs an attestation and the outcome (applied|absent): press t")},
		{"t enters the attestation and outcome, then a applies", nil,
			keys("jj", keyEnter, "p", "t", "risk team: call R-1 went through", keyEnter, "applied", keyEnter, "a", "PAY-4", keyEnter, " notify attested", keyEnter),
			func(t *testing.T, m Model, f *fake) {
				if len(f.applied) != 1 {
					t.Fatalf("applied %d; status %q why %q plan err %q", len(f.applied), m.statusText(), m.detail.formWhy, m.detail.d.planErr)
				}
				p := f.applied[0]
				if p.Attest != "risk team: call R-1 went through" || p.Request.Outcome != "applied" || p.Actions[0].Type != plans.Manual {
					t.Fatalf("plan attest %q request %+v actions %v", p.Attest, p.Request, p.Actions)
				}
			}},
		{"t with a bad outcome says so", nil, keys("jj", keyEnter, "p", "t", "x", keyEnter, "maybe", keyEnter), func(t *testing.T, m Model, _ *fake) {
			if m.input() != inputAttest || !strings.Contains(m.detail.formWhy, "applied or absent") {
				t.Fatalf("input %d why %q", m.input(), m.detail.formWhy)
			}
		}},
		{"t without a plan says so", nil, keys("j", keyEnter, "t"), wantStatus("press p first")},
		{"A shows the audit of the operation", nil, keys("j", keyEnter, "p", "a", "PAY-1", keyEnter, "x", keyEnter, "A"), func(t *testing.T, m Model, _ *fake) {
			if m.detail.pane != paneAudit || m.detail.d.audit == nil || len(m.detail.d.audit.Actions) != 1 || !strings.Contains(m.detail.vp.View(), "reverse") {
				t.Fatalf("pane %d audit %+v\n%s", m.detail.pane, m.detail.d.audit, m.detail.vp.View())
			}
		}},
		{"r in the detail triages again", nil, keys("j", keyEnter, "r"), func(t *testing.T, m Model, _ *fake) {
			if m.detail.loading || m.shownVerdict() != inspect.DuplicateEffect {
				t.Fatalf("loading %v verdict %s", m.detail.loading, m.shownVerdict())
			}
		}},
		{"esc from a pane goes back to the report", nil, keys("j", keyEnter, "p", keyEsc), func(t *testing.T, m Model, _ *fake) {
			if m.screen != screenDetail || m.detail.pane != paneReport {
				t.Fatalf("screen %d pane %d", m.screen, m.detail.pane)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			o := f.options()
			if tc.opts != nil {
				tc.opts(&o)
			}
			m := press(t, newModel(t, f, o, 120, 40), tc.keys...)
			tc.check(t, m, f)
		})
	}
}

// keyClear is ctrl+u: textinput deletes to the start of the line.
var keyClear = tea.KeyPressMsg{Code: 'u', Mod: tea.ModCtrl}

func wantSelected(id string) func(*testing.T, Model, *fake) {
	return func(t *testing.T, m Model, _ *fake) {
		t.Helper()
		if m.selected() != id {
			t.Fatalf("selected %s, want %s", m.selected(), id)
		}
	}
}

func wantStatus(s string) func(*testing.T, Model, *fake) {
	return func(t *testing.T, m Model, f *fake) {
		t.Helper()
		if !strings.Contains(m.statusText(), s) || len(f.applied) != 0 {
			t.Fatalf("status %q, want %q (applied %d)", m.statusText(), s, len(f.applied))
		}
	}
}

// TestQuit: q and Ctrl-C quit from the list, the detail and a form.
func TestQuit(t *testing.T) {
	for _, tc := range []struct {
		name string
		pre  []tea.KeyPressMsg
		key  tea.KeyPressMsg
	}{
		{"q in the list", nil, keyRunes("q")},
		{"ctrl+c in the list", nil, keyCtrlC},
		{"q in the detail", keys(keyEnter), keyRunes("q")},
		{"ctrl+c in the confirmation", keys("j", keyEnter, "p", "a"), keyCtrlC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			m := press(t, newModel(t, f, f.options(), 80, 24), tc.pre...)
			_, cmd := m.Update(tc.key)
			if cmd == nil {
				t.Fatal("no command")
			}
			if _, ok := cmd().(tea.QuitMsg); !ok {
				t.Fatal("the key does not quit")
			}
		})
	}
	// q typed into a form is text, not quit.
	f := newFake(t)
	m := press(t, newModel(t, f, f.options(), 80, 24), keys("/", "q")...)
	if m.list.filter != "q" {
		t.Fatalf("filter %q", m.list.filter)
	}
}

// TestStatusLine: a failed refresh, a refused check and an unreachable
// source are shown in the status line; the list is kept, nothing crashes.
func TestStatusLine(t *testing.T) {
	f := newFake(t)
	m := newModel(t, f, f.options(), 120, 40)
	if v := m.View().Content; !strings.Contains(v, "settlement/orphans refused: would need a full scan of ledger_entry") {
		t.Fatalf("no refused check in the status line:\n%s", v)
	}
	// The first refresh fails: the header says the list was not read.
	f.failReconcile = errBoom
	if v := newModel(t, f, f.options(), 120, 40).View().Content; !strings.Contains(v, "0 operation(s) · not read: see the status line") {
		t.Fatalf("first refresh failed:\n%s", v)
	}
	m = press(t, m, keyRunes("r"))
	if v := m.View().Content; len(m.list.items) != 4 || !strings.Contains(v, "refresh failed: dial tcp 127.0.0.1:3306") {
		t.Fatalf("items %d\n%s", len(m.list.items), v)
	}
	// A service that cannot be opened: the detail says so.
	o := f.options()
	o.Service = func() (Service, error) { return nil, errBoom }
	m = press(t, newModel(t, f, o, 120, 40), keyEnter)
	if v := m.View().Content; !strings.Contains(v, "connection refused") {
		t.Fatalf("detail:\n%s", v)
	}
}

// panicky panics on every triage.
type panicky struct{ *fake }

func (panicky) Triage(context.Context, string, string) (*triage.Result, error) { panic("boom") }

// TestPanicQuitsCleanly: a panic in a command ends the program with the
// one-line internal error, through a normal quit (the terminal restored).
func TestPanicQuitsCleanly(t *testing.T) {
	f := newFake(t)
	o := f.options()
	o.Triage = func() (Triager, error) { return panicky{f}, nil }
	m := newModel(t, f, o, 80, 24)
	next, cmd := m.Update(keyEnter)
	msg := cmd()
	next, cmd = next.(Model).Update(msg)
	if cmd == nil {
		t.Fatal("no quit")
	}
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("a panic does not quit")
	}
	ie, ok := next.(Model).crash.(*sources.InternalError)
	if !ok || !strings.Contains(ie.Error(), "internal error: boom") {
		t.Fatalf("crash %v", next.(Model).crash)
	}
}

// Update is pure: the model a key was given is left as it was.
func TestUpdateLeavesTheOldModel(t *testing.T) {
	for _, k := range []tea.KeyPressMsg{keyRunes("s"), keyRunes("j"), keyRunes("/")} {
		t.Run(k.String(), func(t *testing.T) {
			f := newFake(t)
			m := newModel(t, f, f.options(), 120, 40)
			before := m.View().Content
			sel, first := m.selected(), m.list.items[0].BizID
			_, _ = m.Update(k)
			if m.View().Content != before || m.selected() != sel || m.list.items[0].BizID != first {
				t.Fatalf("the old model changed after %q", k.String())
			}
		})
	}
}

// pick: the one pipeline that knows the id; of several, the first and the
// others named; of none, the first (its NOT_FOUND).
func TestPick(t *testing.T) {
	f := newFake(t)
	known, unknown := f.op("PAY-1"), f.op("NOPE")
	other := known
	p2 := *known.Pipeline
	p2.Name = "settlement_b"
	other.Pipeline = &p2
	for _, tc := range []struct {
		name   string
		ops    []triage.Operation
		want   inspect.Code
		others string
	}{
		{"one knows it", []triage.Operation{unknown, known}, inspect.DuplicateEffect, ""},
		{"two know it", []triage.Operation{known, other}, inspect.DuplicateEffect, "settlement_b"},
		{"none knows it", []triage.Operation{unknown, unknown}, inspect.NotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op, others := pick(&triage.Result{BizID: "PAY-1", Ops: tc.ops})
			if op.Report.Verdict.Code != tc.want || strings.Join(others, ",") != tc.others {
				t.Fatalf("picked %s, others %v", op.Report.Verdict.Code, others)
			}
		})
	}
}
