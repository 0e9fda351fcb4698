package cmd

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	day := 24 * time.Hour
	for _, c := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"8d", 8 * day, false},
		{"1d12h", day + 12*time.Hour, false},
		{" 7d ", 7 * day, false},
		{"36h", 36 * time.Hour, false},
		{"90s", 90 * time.Second, false},
		{"0d", 0, false},
		{"100000d", 100000 * day, false},
		{"100001d", 0, true},
		{"d", 0, true},
		{"7 days", 0, true},
		{"7dd", 0, true},
		{"1d-3h", day - 3*time.Hour, false},
		{"", 0, true},
		{"soon", 0, true},
	} {
		got, err := ParseDuration(c.in)
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.err)
		}
		if err != nil && !strings.Contains(err.Error(), "duration") {
			t.Errorf("%q: the error does not say what was wrong: %v", c.in, err)
		}
		if err != nil && !strings.Contains(err.Error(), strconv.Quote(c.in)) {
			t.Errorf("%q: the error does not quote the whole input: %v", c.in, err)
		}
	}
}

// TestDurationFlagRoundTrip: what the flag prints (its default in --help)
// is what it parses back, whole days included.
func TestDurationFlagRoundTrip(t *testing.T) {
	day := 24 * time.Hour
	for _, d := range []time.Duration{0, 90 * time.Second, 7 * day, day + 12*time.Hour, 100000 * day, 100001 * day, -5 * time.Minute} {
		f := durationFlag{d: d}
		var g durationFlag
		if err := g.Set(f.String()); err != nil || g.d != d {
			t.Errorf("%v: String %q parses back to %v, %v", d, f.String(), g.d, err)
		}
	}
	if s := (&durationFlag{d: 8 * day}).String(); s != "8d" {
		t.Errorf("8 days print as %q, want 8d", s)
	}
}

// FuzzParseDuration: any flag value parses or is an error quoting it, never
// a panic; what parses prints back to the same value (String, then Set);
// without days it is Go's duration; days then a Go duration add up, without
// overflow.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"7d", "1d12h", "90s", "d", "", "99999999999999999999d", "7dd", "100000d2562047h", "1d-3h", " 2d "} {
		f.Add(s)
	}
	day := 24 * time.Hour
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Errorf("%q: the error does not quote the input: %v", s, err)
			}
			return
		}
		var g durationFlag
		fl := durationFlag{d: d}
		if err := g.Set(fl.String()); err != nil || g.d != d {
			t.Errorf("%q = %v: String %q parses back to %v, %v", s, d, fl.String(), g.d, err)
		}
		in := strings.TrimSpace(s)
		if gd, gerr := time.ParseDuration(in); gerr == nil && gd != d {
			t.Errorf("%q = %v, Go says %v", s, d, gd)
		}
		days, rest, ok := strings.Cut(in, "d")
		n, nerr := strconv.Atoi(days)
		if !ok || nerr != nil || strings.ContainsAny(days, "+-") {
			return
		}
		whole := time.Duration(n) * day
		var r time.Duration
		if rest != "" {
			var rerr error
			if r, rerr = time.ParseDuration(rest); rerr != nil {
				t.Fatalf("%q = %v, but %q is no Go duration", s, d, rest)
			}
		}
		if d != whole+r || (r > 0 && d < whole) || (r < 0 && d > whole) {
			t.Errorf("%q = %v, want %d days + %q = %v (without overflow)", s, d, n, rest, whole+r)
		}
	})
}
