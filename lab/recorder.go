package lab

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/lab/consumer"
)

// recorder keeps every consumer event so that scenarios can wait for "the
// WMS call took effect" or "PAY-1 was committed" instead of sleeping.
type recorder struct {
	mu     sync.Mutex
	events []consumer.Event
	wake   chan struct{}
}

func newRecorder() *recorder { return &recorder{wake: make(chan struct{})} }

// feed drains ch into the log until it is closed or ctx ends.
func (r *recorder) feed(ctx context.Context, ch <-chan consumer.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-ch:
			if !ok {
				return
			}
			r.mu.Lock()
			r.events = append(r.events, ev)
			close(r.wake)
			r.wake = make(chan struct{})
			r.mu.Unlock()
		}
	}
}

// wait blocks until an event matches, or ctx ends (an error that lists the
// events seen for the id, to make a stuck scenario easy to read).
func (r *recorder) wait(ctx context.Context, match func(consumer.Event) bool, what string) (consumer.Event, error) {
	for {
		r.mu.Lock()
		for _, ev := range r.events {
			if match(ev) {
				r.mu.Unlock()
				return ev, nil
			}
		}
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return consumer.Event{}, fmt.Errorf("waiting for %s: %v (events: %s)", what, ctx.Err(), r.summary())
		case <-wake:
		}
	}
}

// waitFor waits for event what ("done", "committed", ...) of bizID.
func (r *recorder) waitFor(ctx context.Context, bizID, what string) error {
	_, err := r.wait(ctx, func(ev consumer.Event) bool { return ev.BizID == bizID && ev.What == what },
		fmt.Sprintf("%q of %s", what, bizID))
	return err
}

func (r *recorder) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	from := 0
	if len(r.events) > 30 {
		from = len(r.events) - 30
	}
	for _, ev := range r.events[from:] {
		parts = append(parts, fmt.Sprintf("%s %s %s %s", ev.Consumer, ev.BizID, ev.Step, ev.What))
	}
	return strings.Join(parts, "; ")
}

// since returns the events of bizID, for a scenario's narrative.
func (r *recorder) of(bizID string) []consumer.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []consumer.Event
	for _, ev := range r.events {
		if ev.BizID == bizID {
			out = append(out, ev)
		}
	}
	return out
}

func fmtEvents(evs []consumer.Event) string {
	var parts []string
	for _, ev := range evs {
		s := ev.Consumer + ": " + ev.What
		if ev.Step != "" {
			s += " " + ev.Step
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " → ")
}

var _ = time.Second
