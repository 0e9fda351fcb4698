package cmd

import (
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
	}
}

// FuzzParseDuration: any flag value parses or is an error, never a panic,
// and a number of days followed by a Go duration adds up.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"7d", "1d12h", "90s", "d", "", "99999999999999999999d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err == nil && strings.HasSuffix(strings.TrimSpace(s), "d") && d < 0 {
			t.Errorf("%q: negative %v", s, d)
		}
	})
}
