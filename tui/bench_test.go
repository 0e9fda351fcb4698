package tui

import (
	"context"
	"os"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/reconcile"
)

// bigModel is a console whose list holds 5,000 findings, at 120×40.
func bigModel(b testing.TB) Model {
	f := newFake(b)
	f.extra = 5000 - len(fakeOps())
	m := newModel(b, f, f.options(), 120, 40)
	if len(m.list.items) != 5000 {
		b.Fatalf("%d items", len(m.list.items))
	}
	return m
}

// keystroke is one key handled and the screen rendered, as the program
// does for every key.
func keystroke(m Model, k tea.KeyPressMsg) Model {
	next, _ := m.Update(k)
	m = next.(Model)
	_ = m.View().Content
	return m
}

// BenchmarkKeyMove: ↓/↑ in a list of 5,000 (docs/performance.md: under
// 16 ms, one frame at 60 Hz, handled and rendered).
func BenchmarkKeyMove(b *testing.B) {
	m := bigModel(b)
	down, up := keyRunes("j"), keyRunes("k")
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := down
		if i/1000%2 == 1 {
			k = up
		}
		m = keystroke(m, k)
	}
}

// BenchmarkKeyFilter: one character typed into (then deleted from) the
// filter of a list of 5,000: each refilters all of them.
func BenchmarkKeyFilter(b *testing.B) {
	m := press(b, bigModel(b), keyRunes("/"), keyRunes("b"), keyRunes("u"))
	add, del := keyRunes("l"), tea.KeyPressMsg{Code: tea.KeyBackspace}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := add
		if i%2 == 1 {
			k = del
		}
		m = keystroke(m, k)
	}
	if m.input() != inputFilter {
		b.Fatal("the filter closed")
	}
}

// BenchmarkKeyDuringRefresh: a key while a refresh of 5,000 runs in
// another goroutine (as the program runs it: a tea.Cmd).
func BenchmarkKeyDuringRefresh(b *testing.B) {
	m := bigModel(b)
	m, cmd := m.refresh()
	done := make(chan tea.Msg, 1)
	go func() { done <- cmd() }()
	b.ResetTimer()
	for i := range b.N {
		m = keystroke(m, keyRunes([]string{"j", "k"}[i%2]))
	}
	b.StopTimer()
	<-done
}

// BenchmarkRSS reports the process's peak resident memory (VmHWM) once a
// list of 5,000 findings is loaded, refreshed and rendered: an upper
// bound of the console's (the test binary carries the test's fake and
// its plan builder too).
func BenchmarkRSS(b *testing.B) {
	for range b.N {
		m := bigModel(b)
		for range 3 {
			m = step(b, m, m.reconcileCmd(m.list.gen)())
			for range 100 {
				m = keystroke(m, keyRunes("j"))
			}
		}
	}
	b.ReportMetric(float64(vmHWM(b))/1024, "VmHWM-MB")
}

// vmHWM is the process's peak RSS in KiB.
func vmHWM(tb testing.TB) int {
	kib, err := testenv.PeakRSS(os.Getpid())
	if err != nil {
		tb.Fatal(err)
	}
	return kib
}

// TestRefreshDoesNotBlockKeys: while a refresh is stuck (a reconcile that
// does not return), keys still move the selection and open an operation.
func TestRefreshDoesNotBlockKeys(t *testing.T) {
	f := newFake(t)
	o := f.options()
	release := make(chan struct{})
	calls := 0
	o.Reconcile = func() (reconcile.Func, error) {
		return func(ctx context.Context, ro reconcile.Options, emit func(reconcile.Result) error) (*reconcile.Summary, error) {
			calls++
			if calls > 1 {
				<-release // the second refresh hangs
			}
			return f.reconcile(ctx, ro, emit)
		}, nil
	}
	defer close(release)
	tm := startProgram(t, New(context.Background(), o, NewStyles(false)), 120, 40)
	waitFor(t, tm, "read 08:30:00")
	sendKeys(tm, "r")
	waitFor(t, tm, "refreshing")
	sendKeys(tm, "jjj", keyEnter)
	waitFor(t, tm, "PAY-2  settlement  STRANDED")
}
