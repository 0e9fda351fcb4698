package sources

import (
	"testing"
	"time"
)

func TestLeaseLive(t *testing.T) {
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	later, earlier := now.Add(time.Second), now.Add(-time.Second)
	for _, c := range []struct {
		name string
		row  StateRow
		now  time.Time
		want bool
	}{
		{"held", StateRow{Found: true, Owner: "pay-1", LeaseUntil: &later}, now, true},
		{"expired", StateRow{Found: true, Owner: "pay-1", LeaseUntil: &earlier}, now, false},
		{"expires exactly now", StateRow{Found: true, Owner: "pay-1", LeaseUntil: &now}, now, false},
		{"no owner", StateRow{Found: true, LeaseUntil: &later}, now, false},
		{"no lease_until", StateRow{Found: true, Owner: "pay-1"}, now, false},
		{"clock not read", StateRow{Found: true, Owner: "pay-1", LeaseUntil: &later}, time.Time{}, false},
		{"no row", StateRow{Owner: "pay-1", LeaseUntil: &later}, now, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.row.LeaseLive(c.now); got != c.want {
				t.Errorf("LeaseLive = %v, want %v", got, c.want)
			}
		})
	}
}
