package main

import (
	"testing"
	"time"
)

func TestNextRun(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	five := 5 * time.Minute
	for _, c := range []struct {
		t     string
		phase time.Duration
		want  string
	}{
		{"2026-12-02T07:01:30Z", 0, "2026-12-02T07:05:00Z"},
		{"2026-12-02T07:05:00Z", 0, "2026-12-02T07:10:00Z"}, // a run at t itself is not after it
		{"2026-12-02T07:04:59.999Z", 0, "2026-12-02T07:05:00Z"},
		{"2026-12-02T07:01:30Z", 2 * time.Minute, "2026-12-02T07:02:00Z"},
		{"2026-12-02T07:02:30Z", 2 * time.Minute, "2026-12-02T07:07:00Z"},
		{"2026-12-02T07:06:59Z", 299 * time.Second, "2026-12-02T07:09:59Z"},
	} {
		if got := nextRun(at(c.t), five, c.phase); !got.Equal(at(c.want)) {
			t.Errorf("nextRun(%s, 5m, %s) = %s, want %s", c.t, c.phase, got.Format(time.RFC3339Nano), c.want)
		}
	}
}

func TestDistOf(t *testing.T) {
	var v []float64
	for i := 100; i >= 1; i-- {
		v = append(v, float64(i))
	}
	if d := distOf(v); d != (dist{N: 100, P50: 50, P99: 99, Max: 100}) {
		t.Errorf("1..100: %+v, want n 100, p50 50, p99 99, max 100", d)
	}
	if d := distOf([]float64{7}); d != (dist{N: 1, P50: 7, P99: 7, Max: 7}) {
		t.Errorf("one value: %+v", d)
	}
	if d := distOf(nil); d != (dist{}) {
		t.Errorf("none: %+v, want zero", d)
	}
}
