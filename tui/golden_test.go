package tui

import (
	"bytes"
	"context"
	"fmt"
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
				tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(size[0], size[1]))
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

// sendKeys sends keys (a tea.KeyPressMsg) and text (a string, one key per
// rune) to the program.
func sendKeys(tm *teatest.TestModel, ks ...any) {
	for _, k := range keys(ks...) {
		tm.Send(k)
	}
}

// waitFor waits until the program has drawn text (a screen is drawn once
// every message before it was handled).
func waitFor(t *testing.T, tm *teatest.TestModel, text string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(text)) },
		teatest.WithDuration(20*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
}

var _ tea.Model = Model{}
