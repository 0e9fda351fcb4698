package tui

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest/v2"
)

// TestGolden runs the console as a program (teatest) on the fake, with a
// fixed clock and no colour, and compares whole screens with
// testdata/TestGolden/<size>/<screen>.golden (go test ./tui -run
// TestGolden -update rewrites them).
func TestGolden(t *testing.T) {
	// Each screen is reached by steps: keys sent, then a text the screen
	// shows once it is drawn (the program handles a key only after the
	// answers of the commands before it that the steps waited for).
	type stepT struct {
		keys []any
		wait string
	}
	open := stepT{[]any{"j", keyEnter}, "STEPS"}
	plan := stepT{[]any{"p"}, "apply re-checks"}
	confirm := stepT{[]any{"a"}, "type the biz_id"}
	screens := []struct {
		name  string
		steps []stepT
	}{
		{"list", nil},
		{"detail", []stepT{open}},
		{"plan", []stepT{open, plan}},
		{"dryrun", []stepT{open, plan, {[]any{"d"}, "would apply"}}},
		{"confirm", []stepT{open, plan, confirm}},
		{"after-apply", []stepT{open, plan, confirm, {[]any{"PAY-1", keyEnter, " double debit", keyEnter}, "NOW  COMPLETE"}}},
		{"help", []stepT{{[]any{"?"}, "any key closes"}}},
		{"attest", []stepT{{[]any{"jj", keyEnter}, "STEPS"}, {[]any{"p"}, "no plan:"}, {[]any{"t"}, "ATTEST"}}},
	}
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		for _, sc := range screens {
			t.Run(fmt.Sprintf("%dx%d/%s", size[0], size[1], sc.name), func(t *testing.T) {
				f := newFake(t)
				m := New(context.Background(), f.options(), NewStyles(false))
				tm := startProgram(t, m, size[0], size[1])
				waitFor(t, tm, "read 08:30:00")
				for _, st := range sc.steps {
					sendKeys(tm, st.keys...)
					waitFor(t, tm, st.wait)
				}
				if err := tm.Quit(); err != nil {
					t.Fatal(err)
				}
				final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(Model)
				golden.RequireEqual(t, []byte(final.View().Content))
			})
		}
	}
}

// program is the console run as a program (teatest) and the screen its
// model draws: v2's renderer writes only the cells that changed, so the
// screen is read from the model (through a filter that sees it before
// each message), never searched for in the output stream.
type program struct {
	*teatest.TestModel
	mu     sync.Mutex
	screen string
}

// pingMsg makes the program pass its model through the filter.
type pingMsg struct{}

func startProgram(t *testing.T, m Model, w, h int) *program {
	p := &program{}
	p.TestModel = teatest.NewTestModel(t, m, teatest.WithInitialTermSize(w, h),
		teatest.WithProgramOptions(tea.WithFilter(func(m tea.Model, msg tea.Msg) tea.Msg {
			if cm, ok := m.(Model); ok {
				p.mu.Lock()
				p.screen = cm.View().Content
				p.mu.Unlock()
			}
			return msg
		})))
	return p
}

// sendKeys sends keys (a tea.KeyPressMsg) and text (a string, one key per
// rune) to the program.
func sendKeys(p *program, ks ...any) {
	for _, k := range keys(ks...) {
		p.Send(k)
	}
}

// waitFor waits until the model shows text (once every message before it
// was handled).
func waitFor(t *testing.T, p *program, text string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p.Send(pingMsg{})
		time.Sleep(10 * time.Millisecond)
		p.mu.Lock()
		screen := p.screen
		p.mu.Unlock()
		if strings.Contains(screen, text) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the screen does not show %q after 20s:\n%s", text, screen)
		}
	}
}

var _ tea.Model = Model{}
