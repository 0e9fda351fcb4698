package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseDuration parses a Go duration (a flag of opctl reconcile, a wait in a
// runbook, a retention in the config), also accepting a leading number of
// days ("8d", "1d12h"). The error quotes the whole input.
func ParseDuration(s string) (time.Duration, error) {
	bad := func() error { return fmt.Errorf("invalid duration %q (want e.g. 30s, 5m, 2h, 7d)", s) }
	t := strings.TrimSpace(s)
	var days time.Duration
	if i := strings.IndexFunc(t, func(r rune) bool { return r < '0' || r > '9' }); i > 0 && t[i] == 'd' {
		n, err := strconv.Atoi(t[:i])
		if err != nil || n > MaxDurationDays {
			return 0, bad()
		}
		days = time.Duration(n) * 24 * time.Hour
		t = t[i+1:]
		if t == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, bad()
	}
	sum := days + d
	if (d > 0 && sum < days) || (d < 0 && sum > days) {
		return 0, bad() // out of range
	}
	return sum, nil
}

// MaxDurationDays bounds the days of a duration (docs/reconcile.md).
const MaxDurationDays = 100000
