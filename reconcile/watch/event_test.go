package watch

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
)

func TestTrackerTransitions(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	target := func(v inspect.Code) Observation {
		return Observation{Pipeline: "pay", BizID: "b1", Target: true, Verdict: v, Severity: inspect.SeverityAction, Summary: "s"}
	}
	healthy := Observation{Pipeline: "pay", BizID: "b1", Verdict: "COMPLETE", Severity: inspect.SeverityOK}
	for _, tc := range []struct {
		name string
		seq  []Observation
		want []string // event per observation, "" for none
		end  bool     // flagged at the end
	}{
		{"healthy stays quiet", []Observation{healthy, healthy}, []string{"", ""}, false},
		{"flag once", []Observation{target("STRANDED"), target("STRANDED")}, []string{Flagged, ""}, true},
		{"verdict change while flagged", []Observation{target("STRANDED"), target("WILL_REDELIVER")}, []string{Flagged, Changed}, true},
		{"clear on recovery", []Observation{target("STRANDED"), healthy}, []string{Flagged, Cleared}, false},
		{"flag again after clear", []Observation{target("STRANDED"), healthy, target("DUPLICATE_EFFECT")}, []string{Flagged, Cleared, Flagged}, true},
		{"clear without flag is nothing", []Observation{healthy}, []string{""}, false},
		{"severity change is a change", []Observation{target("STRANDED"), {Pipeline: "pay", BizID: "b1", Target: true, Verdict: "STRANDED", Severity: inspect.Severity("warn")}}, []string{Flagged, Changed}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker()
			for i, o := range tc.seq {
				ev := tr.Observe(o, Cause{Source: SourcePoll}, t0.Add(time.Duration(i)*time.Second))
				got := ""
				if ev != nil {
					got = ev.Event
				}
				if got != tc.want[i] {
					t.Fatalf("observation %d: event %q, want %q", i, got, tc.want[i])
				}
			}
			if f := tr.Flagged(Key{"pay", "b1"}); f != tc.end {
				t.Fatalf("flagged at the end = %v, want %v", f, tc.end)
			}
			if n := len(tr.Targets()); (n == 1) != tc.end {
				t.Fatalf("%d targets, flagged %v", n, tc.end)
			}
		})
	}
}

func TestTrackerTargetsKeepFirstFlagTime(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	tr := NewTracker()
	tr.Observe(Observation{Pipeline: "p", BizID: "b", Target: true, Verdict: "A", Severity: "action"}, Cause{Source: SourceSweep}, t0.Add(time.Second))
	tr.Observe(Observation{Pipeline: "p", BizID: "a", Target: true, Verdict: "A", Severity: "action"}, Cause{Source: SourceSweep}, t0.Add(2*time.Second))
	tr.Observe(Observation{Pipeline: "p", BizID: "b", Target: true, Verdict: "B", Severity: "action"}, Cause{Source: SourcePoll}, t0.Add(3*time.Second))
	got := tr.Targets()
	if len(got) != 2 || got[0].BizID != "b" || got[0].Verdict != "B" || !got[0].Since.Equal(t0.Add(time.Second)) || got[1].BizID != "a" {
		t.Fatalf("targets %+v", got)
	}
}

// TestEventGolden pins the event line's fields, order and formats
// (docs/watch.md#events).
func TestEventGolden(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 4, 0, 1, 234567890, time.UTC)
	commit := t0.Add(-1500 * time.Millisecond)
	table, pos := "payments", "2026-12-02T04:00:00.000Z/b1"
	tr := NewTracker()
	var lines []byte
	for _, step := range []struct {
		o Observation
		c Cause
		d time.Duration
	}{
		{Observation{Pipeline: "pay", BizID: "b1", Target: true, Verdict: "STRANDED", Severity: "action", Summary: "the state row says PROCESSING and no one holds it"},
			Cause{Source: SourcePoll, Table: &table, Position: &pos, CommittedAt: &commit}, 0},
		{Observation{Pipeline: "pay", BizID: "b1", Target: true, Verdict: "WILL_REDELIVER", Severity: "action", Summary: "x"},
			Cause{Source: SourceTimer}, time.Second},
		{Observation{Pipeline: "pay", BizID: "b1", Verdict: "COMPLETE", Severity: "ok", Summary: "done"},
			Cause{Source: SourceSweep}, 2 * time.Second},
	} {
		ev := tr.Observe(step.o, step.c, t0.Add(step.d))
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(append(lines, b...), '\n')
	}
	want, err := os.ReadFile("testdata/events.golden")
	if err != nil || string(want) != string(lines) {
		if os.Getenv("UPDATE_GOLDEN") != "" {
			_ = os.WriteFile("testdata/events.golden", lines, 0o644)
		}
		t.Fatalf("events:\n%s\nwant (testdata/events.golden, %v):\n%s", lines, err, want)
	}
}
